//! `status-patches-150-pod-readiness-gate`: sets the condition
//! `haproxy-haptic.org/load-balancer-ready` to True on every gated pod the
//! rendered configuration routes to.
//!
//! Enabled by `kubernetesBackends.podReadinessGate.enabled` (read from the
//! values tree: the flag belongs to the library that renders the servers).
//! Disabled, it watches nothing and patches nothing.
//!
//! A pod is routed when `kubernetes-backends` renders an enabled server for
//! it: it is listed in an EndpointSlice of an existing Service whose ports
//! the slice serves, and its endpoint is routed by the rule in
//! [`haptic_sdk::readiness`] (ready and not terminating, or not ready, not
//! terminating and passing the gate). For each routed pod that lists the
//! gate the library emits a `deployed`-variant patch: the host applies it
//! only once every HAProxy pod runs this render, under the `haptic-deployed`
//! field manager, owning only this condition (Pod `status.conditions` is a
//! map list keyed by `type`). No `lastTransitionTime`, so the output is a
//! function of the input.
//!
//! It never emits a removal: a pod that already carries the condition as
//! True keeps getting the same patch while it exists, even when it stops
//! being routed, so neither a host that treats a dropped item as "release
//! the field" nor a fresh instance can take the condition away.

use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use haptic_sdk::readiness::{self, GatePod, POD_IGNORE_FIELDS};
use haptic_sdk::slim::{SERVICE_IGNORE_FIELDS, SLICE_IGNORE_FIELDS, ServicePorts, Slice};
use haptic_sdk::{Context, Info, Library, Output, Plan, Result, StatusVariant, Values, Watch};
use serde::Deserialize;

/// Watch names.
pub const PODS: &str = "gated-pods";
pub const ENDPOINT_SLICES: &str = "endpointslices";
pub const SERVICES: &str = "services";

/// `(namespace, name)`.
type Key = (String, String);

/// The part of `kubernetesBackends` this library reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BackendValues {
    #[serde(default)]
    pod_readiness_gate: Gate,
}

#[derive(Debug, Default, Deserialize)]
struct Gate {
    #[serde(default)]
    enabled: bool,
}

/// The `status-patches-150-pod-readiness-gate` library.
#[derive(Debug, Default)]
pub struct ReadinessGatePatches {
    enabled: bool,
    /// [`readiness::gate_status`], serialized once: every patch carries the
    /// same one.
    status: String,
    /// Slice names per Service.
    slices_of: HashMap<Key, BTreeSet<String>>,
    /// Slices (namespace, name) listing each pod, by pod namespace then
    /// name (nested so a lookup by `&str` needs no allocation).
    /// A pod is almost always in one slice, and a slice's key is shared by
    /// all its pods, hence a short list of shared keys.
    slices_of_pod: HashMap<String, HashMap<String, Vec<Rc<Key>>>>,
}

impl Library for ReadinessGatePatches {
    fn info(&self) -> Info {
        Info::new(
            "status-patches-150-pod-readiness-gate",
            env!("CARGO_PKG_VERSION"),
        )
        .order(150)
    }

    fn plan(&mut self, values: &Values) -> Result<Plan> {
        let backends: BackendValues = values.library_as("kubernetesBackends")?;
        self.enabled = backends.pod_readiness_gate.enabled;
        self.status = readiness::gate_status().to_string();
        if !self.enabled {
            return Ok(Plan::default());
        }
        Ok(Plan::default()
            .watch(
                Watch::new(PODS, "v1", "Pod")
                    .parse_as::<GatePod>()
                    .ignore_fields(POD_IGNORE_FIELDS.iter().copied()),
            )
            .watch(
                Watch::new(ENDPOINT_SLICES, "discovery.k8s.io/v1", "EndpointSlice")
                    .parse_as::<Slice>()
                    .ignore_fields(SLICE_IGNORE_FIELDS.iter().copied()),
            )
            .watch(
                Watch::new(SERVICES, "v1", "Service")
                    .parse_as::<ServicePorts>()
                    .ignore_fields(SERVICE_IGNORE_FIELDS.iter().copied()),
            )
            .patches_status_of("v1", "Pod"))
    }

    fn render(&mut self, ctx: &Context<'_>, out: &mut Output) -> Result<()> {
        out.retain_previous();
        if !self.enabled {
            return Ok(());
        }
        if ctx.is_complete() {
            self.rebuild_index(ctx)?;
            // Patches exist only for pods that exist: walk the pods, not
            // a set of keys.
            for pod in ctx.objects::<GatePod>(PODS)? {
                self.evaluate(ctx, out, &pod.key.namespace, &pod.key.name, Some(pod.value))?;
            }
            return Ok(());
        }
        for (namespace, name) in self.apply_changes(ctx)? {
            let pod = ctx.get::<GatePod>(PODS, &namespace, &name)?;
            self.evaluate(ctx, out, &namespace, &name, pod.map(|p| p.value))?;
        }
        Ok(())
    }
}

impl ReadinessGatePatches {
    /// Emits or withdraws the patch of one pod (`None`: the pod is gone).
    fn evaluate(
        &self,
        ctx: &Context<'_>,
        out: &mut Output,
        namespace: &str,
        name: &str,
        pod: Option<&GatePod>,
    ) -> Result<()> {
        let patch = match pod {
            Some(pod) => {
                pod.is_gated()
                    && (pod.gate_is_set() || self.is_routed(ctx, namespace, name, pod)?)
            }
            None => false,
        };
        if patch {
            out.status_patch_json(
                StatusVariant::Deployed,
                "v1",
                "Pod",
                namespace,
                name,
                self.status.clone(),
            )
        } else {
            out.remove_status_patch(StatusVariant::Deployed, "v1", "Pod", namespace, name);
            Ok(())
        }
    }

