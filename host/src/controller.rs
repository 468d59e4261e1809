//! The controller's parts that act on the outside world.
//!
//! - [`fleet`]: every HAProxy pod's agent; pushing a render to all of them
//!   concurrently and knowing when the whole fleet runs it, the fact the
//!   `deployed` status variant and the readiness gate wait for.
//! - [`leader`]: leader election on a Lease; the epoch is the fencing token
//!   the agents check.
//! - [`proxies`]: discovering the HAProxy pods. (The objects come from
//!   [`crate::source`]; status patches are written through
//!   [`crate::status_writes`]: neither is the controller's alone, `haptic
//!   run` uses both.)
//! - [`run`]: the loop joining them: render, validate, deploy, status.
//! - [`sinks`]: where failure events go (status writes go through
//!   [`crate::status_writes::StatusWriter`]).
//! - [`metrics`]: what it exports to Prometheus; [`debug`]: why rollouts
//!   wait (`/debug/fleet`, `/debug/gates`, read by `haptic status`).

pub mod debug;
pub mod fleet;
pub mod leader;
pub mod metrics;
pub mod owned;
pub mod proxies;
pub mod run;
pub mod sinks;

pub use fleet::{DeployReport, Deployment, Fleet, FleetSettings, PodOutcome, ProxyPod};
pub use leader::{ElectionSettings, Elector, Leadership};
pub use owned::{OwnedApplier, OwnedApplyError, OwnedReport};
pub use run::{Settings, State, run_in_cluster};
