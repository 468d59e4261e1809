//! `kubernetes-backends`: one HAProxy backend per Service port, one server
//! per endpoint.
//!
//! - Backends are named by the shared rule
//!   ([`haptic_sdk::names::backend_name`], `<namespace>_<service>_<port>`),
//!   so `ingress` routes to them without knowing this library.
//! - EndpointSlices join their Service by the `kubernetes.io/service-name`
//!   label; a slice port joins a Service port by name. Non-TCP ports and
//!   FQDN slices are skipped.
//! - A server is named after its pod (`targetRef.name`), or `ep-<address>`
//!   without one, so a readiness flip changes only the server's state: the
//!   agent applies it with a runtime `set server state`, not a reload. Not
//!   routed endpoints (not ready, or terminating) stay in the file as
//!   `disabled` servers for the same reason.
//! - The `server` lines are a snippet of the backend at `Slot::Other`,
//!   priority [`SERVERS_PRIORITY`], after any other library's lines there:
//!   a library that needs options on them (TLS or HTTP/2 to the pods) adds
//!   a `default-server` line with
//!   [`haptic_sdk::extending::server_options`], and a readiness flip still
//!   changes only the server lines.
//! - `podReadinessGate.enabled` also watches Pods (trimmed) and routes a
//!   not-ready endpoint whose pod passes the gate
//!   ([`haptic_sdk::readiness`]).
//!
//! Rendering is incremental: the library keeps an index from slices and
//! pods to Services and re-renders only the Services a change touches; the
//! SDK then sends the host only the backends whose text changed.

mod render;

use std::collections::{BTreeSet, HashMap};

use haptic_sdk::extending::SERVERS_PRIORITY;
use haptic_sdk::readiness::{self, GatePod, POD_IGNORE_FIELDS};
use haptic_sdk::slim::{SERVICE_IGNORE_FIELDS, SLICE_IGNORE_FIELDS, ServicePorts, Slice};
use haptic_sdk::{Context, Info, Library, Output, Plan, Result, SectionKind, Slot, Values, Watch};
use serde::Deserialize;

/// Watch names.
pub const SERVICES: &str = "services";
pub const ENDPOINT_SLICES: &str = "endpointslices";
pub const PODS: &str = "backend-pods";

/// `(namespace, name)`.
type Key = (String, String);

/// The item key of a backend's `server` lines snippet.
fn servers_key(backend: &str) -> String {
    format!("servers:{backend}")
}

/// Values under `templateLibraries.kubernetesBackends`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendValues {
    /// `balance` algorithm of every backend.
    pub balance: String,
    /// Appended to every `server` line (e.g. `check inter 2s`).
    pub server_options: String,
    pub pod_readiness_gate: GateValues,
}

/// `podReadinessGate`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct GateValues {
    pub enabled: bool,
}

/// Default values.
pub fn defaults() -> serde_json::Value {
    serde_json::json!({
        "balance": "roundrobin",
        "serverOptions": "",
        "podReadinessGate": { "enabled": false }
    })
}

/// The `kubernetes-backends` library.
#[derive(Debug, Default)]
pub struct KubernetesBackends {
    values: BackendValues,
    /// Slice names per Service.
    slices_of: HashMap<Key, BTreeSet<String>>,
    /// Services whose servers point at a pod, to re-render them when the
    /// pod's gate state flips.
    services_of_pod: HashMap<Key, BTreeSet<Key>>,
    /// Pods each Service rendered last time, to maintain `services_of_pod`.
    pods_of_service: HashMap<Key, BTreeSet<Key>>,
    /// Backend names each Service rendered last time.
    backends_of: HashMap<Key, Vec<String>>,
}

impl Library for KubernetesBackends {
    fn info(&self) -> Info {
        Info::new("kubernetes-backends", env!("CARGO_PKG_VERSION"))
            .order(100)
            .defaults(defaults())
    }

