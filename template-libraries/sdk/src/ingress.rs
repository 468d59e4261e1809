//! Ingresses as the bundled `ingress` library sees them, for libraries that
//! add per-Ingress policy (see [`crate::extending`]): which Ingresses haptic
//! serves ([`Classes`], [`ClassRules`], the bundled library's own code) and
//! which one a request matched ([`matched_ingress_acl`]).
//!
//! `txn.haptic_ingress` holds the Ingress (`namespace/name`) whose route a
//! request takes, set by `ingress`'s request rules at priority `0` from the
//! same lookups, in the same order, as its routing. So two Ingresses on one
//! host can have different policies: a rule conditioned on
//! [`matched_ingress_acl`] applies to exactly the requests that Ingress
//! routes. It is unset for a request no Ingress path matches (including
//! one that only an Ingress's `spec.defaultBackend` serves).

pub mod claims;
mod classes;
pub mod published;
pub mod routes;
pub mod tls;

use serde::Deserialize;

pub use classes::{Classes, DEFAULT_CLASS_ANNOTATION, LEGACY_ANNOTATION};

use crate::k8s::api::networking::v1::{Ingress, IngressClass, IngressServiceBackend};
use crate::names::backend_name;
use crate::slim::ServicePorts;
use crate::{Context, Result, Values};

/// The class name the `ingress` library serves by default.
pub const DEFAULT_CLASS_NAME: &str = "haptic";
/// The `spec.controller` of haptic's IngressClasses by default.
pub const DEFAULT_CONTROLLER: &str = "haproxy-haptic.org/controller";

/// The class settings of the `ingress` library's values
/// (`templateLibraries.ingress.className` and `.controller`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClassRules {
    pub class_name: String,
    pub controller: String,
}

impl Default for ClassRules {
    fn default() -> Self {
        Self {
            class_name: DEFAULT_CLASS_NAME.to_owned(),
            controller: DEFAULT_CONTROLLER.to_owned(),
        }
    }
}

impl ClassRules {
    /// The `ingress` library's class settings as the host hands every
    /// library the whole values tree; the defaults when it is absent.
    pub fn from_values(values: &Values) -> Self {
        values
            .library("ingress")
            .and_then(|tree| serde_json::from_value(tree.clone()).ok())
            .unwrap_or_default()
    }

    /// Indexes the cluster's IngressClasses (watch them as
    /// `networking.k8s.io/v1` `IngressClass`) by these rules.
    pub fn classes<'a>(&self, classes: impl IntoIterator<Item = &'a IngressClass>) -> Classes {
        Classes::new(classes, &self.controller)
    }

    /// Whether haptic serves `ingress`, by the bundled library's rules.
    pub fn is_served(&self, ingress: &Ingress, classes: &Classes) -> bool {
        classes.serves(ingress, &self.class_name)
    }
}

/// The class settings of the `ingress-nginx` library's values
/// (`templateLibraries.ingressNginx.classNames`, `.controller`,
/// `.watchIngressWithoutClass`): which Ingresses it serves, so `ingress`
/// knows which of the Ingresses it does not serve another library takes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NginxClassRules {
    pub class_names: Vec<String>,
    pub controller: String,
    pub watch_ingress_without_class: bool,
}

impl NginxClassRules {
    /// The `ingress-nginx` library's class settings; `None` when it is
    /// disabled (the host sends only enabled libraries' values).
    pub fn from_values(values: &Values) -> Option<Self> {
        values
            .library("ingressNginx")
            .and_then(|tree| serde_json::from_value(tree.clone()).ok())
    }

    /// Indexes the cluster's IngressClasses by this controller.
    pub fn classes<'a>(&self, classes: impl IntoIterator<Item = &'a IngressClass>) -> Classes {
        Classes::new(classes, &self.controller)
    }

    /// Whether `ingress-nginx` serves `ingress`: `spec.ingressClassName`
    /// in `classNames` or naming an IngressClass of `controller`; the
    /// legacy annotation in `classNames`; class-less ones when
    /// `watchIngressWithoutClass` is set or one of those IngressClasses is
    /// the default.
    pub fn serves(&self, classes: &Classes, ingress: &Ingress) -> bool {
        let named = ingress
            .spec
            .as_ref()
            .and_then(|s| s.ingress_class_name.as_deref());
        if let Some(name) = named {
            return classes.is_ours(name) || self.class_names.iter().any(|c| c == name);
        }
        let legacy = ingress
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(LEGACY_ANNOTATION));
        match legacy {
            Some(value) => self.class_names.iter().any(|c| c == value),
            None => self.watch_ingress_without_class || classes.default_is_ours(),
        }
    }
}

