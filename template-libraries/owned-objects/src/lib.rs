//! A test library for owned objects (contract 0.3.0) through the SDK: for
//! every ConfigMap labelled `haptic.test/gateway: "true"` (the stand-in for
//! a Gateway) it asks for a Service `<name>-gateway` owned by it, with the
//! port from the ConfigMap's `port` key.
//!
//! Values (`templateLibraries.ownedObjects`): `declare` (default true)
//! declares `v1/Service` in the plan's `applies`; false shows the host's
//! refusal of an undeclared kind.

use haptic_sdk::k8s::api::core::v1::ConfigMap;
use haptic_sdk::{Context, Info, Library, ObjectKey, Output, Plan, Result, Values, Watch};
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct OwnedValues {
    declare: bool,
}

/// The `owned-objects` library.
#[derive(Debug, Default)]
pub struct OwnedObjects;

impl Library for OwnedObjects {
    fn info(&self) -> Info {
        Info::new("owned-objects", env!("CARGO_PKG_VERSION"))
            .order(920)
            .defaults(serde_json::json!({"declare": true}))
    }

    fn plan(&mut self, values: &Values) -> Result<Plan> {
        let values: OwnedValues = values.get()?;
        let gateways = Watch::new("gateways", "v1", "ConfigMap")
            .parse_as::<ConfigMap>()
            .label_selector("haptic.test/gateway=true");
        let plan = Plan::default().watch(gateways);
        Ok(if values.declare {
            plan.applies("v1", "Service")
        } else {
            plan
        })
    }

    fn render(&mut self, ctx: &Context<'_>, out: &mut Output) -> Result<()> {
        for gateway in ctx.objects::<ConfigMap>("gateways")? {
            let namespace = gateway.metadata.namespace.clone().unwrap_or_default();
            let name = gateway.metadata.name.clone().unwrap_or_default();
            let port: u16 = gateway
                .data
                .as_ref()
                .and_then(|data| data.get("port"))
                .and_then(|port| port.parse().ok())
                .unwrap_or(80);
            let owner = ObjectKey {
                watch: "gateways".into(),
                namespace,
                name: name.clone(),
            };
            out.owned_object(
                &owner,
                "v1",
                "Service",
                format!("{name}-gateway"),
                &serde_json::json!({
                    "metadata": {"labels": {"app.kubernetes.io/name": "haproxy"}},
                    "spec": {"type": "LoadBalancer", "selector": {"app": "haproxy"},
                        "ports": [{"name": "http", "port": port, "targetPort": 8080}]}
                }),
            )?;
        }
        Ok(())
    }
}

haptic_sdk::export_library!(OwnedObjects);
