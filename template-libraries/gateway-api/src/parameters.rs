//! GatewayClass parameters: `spec.parametersRef` naming a ConfigMap whose
//! data sets the Service of every Gateway of the class, over the values
//! (`templateLibraries.gatewayApi.service`). Two classes can so give their
//! Gateways different exposure: `internet` a LoadBalancer, `private` a
//! ClusterIP.
//!
//! ```yaml
//! data:
//!   service.type: ClusterIP            # LoadBalancer | ClusterIP | NodePort
//!   service.annotations: '{"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}'
//! ```
//!
//! A reference that names another kind, no namespace, a ConfigMap that does
//! not exist, or data this module cannot read makes the class
//! `Accepted=False` with reason `InvalidParameters` (the spec's), and its
//! Gateways are not served: falling back to the values could expose a
//! Gateway the class keeps internal.

use std::collections::BTreeMap;

use haptic_sdk::slim::CONFIG_MAP_IGNORE_FIELDS;
use haptic_sdk::{Context, Result, Watch};

use crate::api::{ConfigMap, ParametersRef};

/// Watch name of the ConfigMaps parameters may name.
pub const CONFIG_MAPS: &str = "gateway-configmaps";

/// The Service types a class may ask for (a Gateway's Service always has
/// ports and pods behind it, so never `ExternalName`).
pub const SERVICE_TYPES: &[&str] = &["LoadBalancer", "ClusterIP", "NodePort"];

/// The data keys read; any other is a mistake worth refusing (a typo would
/// otherwise silently keep the values' setting).
const TYPE_KEY: &str = "service.type";
const ANNOTATIONS_KEY: &str = "service.annotations";

/// The ConfigMaps watch: parameters live in ConfigMaps of any namespace,
/// and only their data is kept (annotations, labels and binary data never
/// reach the library): the SDK's one list, which ingress-nginx's
/// custom-headers watch uses too.
pub fn watch() -> Watch {
    Watch::new(CONFIG_MAPS, "v1", "ConfigMap")
        .parse_as::<ConfigMap>()
        .ignore_fields(CONFIG_MAP_IGNORE_FIELDS.iter().copied())
}

/// What a class's parameters set; `None` and empty keep the values'.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassParameters {
    pub service_type: Option<String>,
    /// Added to the values' annotations, winning on the same name.
    pub service_annotations: BTreeMap<String, String>,
}

/// Why a class's parameters are refused: the `InvalidParameters` message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub String);

/// The parameters `reference` names (none: nothing over the values).
pub fn resolve(
    ctx: &Context<'_>,
    reference: Option<&ParametersRef>,
) -> Result<std::result::Result<ClassParameters, Invalid>> {
    let Some(reference) = reference else {
        return Ok(Ok(ClassParameters::default()));
    };
    let (namespace, name) = match target(reference) {
        Ok(target) => target,
        Err(invalid) => return Ok(Err(invalid)),
    };
    let data = ctx
        .get::<ConfigMap>(CONFIG_MAPS, namespace, name)?
        .map(|found| &found.value.data);
    Ok(read(namespace, name, data))
}

/// The ConfigMap `reference` names, as `(namespace, name)`.
fn target(reference: &ParametersRef) -> std::result::Result<(&str, &str), Invalid> {
    if !reference.group.is_empty() || reference.kind != "ConfigMap" {
        let group = if reference.group.is_empty() {
            "core"
        } else {
            &reference.group
        };
        return Err(Invalid(format!(
            "spec.parametersRef names {} {:?} of group {group}; only a ConfigMap (group \"\", \
             kind ConfigMap) is supported",
            reference.kind, reference.name
        )));
    }
    match reference.namespace.as_deref() {
        Some(namespace) if !namespace.is_empty() => Ok((namespace, &reference.name)),
        _ => Err(Invalid(format!(
            "spec.parametersRef names ConfigMap {:?} without a namespace; a ConfigMap is \
             namespaced, so set spec.parametersRef.namespace",
            reference.name
        ))),
    }
}

