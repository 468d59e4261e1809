//! The API server's defaults for the fields a field selector can name.
//!
//! An object read from a file lacks what the API server fills in on create
//! (a Secret without `type` is stored as `Opaque`), and the server's field
//! selectors read typed fields, so an omitted boolean or count compares as
//! `false` or `0`, not as the empty string. Only fields the API server lets
//! a selector name are here (its `SelectableFields` per kind; the list at
//! <https://kubernetes.io/docs/concepts/overview/working-with-objects/field-selectors/>);
//! other defaults cannot change which objects a watch selects.

use serde_json::{Map, Value};

/// One defaulted selectable field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Default {
    pub api_version: &'static str,
    pub kind: &'static str,
    /// Dotted path, as a field selector names it.
    pub path: &'static str,
    /// The value as a field selector compares it.
    pub value: &'static str,
    /// The API server stores the value in the object (defaulting or an
    /// admission plugin on create), so objects from files get it too;
    /// otherwise it is only the typed zero value a selector reads.
    pub stored: bool,
}

const fn stored(
    api_version: &'static str,
    kind: &'static str,
    path: &'static str,
    value: &'static str,
) -> Default {
    Default {
        api_version,
        kind,
        path,
        value,
        stored: true,
    }
}

const fn zero(
    api_version: &'static str,
    kind: &'static str,
    path: &'static str,
    value: &'static str,
) -> Default {
    Default {
        api_version,
        kind,
        path,
        value,
        stored: false,
    }
}

/// Every defaulted selectable field of the built-in kinds.
pub const DEFAULTS: &[Default] = &[
    stored("v1", "Secret", "type", "Opaque"),
    stored("v1", "Pod", "spec.restartPolicy", "Always"),
    stored("v1", "Pod", "spec.schedulerName", "default-scheduler"),
    // The ServiceAccount admission plugin (on by default).
    stored("v1", "Pod", "spec.serviceAccountName", "default"),
    stored("v1", "Pod", "status.phase", "Pending"),
    zero("v1", "Pod", "spec.hostNetwork", "false"),
    stored("v1", "Namespace", "status.phase", "Active"),
    zero("v1", "Node", "spec.unschedulable", "false"),
    zero("v1", "ReplicationController", "status.replicas", "0"),
    zero("apps/v1", "ReplicaSet", "status.replicas", "0"),
    zero("batch/v1", "Job", "status.successful", "0"),
];

/// The value a selector reads for `path` of an `api_version`/`kind` object
/// that does not have the field.
pub fn of(api_version: &str, kind: &str, path: &str) -> Option<&'static str> {
    DEFAULTS
        .iter()
        .find(|d| d.api_version == api_version && d.kind == kind && d.path == path)
        .map(|d| d.value)
}

/// Fills in the stored defaults `object` (of `api_version`/`kind`) lacks,
/// as the API server does on create. A field present with any value, or a
/// parent that is not a mapping, is left alone.
pub fn apply(api_version: &str, kind: &str, object: &mut Map<String, Value>) {
    for default in DEFAULTS
        .iter()
        .filter(|d| d.stored && d.api_version == api_version && d.kind == kind)
    {
        let mut fields = &mut *object;
        let mut segments = default.path.split('.').peekable();
        while let Some(segment) = segments.next() {
            if segments.peek().is_none() {
                fields
                    .entry(segment)
                    .or_insert_with(|| Value::String(default.value.to_owned()));
                break;
            }
            let child = fields
                .entry(segment)
                .or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(child) = child else {
                break;
            };
            fields = child;
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn applied(api_version: &str, kind: &str, object: Value) -> Value {
        let Value::Object(mut object) = object else {
            panic!("test objects are mappings");
        };
        apply(api_version, kind, &mut object);
        Value::Object(object)
    }

    #[test]
    fn stored_defaults_fill_only_what_is_missing() {
        assert_eq!(
            applied("v1", "Secret", json!({"metadata": {"name": "s"}}))["type"],
            "Opaque"
        );
        assert_eq!(
            applied("v1", "Secret", json!({"type": "kubernetes.io/tls"}))["type"],
            "kubernetes.io/tls"
        );
        let pod = applied("v1", "Pod", json!({"spec": {"restartPolicy": "Never"}}));
        assert_eq!(pod["spec"]["restartPolicy"], "Never");
        assert_eq!(pod["spec"]["schedulerName"], "default-scheduler");
        assert_eq!(pod["status"]["phase"], "Pending");
        assert!(
            pod["spec"].get("hostNetwork").is_none(),
            "a zero value is not stored"
        );
        assert_eq!(
            applied("v1", "ConfigMap", json!({"data": {}})),
            json!({"data": {}}),
            "no defaults for other kinds"
        );
        assert_eq!(
            applied("v1", "Pod", json!({"spec": "odd"}))["spec"],
            "odd",
            "a parent that is not a mapping is left alone"
        );
    }

    #[test]
    fn zero_values_are_known_to_selectors() {
        assert_eq!(of("v1", "Pod", "spec.hostNetwork"), Some("false"));
        assert_eq!(of("v1", "Secret", "type"), Some("Opaque"));
        assert_eq!(of("v1", "ConfigMap", "type"), None);
    }
}
