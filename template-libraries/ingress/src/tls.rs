//! TLS termination for the Ingresses' `spec.tls`.
//!
//! - Certificates: the SDK's [`haptic_sdk::ingress::tls`] (one engine for
//!   every Ingress library): `kubernetes.io/tls` Secrets checked by the
//!   host, one secret file `certs/<ns>_<name>.pem` and one line of
//!   `certs/ingress.crt-list` per usable Secret with the Ingress's TLS
//!   hosts as SNI filters. The older Ingress wins a host two claim.
//! - `certs/default.pem` is served when SNI matches no line, and for every
//!   host whose Secret is unusable: the Secret named in
//!   `tls.defaultCertificate.secret`, else the host's own certificate.
//! - One `bind` line in the routing frontend, naming this library's
//!   crt-list and those of the other enabled Ingress libraries
//!   ([`HttpsBind`]), so HTTPS requests go through the same host and path
//!   rules as HTTP. `X-Forwarded-Proto` is set on every request (a
//!   client's own value is replaced).
//! - `maps/ingress-tls.map` marks each TLS host of each Ingress
//!   (`<host>@<namespace>/<name> redirect|no-redirect`); the frontend sets
//!   `txn.haptic_tls` from it for the host and the Ingress the request is
//!   routed to (`txn.haptic_ingress`), redirects plain HTTP when it is
//!   `redirect` (308 by default: unlike 301, clients keep the method and
//!   body of a POST), except ACME HTTP-01 challenges, and adds HSTS on HTTPS
//!   responses when enabled. Keyed by Ingress, a `spec.tls` entry and its
//!   redirect annotation reach only the declaring Ingress's own routes:
//!   keyed by host alone, an Ingress of another namespace listing a
//!   victim's host redirected the victim's plain HTTP.
//!
//! Problems never break the configuration: a missing or unusable Secret is
//! a warning on the Ingress (an Event in a cluster) naming the Secret and
//! the reason, and its hosts get the default certificate. No key material
//! appears in a warning or log line.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use haptic_sdk::claims::HostClaims;
use haptic_sdk::haproxy;
use haptic_sdk::ingress::tls::{
    CertificateCache, Certificates, HttpsBind, INGRESS, parse_reference,
};
use haptic_sdk::k8s::api::networking::v1::Ingress;
use haptic_sdk::{Context, Entry, Output, Result, SectionKind, Slot, Watch};
use serde::Deserialize;

/// The watch of TLS Secrets.
pub const SECRETS: &str = "ingress-tls-secrets";
/// `<host>@<namespace>/<name>` of each TLS host of each Ingress, and
/// whether plain HTTP to that Ingress's routes on that host redirects.
pub const TLS_MAP: &str = "maps/ingress-tls.map";
/// Per-Ingress override of `tls.redirect` (`"true"` or `"false"`).
pub const REDIRECT_ANNOTATION: &str = "haproxy-haptic.org/ssl-redirect";
/// `templateLibraries.ingress.tls`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TlsValues {
    pub enabled: bool,
    /// The HTTPS address, e.g. `:8443`.
    pub bind: String,
    pub default_certificate: DefaultCertificateValues,
    /// Redirect plain HTTP to HTTPS for TLS hosts. Off by default: the
    /// Ingress specification says nothing of redirects and the upstream
    /// conformance suite (host_rules) expects plain HTTP to a TLS host to be
    /// served; `tls.redirect` or the per-Ingress annotation turn it on.
    pub redirect: bool,
    /// 301, 302, 303, 307 or 308.
    pub redirect_code: u16,
    pub hsts: HstsValues,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct DefaultCertificateValues {
    /// `namespace/name` of a `kubernetes.io/tls` Secret; empty uses the
    /// host's certificate.
    pub secret: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HstsValues {
    pub enabled: bool,
    pub max_age: u64,
    pub include_sub_domains: bool,
    pub preload: bool,
}

/// Defaults under `tls`.
pub fn defaults() -> serde_json::Value {
    serde_json::json!({
        "enabled": true,
        "bind": ":8443",
        "defaultCertificate": { "secret": "" },
        "redirect": false,
        "redirectCode": 308,
        "hsts": { "enabled": false, "maxAge": 31_536_000, "includeSubDomains": false, "preload": false }
    })
}

impl TlsValues {
    /// Refuses values that would write broken configuration lines.
    pub fn check(&self) -> std::result::Result<(), String> {
        if !self.enabled {
            return Ok(());
        }
        if self.bind.trim().is_empty() || self.bind.contains(['\n', '\r']) {
            return Err(
                "templateLibraries.ingress.tls.bind must be one address such as \":8443\""
                    .to_owned(),
            );
        }
        if ![301, 302, 303, 307, 308].contains(&self.redirect_code) {
            return Err(format!(
                "templateLibraries.ingress.tls.redirectCode is {}; use 301, 302, 303, 307 or 308",
                self.redirect_code
            ));
        }
        if !self.default_certificate.secret.is_empty()
            && parse_reference(&self.default_certificate.secret).is_none()
        {
            return Err(format!(
                "templateLibraries.ingress.tls.defaultCertificate.secret is {:?}; write it as \
                 namespace/name",
                self.default_certificate.secret
            ));
        }
        Ok(())
    }
}

/// The watch of TLS Secrets.
pub fn secrets_watch() -> Watch {
    haptic_sdk::ingress::tls::secrets_watch(SECRETS)
}

/// The certificate cache of this library's Secrets watch.
pub fn certificate_cache() -> CertificateCache {
    CertificateCache::new(SECRETS)
}

/// What TLS adds to one render.
pub struct TlsRender<'v> {
    values: &'v TlsValues,
    frontend: &'v str,
    certificates: Certificates,
    /// `<TLS host>@<namespace>/<name>` -> redirect plain HTTP.
    redirects: BTreeMap<String, bool>,
}