    fn plan(&mut self, values: &Values) -> Result<Plan> {
        let parsed: BackendValues = values.get()?;
        if parsed.server_options.contains(['\n', '\r']) || parsed.balance.contains(['\n', '\r']) {
            return Err(haptic_sdk::Error::msg(
                "templateLibraries.kubernetesBackends.serverOptions and .balance must be single lines",
            ));
        }
        let mut plan = Plan::default()
            .watch(
                Watch::new(SERVICES, "v1", "Service")
                    .parse_as::<ServicePorts>()
                    .ignore_fields(SERVICE_IGNORE_FIELDS.iter().copied()),
            )
            .watch(
                Watch::new(ENDPOINT_SLICES, "discovery.k8s.io/v1", "EndpointSlice")
                    .parse_as::<Slice>()
                    .ignore_fields(SLICE_IGNORE_FIELDS.iter().copied()),
            );
        if parsed.pod_readiness_gate.enabled {
            plan = plan.watch(
                // Only the pods of not-ready endpoints are ever read.
                Watch::new(PODS, "v1", "Pod")
                    .parse_as::<GatePod>()
                    .lazy()
                    .ignore_fields(POD_IGNORE_FIELDS.iter().copied()),
            );
        }
        self.values = parsed;
        Ok(plan)
    }

    fn render(&mut self, ctx: &Context<'_>, out: &mut Output) -> Result<()> {
        out.retain_previous();
        let dirty = if ctx.is_complete() {
            self.rebuild_index(ctx)?
        } else {
            self.apply_changes(ctx)
        };
        for service in dirty {
            self.render_service(ctx, out, service)?;
        }
        Ok(())
    }
}

impl KubernetesBackends {
    /// Forgets every cache and returns every Service to render.
    fn rebuild_index(&mut self, ctx: &Context<'_>) -> Result<BTreeSet<Key>> {
        self.slices_of.clear();
        self.services_of_pod.clear();
        self.pods_of_service.clear();
        self.backends_of.clear();
        let mut dirty = BTreeSet::new();
        for slice in ctx.objects::<Slice>(ENDPOINT_SLICES)? {
            if let Some(service) = readiness::slice_service(&slice) {
                let key = (slice.key.namespace.clone(), service.to_owned());
                self.slices_of
                    .entry(key.clone())
                    .or_default()
                    .insert(slice.key.name.clone());
                dirty.insert(key);
            }
        }
        for service in ctx.objects::<ServicePorts>(SERVICES)? {
            dirty.insert((service.key.namespace.clone(), service.key.name.clone()));
        }
        Ok(dirty)
    }

    /// Updates the index from this render's changes and returns the
    /// Services they touch.
    fn apply_changes(&mut self, ctx: &Context<'_>) -> BTreeSet<Key> {
        let mut dirty = BTreeSet::new();
        for change in ctx.changes() {
            let namespace = &change.key.namespace;
            match change.watch() {
                SERVICES => {
                    dirty.insert((namespace.clone(), change.key.name.clone()));
                }
                ENDPOINT_SLICES => {
                    let before = change
                        .previous::<Slice>()
                        .and_then(readiness::slice_service);
                    let after = change.current::<Slice>().and_then(readiness::slice_service);
                    if let Some(service) = before {
                        let key = (namespace.clone(), service.to_owned());
                        if let Some(names) = self.slices_of.get_mut(&key) {
                            names.remove(&change.key.name);
                            if names.is_empty() {
                                self.slices_of.remove(&key);
                            }
                        }
                        dirty.insert(key);
                    }
                    if let Some(service) = after {
                        let key = (namespace.clone(), service.to_owned());
                        self.slices_of
                            .entry(key.clone())
                            .or_default()
                            .insert(change.key.name.clone());
                        dirty.insert(key);
                    }
                }
                PODS => {
                    let before = change
                        .previous::<GatePod>()
                        .is_some_and(GatePod::passes_gate);
                    let after = change
                        .current::<GatePod>()
                        .is_some_and(GatePod::passes_gate);
                    if before != after {
                        let pod = (namespace.clone(), change.key.name.clone());
                        if let Some(services) = self.services_of_pod.get(&pod) {
                            dirty.extend(services.iter().cloned());
                        }
                    }
                }
                _ => {}
            }
        }
        dirty
    }

