//! `status-patches-150-pod-readiness-gate`: being written; renders nothing yet.

use haptic_sdk::{Context, Info, Library, Output, Result};

/// The `status-patches-150-pod-readiness-gate` library.
#[derive(Debug, Default)]
pub struct ReadinessGatePatches;

impl Library for ReadinessGatePatches {
    fn info(&self) -> Info {
        Info::new(
            "status-patches-150-pod-readiness-gate",
            env!("CARGO_PKG_VERSION"),
        )
        .order(150)
    }

    fn render(&mut self, _ctx: &Context<'_>, _out: &mut Output) -> Result<()> {
        Ok(())
    }
}

haptic_sdk::export_library!(ReadinessGatePatches);
