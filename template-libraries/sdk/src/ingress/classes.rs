//! Which Ingresses haptic serves: the bundled `ingress` library's class
//! rules, exactly, for every library that acts on Ingresses (so a custom
//! library does not act on an Ingress of another controller's class).
//!
//! An Ingress is served when
//! 1. `spec.ingressClassName` names an IngressClass whose `spec.controller`
//!    is ours (values `controller`, default `haproxy-haptic.org/controller`);
//!    a class name without such an IngressClass object is not served;
//! 2. or it has no `spec.ingressClassName` but the deprecated annotation
//!    `kubernetes.io/ingress.class` equals our class name (values
//!    `className`, default `haptic`): the annotation predates IngressClass
//!    objects, so it names the class directly and needs none;
//! 3. or it has neither, and one of our IngressClasses is marked default
//!    (`ingressclass.kubernetes.io/is-default-class: "true"`).

use std::collections::BTreeSet;

use crate::k8s::api::networking::v1::{Ingress, IngressClass};

/// The deprecated class annotation.
pub const LEGACY_ANNOTATION: &str = "kubernetes.io/ingress.class";
/// Marks an IngressClass as the cluster's default.
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";

/// Our IngressClasses, as far as the served-or-not decision needs them.
#[derive(Debug, Default)]
pub struct Classes {
    ours: BTreeSet<String>,
    default_is_ours: bool,
}

impl Classes {
    /// Indexes the IngressClasses whose controller is `controller`.
    pub fn new<'a>(classes: impl IntoIterator<Item = &'a IngressClass>, controller: &str) -> Self {
        let mut index = Self::default();
        for class in classes {
            let is_ours = class
                .spec
                .as_ref()
                .and_then(|s| s.controller.as_deref())
                .is_some_and(|c| c == controller);
            if !is_ours {
                continue;
            }
            if let Some(name) = &class.metadata.name {
                index.ours.insert(name.clone());
            }
            let is_default = class
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
                .is_some_and(|v| v == "true");
            index.default_is_ours |= is_default;
        }
        index
    }

    /// Whether an IngressClass of this name has our controller.
    pub fn is_ours(&self, class_name: &str) -> bool {
        self.ours.contains(class_name)
    }

    /// Whether one of our IngressClasses is the cluster's default.
    pub fn default_is_ours(&self) -> bool {
        self.default_is_ours
    }

    /// Why `ingress` is not ours, for the log; `None` when it is.
    pub fn not_served_because(&self, ingress: &Ingress, class_name: &str) -> Option<String> {
        if self.serves(ingress, class_name) {
            return None;
        }
        let named = ingress
            .spec
            .as_ref()
            .and_then(|s| s.ingress_class_name.as_deref());
        let legacy = ingress
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(LEGACY_ANNOTATION));
        Some(match (named, legacy) {
            (Some(name), _) => {
                format!("its ingressClassName `{name}` names no IngressClass of this controller")
            }
            (None, Some(value)) => {
                format!("its {LEGACY_ANNOTATION} annotation is `{value}`, not `{class_name}`")
            }
            (None, None) => format!(
                "it has no ingressClassName and no IngressClass of this controller is the default \
                 (set ingressClassName: {class_name}, or annotate the IngressClass with \
                 {DEFAULT_CLASS_ANNOTATION}: \"true\")"
            ),
        })
    }

    /// Whether `ingress` is ours (see the module docs).
    pub fn serves(&self, ingress: &Ingress, class_name: &str) -> bool {
        if let Some(name) = ingress
            .spec
            .as_ref()
            .and_then(|s| s.ingress_class_name.as_deref())
        {
            return self.ours.contains(name);
        }
        let legacy = ingress
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(LEGACY_ANNOTATION));
        match legacy {
            Some(value) => value == class_name,
            None => self.default_is_ours,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class(name: &str, controller: &str, default: bool) -> IngressClass {
        let annotations = if default {
            json!({DEFAULT_CLASS_ANNOTATION: "true"})
        } else {
            json!({})
        };
        serde_json::from_value(json!({"metadata": {"name": name, "annotations": annotations}, "spec": {"controller": controller}})).unwrap()
    }

    fn ingress(class_name: Option<&str>, legacy: Option<&str>) -> Ingress {
        let annotations = legacy.map_or(json!({}), |v| json!({LEGACY_ANNOTATION: v}));
        serde_json::from_value(json!({"metadata": {"name": "i", "annotations": annotations}, "spec": {"ingressClassName": class_name}})).unwrap()
    }

    const OURS: &str = "haproxy-haptic.org/controller";

    #[test]
    fn class_name_must_name_one_of_our_classes() {
        let classes = [
            class("haptic", OURS, false),
            class("nginx", "k8s.io/ingress-nginx", true),
        ];
        let index = Classes::new(&classes, OURS);
        assert!(index.serves(&ingress(Some("haptic"), None), "haptic"));
        assert!(!index.serves(&ingress(Some("nginx"), None), "haptic"));
        assert!(!index.serves(&ingress(Some("missing"), None), "haptic"));
        assert!(
            !index.serves(&ingress(None, None), "haptic"),
            "the default class is not ours"
        );
    }

    #[test]
    fn classless_ingresses_follow_our_default_class() {
        let classes = [class("haptic", OURS, true)];
        let index = Classes::new(&classes, OURS);
        assert!(index.serves(&ingress(None, None), "haptic"));
        assert!(
            !index.serves(&ingress(None, Some("nginx")), "haptic"),
            "legacy annotation for another class"
        );
    }

    #[test]
    fn the_legacy_annotation_names_our_class_without_an_object() {
        let index = Classes::new(&[], OURS);
        assert!(index.serves(&ingress(None, Some("haptic")), "haptic"));
        assert!(!index.serves(&ingress(None, Some("other")), "haptic"));
        assert!(
            !index.serves(&ingress(Some("other"), Some("haptic")), "haptic"),
            "spec wins over the annotation"
        );
    }

    #[test]
    fn an_ingress_not_served_says_why() {
        let ours = [class("haptic", "haproxy-haptic.org/controller", false)];
        let classes = Classes::new(ours.iter(), "haproxy-haptic.org/controller");
        assert_eq!(
            classes.not_served_because(&ingress(Some("haptic"), None), "haptic"),
            None
        );
        let other = classes
            .not_served_because(&ingress(Some("nginx"), None), "haptic")
            .unwrap();
        assert!(other.contains("`nginx` names no IngressClass"), "{other}");
        let legacy = classes
            .not_served_because(&ingress(None, Some("nginx")), "haptic")
            .unwrap();
        assert!(legacy.contains("annotation is `nginx`"), "{legacy}");
        let classless = classes
            .not_served_because(&ingress(None, None), "haptic")
            .unwrap();
        assert!(
            classless.contains("no IngressClass of this controller is the default"),
            "{classless}"
        );
    }
}
