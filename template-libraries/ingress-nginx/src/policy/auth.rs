//! `auth-type: basic` and its `auth-secret*`, `auth-realm`: users from a
//! Secret of the Ingress's namespace.

use crate::annotations::Annotations;
use crate::invalid;
use crate::report::Status;

use super::{BasicAuth, Policy};

impl Policy {
    pub(super) fn read_auth(&mut self, a: &mut Annotations<'_>) {
        let names = ["auth-secret", "auth-secret-type", "auth-realm"];
        match a.take("auth-type") {
            Some((key, "basic")) => {
                let secret = a.parsed("auth-secret", |v| {
                    let name = v.trim();
                    let good = !name.is_empty()
                        && name.len() <= 253
                        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
                    if good {
                        Ok(name.to_owned())
                    } else {
                        Err(invalid!("{name:?} is not the name of a Secret in the Ingress's namespace (haptic reads no Secret of another namespace)"))
                    }
                });
                let Some((secret_key, secret)) = secret else {
                    a.record(key, Status::Invalid("auth-secret is missing or invalid: no users to check, so nothing is applied".into()));
                    a.not_honoured(&names[1..], "auth-secret is missing or invalid");
                    return;
                };
                a.record(secret_key, Status::Differs(format!("the users of Secret {secret} (type Opaque), in a userlist; a hash HAProxy's crypt(3) cannot compute (htpasswd -m's $apr1$, which ingress-nginx accepts) leaves its user out with a warning: make hashes with htpasswd -B or mkpasswd -m sha-512")));
                let mut map = false;
                if let Some((key, kind)) = a.take("auth-secret-type") {
                    let status = match kind.trim() {
                        "auth-file" => Status::Honoured("htpasswd lines under the key auth".into()),
                        "auth-map" => {
                            map = true;
                            Status::Honoured("one key per user, its value the hash".into())
                        }
                        other => Status::Invalid(format!(
                            "{other:?} is not auth-file or auth-map; auth-file is used"
                        )),
                    };
                    a.record(key, status);
                }
                let mut realm = String::new();
                if let Some((key, text)) = a.take("auth-realm") {
                    if text
                        .chars()
                        .any(|c| c.is_control() || c == '\'' || c == '"')
                    {
                        a.record(
                            key,
                            Status::Invalid(format!(
                                "{text:?}: a realm without quotes or control characters"
                            )),
                        );
                    } else {
                        realm = text.trim().to_owned();
                        a.record(key, Status::Honoured(format!("the realm is {realm:?}")));
                    }
                }
                a.record(key, Status::Honoured("requests without valid credentials are answered 401 with WWW-Authenticate: Basic".into()));
                self.auth = Some(BasicAuth { secret, map, realm });
            }
            Some((key, other)) => {
                let why = if other == "digest" {
                    "digest authentication has no HAProxy counterpart".to_owned()
                } else {
                    format!("{other:?} is not basic or digest")
                };
                a.record(key, Status::NotHonoured(why));
                a.not_honoured(&names, "auth-type is not basic");
            }
            None => {
                a.not_honoured(&names, "auth-type is not set to basic on this Ingress");
            }
        }
    }
}