    /// Renders (or removes) the backends of one Service and refreshes the
    /// pod index for it.
    fn render_service(&mut self, ctx: &Context<'_>, out: &mut Output, key: Key) -> Result<()> {
        let service = ctx.get::<ServicePorts>(SERVICES, &key.0, &key.1)?;
        let rendered = match service {
            Some(service) => {
                let slice_names = self.slices_of.get(&key);
                let slices = slice_names
                    .into_iter()
                    .flatten()
                    .map(|name| ctx.get::<Slice>(ENDPOINT_SLICES, &key.0, name))
                    .collect::<Result<Vec<_>>>()?;
                let slices: Vec<&Slice> = slices.into_iter().flatten().map(|e| e.value).collect();
                let gate = self.values.pod_readiness_gate.enabled;
                let pod = |namespace: &str, name: &str| -> Option<&GatePod> {
                    if !gate {
                        return None;
                    }
                    ctx.get::<GatePod>(PODS, namespace, name)
                        .ok()
                        .flatten()
                        .map(|e| e.value)
                };
                render::service_backends(&key.0, &key.1, service.value, &slices, &self.values, pod)
            }
            None => render::Rendered::default(),
        };

        if let Some(service) = &service
            && !rendered.invalid_addresses.is_empty()
        {
            let slices: Vec<String> = self
                .slices_of
                .get(&key)
                .into_iter()
                .flatten()
                .map(|slice| format!("EndpointSlice {}/{slice}", key.0))
                .collect();
            out.warning(
                Some(service.key),
                "EndpointAddressInvalid",
                format!(
                    "Service {}/{}: endpoint addresses {:?} (in {}) are not IP addresses of their \
                     slice's addressType; those endpoints are skipped",
                    key.0,
                    key.1,
                    rendered.invalid_addresses,
                    slices.join(", ")
                ),
            )?;
        }
        let old_backends = self.backends_of.remove(&key).unwrap_or_default();
        let mut names = Vec::with_capacity(rendered.backends.len());
        for backend in rendered.backends {
            out.section(SectionKind::Backend, backend.name.clone(), backend.body)?;
            let key = servers_key(&backend.name);
            if backend.servers.is_empty() {
                out.remove(&key);
            } else {
                out.snippet_keyed(
                    key,
                    SectionKind::Backend,
                    backend.name.clone(),
                    Slot::Other,
                    SERVERS_PRIORITY,
                    backend.servers,
                )?;
            }
            names.push(backend.name);
        }
        for name in old_backends {
            if !names.contains(&name) {
                out.remove_section(SectionKind::Backend, &name);
                out.remove(&servers_key(&name));
            }
        }
        if !names.is_empty() {
            self.backends_of.insert(key.clone(), names);
        }

        let old_pods = self.pods_of_service.remove(&key).unwrap_or_default();
        for pod in old_pods.difference(&rendered.pods) {
            if let Some(services) = self.services_of_pod.get_mut(pod) {
                services.remove(&key);
                if services.is_empty() {
                    self.services_of_pod.remove(pod);
                }
            }
        }
        for pod in &rendered.pods {
            self.services_of_pod
                .entry(pod.clone())
                .or_default()
                .insert(key.clone());
        }
        if !rendered.pods.is_empty() {
            self.pods_of_service.insert(key, rendered.pods);
        }
        Ok(())
    }
}

haptic_sdk::export_library!(KubernetesBackends);

#[cfg(test)]
mod tests;
