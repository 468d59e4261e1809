//! `custom-headers`: the headers of a ConfigMap of the Ingress's namespace,
//! checked before they are set on the answers.

use haptic_sdk::k8s::api::core::v1::ConfigMap;
use haptic_sdk::k8s::api::networking::v1::Ingress;
use haptic_sdk::{Context, Entry, Output, Result};

use crate::CONFIG_MAPS;
use crate::invalid;
use crate::parse;
use crate::parse::Invalid;

/// Headers that frame or route the answer: set from a ConfigMap they would
/// break it (a wrong length, a second transfer coding), so never.
const FRAMING_HEADERS: &[&str] = &[
    "connection",
    "content-length",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The `(name, value)` headers of ConfigMap `config_map` (the Ingress's
/// namespace) for `annotation` (`custom-headers`, `auth-proxy-set-headers`):
/// each entry checked, a bad one (not a header name, a framing header, a
/// control character in the value) left out with a warning naming the
/// Ingress, the ConfigMap and the key.
pub(super) fn config_map_headers(
    ctx: &Context<'_>,
    out: &mut Output,
    ingress: &Entry<'_, Ingress>,
    annotation: &str,
    config_map: &str,
) -> Result<Vec<(String, String)>> {
    let namespace = ingress.key.namespace.as_str();
    let id = format!("{namespace}/{}", ingress.key.name);
    let Some(found) = ctx.get::<ConfigMap>(CONFIG_MAPS, namespace, config_map)? else {
        out.warning(
            Some(ingress.key),
            "CustomHeadersMissing",
            format!(
                "Ingress {id:?}: ConfigMap {namespace}/{config_map} of annotation {annotation} does not exist; none of its headers is set until it does"
            ),
        )?;
        return Ok(Vec::new());
    };
    let mut headers = Vec::new();
    for (key, value) in found.value.data.iter().flatten() {
        let checked = parse::header_name(key).and_then(|name| {
            if FRAMING_HEADERS.contains(&name.as_str()) {
                Err(invalid!("{name} frames the answer; HAProxy sets it"))
            } else if value.chars().any(char::is_control) {
                Err(Invalid::from("its value holds a control character"))
            } else {
                Ok(name)
            }
        });
        match checked {
            Ok(name) => headers.push((name, value.clone())),
            Err(why) => out.warning(
                Some(ingress.key),
                "CustomHeaderLeftOut",
                format!(
                    "Ingress {id:?}: key {key:?} of ConfigMap {namespace}/{config_map} ({annotation}) is left out: {why}"
                ),
            )?,
        }
    }
    Ok(headers)
}
