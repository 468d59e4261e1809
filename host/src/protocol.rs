//! The protocol between the controller and the agents, owned by neither:
//! the controller plans and sends, the agent checks and applies, and both
//! read these definitions.
//!
//! - [`wire`]: the agent API's request and answer types (bundles, fencing
//!   tokens, what every worker runs).
//! - [`plan`]: runtime commands or a reload, from the running bundle to the
//!   next; the controller asks it whether a render needs `haproxy -c`, the
//!   agent follows it.
//! - [`runtime_commands`]: the commands of a runtime batch and the files a
//!   worker loaded.
//! - [`client`]: the controller's client of the agent API.
//! - [`api_tls`]: TLS for the agent API, both ends.

pub mod api_tls;
pub mod client;
pub mod plan;
pub mod runtime_commands;
pub mod wire;

pub use client::{AgentClient, ClientError};
pub use wire::{
    ApplyMode, ApplyRequest, ApplyResponse, Bundle, BundleFile, FencingToken, PodState, WorkerRole,
    WorkerState, holds_private_key,
};
