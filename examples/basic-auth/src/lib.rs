//! An example custom template library: an Ingress annotated with
//! `basic-auth.haproxy-haptic.org/secret: <name>` asks for HTTP basic auth
//! on the requests it routes, with the users of that Secret's `auth` key
//! (htpasswd lines, `user:hash`, in the Ingress's namespace). The rule is
//! on the matched Ingress (`txn.haptic_ingress`, through
//! [`matched_ingress_acl`]), not on the host, so another Ingress on the
//! same host keeps its own policy.
//!
//! HAProxy 2.6 cannot load a userlist from a file, so the hashes sit in
//! haproxy.cfg: the userlist is a [secret section](Output::secret_section),
//! which the host shows redacted and writes 0600. Each hash is checked with
//! the host's [`crypt`](haptic_sdk::crypt) import first: `haproxy -c`
//! accepts any string, but a hash HAProxy's crypt(3) cannot compute
//! (`htpasswd -m`'s `$apr1$`) would lock its user out silently, so such a
//! user is left out with a warning that names the user, never the hash.
//! Only Ingresses haptic serves count (the bundled `ingress` library's
//! class rules, [`ClassRules`]). A missing Secret, or one without usable users, denies every request the
//! Ingress routes (fail closed) and warns.

use std::collections::BTreeMap;

use haptic_sdk::ingress::{ClassRules, matched_ingress_acl};
use haptic_sdk::k8s::api::core::v1::Secret;
use haptic_sdk::k8s::api::networking::v1::{Ingress, IngressClass};
use haptic_sdk::{
    Context, Info, Library, ObjectKey, Output, Plan, Result, SectionKind, Slot, Values, Watch,
};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BasicAuthValues {
    /// The annotation naming the Secret.
    annotation: String,
    /// The frontend the rule goes into (`base`'s `http`).
    frontend: String,
}

/// The `basic-auth` library.
#[derive(Debug, Default)]
pub struct BasicAuth {
    values: Option<BasicAuthValues>,
    classes: ClassRules,
}

impl Library for BasicAuth {
    fn info(&self) -> Info {
        Info::new("basic-auth", env!("CARGO_PKG_VERSION"))
            // After the bundled libraries, so `frontend http` exists.
            .order(500)
            .defaults(serde_json::json!({
                "annotation": "basic-auth.haproxy-haptic.org/secret",
                "frontend": "http",
            }))
    }

    fn plan(&mut self, values: &Values) -> Result<Plan> {
        self.values = Some(values.get()?);
        self.classes = ClassRules::from_values(values);
        let classes = Watch::new("classes", "networking.k8s.io/v1", "IngressClass")
            .parse_as::<IngressClass>();
        let ingresses = Watch::new("ingresses", "networking.k8s.io/v1", "Ingress")
            .parse_as::<Ingress>()
            .ignore_fields(["metadata.managedFields", "status"]);
        let secrets = Watch::new("secrets", "v1", "Secret")
            .parse_as::<Secret>()
            .field_selector("type=Opaque")
            .ignore_fields(["metadata.managedFields"]);
        Ok(Plan::default()
            .watch(ingresses)
            .watch(classes)
            .watch(secrets))
    }

    fn render(&mut self, ctx: &Context<'_>, out: &mut Output) -> Result<()> {
        let Some(values) = &self.values else {
            return Ok(());
        };
        let secrets: BTreeMap<(String, String), _> = ctx
            .objects::<Secret>("secrets")?
            .map(|secret| {
                let key = (
                    secret.metadata.namespace.clone().unwrap_or_default(),
                    secret.metadata.name.clone().unwrap_or_default(),
                );
                (key, secret)
            })
            .collect();
        let classes = self.classes.classes(
            ctx.objects::<IngressClass>("classes")?
                .map(|class| class.value),
        );
        for ingress in ctx.objects::<Ingress>("ingresses")? {
            if !self.classes.is_served(&ingress, &classes) {
                continue;
            }
            let Some(secret_name) = ingress
                .metadata
                .annotations
                .as_ref()
                .and_then(|annotations| annotations.get(&values.annotation))
            else {
                continue;
            };
            let namespace = ingress.metadata.namespace.clone().unwrap_or_default();
            let name = ingress.metadata.name.clone().unwrap_or_default();
            let key = ObjectKey {
                watch: "ingresses".into(),
                namespace: namespace.clone(),
                name: name.clone(),
            };
            let userlist = format!("basic_auth_{namespace}_{name}");
            let users = match secrets.get(&(namespace.clone(), secret_name.clone())) {
                Some(secret) => users(secret, &key, out)?,
                None => {
                    out.warning(
                        Some(&key),
                        "BasicAuthSecretMissing",
                        format!(
                            "Secret {namespace}/{secret_name} named by {} does not exist (or is not \
                             Opaque); every request this Ingress routes is denied until it does.",
                            values.annotation
                        ),
                    )?;
                    Vec::new()
                }
            };
            let routed = matched_ingress_acl(&namespace, &name);
            let rule = if users.is_empty() {
                format!("http-request deny deny_status 401 if {routed}")
            } else {
                let body: String = users
                    .iter()
                    .map(|(user, hash)| format!("user {user} password {hash}\n"))
                    .collect();
                out.secret_section(SectionKind::Userlist, userlist.clone(), body)?;
                format!("http-request auth realm {name} if {routed} !{{ http_auth({userlist}) }}")
            };
            // Above 0: after `ingress` sets txn.haptic_ingress.
            out.snippet(
                SectionKind::Frontend,
                values.frontend.clone(),
                Slot::RequestRules,
                50,
                rule,
            )?;
        }
        Ok(())
    }
}

/// The usable `user:hash` lines of the Secret's `auth` key
/// ([`haptic_sdk::crypt::htpasswd_users`]); a user whose hash HAProxy would
/// never match is left out with a warning.
fn users(secret: &Secret, ingress: &ObjectKey, out: &mut Output) -> Result<Vec<(String, String)>> {
    let text = secret
        .data
        .as_ref()
        .and_then(|data| data.get("auth"))
        .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
        .unwrap_or_default();
    let (users, refused) = haptic_sdk::crypt::htpasswd_users(&text);
    for (user, why) in refused {
        out.warning(
            Some(ingress),
            "BasicAuthHashUnusable",
            format!("user {user} is left out: {why}"),
        )?;
    }
    Ok(users)
}

haptic_sdk::export_library!(BasicAuth);
