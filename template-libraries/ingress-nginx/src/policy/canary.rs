//! `canary` and its `canary-by-*`, `canary-weight*`: how requests choose a
//! canary Ingress's backend over the main Ingress's.

use crate::annotations::Annotations;
use crate::parse;
use crate::report::Status;

use super::{Canary, Policy};
use crate::regex;

impl Policy {
    pub(super) fn read_canary(&mut self, a: &mut Annotations<'_>) {
        let names = [
            "canary-by-header",
            "canary-by-header-value",
            "canary-by-header-pattern",
            "canary-by-cookie",
            "canary-weight",
            "canary-weight-total",
        ];
        let on = a.parsed("canary", parse::boolean);
        let Some((key, true)) = on else {
            if let Some((key, false)) = on {
                a.record(
                    key,
                    Status::Honoured("not a canary: routed as its own Ingress".into()),
                );
            }
            a.not_honoured(&names, "canary is not \"true\" on this Ingress");
            return;
        };
        a.record(key, Status::Honoured("a canary: its paths take requests from the main Ingress of the same host and path by header, cookie, then weight".into()));
        let mut c = Canary {
            total: 100,
            ..Canary::default()
        };
        if let Some(total) = a.honoured(
            "canary-weight-total",
            |v| parse::number(v, 1..=1_000_000),
            |total| format!("weights are out of {total}"),
        ) {
            c.total = total;
        }
        if let Some((key, weight)) = a.parsed("canary-weight", |v| parse::number(v, 0..=1_000_000))
        {
            if weight > c.total {
                a.record(
                    key,
                    Status::Invalid(format!("{weight} is above canary-weight-total {}", c.total)),
                );
            } else {
                a.record(
                    key,
                    Status::Honoured(format!(
                        "{weight} of {} requests (rand) go to the canary",
                        c.total
                    )),
                );
                c.weight = weight;
            }
        }
        if let Some(header) = a.honoured("canary-by-header", parse::header_name, |header| {
            format!("{header}: always sends a request to the canary, never keeps it away")
        }) {
            c.header = Some(header);
        }
        if let Some(value) = a.honoured("canary-by-header-value", parse::plain_word, |value| {
            format!("the header equal to {value} sends a request to the canary")
        }) {
            c.header_value = Some(value);
        }
        if let Some((key, pattern)) = a.parsed("canary-by-header-pattern", regex::pattern) {
            let status = if c.header_value.is_some() {
                Status::NotHonoured(
                    "canary-by-header-value is set and wins, as in ingress-nginx".into(),
                )
            } else {
                c.header_pattern = Some(pattern);
                Status::Honoured(
                    "a header matching the PCRE2 pattern sends a request to the canary".into(),
                )
            };
            a.record(key, status);
        }
        if let Some(cookie) = a.honoured("canary-by-cookie", parse::cookie_name, |cookie| {
            format!("cookie {cookie}=always sends a request to the canary, never keeps it away")
        }) {
            c.cookie = Some(cookie);
        }
        self.canary = Some(c);
    }
}
