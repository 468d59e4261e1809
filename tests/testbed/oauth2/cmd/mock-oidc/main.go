// Command mock-oidc serves github.com/oauth2-proxy/mockoidc (a library, made for Go tests) as a
// process: the OIDC provider in front of which the bed runs oauth2-proxy. It has no login page:
// the authorize endpoint approves every request at once and redirects back with a code, so a
// client that follows redirects (curl -L with a cookie jar) completes the whole flow.
//
// Every login is the one user given by the flags: mockoidc hands out its queued users one per
// authorize request and falls back to its built-in DefaultUser (jane.doe@example.com) when the
// queue is empty, so a middleware keeps exactly one copy of ours queued before each authorize.
//
// The provider's endpoints live under the fixed path /oidc; the issuer (and every endpoint in
// the discovery document) is built from the listener's address, so --issuer-url (default: the
// listen address) names the host and port that clients reach, e.g. a Service's name in a
// cluster. Prints the discovery URL on stdout once serving.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/oauth2-proxy/mockoidc"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9000", "address to serve on (host:port; port 0 picks a free one)")
	issuer := flag.String("issuer-url", "", "issuer URL clients reach the provider at, http://HOST:PORT/oidc (default: the bound address, useless for 0.0.0.0)")
	clientID := flag.String("client-id", "oauth2-proxy", "OAuth2 client id the provider accepts")
	clientSecret := flag.String("client-secret", "oauth2-proxy-secret", "OAuth2 client secret the provider accepts")
	email := flag.String("email", "jane.doe@example.com", "email claim of the user every login gets (email_verified is true)")
	subject := flag.String("subject", "1234567890", "sub claim of the user")
	username := flag.String("preferred-username", "jane.doe", "preferred_username claim of the user (mockoidc has no name claim)")
	groups := flag.String("groups", "", "comma-separated groups claim of the user (sent for the groups scope)")
	flag.Parse()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("mock-oidc: %v", err)
	}
	bound := ln.Addr().String()
	// mockoidc takes the issuer's host and port from the listener's address (scheme http
	// without TLS, path /oidc), so the listener reports the public address instead.
	if *issuer != "" {
		u, err := url.Parse(*issuer)
		if err != nil || u.Scheme != "http" || u.Host == "" || strings.TrimSuffix(u.Path, "/") != mockoidc.IssuerBase {
			log.Fatalf("mock-oidc: --issuer-url %q: mockoidc serves only http://HOST:PORT%s", *issuer, mockoidc.IssuerBase)
		}
		ln = publicListener{ln, publicAddr(u.Host)}
	}

	// nil: the default keypair, a fresh 2048-bit RSA key each start.
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		log.Fatalf("mock-oidc: %v", err)
	}
	m.ClientID, m.ClientSecret = *clientID, *clientSecret
	user := &mockoidc.MockUser{
		Subject:           *subject,
		Email:             *email,
		EmailVerified:     true, // oauth2-proxy refuses an unverified email by default
		PreferredUsername: *username,
	}
	if *groups != "" {
		user.Groups = strings.Split(*groups, ",")
	}
	m.AddMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == mockoidc.AuthorizationEndpoint {
				// At most one queued: an authorize refused before it pops the queue
				// (bad client id, scope) leaves it for the next one.
				m.UserQueue.Lock()
				if len(m.UserQueue.Queue) == 0 {
					m.UserQueue.Queue = append(m.UserQueue.Queue, user)
				}
				m.UserQueue.Unlock()
			}
			log.Printf("mock-oidc: %s %s", r.Method, r.URL.Path)
			next.ServeHTTP(w, r)
		})
	})
	if err := m.Start(ln, nil); err != nil {
		log.Fatalf("mock-oidc: %v", err)
	}
	log.Printf("mock-oidc: serving on %s, issuer %s, client id %q, user %s (sub %s)", bound, m.Issuer(), m.ClientID, user.Email, user.Subject)
	fmt.Println(m.DiscoveryEndpoint())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	_ = m.Shutdown()
}

// publicListener is a listener that reports another address than the one it is bound to.
type publicListener struct {
	net.Listener
	addr net.Addr
}

func (l publicListener) Addr() net.Addr { return l.addr }

type publicAddr string

func (publicAddr) Network() string  { return "tcp" }
func (a publicAddr) String() string { return string(a) }
