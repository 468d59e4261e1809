//! An example custom template library: while an Ingress carries the
//! annotation `maintenance.haproxy-haptic.org/enabled: "true"`, every host of
//! its rules answers `503` with a `Retry-After` header instead of reaching
//! its backends.
//!
//! It writes the hosts into pattern files next to haproxy.cfg and adds one
//! rule to the `http` frontend that the bundled `base` library defines, so a
//! change touches one file and the rule never grows with the cluster. A
//! wildcard host (`*.example.com`) matches by suffix, so unlike an Ingress
//! rule it also covers deeper subdomains.

use haptic_sdk::k8s::api::networking::v1::Ingress;
use haptic_sdk::names::quote;
use haptic_sdk::{Context, Info, Library, Output, Plan, Result, SectionKind, Slot, Values, Watch};
use serde::Deserialize;

const EXACT_HOSTS_FILE: &str = "maps/maintenance-hosts.lst";
const WILDCARD_HOSTS_FILE: &str = "maps/maintenance-domains.lst";

/// `templateLibraries.maintenanceMode` values.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MaintenanceValues {
    /// The annotation that puts an Ingress into maintenance.
    annotation: String,
    /// The frontend the rule goes into.
    frontend: String,
    /// Body of the 503 answer.
    message: String,
    /// Seconds clients are told to wait (`Retry-After`).
    retry_after_seconds: u32,
}

#[derive(Default)]
pub struct MaintenanceMode {
    values: Option<MaintenanceValues>,
}

impl Library for MaintenanceMode {
    fn info(&self) -> Info {
        Info::new("maintenance-mode", env!("CARGO_PKG_VERSION"))
            // After the bundled libraries, so `frontend http` exists.
            .order(500)
            .defaults(serde_json::json!({
                "annotation": "maintenance.haproxy-haptic.org/enabled",
                "frontend": "http",
                "message": "This service is down for maintenance. Please try again later.",
                "retryAfterSeconds": 300,
            }))
    }

    fn plan(&mut self, values: &Values) -> Result<Plan> {
        self.values = Some(values.get()?);
        // Only metadata and rules matter here; dropping the rest keeps the
        // host from sending it.
        let ingresses = Watch::new("ingresses", "networking.k8s.io/v1", "Ingress")
            .parse_as::<Ingress>()
            .ignore_fields(["metadata.managedFields", "status"]);
        Ok(Plan::default().watch(ingresses))
    }

    fn render(&mut self, ctx: &Context<'_>, out: &mut Output) -> Result<()> {
        let Some(values) = &self.values else {
            return Ok(());
        };
        let mut hosts: Vec<String> = Vec::new();
        for ingress in ctx.objects::<Ingress>("ingresses")? {
            let annotated = ingress
                .metadata
                .annotations
                .as_ref()
                .and_then(|annotations| annotations.get(&values.annotation))
                .is_some_and(|value| value == "true");
            if !annotated {
                continue;
            }
            let rules = ingress.spec.as_ref().and_then(|spec| spec.rules.as_ref());
            hosts.extend(
                rules
                    .into_iter()
                    .flatten()
                    .filter_map(|rule| rule.host.clone()),
            );
        }
        hosts.sort();
        hosts.dedup();
        // Patterns are matched against the lowercased Host header without
        // its port: exact hosts as strings, wildcard hosts (`*.example.com`)
        // by their `.example.com` suffix.
        let (wildcards, exact): (Vec<&String>, Vec<&String>) =
            hosts.iter().partition(|host| host.starts_with("*."));
        let mut conditions = Vec::new();
        for (file, matcher, hosts) in [
            (EXACT_HOSTS_FILE, "str", exact),
            (WILDCARD_HOSTS_FILE, "end", wildcards),
        ] {
            if hosts.is_empty() {
                continue;
            }
            let patterns: String = hosts
                .iter()
                .map(|host| format!("{}\n", host.trim_start_matches('*').to_ascii_lowercase()))
                .collect();
            out.file(file, patterns)?;
            conditions.push(format!(
                "{{ req.hdr(host),field(1,:),lower -m {matcher} -f {file} }}"
            ));
        }
        if conditions.is_empty() {
            return Ok(());
        }
        out.snippet(
            SectionKind::Frontend,
            values.frontend.clone(),
            Slot::RequestRules,
            -100,
            format!(
                "http-request return status 503 content-type text/plain hdr Retry-After {} string {} if {}",
                values.retry_after_seconds,
                quote(&values.message),
                conditions.join(" || ")
            ),
        )
    }
}

haptic_sdk::export_library!(MaintenanceMode);

#[cfg(test)]
mod tests {
    use haptic_sdk::testing::Harness;
    use serde_json::json;

    use super::*;

    fn ingress(name: &str, host: &str, maintenance: bool) -> serde_json::Value {
        let annotations = if maintenance {
            json!({"maintenance.haproxy-haptic.org/enabled": "true"})
        } else {
            json!({})
        };
        json!({
            "metadata": {"namespace": "shop", "name": name, "annotations": annotations},
            "spec": {"rules": [{"host": host}]}
        })
    }

    #[test]
    fn only_annotated_hosts_are_in_maintenance() {
        let mut harness = Harness::<MaintenanceMode>::new(json!({})).unwrap();
        harness.apply("ingresses", &ingress("shop", "Shop.example.com", true));
        harness.apply("ingresses", &ingress("blog", "blog.example.com", false));
        harness.render().unwrap();
        assert_eq!(harness.file(EXACT_HOSTS_FILE), Some("shop.example.com\n"));
        assert_eq!(harness.file(WILDCARD_HOSTS_FILE), None);
    }

    #[test]
    fn lifting_maintenance_removes_the_rule_and_file() {
        let mut harness = Harness::<MaintenanceMode>::new(json!({})).unwrap();
        harness.apply("ingresses", &ingress("shop", "shop.example.com", true));
        harness.render().unwrap();
        harness.apply("ingresses", &ingress("shop", "shop.example.com", false));
        harness.render().unwrap();
        assert_eq!(harness.file(EXACT_HOSTS_FILE), None);
        assert!(harness.output().is_empty());
    }
}
