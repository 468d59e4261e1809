//! `haptic agent`: the process beside HAProxy in every proxy pod. The
//! controller decides what every pod should run; the agent applies it to
//! its HAProxy by the cheapest correct means and reports, from HAProxy
//! itself, what every live worker routes per.
//!
//! Process model (a sidecar): HAProxy runs in master-worker mode in its own
//! container, started by [`launch`] (`haptic haproxy`) from the last applied
//! files; the agent reaches it through the shared configuration directory
//! and HAProxy's sockets, and is never its parent. An agent restart, even a
//! `kill -9`, leaves HAProxy, its configuration and its connections alone;
//! an HAProxy restart starts from `current/` on disk, which only ever holds
//! a validated bundle.
//!
//! - [`wire`]: the API's request and answer types (shared with the client).
//! - [`haproxy`]: the master CLI and the worker stats socket.
//! - [`plan`]: runtime commands or a reload, from the running bundle to the next.
//! - [`disk`]: the configuration directory, written atomically.
//! - [`applier`]: one apply at a time; what each worker runs.
//! - [`server`], [`tls`], [`metrics`]: the HTTP API, its TLS and its metrics.
//! - [`client`]: the controller's client.
//! - [`launch`]: `haptic haproxy`, HAProxy's own container entry point.

pub mod applier;
pub mod client;
pub mod disk;
pub mod haproxy;
pub mod launch;
pub mod metrics;
pub mod plan;
pub mod server;
pub mod tls;
pub mod wire;

pub use applier::{Applier, ApplyError, Limits};
pub use client::{AgentClient, ClientError};
pub use wire::{
    ApplyMode, ApplyRequest, ApplyResponse, Bundle, BundleFile, FencingToken, PodState,
};

use std::path::{Path, PathBuf};

/// The sockets' default paths inside the configuration directory, shared by
/// `haptic agent` and `haptic haproxy` so the two agree without flags.
pub fn default_master_socket(config_dir: &Path) -> PathBuf {
    config_dir.join("master.sock")
}

/// See [`default_master_socket`].
pub fn default_worker_socket(config_dir: &Path) -> PathBuf {
    config_dir.join("worker.sock")
}
