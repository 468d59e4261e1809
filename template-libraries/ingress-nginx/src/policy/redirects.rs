//! The redirects: `ssl-redirect`, `force-ssl-redirect`,
//! `permanent-redirect*`, `temporal-redirect*`, `app-root`,
//! `from-to-www-redirect`.

use crate::annotations::Annotations;
use crate::parse;
use crate::report::Status;

use super::Policy;

impl Policy {
    pub(super) fn read_redirects(&mut self, a: &mut Annotations<'_>) {
        self.ssl_redirect = true;
        if let Some((key, on)) = a.parsed("ssl-redirect", parse::boolean) {
            self.ssl_redirect = on;
            a.record(
                key,
                Status::Honoured(format!(
                    "plain HTTP to this Ingress's TLS hosts is {} (308, ACME challenges excepted)",
                    if on {
                        "redirected to HTTPS"
                    } else {
                        "served, not redirected"
                    }
                )),
            );
        }
        if let Some((key, on)) = a.parsed("force-ssl-redirect", parse::boolean) {
            self.force_ssl_redirect = on;
            a.record(key, Status::Honoured("plain HTTP to every host of this Ingress is redirected to HTTPS with 308, TLS section or not (ACME challenges excepted)".into()));
        }
        let permanent_code = a.parsed("permanent-redirect-code", parse::redirect_code);
        let temporal_code = a.parsed("temporal-redirect-code", parse::redirect_code);
        let permanent = a.parsed("permanent-redirect", parse::url);
        let temporal = a.parsed("temporal-redirect", parse::url);
        // ingress-nginx reads the temporal redirect first and ignores the
        // permanent one when both are set.
        if let Some((key, url)) = temporal {
            let code = temporal_code.as_ref().map_or(302, |(_, c)| *c);
            a.record(
                key,
                Status::Honoured(format!(
                    "every request is answered {code} with Location {url}"
                )),
            );
            self.redirect = Some((url, code));
            if let Some((key, _)) = permanent {
                a.record(
                    key,
                    Status::NotHonoured(
                        "temporal-redirect is set too and wins, as in ingress-nginx".into(),
                    ),
                );
            }
        } else if let Some((key, url)) = permanent {
            let code = permanent_code.as_ref().map_or(301, |(_, c)| *c);
            a.record(
                key,
                Status::Honoured(format!(
                    "every request is answered {code} with Location {url}"
                )),
            );
            self.redirect = Some((url, code));
        }
        for (key, code) in [permanent_code, temporal_code].into_iter().flatten() {
            let status = if self.redirect.as_ref().is_some_and(|(_, c)| *c == code) {
                Status::Honoured(format!("the redirect's status is {code}"))
            } else {
                Status::NotHonoured("its redirect annotation is absent or not in effect".into())
            };
            a.record(key, status);
        }
        if let Some(root) = a.honoured("app-root", parse::path, |root| {
            format!("a request for / is answered 302 with Location <scheme>://<host>{root}")
        }) {
            self.app_root = Some(root);
        }
        if let Some((key, on)) = a.parsed("from-to-www-redirect", parse::boolean) {
            self.from_to_www = on;
            a.record(key, Status::Honoured("a request for the www. form of a rule's host (or the bare form of a www. host) is answered 308 to the rule's host, path and query kept".into()));
        }
    }
}
