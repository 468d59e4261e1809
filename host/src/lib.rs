//! haptic: a Kubernetes ingress controller for HAProxy whose configuration
//! logic lives in sandboxed WebAssembly components ("template libraries").
//!
//! The host owns the outside world; libraries only turn objects into
//! configuration. The modules follow the data:
//!
//! - [`manifests`]: Kubernetes objects from YAML files (the offline source).
//! - [`values`]: Helm-style values, split per library.
//! - [`library`]: loading, sandboxing and calling template libraries.
//! - [`render`]: feeding libraries their objects and merging their output
//!   into one HAProxy configuration, files and status patches.
//! - [`engine`]: the render core every caller shares: the library set,
//!   values, rendering and validation.
//! - [`haproxy_syntax`]: how HAProxy reads haproxy.cfg (words, section
//!   keywords), shared by the output checks, the policy and the tests.
//! - [`policy`]: the directive policy every configuration passes before
//!   `haproxy -c` reads it (no code loading, no files outside the render).
//! - [`validate`]: checking a rendered configuration with `haproxy -c`.
//! - [`offline`]: the offline job (`haptic render`): manifests in, validated
//!   configuration out.
//! - [`owned`]: objects libraries ask the host to apply (a Service per
//!   Gateway), as manifests for `render` to show and the controller to apply.
//! - [`precompiled`]: libraries compiled when the image was built, copied
//!   into the compile cache a process starts with.
//! - [`fixtures`]: a library's fixture tests (`haptic test`).
//! - [`scaffold`]: a new library project of one's own (`haptic new`).
//! - [`protocol`]: what the controller and the agents say to each other
//!   (bundles, the apply plan, runtime commands, the client), owned by
//!   neither.
//! - [`agent`]: `haptic agent` beside HAProxy in every proxy pod: applies
//!   bundles, reports what every worker runs.
//! - [`local`]: `haptic run`: the controller on a directory of manifests
//!   with local HAProxy processes and their agents.
//! - [`crypt`]: password hashes checked the way HAProxy matches them.
//! - [`tls`]: certificate checks and the default certificate for TLS
//!   termination.
//! - [`source`]: where the cluster's objects come from (what a watcher
//!   covers, what a source tells the render loop; the Kubernetes API as
//!   one source).
//! - [`status_writes`]: the libraries' status patches written to whatever
//!   holds the objects (the API server by server-side apply, `haptic run`'s
//!   in-memory objects), skipping what already holds.
//! - [`controller`]: the controller's side of the data plane (the fleet of
//!   agents and deploys to it).
//! - [`inspect`]: `haptic status` (why a rollout waits) and `haptic diff`
//!   (what a change would do), for operators.
//! - [`migrate`]: the ingress-nginx migration report, read from a render's
//!   library output (`haptic migrate report`, the controller's metric).

pub mod agent;
pub mod controller;
pub mod crypt;
pub mod echo;
pub mod engine;
pub mod fixtures;
pub mod haproxy_syntax;
pub mod inspect;
pub mod library;
pub mod local;
pub mod manifests;
pub mod migrate;
pub mod offline;
pub mod owned;
pub mod policy;
pub mod precompiled;
pub mod protocol;
pub mod render;
pub mod scaffold;
pub mod source;
pub mod status_writes;
/// A deterministic synthetic cluster (Ingresses, Services, EndpointSlices, Pods) for benchmarks and tests.
#[cfg(feature = "synthetic")]
pub mod synthetic;
pub mod tls;
pub mod validate;
pub mod values;

/// Template libraries compiled by `build.rs`: the bundled ones (the table
/// the runtime loads) and the paths of components built for tests.
pub mod guests {
    /// A template library compiled into the binary.
    #[derive(Debug, Clone, Copy)]
    pub struct Bundled {
        /// The library's name, as it describes itself (`base`).
        pub name: &'static str,
        /// Its origin in errors before it has described itself (`bundled:base`).
        pub origin: &'static str,
        /// Its Cargo package (`haptic-base`).
        pub package: &'static str,
        /// Where the build left the component.
        pub path: &'static str,
        /// The component.
        pub bytes: &'static [u8],
    }

    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}