/// The backend of the Service port an Ingress backend names (the
/// `kubernetes-backends` naming rule), or `None` when the Service (watched
/// as [`ServicePorts`] under `services_watch`) or the port does not exist.
/// A port given by name is resolved through the Service; no port at all
/// means the Service's only port.
pub fn service_port_backend(
    ctx: &Context<'_>,
    services_watch: &str,
    namespace: &str,
    backend: &IngressServiceBackend,
) -> Result<Option<String>> {
    Ok(service_port(ctx, services_watch, namespace, backend)?
        .map(|(_, port)| backend_name(namespace, &backend.name, port)))
}

/// The Service an Ingress backend names and the number of its port (see
/// [`service_port_backend`] for how the port is found), or `None`.
pub fn service_port<'a>(
    ctx: &Context<'a>,
    services_watch: &str,
    namespace: &str,
    backend: &IngressServiceBackend,
) -> Result<Option<(&'a ServicePorts, i32)>> {
    let Some(service) = ctx.get::<ServicePorts>(services_watch, namespace, &backend.name)? else {
        return Ok(None);
    };
    let ports = &service.value.spec.ports;
    let wanted = backend.port.as_ref();
    let number = ports.iter().find_map(|p| {
        let matches = match wanted {
            Some(w) if w.number.is_some() => w.number == Some(p.port),
            Some(w) => w.name.is_some() && w.name == p.name,
            None => ports.len() == 1,
        };
        matches.then_some(p.port)
    });
    Ok(number.map(|port| (service.value, port)))
}

/// How an Ingress backend names its port, for messages: the number, the
/// name, or empty.
pub fn port_text(backend: &IngressServiceBackend) -> String {
    backend
        .port
        .as_ref()
        .and_then(|w| w.number.map(|n| n.to_string()).or_else(|| w.name.clone()))
        .unwrap_or_default()
}

/// The variable naming the matched Ingress, `namespace/name`.
pub const MATCHED_INGRESS_VARIABLE: &str = "txn.haptic_ingress";

/// An anonymous ACL that is true for requests routed by Ingress
/// `namespace/name`: `{ var(txn.haptic_ingress) -m str shop/admin }`. Use it
/// in a `RequestRules` snippet at a priority above `0` (after `ingress` sets
/// the variable) or in any `ResponseRules` snippet. Names of Kubernetes
/// objects cannot hold spaces or braces, so they go in as they are.
pub fn matched_ingress_acl(namespace: &str, name: &str) -> String {
    format!("{{ var({MATCHED_INGRESS_VARIABLE}) -m str {namespace}/{name} }}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_rules_follow_the_ingress_librarys_values() {
        let values = |tree| Values::new(tree, "mine", &serde_json::json!({})).unwrap();
        assert_eq!(
            ClassRules::from_values(&values(serde_json::json!({}))),
            ClassRules::default()
        );
        let rules = ClassRules::from_values(&values(serde_json::json!({
            "ingress": {"className": "edge", "controller": "example.com/edge", "frontend": "http"}
        })));
        assert_eq!(rules.class_name, "edge");
        assert_eq!(rules.controller, "example.com/edge");
        let class: IngressClass = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "edge"}, "spec": {"controller": "example.com/edge"}
        }))
        .unwrap();
        let classes = rules.classes([&class]);
        let ingress = |class: &str| -> Ingress {
            serde_json::from_value(serde_json::json!({"spec": {"ingressClassName": class}}))
                .unwrap()
        };
        assert!(rules.is_served(&ingress("edge"), &classes));
        assert!(!rules.is_served(&ingress("haptic"), &classes));
    }

    #[test]
    fn the_acl_names_the_ingress() {
        assert_eq!(
            matched_ingress_acl("shop", "admin"),
            "{ var(txn.haptic_ingress) -m str shop/admin }"
        );
    }
}
