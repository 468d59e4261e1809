//! The floor of a full render under the contract, for the render benchmark:
//! this library watches the Pods and EndpointSlices the gate library and
//! `kubernetes-backends` watch (same trims) and does only a fixed part of
//! their work, chosen by the value `templateLibraries.renderFloor.stage`:
//!
//! - `receive`: every object crosses into the guest and the SDK stores it,
//!   scanned but not parsed into fields ([`IgnoredAny`]);
//! - `parse`: each is parsed into the SDK's [`GatePod`] or [`Slice`], as
//!   both libraries parse them;
//! - `patch`: parsed, and one status patch answered per pod, the gate
//!   library's patch (what it answers for a routed gated pod).
//!
//! What the gate library spends beyond `patch` is its own logic (the
//! Services, the slice index and the routing rule); what `receive` spends
//! no library of this contract that reads every pod and endpoint can avoid.

use haptic_sdk::readiness::{self, GatePod, POD_IGNORE_FIELDS};
use haptic_sdk::slim::{SLICE_IGNORE_FIELDS, Slice};
use haptic_sdk::{Context, Info, Library, Output, Plan, Result, StatusVariant, Values, Watch};
use serde::Deserialize;
use serde::de::IgnoredAny;

/// The watches' names.
const PODS: &str = "pods";
const ENDPOINT_SLICES: &str = "endpointslices";

/// How much of the gate library's work to do.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Stage {
    #[default]
    Receive,
    Parse,
    Patch,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FloorValues {
    stage: Stage,
}

/// The `render-floor` library.
#[derive(Debug, Default)]
pub struct RenderFloor {
    stage: Stage,
    /// The gate library's status text, serialized once as it does.
    status: String,
}

impl Library for RenderFloor {
    fn info(&self) -> Info {
        Info::new("render-floor", env!("CARGO_PKG_VERSION")).order(950)
    }

    fn plan(&mut self, values: &Values) -> Result<Plan> {
        let values: FloorValues = values.get()?;
        self.stage = values.stage;
        self.status = readiness::gate_status().to_string();
        let pods = Watch::new(PODS, "v1", "Pod").ignore_fields(POD_IGNORE_FIELDS.iter().copied());
        let slices = Watch::new(ENDPOINT_SLICES, "discovery.k8s.io/v1", "EndpointSlice")
            .ignore_fields(SLICE_IGNORE_FIELDS.iter().copied());
        let (pods, slices) = match self.stage {
            Stage::Receive => (
                pods.parse_as::<IgnoredAny>(),
                slices.parse_as::<IgnoredAny>(),
            ),
            Stage::Parse | Stage::Patch => (pods.parse_as::<GatePod>(), slices.parse_as::<Slice>()),
        };
        let plan = Plan::default().watch(pods).watch(slices);
        Ok(if self.stage == Stage::Patch {
            plan.patches_status_of("v1", "Pod")
        } else {
            plan
        })
    }

    fn render(&mut self, ctx: &Context<'_>, out: &mut Output) -> Result<()> {
        out.retain_previous();
        if self.stage != Stage::Patch {
            return Ok(());
        }
        for pod in ctx.objects::<GatePod>(PODS)? {
            out.status_patch_json(
                StatusVariant::Deployed,
                "v1",
                "Pod",
                &pod.key.namespace,
                &pod.key.name,
                self.status.clone(),
            )?;
        }
        Ok(())
    }
}

haptic_sdk::export_library!(RenderFloor);
