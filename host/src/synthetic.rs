//! A deterministic synthetic cluster for benchmarks and tests: an
//! IngressClass, Namespaces, Services, EndpointSlices, (trimmed) Pods and
//! Ingresses in the shapes the API server returns, sized by a
//! [`ClusterSpec`]. The same spec always gives the same objects, so a
//! benchmark figure can be reproduced by anyone.
//!
//! [`ClusterSpec::benchmark`] is the size of the design's targets (HAPTIC's
//! TestScale): 20 namespaces x 40 Ingresses, 1,000 Services, 10,000
//! endpoints. [`Cluster::flip_endpoint`] and [`Cluster::add_ingress`] give
//! the objects of the two changes those targets time.

pub mod gateway;
#[cfg(test)]
mod tests;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::manifests::{self, Manifest, ManifestError, WatchedKinds};

/// The class every synthetic Ingress names, and its controller.
pub const INGRESS_CLASS: &str = "haptic";
pub const CONTROLLER: &str = "haproxy-haptic.org/controller";
/// The readiness gate condition type pods list when `gated`.
pub const GATE_CONDITION: &str = "haproxy-haptic.org/load-balancer-ready";

/// How big a cluster to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterSpec {
    pub namespaces: usize,
    pub ingresses_per_namespace: usize,
    pub services_per_namespace: usize,
    pub endpoints_per_service: usize,
    /// Pods list the readiness gate, and not-ready endpoints belong to pods
    /// whose containers are ready but that wait for the gate.
    pub gated: bool,
}

impl ClusterSpec {
    /// 800 Ingresses, 1,000 Services, 10,000 endpoints and pods, gated.
    pub fn benchmark() -> Self {
        Self {
            namespaces: 20,
            ingresses_per_namespace: 40,
            services_per_namespace: 50,
            endpoints_per_service: 10,
            gated: true,
        }
    }

    /// A cluster small enough to read: 2 namespaces, 3 Ingresses and 4
    /// Services each, 3 endpoints per Service.
    pub fn small() -> Self {
        Self {
            namespaces: 2,
            ingresses_per_namespace: 3,
            services_per_namespace: 4,
            endpoints_per_service: 3,
            gated: false,
        }
    }

    pub fn services(&self) -> usize {
        self.namespaces * self.services_per_namespace
    }

    pub fn endpoints(&self) -> usize {
        self.services() * self.endpoints_per_service
    }
}

/// Why a synthetic-cluster operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SyntheticError {
    /// The endpoint asked for does not exist in this cluster.
    #[error(
        "the synthetic cluster has no endpoint {endpoint} of service {service} in namespace {namespace}; \
         it has {namespaces} namespaces, {services} services each and {endpoints} endpoints per service"
    )]
    NoSuchEndpoint {
        namespace: usize,
        service: usize,
        endpoint: usize,
        namespaces: usize,
        services: usize,
        endpoints: usize,
    },
    /// Gateway API objects need Services to route to.
    #[error(
        "the synthetic cluster has no Services for HTTPRoutes to route to; give it services_per_namespace > 0"
    )]
    NoServices,
    /// Writing the YAML files failed.
    #[error("cannot write {}: {source}; check that the directory is writable", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A generated cluster that can be changed the way a real one changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    spec: ClusterSpec,
    infrastructure: Vec<Value>,
    services: Vec<Value>,
    endpoint_slices: Vec<Value>,
    pods: Vec<Value>,
    ingresses: Vec<Value>,
    /// Like etcd's revision: every write takes the next one.
    revision: u64,
    added_ingresses: usize,
}

