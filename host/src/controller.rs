//! The controller's parts that talk to the data plane.
//!
//! - [`fleet`]: every HAProxy pod's agent; pushing a render to all of them
//!   concurrently and knowing when the whole fleet runs it, the fact the
//!   `deployed` status variant and the readiness gate wait for.

pub mod fleet;

pub use fleet::{DeployReport, Deployment, Fleet, FleetSettings, PodOutcome, ProxyPod};
