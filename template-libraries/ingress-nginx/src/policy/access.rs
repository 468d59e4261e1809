//! Who may send what: source ranges (`*list-source-range`), request limits
//! (`limit-*`) and the body size (`proxy-body-size`).

use crate::annotations::Annotations;
use crate::report::Status;
use crate::{invalid, parse};

use super::Policy;

impl Policy {
    pub(super) fn read_access(&mut self, a: &mut Annotations<'_>) {
        for name in ["whitelist-source-range", "allowlist-source-range"] {
            if let Some(list) = a.honoured(name, parse::cidrs, |list| {
                format!("requests from outside {} are answered 403", list.join(", "))
            }) {
                self.allow.get_or_insert_with(Vec::new).extend(list);
            }
        }
        if let Some(list) = a.honoured("denylist-source-range", parse::cidrs, |list| {
            format!("requests from {} are answered 403", list.join(", "))
        }) {
            self.deny = Some(list);
        }
        if let Some((key, any)) = a.parsed("satisfy", |v| match v.trim() {
            "any" => Ok(true),
            "all" => Ok(false),
            other => Err(invalid!("{other:?} is not any or all")),
        }) {
            let status = match (any, self.allow.is_some()) {
                (false, _) => Status::Honoured(
                    "all: the source ranges and the authentication both apply".to_owned(),
                ),
                (true, true) => Status::Differs(
                    "any: a client in the allowed source ranges gets in without authentication, any other must authenticate (basic, auth-url or the global auth-url); without authentication the ranges alone decide. Difference: denylist-source-range refuses its ranges even to a client who authenticates (nginx would let one in)".to_owned(),
                ),
                (true, false) => Status::Honoured(
                    "any, with no allowed source range on the Ingress: the authentication alone decides".to_owned(),
                ),
            };
            a.record(key, status);
            self.satisfy_any = any;
        }
        let window = "HAProxy counts each client's requests over a sliding window and answers 503 above the limit, with no burst allowance (nginx admits bursts of limit-burst-multiplier, default 5, times the rate); the count is per HAProxy pod, as nginx's is per nginx pod";
        if let Some((key, n)) = a.parsed("limit-rps", |v| parse::number(v, 1..=1_000_000)) {
            a.record(
                key,
                Status::Differs(format!(
                    "at most {n} requests per second per client address: {window}"
                )),
            );
            self.limits.rps = Some(n);
        }
        if let Some((key, n)) = a.parsed("limit-rpm", |v| parse::number(v, 1..=60_000_000)) {
            a.record(
                key,
                Status::Differs(format!(
                    "at most {n} requests per minute per client address: {window}"
                )),
            );
            self.limits.rpm = Some(n);
        }
        if let Some(n) = a.honoured(
            "limit-connections",
            |v| parse::number(v, 1..=1_000_000),
            |n| {
                format!(
                    "a client address with {n} connections open is answered 503 on a new request"
                )
            },
        ) {
            self.limits.connections = Some(n);
        }
        // nginx's `limit_rate`, in KB per second: HAProxy 3.0's bwlim-out
        // filter per answer. 0 is nginx's "no limit".
        if let Some((key, kib)) = a.parsed("limit-rate", |v| parse::number(v, 0..=(1 << 30))) {
            if kib == 0 {
                a.record(key, Status::Honoured("no bandwidth limit (0)".to_owned()));
            } else {
                a.record(
                    key,
                    Status::Honoured(format!(
                        "each answer to the Ingress's requests is sent at most {kib} KB ({} bytes) per second (HAProxy's bwlim-out filter, per request as nginx's limit_rate is per connection)",
                        kib * 1024
                    )),
                );
                self.rate_limit = Some(kib * 1024);
            }
        }
        if let Some(list) = a.honoured("limit-whitelist", parse::cidrs, |list| {
            format!("{} are never rate limited", list.join(", "))
        }) {
            self.limits.exempt = list;
        }
        if let Some((key, size)) = a.parsed("proxy-body-size", parse::size) {
            let text = match size {
                Some(bytes) => format!(
                    "a request whose Content-Length exceeds {bytes} bytes is answered 413; a chunked body without Content-Length is not counted (HAProxy would have to buffer it)"
                ),
                None => "no body size limit".to_owned(),
            };
            a.record(
                key,
                if size.is_some() {
                    Status::Differs(text)
                } else {
                    Status::Honoured(text)
                },
            );
            self.body_size = size;
        }
    }
}
