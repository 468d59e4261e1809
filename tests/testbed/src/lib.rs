//! A real local Kubernetes test bed for haptic's end-to-end tests.
//!
//! - [`control_plane`]: etcd, kube-apiserver and kube-controller-manager built
//!   from source (see `tests/testbed/go/`), started on free ports, stopped on drop.
//! - [`app`]: the echo app every scenario routes and rolls.
//! - [`cluster`]: namespaces, objects and waits against the API server.
//! - [`http`]: a minimal HTTP/1.1 GET client to ask a pod or a proxy who answered.
//! - [`load`]: clients through HAProxy that count every answer and keep
//!   every failure.
//! - [`helm`]: the helm binary and the chart for the tests that install it
//!   (install, upgrade, template, uninstall).
//! - [`node`]: the real node (containerd, runc, CNI, kubelet and kube-proxy
//!   v1.35.4): pods are containers from locally built images.
//! - [`oracle`]: HAProxy's master CLI asked whether every worker routes a
//!   host to a pod.
//! - [`credentials`]: which containers of a pod can read its token.
//! - [`paths`]: the running test's target directory.

pub mod app;
pub mod cluster;
pub mod control_plane;
pub mod credentials;
pub mod helm;
pub mod http;
pub mod load;
pub mod node;
pub mod oracle;
pub mod paths;
// The one port picker the host's tests use too (below the ephemeral and
// the NodePort ranges, every candidate bound first).
#[path = "../../../host/tests/support/ports.rs"]
pub mod ports;
