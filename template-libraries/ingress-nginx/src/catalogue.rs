//! ingress-nginx's annotations that haptic does not apply, each with the
//! reason the report gives. The ones it applies are read by [`crate::policy`];
//! whatever neither knows is reported as unknown. `docs/ingress-nginx.md`
//! is the same list for people, with the HAProxy mechanism of each.

/// The nginx code annotations: never applied (they were the door of the
/// 2025 ingress-nginx CVEs), always reported.
pub const SNIPPETS: &[&str] = &[
    "configuration-snippet",
    "server-snippet",
    "auth-snippet",
    "stream-snippet",
    "modsecurity-snippet",
];

const SNIPPET_WHY: &str = "it is nginx configuration code, which haptic never applies (it was the door of the 2025 ingress-nginx CVEs); write what it does as an annotation haptic honours or as a template library";

/// Why haptic does not apply a known annotation, `None` for one it does not
/// know.
pub fn not_honoured(annotation: &str) -> Option<&'static str> {
    if SNIPPETS.contains(&annotation) {
        return Some(SNIPPET_WHY);
    }
    Some(match annotation {
        "upstream-hash-by-subset" | "upstream-hash-by-subset-size" => {
            "HAProxy hashes to one server, not to a subset of them; upstream-hash-by alone is honoured"
        }
        "proxy-next-upstream-timeout" => {
            "HAProxy bounds retries by count (proxy-next-upstream-tries), not by time"
        }
        "custom-http-errors" => {
            "HAProxy (3.0 too) cannot send a request on to another backend once its answer's status is known (nginx's internal redirect to the error-page backend); the backend's own answer is returned"
        }
        "disable-proxy-intercept-errors" => {
            "it turns off custom-http-errors, which is not honoured"
        }
        "limit-rate-after" => {
            "HAProxy's bandwidth limit (bwlim-out) has no initial allowance: with limit-rate, an answer is limited from its first byte"
        }
        "limit-burst-multiplier" => {
            "HAProxy counts requests over a sliding window; there is no burst allowance to size"
        }
        "global-rate-limit"
        | "global-rate-limit-window"
        | "global-rate-limit-key"
        | "global-rate-limit-ignored-cidrs" => {
            "the global rate limit needs memcached; HAProxy's limits are per HAProxy pod (see limit-rps)"
        }
        "client-body-buffer-size"
        | "proxy-buffering"
        | "proxy-buffers-number"
        | "proxy-buffer-size"
        | "proxy-max-temp-file-size"
        | "proxy-request-buffering" => {
            "nginx's buffer tuning has no per-Ingress HAProxy counterpart (HAProxy streams; tune.bufsize is global)"
        }
        "proxy-http-version" => "HAProxy speaks HTTP/1.1 to backends; 1.0 is not offered",
        "connection-proxy-header" => "HAProxy manages the Connection header to the backend itself",
        "ssl-ciphers" | "ssl-prefer-server-ciphers" => {
            "ciphers are set for the whole HTTPS bind, not per Ingress"
        }
        "preserve-trailing-slash" => {
            "the HTTPS redirect keeps the path and query unchanged, as with preserve-trailing-slash: true"
        }
        "http2-push-preload" => "HTTP/2 server push is gone from browsers and from HAProxy",
        "enable-access-log" | "enable-rewrite-log" => {
            "logging is base's (defaults.httpLog), not per Ingress"
        }
        "enable-opentracing"
        | "opentracing-trust-incoming-span"
        | "enable-opentelemetry"
        | "opentelemetry-trust-incoming-span"
        | "opentelemetry-operation-name" => {
            "HAProxy 3.0 as Debian builds it has an OpenTracing filter, but haptic configures no tracer for it"
        }
        "enable-influxdb"
        | "influxdb-measurement"
        | "influxdb-port"
        | "influxdb-host"
        | "influxdb-server-name" => "use haptic's Prometheus metrics instead",
        "enable-modsecurity" | "enable-owasp-core-rules" | "modsecurity-transaction-id" => {
            "ModSecurity is an nginx module; HAProxy would need an SPOE agent (not yet in haptic's agent)"
        }
        "add-base-url"
        | "base-url-scheme"
        | "secure-backends"
        | "grpc-backend"
        | "secure-verify-ca-secret"
        | "ssl-redirect-code" => "removed from ingress-nginx before its last release",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_are_known_and_never_honoured() {
        for snippet in SNIPPETS {
            assert!(not_honoured(snippet).is_some_and(|why| why.contains("never")));
        }
        assert_eq!(not_honoured("no-such-annotation"), None);
    }
}
