//! `base`: the sections every haptic configuration starts from.
//!
//! - `global`: `default-path config` (so map and certificate paths in other
//!   sections resolve next to haproxy.cfg), `maxconn`, logging,
//!   `hard-stop-after`. No `daemon`: the agent runs HAProxy in master-worker
//!   mode in the foreground.
//! - `defaults`: HTTP mode, timeouts, retries, `option redispatch`, and
//!   `option idle-close-on-response`, without which a reload closes idle
//!   keep-alive client connections and their next request fails.
//! - `frontend http`: the frontend routing libraries hang their snippets on;
//!   unmatched requests go to `backend haptic.not-found` (404).
//! - `frontend healthz`: answers `GET /healthz` with 200 for probes.
//! - `frontend stats` (off by default): HAProxy's stats page.
//!
//! Values (`templateLibraries.base`), with their defaults in [`defaults`]:
//! `frontends.http.bind` (`":8080"`, a raw HAProxy bind address, so
//! `"${POD_IP}:8080"` works), `frontends.healthz.{enabled,bind,path}`,
//! `frontends.stats.{enabled,bind,uri}`, `global.{maxconn,log,hardStopAfter,extraLines}`,
//! `defaults.{timeouts,retries,forwardFor,httpLog,extraLines}`,
//! `hostClaims.{default,rules}` (which namespaces may claim which hosts,
//! read by every routing library: [`haptic_sdk::claims`]),
//! `http3.{enabled,advertisedPort,maxAge}` (HTTP/3 beside every HTTPS bind
//! where the HAProxy serves QUIC: [`haptic_sdk::http3`]; `limited-quic` in
//! `global` when its QUIC goes through OpenSSL's compatibility layer).

use haptic_sdk::http3::{self, Http3};
use haptic_sdk::names::quote;
use haptic_sdk::{Context, Error, Info, Library, Output, Plan, Result, SectionKind, Values};
use serde::Deserialize;
use std::fmt::Write as _;

/// The frontend other libraries route in.
pub const HTTP_FRONTEND: &str = "http";
/// The backend answering 404 when nothing matches.
pub const NOT_FOUND_BACKEND: &str = "haptic.not-found";