impl<'v> TlsRender<'v> {
    /// `claims`: the admin's host-claim policy, for the names host-less
    /// `spec.tls` entries take from their certificates.
    pub fn new(values: &'v TlsValues, frontend: &'v str, claims: HostClaims) -> Self {
        Self {
            values,
            frontend,
            certificates: Certificates::new(&INGRESS).claims(claims),
            redirects: BTreeMap::new(),
        }
    }

    /// Adds the `spec.tls` of one served Ingress (call oldest first).
    pub fn add_ingress(
        &mut self,
        ctx: &Context<'_>,
        cache: &mut CertificateCache,
        ingress: &Entry<'_, Ingress>,
        out: &mut Output,
    ) -> Result<()> {
        if ingress
            .spec
            .as_ref()
            .and_then(|spec| spec.tls.as_ref())
            .is_none()
        {
            return Ok(());
        }
        let what = format!("Ingress {}/{}", ingress.key.namespace, ingress.key.name);
        let redirect = match ingress
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(REDIRECT_ANNOTATION))
            .map(String::as_str)
        {
            Some("true") => true,
            Some("false") => false,
            Some(other) => {
                out.warning(
                    Some(ingress.key),
                    "InvalidAnnotation",
                    format!(
                        "{what}: annotation {REDIRECT_ANNOTATION} is {other:?}; it takes \"true\" \
                         or \"false\", so the default ({}) applies",
                        self.values.redirect
                    ),
                )?;
                self.values.redirect
            }
            None => self.values.redirect,
        };
        let id = format!("{}/{}", ingress.key.namespace, ingress.key.name);
        for host in self.certificates.add_ingress(ctx, cache, ingress, out)? {
            self.redirects
                .entry(format!("{host}@{id}"))
                .or_insert(redirect);
        }
        Ok(())
    }

    /// Emits the files and frontend lines; the bind too when this library
    /// writes it (`bind`).
    pub fn finish(
        self,
        ctx: &Context<'_>,
        cache: &mut CertificateCache,
        bind: &HttpsBind,
        out: &mut Output,
    ) -> Result<()> {
        let v = self.values;
        if bind.is_written_by(INGRESS.name) {
            bind.write(
                ctx,
                cache,
                out,
                self.frontend,
                &v.bind,
                &v.default_certificate.secret,
                "templateLibraries.ingress.tls.defaultCertificate.secret",
            )?;
        }
        self.certificates.finish(ctx, cache, out)?;
        let mut map = String::new();
        for (key, redirect) in &self.redirects {
            let flag = if *redirect { "redirect" } else { "no-redirect" };
            // Hosts are checked DNS names and ids Kubernetes names.
            if let Ok(line) = haproxy::map_line(key, flag) {
                map.push_str(&line);
            }
        }
        out.file(TLS_MAP, map)?;

        // After the routing variables (priority 0) are set: the host, then
        // its wildcard, each with the Ingress the request is routed to.
        let mut rules = String::new();
        for (host, unless) in [
            ("txn.haptic_host", ""),
            ("txn.haptic_wildcard", " !{ var(txn.haptic_tls) -m found }"),
        ] {
            let _ = writeln!(
                rules,
                "    http-request set-var-fmt(txn.haptic_tls_key) \"%[var({host})]@%[var(txn.haptic_ingress)]\" if {{ var(txn.haptic_ingress) -m found }}{unless}"
            );
            let _ = writeln!(
                rules,
                "    http-request set-var(txn.haptic_tls) var(txn.haptic_tls_key),map_str({TLS_MAP}) if {{ var(txn.haptic_ingress) -m found }}{unless}"
            );
        }
        let _ = writeln!(
            rules,
            "    http-request redirect scheme https code {} if !{{ ssl_fc }} {{ var(txn.haptic_tls) -m str redirect }} !{{ path_beg /.well-known/acme-challenge/ }}",
            v.redirect_code
        );
        out.snippet(
            SectionKind::Frontend,
            self.frontend,
            Slot::RequestRules,
            10,
            rules,
        )?;
        if v.hsts.enabled {
            let mut header = format!("max-age={}", v.hsts.max_age);
            if v.hsts.include_sub_domains {
                header.push_str("; includeSubDomains");
            }
            if v.hsts.preload {
                header.push_str("; preload");
            }
            out.snippet(
                SectionKind::Frontend,
                self.frontend,
                Slot::ResponseRules,
                0,
                format!(
                    "    http-response set-header Strict-Transport-Security \"{header}\" if {{ ssl_fc }} {{ var(txn.haptic_tls) -m found }}\n"
                ),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_that_would_break_lines_are_refused() {
        let mut values: TlsValues =
            serde_json::from_value(defaults()).expect("defaults deserialize");
        assert!(values.check().is_ok());
        values.redirect_code = 200;
        assert!(values.check().unwrap_err().contains("redirectCode"));
        values.redirect_code = 308;
        values.bind = ":443\n    daemon".into();
        assert!(values.check().unwrap_err().contains("tls.bind"));
        values.bind = ":443".into();
        values.default_certificate.secret = "nonamespace".into();
        assert!(values.check().unwrap_err().contains("namespace/name"));
    }
}
