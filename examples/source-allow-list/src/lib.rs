//! An example custom template library: an Ingress annotated with
//! `allow-list.haproxy-haptic.org/source-ranges: "10.0.0.0/8, 192.0.2.7"`
//! answers `403` to clients outside those ranges, on every host of its
//! rules.
//!
//! The ranges go to HAProxy as they are written (only characters of IPv4
//! and IPv6 addresses and prefix lengths are let through, so an annotation
//! cannot add configuration of its own). HAProxy is the judge of whether
//! `10.0.0.300` is an address: a bad range makes `haproxy -c` refuse the
//! render, the refusal names this library, and the controller keeps the
//! last good configuration serving and reports it. Fixing the annotation
//! converges again. A library that validated the ranges itself would
//! instead fail the render naming the Ingress; this one shows the other
//! path on purpose.

use haptic_sdk::k8s::api::networking::v1::Ingress;
use haptic_sdk::{Context, Info, Library, Output, Plan, Result, SectionKind, Slot, Values, Watch};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AllowListValues {
    /// The annotation listing the allowed source ranges.
    annotation: String,
    /// The frontend the rule goes into (`base`'s `http`).
    frontend: String,
}

/// The `source-allow-list` library.
#[derive(Debug, Default)]
pub struct SourceAllowList {
    values: Option<AllowListValues>,
}

impl Library for SourceAllowList {
    fn info(&self) -> Info {
        Info::new("source-allow-list", env!("CARGO_PKG_VERSION"))
            // After the bundled libraries, so `frontend http` exists.
            .order(500)
            .defaults(serde_json::json!({
                "annotation": "allow-list.haproxy-haptic.org/source-ranges",
                "frontend": "http",
            }))
    }

    fn plan(&mut self, values: &Values) -> Result<Plan> {
        self.values = Some(values.get()?);
        let ingresses = Watch::new("ingresses", "networking.k8s.io/v1", "Ingress")
            .parse_as::<Ingress>()
            .ignore_fields(["metadata.managedFields", "status"]);
        Ok(Plan::default().watch(ingresses))
    }

    fn render(&mut self, ctx: &Context<'_>, out: &mut Output) -> Result<()> {
        let Some(values) = &self.values else {
            return Ok(());
        };
        for ingress in ctx.objects::<Ingress>("ingresses")? {
            let Some(ranges) = ingress
                .metadata
                .annotations
                .as_ref()
                .and_then(|annotations| annotations.get(&values.annotation))
            else {
                continue;
            };
            let ranges = source_ranges(ranges);
            if ranges.is_empty() {
                continue;
            }
            let rules = ingress.spec.as_ref().and_then(|spec| spec.rules.as_ref());
            let mut hosts: Vec<String> = rules
                .into_iter()
                .flatten()
                .filter_map(|rule| rule.host.as_deref())
                .filter(|host| !host.starts_with("*."))
                .map(str::to_ascii_lowercase)
                .collect();
            hosts.sort();
            hosts.dedup();
            for host in hosts {
                out.snippet(
                    SectionKind::Frontend,
                    values.frontend.clone(),
                    Slot::RequestRules,
                    -100,
                    format!(
                        "http-request deny deny_status 403 if {{ req.hdr(host),field(1,:),lower -m str {host} }} !{{ src {} }}",
                        ranges.join(" ")
                    ),
                )?;
            }
        }
        Ok(())
    }
}

/// The comma- or space-separated ranges, each kept only if it is made of
/// address characters (hex digits, `.`, `:`, `/`).
fn source_ranges(annotation: &str) -> Vec<String> {
    annotation
        .split([',', ' ', '\t', '\n'])
        .map(str::trim)
        .filter(|range| !range.is_empty())
        .filter(|range| {
            range
                .chars()
                .all(|c| c.is_ascii_hexdigit() || matches!(c, '.' | ':' | '/'))
        })
        .map(str::to_owned)
        .collect()
}

haptic_sdk::export_library!(SourceAllowList);

#[cfg(test)]
mod tests {
    use haptic_sdk::testing::Harness;
    use serde_json::json;

    use super::*;

    #[test]
    fn only_address_characters_pass() {
        assert_eq!(
            source_ranges("10.0.0.0/8, 192.0.2.7 2001:db8::/32,,bad;line"),
            ["10.0.0.0/8", "192.0.2.7", "2001:db8::/32"]
        );
    }

    #[test]
    fn an_annotated_ingress_gets_one_rule_per_host() {
        let mut harness = Harness::<SourceAllowList>::new(json!({})).unwrap();
        harness.apply(
            "ingresses",
            &json!({
                "metadata": {"namespace": "shop", "name": "admin",
                    "annotations": {"allow-list.haproxy-haptic.org/source-ranges": "10.0.0.0/8"}},
                "spec": {"rules": [{"host": "Admin.example.com"}, {"host": "*.example.com"}]}
            }),
        );
        harness.apply(
            "ingresses",
            &json!({"metadata": {"namespace": "shop", "name": "open"}, "spec": {"rules": [{"host": "open.example.com"}]}}),
        );
        harness.render().unwrap();
        let lines: Vec<String> = harness
            .output()
            .values()
            .filter_map(|item| match item {
                haptic_sdk::Item::Snippet { lines, .. } => Some(lines.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            lines,
            [
                "http-request deny deny_status 403 if { req.hdr(host),field(1,:),lower -m str admin.example.com } !{ src 10.0.0.0/8 }"
            ]
        );
    }
}
