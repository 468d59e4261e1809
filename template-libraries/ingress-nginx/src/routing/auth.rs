//! `auth-type: basic` written: a secret `userlist` and the rule asking for
//! it. `auth-url` read into the Ingress's profile for the agent
//! (`haptic_sdk::agent`); the routing names it for the Ingress's requests.

use haptic_sdk::k8s::api::core::v1::Secret;
use haptic_sdk::k8s::api::networking::v1::Ingress;
use haptic_sdk::names::sanitize;
use haptic_sdk::{Context, Entry, Output, Result, SectionKind, Slot};

use haptic_sdk::agent::{ExternalAuth, check_variables};

use crate::SECRETS;
use crate::policy::{self, Policy};

use super::headers::config_map_headers;

/// The library's name, which names its auth engine and profiles.
pub(crate) const LIBRARY: &str = "ingress-nginx";

/// The profile of the values' `globalAuth`, one for every Ingress taking it.
pub(crate) const GLOBAL_AUTH_PROFILE: &str = "ingress-nginx.global-auth";

/// The name of Ingress `id`'s profiles for the agent (auth, mirror): letters,
/// digits, `.`, `-` and `_` only, as the configuration may carry.
pub(super) fn agent_profile(id: &str) -> String {
    format!("{LIBRARY}.{}", sanitize(&id.replace('/', ".")))
}

/// `auth-url`: the Ingress's profile, with `auth-proxy-set-headers`'
/// headers read now.
pub(super) fn external_auth(
    ctx: &Context<'_>,
    out: &mut Output,
    ingress: &Entry<'_, Ingress>,
    id: &str,
    auth: &ExternalAuth,
    policy: &Policy,
) -> Result<ExternalAuth> {
    let namespace = ingress.key.namespace.as_str();
    let mut auth = auth.clone();
    if let Some(config_map) = &policy.auth_proxy_headers {
        for (name, value) in
            config_map_headers(ctx, out, ingress, "auth-proxy-set-headers", config_map)?
        {
            match check_variables(&value) {
                Ok(()) => {
                    auth.request_headers.insert(name, value);
                }
                Err(why) => out.warning(
                    Some(ingress.key),
                    "AuthProxyHeaderLeftOut",
                    format!(
                        "Ingress {id:?}: header {name} of ConfigMap {namespace}/{config_map} (auth-proxy-set-headers) is left out: {why}"
                    ),
                )?,
            }
        }
    }
    Ok(auth)
}

/// `auth-type: basic`: a secret `userlist` of the Secret's usable users and
/// the rule asking the requests `asked` matches for them; without a usable
/// user those are refused (fail closed).
pub(super) fn basic_auth(
    ctx: &Context<'_>,
    out: &mut Output,
    ingress: &Entry<'_, Ingress>,
    id: &str,
    auth: &policy::BasicAuth,
    asked: &str,
    frontend: &str,
) -> Result<()> {
    let namespace = ingress.key.namespace.as_str();
    let acl = asked;
    let secret = ctx.get::<Secret>(SECRETS, namespace, &auth.secret)?;
    let data = secret.as_ref().and_then(|s| s.value.data.as_ref());
    let (users, refused) = match data {
        Some(data) if auth.map => {
            let pairs: Vec<(String, String)> = data
                .iter()
                .map(|(user, hash)| (user.clone(), String::from_utf8_lossy(&hash.0).into_owned()))
                .collect();
            haptic_sdk::crypt::users_of(pairs.iter().map(|(u, h)| (u.as_str(), h.as_str())))
        }
        Some(data) => haptic_sdk::crypt::htpasswd_users(
            &data
                .get("auth")
                .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
                .unwrap_or_default(),
        ),
        None => (Vec::new(), Vec::new()),
    };
    for (user, why) in refused {
        out.warning(
            Some(ingress.key),
            "AuthUserLeftOut",
            format!(
                "Ingress {id:?}: user {user} of Secret {:?} is left out: {why}",
                auth.secret
            ),
        )?;
    }
    let rule = if users.is_empty() {
        out.warning(
            Some(ingress.key),
            "AuthSecretUnusable",
            format!(
                "Ingress {id:?}: Secret {:?} (type Opaque, in its namespace) is missing or holds no usable user; every request this Ingress routes is answered 401 until it does",
                auth.secret
            ),
        )?;
        format!("    http-request deny deny_status 401 if {acl}\n")
    } else {
        let userlist = format!("ingress-nginx.auth.{}", sanitize(&id.replace('/', ".")));
        let body: String = users
            .iter()
            .map(|(user, hash)| format!("    user {user} password {hash}\n"))
            .collect();
        out.secret_section(SectionKind::Userlist, userlist.clone(), body)?;
        let realm = if auth.realm.is_empty() {
            String::new()
        } else {
            format!(" realm {}", haptic_sdk::names::quote(&auth.realm))
        };
        format!("    http-request auth{realm} if {acl} !{{ http_auth({userlist}) }}\n")
    };
    // After the source ranges (10), as nginx's access phase runs them.
    out.snippet_keyed(
        format!("ingress-nginx-auth:{id}"),
        SectionKind::Frontend,
        frontend,
        Slot::RequestRules,
        20,
        rule,
    )
}
