#!/usr/bin/env bash
# Smoke test of the external-authentication pair without Kubernetes: mock-oidc and oauth2-proxy
# on 127.0.0.1, driven by curl with a cookie jar, one hop at a time (no browser). Builds them
# first through tests/testbed/scripts/build-oauth2.sh (cached; OAUTH2_BIN_DIR=DIR skips that).
#
#   GET /oauth2/auth, no cookie        -> 401
#   GET /oauth2/start?rd=/app          -> 302 to mock-oidc's authorize endpoint (CSRF cookie set)
#   GET <authorize>                    -> 302 to /oauth2/callback?code=..&state=.. (no login page)
#   GET /oauth2/callback               -> 302 to /app, _oauth2_proxy cookie set
#   GET /app with the cookie           -> 202 (the static upstream)
#   GET /oauth2/auth with the cookie   -> 202, X-Auth-Request-User/-Email/-Preferred-Username/-Groups
#   GET /oauth2/sign_out               -> 302, _oauth2_proxy cleared; /oauth2/auth -> 401 again
# and the login twice, to show that every login is the same user. Exits non-zero on the first
# deviation, after printing what it saw and both servers' logs.
#
# Run: tests/testbed/oauth2/smoke.sh (about 1 s once built). SMOKE_KEEP=1 keeps the temp dir
# with both logs and the cookie jar.
#
# Build figures (tests/testbed/scripts/build-oauth2.sh, this 2-core machine, go1.26.8):
#   cold compile, module cache warm, empty GOCACHE:       82 s wall (125 s user), 1.3 GB peak RSS
#   fully cold, empty module cache (~190 modules, 750 MB) and GOCACHE: 152 s wall
#   second run: returns at once (~0.01 s)
#   sizes (stripped, CGO off): oauth2-proxy 30.3 MB (30,310,526 B), mock-oidc 6.6 MB (6,627,454 B)
#
# Findings (oauth2-proxy v7.15.6, mockoidc v0.0.0-20261103160011-e06ed0b7cb7f):
# - mockoidc's issuer is always <scheme>://<listener address>/oidc: the path /oidc is fixed, the
#   scheme is http unless started with TLS, and host:port come from the listener. oauth2-proxy
#   checks the discovery document's issuer against --oidc-issuer-url exactly, so pass the
#   issuer with /oidc; in a cluster mock-oidc needs --issuer-url http://<service>:<port>/oidc
#   (listening on 0.0.0.0 would advertise 0.0.0.0), and that one URL must work from both the
#   client (authorize) and oauth2-proxy (discovery, token, jwks, userinfo); otherwise
#   oauth2-proxy's --skip-oidc-discovery with --login-url/--redeem-url/--oidc-jwks-url splits them.
# - Plain http to the provider is accepted; no TLS is needed anywhere.
# - The authorize step has no page: it pops the queued user (mock-oidc keeps one queued) and
#   302s straight to the callback, so following redirects is the whole login. The user is the
#   same at every login (checked by logging in twice).
# - PKCE: mockoidc advertises plain and S256; without --code-challenge-method oauth2-proxy
#   only warns and sends none. --code-challenge-method=S256 works.
# - Email: mock-oidc's user has email_verified=true, so neither
#   --insecure-oidc-allow-unverified-email nor --oidc-email-claim is needed. mockoidc has no
#   "name" claim: the user is sub, email, preferred_username, groups.
# - Scopes: oauth2-proxy asks for "openid email profile"; mockoidc sends a claim only for its
#   scope, so groups need --scope='openid email profile groups' (an unknown scope is refused).
# - /oauth2/auth: 401 with a 13-byte "Unauthorized" body (never a redirect: the ingress must
#   send the client to /oauth2/start?rd=... itself); 202 and an empty body with the session.
#   With --set-xauthrequest the 202 carries X-Auth-Request-User (the sub claim, not the
#   email), X-Auth-Request-Email, X-Auth-Request-Preferred-Username and X-Auth-Request-Groups
#   (comma-joined); X-Auth-Request-Access-Token only with --pass-access-token as well.
# - Cookies: /oauth2/start sets _oauth2_proxy_csrf (15 min); the callback clears it and sets
#   _oauth2_proxy, about 2.3 KB (it holds the id, access and refresh tokens;
#   --session-cookie-minimal shrinks it). oauth2-proxy splits one over 4000 bytes into _oauth2_proxy_0, _1, ...
# - --redirect-url's host must be the host the client uses: the CSRF cookie is set on the
#   host of /oauth2/start, and a callback on another host is refused with 403 "unable to
#   obtain CSRF cookie".
# - --cookie-secure=false is needed over plain http to a real host name; curl (>= 7.79)
#   treats 127.0.0.1/localhost as secure and sends Secure cookies there anyway, so this
#   smoke test alone would not catch it.
# - Sign-out: GET /oauth2/sign_out -> 302 to "/" (or to its rd=) with "_oauth2_proxy=; Max-Age=0";
#   the session is only in the cookie, nothing is revoked at the provider.
# - The token endpoint is hit twice per login: oauth2-proxy sends the client secret in a Basic
#   header first, mockoidc wants it in the form (400), and golang.org/x/oauth2 retries with it
#   in the form. Harmless.
# - mockoidc writes expires_in in nanoseconds (a time.Duration), so oauth2-proxy's session
#   expiry lands in 2094: a session ends by --cookie-expire (168 h) or sign-out, never by
#   token expiry, and only --cookie-refresh would make it refresh.
# - --reverse-proxy without --trusted-proxy-ip logs a warning (all peers trusted); harmless here.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
BIN_DIR="${OAUTH2_BIN_DIR:-$("$HERE/../scripts/build-oauth2.sh" | tail -n 1)}"
CLIENT_ID=haptic-test
CLIENT_SECRET=haptic-test-secret
EMAIL=alice@haptic.test
USERNAME=alice
SUBJECT=alice-0001