    /// Rebuilds the indexes from every slice.
    fn rebuild_index(&mut self, ctx: &Context<'_>) -> Result<()> {
        self.slices_of.clear();
        self.slices_of_pod.clear();
        for slice in ctx.objects::<Slice>(ENDPOINT_SLICES)? {
            self.index_slice(
                &slice.key.namespace,
                &slice.key.name,
                slice.value,
                true,
                None,
            );
        }
        Ok(())
    }

    /// Adds (`add`) or removes a slice from the indexes; collects its pods
    /// into `pods` when given.
    fn index_slice(
        &mut self,
        namespace: &str,
        name: &str,
        slice: &Slice,
        add: bool,
        mut pods: Option<&mut BTreeSet<Key>>,
    ) {
        let slice_key = Rc::new((namespace.to_owned(), name.to_owned()));
        if let Some(service) = readiness::slice_service(slice) {
            let service_key = (namespace.to_owned(), service.to_owned());
            if add {
                self.slices_of
                    .entry(service_key)
                    .or_default()
                    .insert(name.to_owned());
            } else if let Some(names) = self.slices_of.get_mut(&service_key) {
                names.remove(name);
                if names.is_empty() {
                    self.slices_of.remove(&service_key);
                }
            }
        }
        for endpoint in &slice.endpoints {
            let Some((pod_ns, pod_name)) = readiness::endpoint_pod(namespace, endpoint) else {
                continue;
            };
            if add {
                if !self.slices_of_pod.contains_key(pod_ns) {
                    self.slices_of_pod.insert(pod_ns.to_owned(), HashMap::new());
                }
                if let Some(names) = self.slices_of_pod.get_mut(pod_ns) {
                    let slices = match names.get_mut(pod_name) {
                        Some(slices) => slices,
                        None => names.entry(pod_name.to_owned()).or_default(),
                    };
                    if !slices.contains(&slice_key) {
                        slices.push(Rc::clone(&slice_key));
                    }
                }
            } else if let Some(names) = self.slices_of_pod.get_mut(pod_ns) {
                if let Some(slices) = names.get_mut(pod_name) {
                    slices.retain(|s| *s != slice_key);
                    if slices.is_empty() {
                        names.remove(pod_name);
                    }
                }
                if names.is_empty() {
                    self.slices_of_pod.remove(pod_ns);
                }
            }
            if let Some(pods) = pods.as_deref_mut() {
                pods.insert((pod_ns.to_owned(), pod_name.to_owned()));
            }
        }
    }

    /// Updates the indexes from this render's changes; returns the pods to
    /// evaluate again.
    fn apply_changes(&mut self, ctx: &Context<'_>) -> Result<BTreeSet<Key>> {
        let mut dirty = BTreeSet::new();
        for change in ctx.changes() {
            let (namespace, name) = (&change.key.namespace, &change.key.name);
            match change.watch() {
                PODS => {
                    dirty.insert((namespace.clone(), name.clone()));
                }
                ENDPOINT_SLICES => {
                    if let Some(before) = change.previous::<Slice>() {
                        self.index_slice(namespace, name, before, false, Some(&mut dirty));
                    }
                    if let Some(after) = change.current::<Slice>() {
                        self.index_slice(namespace, name, after, true, Some(&mut dirty));
                    }
                }
                SERVICES => {
                    let service_key = (namespace.clone(), name.clone());
                    for slice_name in self.slices_of.get(&service_key).into_iter().flatten() {
                        if let Some(slice) =
                            ctx.get::<Slice>(ENDPOINT_SLICES, namespace, slice_name)?
                        {
                            dirty.extend(
                                slice
                                    .endpoints
                                    .iter()
                                    .filter_map(|e| readiness::endpoint_pod(namespace, e))
                                    .map(|(ns, n)| (ns.to_owned(), n.to_owned())),
                            );
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(dirty)
    }

    /// Whether `kubernetes-backends` renders an enabled server for the pod.
    fn is_routed(
        &self,
        ctx: &Context<'_>,
        namespace: &str,
        name: &str,
        gate_pod: &GatePod,
    ) -> Result<bool> {
        let slices = self
            .slices_of_pod
            .get(namespace)
            .and_then(|names| names.get(name));
        for slice_key in slices.into_iter().flatten() {
            let (slice_ns, slice_name) = (&slice_key.0, &slice_key.1);
            let Some(slice) = ctx.get::<Slice>(ENDPOINT_SLICES, slice_ns, slice_name)? else {
                continue;
            };
            let Some(service_name) = readiness::slice_service(&slice) else {
                continue;
            };
            let Some(service) = ctx.get::<ServicePorts>(SERVICES, slice_ns, service_name)? else {
                continue;
            };
            if !readiness::slice_is_rendered(&service, &slice) {
                continue;
            }
            let routed = slice.endpoints.iter().any(|endpoint| {
                !endpoint.addresses.is_empty()
                    && readiness::endpoint_pod(slice_ns, endpoint) == Some((namespace, name))
                    && readiness::is_routed(endpoint, Some(gate_pod))
            });
            if routed {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

haptic_sdk::export_library!(ReadinessGatePatches);

#[cfg(test)]
mod tests;