/// The parameters of ConfigMap `namespace/name` with `data` (`None`: it
/// does not exist).
pub fn read(
    namespace: &str,
    name: &str,
    data: Option<&BTreeMap<String, String>>,
) -> std::result::Result<ClassParameters, Invalid> {
    let id = format!("ConfigMap {namespace}/{name} (spec.parametersRef)");
    let Some(data) = data else {
        return Err(Invalid(format!("{id} does not exist")));
    };
    let mut parameters = ClassParameters::default();
    for (key, value) in data {
        match key.as_str() {
            TYPE_KEY => {
                if !SERVICE_TYPES.contains(&value.as_str()) {
                    return Err(Invalid(format!(
                        "{id}: {TYPE_KEY} {value:?} is not one of {}",
                        SERVICE_TYPES.join(", ")
                    )));
                }
                parameters.service_type = Some(value.clone());
            }
            ANNOTATIONS_KEY => {
                parameters.service_annotations = serde_json::from_str(value).map_err(|error| {
                    Invalid(format!(
                        "{id}: {ANNOTATIONS_KEY} is not a JSON object of strings \
                             ({error}); write it as {{\"name\": \"value\"}}"
                    ))
                })?;
            }
            _ => {
                return Err(Invalid(format!(
                    "{id}: unknown key {key:?}; the keys are {TYPE_KEY} and {ANNOTATIONS_KEY}"
                )));
            }
        }
    }
    Ok(parameters)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn reference(group: &str, kind: &str, namespace: Option<&str>) -> ParametersRef {
        ParametersRef {
            group: group.into(),
            kind: kind.into(),
            name: "params".into(),
            namespace: namespace.map(str::to_owned),
        }
    }

    #[test]
    fn a_configmap_sets_the_service_type_and_annotations() {
        let found = data(&[
            ("service.type", "ClusterIP"),
            ("service.annotations", r#"{"example.com/internal": "true"}"#),
        ]);
        let parameters = read("infra", "params", Some(&found)).expect("valid");
        assert_eq!(parameters.service_type.as_deref(), Some("ClusterIP"));
        assert_eq!(
            parameters.service_annotations,
            data(&[("example.com/internal", "true")])
        );
        assert_eq!(
            read("infra", "params", Some(&BTreeMap::new())),
            Ok(ClassParameters::default())
        );
    }

    #[test]
    fn missing_or_malformed_parameters_are_invalid_and_say_why() {
        let message = |result: std::result::Result<ClassParameters, Invalid>| match result {
            Err(Invalid(message)) => message,
            Ok(parameters) => panic!("accepted: {parameters:?}"),
        };
        assert_eq!(
            message(read("infra", "gone", None)),
            "ConfigMap infra/gone (spec.parametersRef) does not exist"
        );
        assert_eq!(
            message(read(
                "infra",
                "p",
                Some(&data(&[("service.type", "Headless")]))
            )),
            "ConfigMap infra/p (spec.parametersRef): service.type \"Headless\" is not one of \
             LoadBalancer, ClusterIP, NodePort"
        );
        assert!(
            message(read(
                "infra",
                "p",
                Some(&data(&[("service.typo", "ClusterIP")]))
            ))
            .contains("unknown key \"service.typo\"")
        );
        assert!(
            message(read(
                "infra",
                "p",
                Some(&data(&[("service.annotations", "a: b")]))
            ))
            .contains("service.annotations is not a JSON object of strings")
        );
    }

    #[test]
    fn only_a_namespaced_configmap_may_be_named() {
        assert_eq!(
            target(&reference("", "ConfigMap", Some("infra"))),
            Ok(("infra", "params"))
        );
        let Err(Invalid(kind)) = target(&reference("example.com", "Params", Some("infra"))) else {
            panic!("another kind accepted");
        };
        assert!(
            kind.contains("Params \"params\" of group example.com"),
            "{kind}"
        );
        let Err(Invalid(secret)) = target(&reference("", "Secret", Some("infra"))) else {
            panic!("a Secret accepted");
        };
        assert!(secret.contains("of group core"), "{secret}");
        let Err(Invalid(unscoped)) = target(&reference("", "ConfigMap", None)) else {
            panic!("no namespace accepted");
        };
        assert!(unscoped.contains("without a namespace"), "{unscoped}");
    }
}
