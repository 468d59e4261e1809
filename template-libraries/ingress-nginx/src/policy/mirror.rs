//! `mirror-target` and its companions `mirror-host`, `mirror-request-body`:
//! the agent beside HAProxy sends a copy of each request to the target,
//! fire and forget (`haptic_sdk::agent::MirrorEngine`, docs/spoa.md).

use haptic_sdk::agent::{MIRROR_BODY_LIMIT, MirrorTarget, check_variables};

use crate::annotations::Annotations;
use crate::invalid;
use crate::parse::{self, Invalid};
use crate::report::Status;

use super::Policy;

const COMPANIONS: &[&str] = &["mirror-host", "mirror-request-body"];

impl Policy {
    pub(super) fn read_mirror(&mut self, a: &mut Annotations<'_>) {
        let Some((target_key, target)) = a.parsed("mirror-target", target_url) else {
            a.not_honoured(
                COMPANIONS,
                "mirror-target is not set or not valid on this Ingress",
            );
            return;
        };
        let mut mirror = MirrorTarget::new(target.clone());
        mirror.host = a.honoured(
            "mirror-host",
            |v| {
                let text = v.trim().to_owned();
                if text.is_empty() || text.len() > 253 {
                    return Err(invalid!("{text:?} is not a host name"));
                }
                check_variables(&text).map_err(|why| invalid!("{text:?}: {why}"))?;
                Ok(text)
            },
            |h| format!("the copies carry Host {h}"),
        );
        if let Some(body) = a.honoured(
            "mirror-request-body",
            |v| match v.trim() {
                "on" => Ok(true),
                "off" => Ok(false),
                other => Err(invalid!("{other:?} is not \"on\" or \"off\"")),
            },
            |on| {
                if *on {
                    format!("bodies up to {MIRROR_BODY_LIMIT} bytes are copied; a request with a longer body is not mirrored")
                } else {
                    "the copies carry no body".to_owned()
                }
            },
        ) {
            mirror.body = body;
        }
        a.record(
            target_key,
            Status::Differs(format!(
                "haptic's agent (beside each HAProxy, through an SPOE filter) sends a copy of every request this Ingress routes to {target}, after authentication, and discards the answer; the client never waits for it (a copy is abandoned after 5 s, and never sent while 1,024 are under way); a target without a path gets the request's path and query (nginx would send its internal mirror location's); bodies up to {MIRROR_BODY_LIMIT} bytes are copied unless mirror-request-body is off, and requests with longer ones are not mirrored"
            )),
        );
        self.mirror = Some(mirror);
    }
}

/// `mirror-target`: an http(s) URL, nginx variables allowed
/// (`https://shadow.test$request_uri`).
fn target_url(value: &str) -> Result<String, Invalid> {
    let url = parse::url(value)?;
    check_variables(&url).map_err(|why| invalid!("{url:?}: {why}"))?;
    Ok(url)
}