/// Default values, merged under the user's `templateLibraries.base`.
pub fn defaults() -> serde_json::Value {
    serde_json::json!({
        "global": {
            // Unset: HAProxy sizes maxconn from the file-descriptor limit it
            // finds. A fixed value above what the pod's limit allows makes
            // HAProxy refuse to start ("Cannot raise FD limit").
            "maxconn": null,
            "log": "stdout format raw local0",
            "hardStopAfter": "30s",
            "extraLines": []
        },
        "defaults": {
            "timeouts": {
                "connect": "5s",
                "client": "60s",
                "server": "60s",
                "httpRequest": "10s",
                "httpKeepAlive": "60s",
                "queue": "30s",
                "tunnel": "1h"
            },
            "retries": 3,
            "forwardFor": true,
            "httpLog": false,
            "extraLines": []
        },
        "frontends": {
            // The Server header of responses that carry none (backend or
            // HAProxy answers alike); the Ingress conformance suite expects
            // one. Empty: none is added.
            "http": { "bind": ":8080", "serverHeader": "haptic" },
            "healthz": { "enabled": true, "bind": ":8081", "path": "/healthz" },
            "stats": { "enabled": false, "bind": ":8404", "uri": "/stats" }
        },
        // The admin's host-claim policy, read by every routing library
        // (haptic_sdk::claims): no rule, every namespace may claim any host.
        "hostClaims": { "default": "allow", "rules": [] },
        // HTTP/3 beside every HTTPS bind, where the HAProxy serves QUIC
        // (haptic_sdk::http3): read by the libraries that write them.
        "http3": http3::defaults()
    })
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct BaseValues {
    global: GlobalValues,
    defaults: DefaultsValues,
    frontends: Frontends,
    /// Parsed only to refuse a wrong setting here, with the library that
    /// owns the key; [`Http3::from_values`] decides.
    #[allow(dead_code)]
    http3: Option<http3::Settings>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct GlobalValues {
    maxconn: Option<u32>,
    log: String,
    hard_stop_after: String,
    extra_lines: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct DefaultsValues {
    timeouts: Timeouts,
    retries: u32,
    forward_for: bool,
    http_log: bool,
    extra_lines: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Timeouts {
    connect: String,
    client: String,
    server: String,
    http_request: String,
    http_keep_alive: String,
    queue: String,
    tunnel: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Frontends {
    http: HttpFrontend,
    healthz: Healthz,
    stats: Stats,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct HttpFrontend {
    bind: String,
    server_header: String,
}

#[derive(Debug, Default, Deserialize)]
struct Healthz {
    enabled: bool,
    bind: String,
    path: String,
}

#[derive(Debug, Default, Deserialize)]
struct Stats {
    enabled: bool,
    bind: String,
    uri: String,
}

/// The `base` library.
#[derive(Debug, Default)]
pub struct Base {
    values: BaseValues,
    http3: Option<Http3>,
}

impl Library for Base {
    fn info(&self) -> Info {
        Info::new("base", env!("CARGO_PKG_VERSION"))
            .order(0)
            .defaults(defaults())
    }

    fn plan(&mut self, values: &Values) -> Result<Plan> {
        let parsed: BaseValues = values.get()?;
        check_values(&parsed)?;
        // Read by the routing libraries; checked here too so a bad policy
        // is reported once by the library that owns the key.
        values.host_claims()?;
        self.values = parsed;
        self.http3 = Some(Http3::from_values(values));
        Ok(Plan::default())
    }

    fn render(&mut self, _ctx: &Context<'_>, out: &mut Output) -> Result<()> {
        let v = &self.values;
        let quic = self.http3.as_ref().map_or("", Http3::global_lines);
        out.section(SectionKind::Global, "", global(&v.global, quic))?;
        out.section(SectionKind::Defaults, "", defaults_section(&v.defaults))?;
        let http = &v.frontends.http;
        let mut body = format!(
            "    bind {}\n    default_backend {NOT_FOUND_BACKEND}\n",
            http.bind
        );
        if !http.server_header.is_empty() {
            // After-response: also HAProxy's own answers (404, 503, redirects).
            let _ = writeln!(
                body,
                "    http-after-response set-header Server {} if !{{ res.hdr(server) -m found }}",
                quote(&http.server_header)
            );
        }
        out.section(SectionKind::Frontend, HTTP_FRONTEND, body)?;
        out.section(
            SectionKind::Backend,
            NOT_FOUND_BACKEND,
            "    http-request return status 404 content-type text/plain string 'Not Found'\n",
        )?;
        let healthz = &v.frontends.healthz;
        if healthz.enabled {
            out.section(
                SectionKind::Frontend,
                "healthz",
                format!(
                    "    bind {}\n    http-request return status 200 content-type text/plain string 'ok' if {{ path {} }}\n    http-request return status 404 content-type text/plain string 'Not Found'\n",
                    healthz.bind,
                    quote(&healthz.path)
                ),
            )?;
        }
        let stats = &v.frontends.stats;
        if stats.enabled {
            out.section(
                SectionKind::Frontend,
                "stats",
                format!(
                    "    bind {}\n    stats enable\n    stats uri {}\n    stats refresh 10s\n",
                    stats.bind,
                    quote(&stats.uri)
                ),
            )?;
        }
        Ok(())
    }
}

/// `quic`: what QUIC listeners need here ([`Http3::global_lines`]).
fn global(v: &GlobalValues, quic: &str) -> String {
    let mut body = String::from("    default-path config\n");
    body.push_str(quic);
    if let Some(maxconn) = v.maxconn {
        let _ = writeln!(body, "    maxconn {maxconn}");
    }
    if !v.log.is_empty() {
        let _ = writeln!(body, "    log {}", v.log);
    }
    if !v.hard_stop_after.is_empty() {
        let _ = writeln!(body, "    hard-stop-after {}", v.hard_stop_after);
    }
    for line in &v.extra_lines {
        let _ = writeln!(body, "    {line}");
    }
    body
}

fn defaults_section(v: &DefaultsValues) -> String {
    let t = &v.timeouts;
    let mut body = String::from("    mode http\n    log global\n    option dontlognull\n");
    if v.http_log {
        body.push_str("    option httplog\n");
    }
    if v.forward_for {
        body.push_str("    option forwardfor\n");
    }
    body.push_str("    option idle-close-on-response\n    option redispatch\n");
    let _ = writeln!(body, "    retries {}", v.retries);
    for (name, value) in [
        ("connect", &t.connect),
        ("client", &t.client),
        ("server", &t.server),
        ("http-request", &t.http_request),
        ("http-keep-alive", &t.http_keep_alive),
        ("queue", &t.queue),
        ("tunnel", &t.tunnel),
    ] {
        if !value.is_empty() {
            let _ = writeln!(body, "    timeout {name} {value}");
        }
    }
    for line in &v.extra_lines {
        let _ = writeln!(body, "    {line}");
    }
    body
}

/// Raw values become config lines: one containing a line break would
/// inject lines the user did not mean.
fn check_values(v: &BaseValues) -> Result<()> {
    let t = &v.defaults.timeouts;
    let raw = [
        ("global.log", &v.global.log),
        ("global.hardStopAfter", &v.global.hard_stop_after),
        ("defaults.timeouts.connect", &t.connect),
        ("defaults.timeouts.client", &t.client),
        ("defaults.timeouts.server", &t.server),
        ("defaults.timeouts.httpRequest", &t.http_request),
        ("defaults.timeouts.httpKeepAlive", &t.http_keep_alive),
        ("defaults.timeouts.queue", &t.queue),
        ("defaults.timeouts.tunnel", &t.tunnel),
        ("frontends.http.bind", &v.frontends.http.bind),
        (
            "frontends.http.serverHeader",
            &v.frontends.http.server_header,
        ),
        ("frontends.healthz.bind", &v.frontends.healthz.bind),
        ("frontends.stats.bind", &v.frontends.stats.bind),
    ];
    let extra = v.global.extra_lines.iter().chain(&v.defaults.extra_lines);
    for (name, value) in raw
        .into_iter()
        .chain(extra.map(|line| ("extraLines", line)))
    {
        if value.contains(['\n', '\r']) {
            return Err(Error::msg(format!(
                "templateLibraries.base.{name} contains a line break; give one HAProxy line per entry"
            )));
        }
    }
    if v.frontends.http.bind.trim().is_empty() {
        return Err(Error::msg(
            "templateLibraries.base.frontends.http.bind is empty; set an address such as \":8080\"",
        ));
    }
    Ok(())
}

haptic_sdk::export_library!(Base);

#[cfg(test)]
mod tests {
    use super::*;
    use haptic_sdk::testing::Harness;
    use serde_json::json;

    #[test]
    fn renders_the_sections_routing_hangs_on() {
        let mut h = Harness::<Base>::new(json!({})).unwrap();
        h.render().unwrap();
        let global = h.section(SectionKind::Global, "").unwrap();
        assert!(global.contains("default-path config"));
        assert!(!global.contains("daemon"));
        let defaults = h.section(SectionKind::Defaults, "").unwrap();
        assert!(defaults.contains("option idle-close-on-response"));
        let http = h.section(SectionKind::Frontend, "http").unwrap();
        assert!(http.contains("bind :8080"));
        assert!(http.contains("default_backend haptic.not-found"));
        assert!(http.contains(
            "http-after-response set-header Server 'haptic' if !{ res.hdr(server) -m found }"
        ));
        assert!(
            h.section(SectionKind::Frontend, "healthz")
                .unwrap()
                .contains("path '/healthz'")
        );
        assert!(h.section(SectionKind::Frontend, "stats").is_none());
    }

    #[test]
    fn values_change_binds_and_toggle_frontends() {
        let tree = json!({"base": {"frontends": {"http": {"bind": "\"${POD_IP}:80\""}, "healthz": {"enabled": false}, "stats": {"enabled": true}}}});
        let mut h = Harness::<Base>::new(tree).unwrap();
        h.render().unwrap();
        assert!(
            h.section(SectionKind::Frontend, "http")
                .unwrap()
                .contains("bind \"${POD_IP}:80\"")
        );
        assert!(h.section(SectionKind::Frontend, "healthz").is_none());
        assert!(h.section(SectionKind::Frontend, "stats").is_some());
        let tree = json!({"base": {"frontends": {"http": {"serverHeader": ""}}}});
        let mut h = Harness::<Base>::new(tree).unwrap();
        h.render().unwrap();
        let http = h.section(SectionKind::Frontend, "http").unwrap();
        assert!(
            !http.contains("Server"),
            "no Server header when empty: {http}"
        );
    }

    #[test]
    fn a_line_break_in_a_value_is_refused() {
        let tree = json!({"base": {"global": {"log": "stdout\n    daemon"}}});
        let err = Harness::<Base>::new(tree).unwrap_err();
        assert!(err.to_string().contains("global.log"), "{err}");
    }
}