WORK="$(mktemp -d)"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [[ -n "${SMOKE_KEEP:-}" ]] || rm -rf "$WORK"
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*" >&2
    for log in "$WORK"/mock-oidc.log "$WORK"/oauth2-proxy.log; do
        [[ -f "$log" ]] && { echo "--- $(basename "$log")" >&2; tail -n 40 "$log" >&2; }
    done
    exit 1
}

# A port nothing listens on now (a tiny race with other processes, fine for a smoke test).
free_port() {
    local port
    for _ in $(seq 50); do
        port=$(( 20000 + RANDOM % 40000 ))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return; fi
    done
    fail "no free port"
}

# One request, no redirect followed: prints "STATUS LOCATION" and keeps the headers in
# $WORK/headers. Extra arguments go to curl (the cookie jar).
hop() {
    curl -sS -o "$WORK/body" -D "$WORK/headers" -w '%{http_code} %{redirect_url}' "$@"
}
status() { local out; out="$(hop "$@")"; echo "${out%% *}"; }
header() { awk -v h="$1" 'BEGIN { IGNORECASE = 1 } tolower($1) == tolower(h ":") { sub(/^[^:]*: */, ""); sub(/\r$/, ""); print }' "$WORK/headers"; }
expect() { # expect WHAT WANT GOT
    if [[ "$3" != $2 ]]; then fail "$1: wanted $2, got '$3'"; fi
    local got="$3"; (( ${#got} > 110 )) && got="${got:0:110}..."
    echo "ok   $1: $got"
}

# Port 0: mock-oidc binds a free port and prints the discovery URL with it.
"$BIN_DIR/mock-oidc" --listen 127.0.0.1:0 --client-id "$CLIENT_ID" --client-secret "$CLIENT_SECRET" \
    --email "$EMAIL" --preferred-username "$USERNAME" --subject "$SUBJECT" --groups dev,ops \
    >"$WORK/mock-oidc.out" 2>"$WORK/mock-oidc.log" &
PIDS+=($!)
for _ in $(seq 50); do [[ -s "$WORK/mock-oidc.out" ]] && break; sleep 0.1; done
DISCOVERY="$(head -n 1 "$WORK/mock-oidc.out")"
ISSUER="${DISCOVERY%/.well-known/openid-configuration}"
[[ -n "$DISCOVERY" ]] || fail "mock-oidc printed no discovery URL"
echo "mock-oidc: $DISCOVERY"
curl -fsS "$DISCOVERY" >"$WORK/discovery" || fail "discovery document not served"
expect "discovery issuer" "*\"issuer\":\"$ISSUER\"*" "$(cat "$WORK/discovery")" >/dev/null

PROXY_PORT=$(free_port)
PROXY="http://127.0.0.1:$PROXY_PORT"
COOKIE_SECRET="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" # 32 bytes of hex
"$BIN_DIR/oauth2-proxy" \
    --provider=oidc --oidc-issuer-url="$ISSUER" \
    --client-id="$CLIENT_ID" --client-secret="$CLIENT_SECRET" --code-challenge-method=S256 \
    --cookie-secret="$COOKIE_SECRET" --cookie-secure=false \
    --scope='openid email profile groups' --email-domain='*' --upstream=static://202 \
    --http-address="127.0.0.1:$PROXY_PORT" --redirect-url="$PROXY/oauth2/callback" \
    --reverse-proxy --set-xauthrequest --skip-provider-button \
    >"$WORK/oauth2-proxy.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do
    [[ "$(curl -s -o /dev/null -w '%{http_code}' "$PROXY/ping")" == 200 ]] && break
    kill -0 "${PIDS[1]}" 2>/dev/null || fail "oauth2-proxy exited"
    sleep 0.1
done
echo "oauth2-proxy: $PROXY ($("$BIN_DIR/oauth2-proxy" --version))"

JAR="$WORK/jar"
expect "GET /oauth2/auth without cookie" 401 "$(status "$PROXY/oauth2/auth")"

login() {
    local out status location cookie
    out="$(hop -c "$JAR" -b "$JAR" "$PROXY/oauth2/start?rd=/app")"
    status="${out%% *}" location="${out#* }"
    expect "GET /oauth2/start?rd=/app" 302 "$status"
    expect "  redirect to the provider" "$ISSUER/authorize?*" "$location"
    expect "  PKCE challenge method" S256 "$(sed -n 's/.*[?&]code_challenge_method=\([^&]*\).*/\1/p' <<<"$location")"

    out="$(hop -c "$JAR" -b "$JAR" "$location")"
    status="${out%% *}" location="${out#* }"
    expect "GET <provider>/authorize" 302 "$status"
    expect "  redirect to the callback" "$PROXY/oauth2/callback?*code=*" "$location"

    out="$(hop -c "$JAR" -b "$JAR" "$location")"
    status="${out%% *}"
    expect "GET /oauth2/callback" 302 "$status"
    expect "  redirect to rd" /app "$(header location)"
    cookie="$(header set-cookie | grep '^_oauth2_proxy=' || true)"
    expect "  session cookie set" "_oauth2_proxy=*" "$cookie"
    echo "       (Set-Cookie _oauth2_proxy: ${#cookie} bytes; also: $(header set-cookie | grep -v '^_oauth2_proxy=' | cut -d';' -f1 | cut -c1-40 | paste -sd' ' -))"

    expect "GET /app with the cookie (static upstream)" 202 "$(status -b "$JAR" "$PROXY/app")"
    expect "GET /oauth2/auth with the cookie" 202 "$(status -b "$JAR" "$PROXY/oauth2/auth")"
    grep -i '^x-auth-request' "$WORK/headers" | tr -d '\r' | sed 's/^/       /'
    expect "  X-Auth-Request-User" "$SUBJECT" "$(header x-auth-request-user)"
    expect "  X-Auth-Request-Email" "$EMAIL" "$(header x-auth-request-email)"
    expect "  X-Auth-Request-Preferred-Username" "$USERNAME" "$(header x-auth-request-preferred-username)"
    expect "  X-Auth-Request-Groups" "dev,ops" "$(header x-auth-request-groups)"
}

logout() {
    local out
    out="$(hop -c "$JAR" -b "$JAR" "$PROXY/oauth2/sign_out")"
    expect "GET /oauth2/sign_out" 302 "${out%% *}"
    expect "  redirect" "*" "$(header location)"
    expect "  session cookie cleared" "_oauth2_proxy=;*" "$(header set-cookie | grep '^_oauth2_proxy=' || true)"
    expect "GET /oauth2/auth after sign-out" 401 "$(status -b "$JAR" "$PROXY/oauth2/auth")"
}

for round in 1 2; do
    echo "-- login $round"
    login
    logout
done
echo "smoke: oauth2-proxy + mock-oidc: all checks passed"
