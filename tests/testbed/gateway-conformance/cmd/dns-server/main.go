// Command dns-server stands in for the CoreDNS pod of the Gateway API conformance suite's base
// manifests (registry.k8s.io/coredns/coredns, image tag from the suite), which the bed cannot
// pull and the Go module proxy does not serve.
//
// What the suite needs from that pod: it runs and is Ready (the suite waits for every pod of
// gateway-conformance-infra before any test), and the UDPRoute test (GATEWAY-UDP profile) gets
// an answer for foo.bar.com through a Gateway. So it serves what the suite's Corefile asks of
// the zone foo.bar.com (CoreDNS's `whoami`: the client's address and port) on UDP and TCP port
// 53, and answers REFUSED elsewhere: the Corefile's `forward . 8.8.8.8` has no way out of the
// bed. It takes CoreDNS's `-conf <Corefile>` argument and only checks that the file exists.
package main

import (
	"flag"
	"log"
	"net"
	"os"
	"strings"

	"github.com/miekg/dns"
)

const zone = "foo.bar.com."

func main() {
	conf := flag.String("conf", "", "CoreDNS Corefile (read for its existence only)")
	listen := flag.String("listen", ":53", "address to serve DNS on (UDP and TCP)")
	flag.Parse()
	if *conf != "" {
		if _, err := os.Stat(*conf); err != nil {
			log.Fatalf("dns-server: the Corefile %s is not readable: %v", *conf, err)
		}
	}
	dns.HandleFunc(".", refuse)
	dns.HandleFunc(zone, whoami)
	errs := make(chan error, 2)
	for _, network := range []string{"udp", "tcp"} {
		server := &dns.Server{Addr: *listen, Net: network}
		go func() { errs <- server.ListenAndServe() }()
	}
	log.Printf("dns-server: serving whoami for %s on %s (udp, tcp)", zone, *listen)
	log.Fatalf("dns-server: %v", <-errs)
}

// whoami answers like CoreDNS's whoami plugin: an A (or AAAA) record with the client's
// address and an SRV record with its port and transport, in the additional section.
func whoami(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	name := zone
	if len(r.Question) > 0 {
		name = r.Question[0].Name
	}
	var ip net.IP
	var port int
	transport := "udp"
	switch a := w.RemoteAddr().(type) {
	case *net.UDPAddr:
		ip, port = a.IP, a.Port
	case *net.TCPAddr:
		ip, port, transport = a.IP, a.Port, "tcp"
	}
	if v4 := ip.To4(); v4 != nil {
		m.Extra = append(m.Extra, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: v4})
	} else if ip != nil {
		m.Extra = append(m.Extra, &dns.AAAA{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET}, AAAA: ip})
	}
	m.Extra = append(m.Extra, &dns.SRV{
		Hdr:    dns.RR_Header{Name: "_" + transport + "." + strings.TrimPrefix(name, "."), Rrtype: dns.TypeSRV, Class: dns.ClassINET},
		Port:   uint16(port),
		Target: ".",
	})
	_ = w.WriteMsg(m)
}

func refuse(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetRcode(r, dns.RcodeRefused)
	_ = w.WriteMsg(m)
}