impl Cluster {
    /// Generates the cluster `spec` describes.
    pub fn generate(spec: ClusterSpec) -> Self {
        let mut cluster = Self {
            spec,
            infrastructure: Vec::new(),
            services: Vec::with_capacity(spec.services()),
            endpoint_slices: Vec::with_capacity(spec.services()),
            pods: Vec::with_capacity(spec.endpoints()),
            ingresses: Vec::with_capacity(spec.namespaces * spec.ingresses_per_namespace),
            revision: 0,
            added_ingresses: 0,
        };
        let class = json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "IngressClass",
            "metadata": {"name": INGRESS_CLASS, "resourceVersion": cluster.next_revision()},
            "spec": {"controller": CONTROLLER},
        });
        cluster.infrastructure.push(class);
        for ns in 0..spec.namespaces {
            let namespace = json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": namespace_name(ns), "resourceVersion": cluster.next_revision()},
            });
            cluster.infrastructure.push(namespace);
        }
        for ns in 0..spec.namespaces {
            for svc in 0..spec.services_per_namespace {
                cluster.generate_service(ns, svc);
            }
            for index in 0..spec.ingresses_per_namespace {
                let ingress = cluster.ingress(ns, index);
                cluster.ingresses.push(ingress);
            }
        }
        cluster
    }

    pub fn spec(&self) -> &ClusterSpec {
        &self.spec
    }

    /// Every object: the IngressClass and Namespaces, Services,
    /// EndpointSlices, Pods, then Ingresses.
    pub fn objects(&self) -> impl Iterator<Item = &Value> {
        self.infrastructure
            .iter()
            .chain(&self.services)
            .chain(&self.endpoint_slices)
            .chain(&self.pods)
            .chain(&self.ingresses)
    }

    /// The objects as manifests, as if loaded from files.
    pub fn manifests(&self) -> Result<Vec<Manifest>, ManifestError> {
        manifests::from_objects(
            Path::new("synthetic"),
            self.objects().cloned(),
            &WatchedKinds::new(),
        )
    }

    /// Flips the readiness of one endpoint (indices are 0-based within the
    /// namespace and service) and of its pod, and returns the changed
    /// EndpointSlice and Pod with new resourceVersions: the endpoint's
    /// `ready`/`serving` and the pod's `ContainersReady`/`Ready` take the
    /// new state, as a readiness probe flipping would make them. Flipping
    /// twice restores the original conditions. Endpoint 0 starts ready
    /// everywhere.
    pub fn flip_endpoint(
        &mut self,
        namespace: usize,
        service: usize,
        endpoint: usize,
    ) -> Result<Vec<Value>, SyntheticError> {
        let spec = self.spec;
        if namespace >= spec.namespaces
            || service >= spec.services_per_namespace
            || endpoint >= spec.endpoints_per_service
        {
            return Err(SyntheticError::NoSuchEndpoint {
                namespace,
                service,
                endpoint,
                namespaces: spec.namespaces,
                services: spec.services_per_namespace,
                endpoints: spec.endpoints_per_service,
            });
        }
        let slice_index = namespace * spec.services_per_namespace + service;
        let pod_index = slice_index * spec.endpoints_per_service + endpoint;
        let slice_revision = self.next_revision();
        let pod_revision = self.next_revision();

        let slice = &mut self.endpoint_slices[slice_index];
        slice["metadata"]["resourceVersion"] = json!(slice_revision);
        let conditions = &mut slice["endpoints"][endpoint]["conditions"];
        let ready = !conditions["ready"].as_bool().unwrap_or(false);
        conditions["ready"] = json!(ready);
        conditions["serving"] =
            json!(ready || conditions["terminating"].as_bool().unwrap_or(false));
        let slice = slice.clone();

        let pod = &mut self.pods[pod_index];
        pod["metadata"]["resourceVersion"] = json!(pod_revision);
        // The endpoint follows the pod's Ready condition, as the
        // EndpointSlice controller makes it; the gate condition is left alone.
        let reason = (!ready).then_some("ContainersNotReady");
        set_pod_condition(pod, "ContainersReady", ready, reason);
        set_pod_condition(pod, "Ready", ready, reason);
        Ok(vec![slice, pod.clone()])
    }

    /// Adds one more Ingress (round-robin over namespaces, continuing each
    /// namespace's numbering) and returns it.
    pub fn add_ingress(&mut self) -> Value {
        let namespaces = self.spec.namespaces.max(1);
        let ns = self.added_ingresses % namespaces;
        let index = self.spec.ingresses_per_namespace + self.added_ingresses / namespaces;
        self.added_ingresses += 1;
        let ingress = self.ingress(ns, index);
        self.ingresses.push(ingress.clone());
        ingress
    }

    /// Writes the objects as multi-document YAML files into `dir` (created
    /// if missing), one file per kind, and returns their paths.
    pub fn write_yaml(&self, dir: &Path) -> Result<Vec<PathBuf>, SyntheticError> {
        let write_error = |path: &Path| {
            let path = path.to_owned();
            move |source| SyntheticError::Write { path, source }
        };
        std::fs::create_dir_all(dir).map_err(write_error(dir))?;
        let groups: [(&str, &[Value]); 5] = [
            ("00-cluster.yaml", &self.infrastructure),
            ("10-services.yaml", &self.services),
            ("20-endpointslices.yaml", &self.endpoint_slices),
            ("30-pods.yaml", &self.pods),
            ("40-ingresses.yaml", &self.ingresses),
        ];
        let mut paths = Vec::new();
        for (name, objects) in groups {
            let path = dir.join(name);
            write_yaml_stream(&path, objects)?;
            paths.push(path);
        }
        Ok(paths)
    }

    fn next_revision(&mut self) -> String {
        self.revision += 1;
        self.revision.to_string()
    }

    fn generate_service(&mut self, ns: usize, svc: usize) {
        let spec = self.spec;
        let namespace = namespace_name(ns);
        let name = service_name(svc);
        let global = ns * spec.services_per_namespace + svc;
        let mut ports =
            vec![json!({"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"})];
        let mut slice_ports = vec![json!({"name": "http", "port": 8080, "protocol": "TCP"})];
        if has_admin_port(svc) {
            ports.push(
                json!({"name": "admin", "port": 9000, "targetPort": 9090, "protocol": "TCP"}),
            );
            slice_ports.push(json!({"name": "admin", "port": 9090, "protocol": "TCP"}));
        }
        let service = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": self.next_revision()},
            "spec": {"selector": {"app": name}, "ports": ports, "type": "ClusterIP"},
        });
        self.services.push(service);

        let mut endpoints = Vec::with_capacity(spec.endpoints_per_service);
        for e in 0..spec.endpoints_per_service {
            let endpoint_index = global * spec.endpoints_per_service + e;
            let state = endpoint_state(global, e, spec.endpoints_per_service);
            let pod_name = pod_name(svc, global, e);
            let ip = Ipv4Addr::from(0x7f01_0000_u32.wrapping_add(endpoint_index as u32 + 1));
            endpoints.push(json!({
                "addresses": [ip.to_string()],
                "conditions": {
                    "ready": state == State::Ready,
                    "serving": state != State::NotReady,
                    "terminating": state == State::Terminating,
                },
                "nodeName": "node-0",
                "targetRef": {"kind": "Pod", "namespace": namespace, "name": pod_name, "uid": uid(endpoint_index)},
            }));
            let pod = self.pod(&namespace, &name, &pod_name, ip, state, uid(endpoint_index));
            self.pods.push(pod);
        }
        let slice = json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": format!("{name}-{:05x}", global * 7919 % 0x10_0000),
                "namespace": namespace,
                "resourceVersion": self.next_revision(),
                "labels": {
                    "kubernetes.io/service-name": name,
                    "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                },
            },
            "addressType": "IPv4",
            "ports": slice_ports,
            "endpoints": endpoints,
        });
        self.endpoint_slices.push(slice);
    }

    fn pod(
        &mut self,
        namespace: &str,
        app: &str,
        name: &str,
        ip: Ipv4Addr,
        state: State,
        uid: String,
    ) -> Value {
        let gated = self.spec.gated;
        let containers_ready = match state {
            State::Ready => true,
            // Gated: the containers are up and the pod waits for the gate.
            State::NotReady => gated,
            State::Terminating => false,
        };
        let mut conditions = vec![
            json!({"type": "PodScheduled", "status": "True"}),
            json!({"type": "Initialized", "status": "True"}),
            condition(
                "ContainersReady",
                containers_ready,
                (!containers_ready).then_some("ContainersNotReady"),
            ),
        ];
        if gated && state == State::Ready {
            conditions.push(condition(GATE_CONDITION, true, None));
        }
        let ready = state == State::Ready;
        let reason = match (ready, containers_ready) {
            (true, _) => None,
            (false, true) => Some("ReadinessGatesNotReady"),
            (false, false) => Some("ContainersNotReady"),
        };
        conditions.push(condition("Ready", ready, reason));
        let mut metadata = json!({
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": self.next_revision(),
            "labels": {"app": app},
        });
        if state == State::Terminating {
            metadata["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            metadata["deletionGracePeriodSeconds"] = json!(30);
        }
        let spec = if gated {
            json!({"readinessGates": [{"conditionType": GATE_CONDITION}]})
        } else {
            json!({})
        };
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": spec,
            "status": {"phase": "Running", "podIP": ip.to_string(), "conditions": conditions},
        })
    }

    /// Ingress `index` of namespace `ns`: `/` by port number, a second path
    /// (Prefix or Exact, alternating) by port name, and `/admin` (Exact, by
    /// name) when the first service has an admin port.
    fn ingress(&mut self, ns: usize, index: usize) -> Value {
        let services = self.spec.services_per_namespace.max(1);
        let first = index % services;
        let second = (index + 1) % services;
        let backend_by_number =
            |svc: usize| json!({"service": {"name": service_name(svc), "port": {"number": 80}}});
        let backend_by_name = |svc: usize, port: &str| json!({"service": {"name": service_name(svc), "port": {"name": port}}});
        let mut paths =
            vec![json!({"path": "/", "pathType": "Prefix", "backend": backend_by_number(first)})];
        paths.push(if index.is_multiple_of(2) {
            json!({"path": "/api", "pathType": "Prefix", "backend": backend_by_name(second, "http")})
        } else {
            json!({"path": "/api/status", "pathType": "Exact", "backend": backend_by_name(second, "http")})
        });
        if has_admin_port(first) {
            paths.push(json!({"path": "/admin", "pathType": "Exact", "backend": backend_by_name(first, "admin")}));
        }
        json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {
                "name": format!("app-{index}"),
                "namespace": namespace_name(ns),
                "resourceVersion": self.next_revision(),
                "generation": 1,
            },
            "spec": {
                "ingressClassName": INGRESS_CLASS,
                "rules": [{"host": format!("app-{index}.ns-{ns}.example.com"), "http": {"paths": paths}}],
            },
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ready,
    NotReady,
    Terminating,
}

