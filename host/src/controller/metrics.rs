//! The controller's Prometheus metrics (prometheus-client), prefixed `haptic_`.
//!
//! What to alert on: `renders_total{result!="ok"}` rising (the fleet stays
//! on the last good configuration until a fix), `fleet_converged_pods`
//! below `fleet_pods` for more than a minute (a pod that cannot take the
//! configuration holds every readiness gate), `deploys_total{mode="failed"}`,
//! `leader` summed over replicas not 1, and `gate_latency_seconds` p99
//! growing (rollouts of gated workloads slow down with it).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `ok`, `render-failed`, `refused` (by `haproxy -c`), `validate-error`.
    pub result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModeLabels {
    /// `runtime`, `reload`, `unchanged`, `confirmed` or `failed`.
    pub mode: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LibraryLabels {
    pub library: String,
}

/// Every metric the controller exports, registered once.
#[derive(Debug)]
pub struct Metrics {
    pub registry: Registry,
    pub renders: Family<ResultLabels, Counter>,
    pub render_seconds: Histogram,
    pub validate_seconds: Histogram,
    /// Renders that skipped `haproxy -c` (only server state changed).
    pub validations_skipped: Counter,
    pub deploy_seconds: Histogram,
    pub deploys: Family<ModeLabels, Counter>,
    pub fleet_pods: Gauge,
    pub fleet_converged_pods: Gauge,
    pub gate_conditions_set: Counter,
    pub gate_latency_seconds: Histogram,
    pub library_errors: Family<LibraryLabels, Counter>,
    pub status_patch_failures: Counter,
    pub leader: Gauge,
    /// Where the memory is (set after each render; resident memory when
    /// scraped).
    pub memory: MemoryGauges,
}

/// The controller's memory by part: what a profile at scale shows first.
#[derive(Debug, Default)]
pub struct MemoryGauges {
    pub resident_bytes: Gauge,
    pub store_objects: Gauge,
    pub store_json_bytes: Gauge,
    pub library_bytes: Family<LibraryLabels, Gauge>,
    pub status_remembered: Gauge,
}

impl MemoryGauges {
    fn register(&self, registry: &mut Registry) {
        let memory = registry.sub_registry_with_prefix("memory");
        memory.register(
            "resident_bytes",
            "The controller's resident memory (VmRSS), read when scraped",
            self.resident_bytes.clone(),
        );
        memory.register(
            "store_objects",
            "Objects in the cluster view",
            self.store_objects.clone(),
        );
        memory.register(
            "store_json_bytes",
            "Bytes of the cluster view's stored JSON (trimmed at ingest)",
            self.store_json_bytes.clone(),
        );
        memory.register(
            "library_bytes",
            "Linear memory of each library instance (it never shrinks)",
            self.library_bytes.clone(),
        );
        memory.register(
            "status_remembered",
            "Status patches the applier remembers as written or holding",
            self.status_remembered.clone(),
        );
    }

    /// Sets the gauges of the render loop's parts.
    pub fn set_render(&self, memory: &crate::render::MemoryUse) {
        self.store_objects.set(gauge_value(memory.objects));
        self.store_json_bytes.set(gauge_value(memory.object_bytes));
        for (library, bytes) in &memory.libraries {
            self.library_bytes
                .get_or_create(&LibraryLabels {
                    library: library.clone(),
                })
                .set(gauge_value(*bytes));
        }
    }
}

fn gauge_value(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// `VmRSS` of this process, from `/proc/self/status` (0 where there is none).
fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                let kib = line.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?;
                kib.trim().parse::<u64>().ok()
            })
        })
        .map_or(0, |kib| kib * 1024)
}

fn seconds_histogram() -> Histogram {
    // 0.5 ms .. ~33 s
    Histogram::new(exponential_buckets(0.0005, 2.0, 17))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("haptic");
        let renders = Family::<ResultLabels, Counter>::default();
        registry.register("renders", "Renders, by result", renders.clone());
        let render_seconds = seconds_histogram();
        registry.register(
            "render_duration_seconds",
            "Time to render the libraries' output into one configuration",
            render_seconds.clone(),
        );
        let validate_seconds = seconds_histogram();
        registry.register(
            "validate_duration_seconds",
            "Time `haproxy -c` took on a render",
            validate_seconds.clone(),
        );
        let validations_skipped = Counter::default();
        registry.register(
            "validations_skipped",
            "Renders deployed without `haproxy -c` because only server state changed",
            validations_skipped.clone(),
        );
        let deploy_seconds = seconds_histogram();
        registry.register(
            "deploy_duration_seconds",
            "Time from a validated render to every HAProxy pod taking it",
            deploy_seconds.clone(),
        );
        let deploys = Family::<ModeLabels, Counter>::default();
        registry.register(
            "deploys",
            "Pushes to one HAProxy pod, by how it applied the render",
            deploys.clone(),
        );
        let fleet_pods = Gauge::default();
        registry.register("fleet_pods", "HAProxy pods known", fleet_pods.clone());
        let fleet_converged_pods = Gauge::default();
        registry.register(
            "fleet_converged_pods",
            "HAProxy pods whose every worker runs the newest render",
            fleet_converged_pods.clone(),
        );
        let gate_conditions_set = Counter::default();
        registry.register(
            "gate_conditions_set",
            "Readiness gate conditions written True",
            gate_conditions_set.clone(),
        );
        let gate_latency_seconds = Histogram::new(exponential_buckets(0.05, 2.0, 12));
        registry.register(
            "gate_latency_seconds",
            "From a gated pod's ContainersReady to its gate condition written (second resolution of the pod's timestamps)",
            gate_latency_seconds.clone(),
        );
        let library_errors = Family::<LibraryLabels, Counter>::default();
        registry.register(
            "library_errors",
            "Renders a library failed (or wrote a line HAProxy refused)",
            library_errors.clone(),
        );
        let status_patch_failures = Counter::default();
        registry.register(
            "status_patch_failures",
            "Status patches the API server did not take",
            status_patch_failures.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica leads (deploys and writes status)",
            leader.clone(),
        );
        let memory = MemoryGauges::default();
        memory.register(&mut registry);
        Self {
            memory,
            registry,
            renders,
            render_seconds,
            validate_seconds,
            validations_skipped,
            deploy_seconds,
            deploys,
            fleet_pods,
            fleet_converged_pods,
            gate_conditions_set,
            gate_latency_seconds,
            library_errors,
            status_patch_failures,
            leader,
        }
    }
}

impl Metrics {
    /// The text exposition format.
    pub fn encode(&self) -> String {
        self.memory
            .resident_bytes
            .set(i64::try_from(resident_bytes()).unwrap_or(i64::MAX));
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