/// A few services have a not-ready last endpoint and a terminating one
/// before it, so renders exercise disabled servers; endpoint 0 is always ready.
fn endpoint_state(service: usize, endpoint: usize, per_service: usize) -> State {
    if per_service >= 2 && service % 7 == 3 && endpoint == per_service - 1 {
        State::NotReady
    } else if per_service >= 3 && service % 11 == 5 && endpoint == per_service - 2 {
        State::Terminating
    } else {
        State::Ready
    }
}

fn has_admin_port(svc: usize) -> bool {
    svc.is_multiple_of(3)
}

/// Writes `objects` to `path` as one multi-document YAML stream.
pub fn write_yaml_stream(path: &Path, objects: &[Value]) -> Result<(), SyntheticError> {
    let write_error = |source| SyntheticError::Write {
        path: path.to_owned(),
        source,
    };
    let mut text = String::new();
    for object in objects {
        text.push_str("---\n");
        let yaml =
            serde_yaml_ng::to_string(object).map_err(|e| write_error(std::io::Error::other(e)))?;
        text.push_str(&yaml);
    }
    std::fs::write(path, text).map_err(write_error)
}

fn namespace_name(ns: usize) -> String {
    format!("ns-{ns}")
}

fn service_name(svc: usize) -> String {
    format!("svc-{svc}")
}

/// `svc-3-6b7f9-e2`: like a Deployment's pod, a template hash and a suffix.
fn pod_name(svc: usize, global: usize, endpoint: usize) -> String {
    format!(
        "svc-{svc}-{:05x}-e{endpoint}",
        (global * 104_729 + 0x6b7f9) % 0x10_0000
    )
}

fn uid(n: usize) -> String {
    format!("00000000-0000-4000-8000-{n:012x}")
}

fn condition(kind: &str, status: bool, reason: Option<&str>) -> Value {
    let mut condition = json!({"type": kind, "status": if status { "True" } else { "False" }});
    if let Some(reason) = reason {
        condition["reason"] = json!(reason);
    }
    condition
}

fn set_pod_condition(pod: &mut Value, kind: &str, status: bool, reason: Option<&str>) {
    if let Some(conditions) = pod["status"]["conditions"].as_array_mut() {
        match conditions.iter_mut().find(|c| c["type"] == kind) {
            Some(existing) => *existing = condition(kind, status, reason),
            None => conditions.push(condition(kind, status, reason)),
        }
    }
}
