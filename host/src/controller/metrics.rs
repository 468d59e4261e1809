//! The controller's Prometheus metrics (prometheus-client), prefixed `haptic_`.
//!
//! What to alert on: `renders_total{result!="ok"}` rising (the fleet stays
//! on the last good configuration until a fix), `fleet_converged_pods`
//! below `fleet_pods` for more than a minute (a pod that cannot take the
//! configuration holds every readiness gate), `deploys_total{mode="failed"}`,
//! `leader` summed over replicas not 1, and `gate_latency_seconds` p99
//! growing (rollouts of gated workloads slow down with it). The chart's
//! alert rules and dashboard (`charts/haptic/files/`) read these names; a
//! test bed test scrapes the real endpoint and fails on a renamed one.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Every `result` of `renders_total`, exported at 0 from the start: a
/// series that appears only with its first increase hides that increase
/// from `rate()` and `increase()`, and from the alerts built on them.
const RENDER_RESULTS: [&str; 4] = ["ok", "render-failed", "refused", "validate-error"];

/// Every `mode` of `deploys_total`, exported at 0 from the start.
const DEPLOY_MODES: [&str; 5] = ["runtime", "reload", "unchanged", "confirmed", "failed"];

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

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FileLabels {
    /// The certificate's path in the bundle HAProxy loads.
    pub file: String,
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
    /// HAProxy pods whose last push failed (agent unreachable or refusing).
    pub fleet_failed_pods: Gauge,
    /// Gated pods with ContainersReady whose gate condition waits for the
    /// fleet, and since when the oldest of them waits.
    pub gates: GateWaits,
    /// When each certificate in the deployed bundle expires.
    pub certificates: CertificateExpiry,
    /// Refused renders isolated to the objects they failed with.
    pub isolations: Counter,
    /// Validations one isolation ran.
    pub isolation_probes: Histogram,
    /// Time from a refused render to its isolated, accepted one.
    pub isolation_seconds: Histogram,
    /// Objects whose change a render failed with, withheld (until they
    /// change again).
    pub objects_withheld: Gauge,
    /// What haptic does with the ingress-nginx annotations of the cluster.
    pub ingress_nginx_annotations: IngressNginxAnnotations,
    /// Where the memory is (set after each render; resident memory when
    /// scraped).
    pub memory: MemoryGauges,
    /// Where the controller's start went, phase by phase.
    pub seed: SeedPhases,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    /// `load`, `lists`, `render`, `validate` or `deploy`.
    pub phase: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListLabels {
    /// `Pod (v1)`, `Ingress (networking.k8s.io/v1)`, ...
    pub watch: String,
}

/// `haptic_seed_phase_seconds{phase}`: where the controller's start went,
/// in the order the phases run, each set once: `load` (libraries compiled
/// and configured, API client made), `lists` (-> every watch's first list
/// is in), `render` and `validate` (the first render and its `haproxy
/// -c`), `deploy` (the first configuration published -> every HAProxy pod
/// runs it). Their sum is the seed `make bench-scale` prints; the phases
/// say which one to work on.
#[derive(Debug)]
pub struct SeedPhases {
    family: Family<PhaseLabels, Gauge<f64, AtomicU64>>,
    /// `haptic_seed_list_seconds{watch}`: when each watch's first list was
    /// in, since these metrics were made. The `lists` phase is the last of
    /// them; the others say whether one kind or the API server holds it.
    lists: Family<ListLabels, Gauge<f64, AtomicU64>>,
    /// When these metrics were made: the libraries are loaded by then.
    made: Instant,
    /// When the first configuration was published to the deploy task.
    published: OnceLock<Instant>,
}

impl Default for SeedPhases {
    fn default() -> Self {
        Self {
            family: Family::default(),
            lists: Family::default(),
            made: Instant::now(),
            published: OnceLock::new(),
        }
    }
}

impl SeedPhases {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "seed_phase_seconds",
            "Where the controller's start went: load, lists, render, validate, deploy (each set once)",
            self.family.clone(),
        );
        registry.register(
            "seed_list_seconds",
            "When each watch's first list was in, since the controller's libraries were loaded (each set once)",
            self.lists.clone(),
        );
    }

    /// Records that `watch`'s first list is in now (later calls change
    /// nothing: a re-list is not part of the start).
    pub fn listed(&self, watch: String) {
        set_once(&self.lists, ListLabels { watch }, self.since_made());
    }

    /// Sets `phase` to `took`, the first time only: a later render or
    /// deploy is not part of the start.
    pub fn record(&self, phase: &'static str, took: Duration) {
        set_once(&self.family, PhaseLabels { phase }, took);
    }

    /// Since these metrics were made.
    pub fn since_made(&self) -> Duration {
        self.made.elapsed()
    }

    /// The first configuration is published now (later calls change nothing).
    pub fn published(&self) {
        let _ = self.published.set(Instant::now());
    }

    /// A deploy converged: the first one after the first publication is
    /// the seed's `deploy` phase.
    pub fn converged(&self) {
        if let Some(published) = self.published.get() {
            self.record("deploy", published.elapsed());
        }
    }
}

/// Sets the gauge `labels` selects in `family` to `value` in seconds, unless
/// it was set before: the seed's figures describe the start, and a later
/// re-list, render or deploy is not part of it.
fn set_once<L>(family: &Family<L, Gauge<f64, AtomicU64>>, labels: L, value: Duration)
where
    L: Clone + std::hash::Hash + Eq,
{
    if family.get(&labels).is_none() {
        family.get_or_create(&labels).set(value.as_secs_f64());
    }
}

/// The readiness gates waiting for the fleet: what "why is my rollout
/// stuck" alerts on. The oldest wait is computed when scraped, so it grows
/// while nothing renders (a stuck rollout renders nothing new).
#[derive(Debug, Default)]
pub struct GateWaits {
    pub waiting: Gauge,
    oldest_wait_seconds: Gauge<f64, AtomicU64>,
    oldest_since: Mutex<Option<Instant>>,
}

impl GateWaits {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "gates_waiting",
            "Gated pods with ContainersReady whose gate condition waits for every HAProxy pod to route to them",
            self.waiting.clone(),
        );
        registry.register(
            "gate_oldest_wait_seconds",
            "How long the longest-waiting gated pod has waited (0 when none waits)",
            self.oldest_wait_seconds.clone(),
        );
    }

    /// Sets the waiting gates from a candidate's (each pod's wait start).
    pub fn set<'a>(&self, since: impl ExactSizeIterator<Item = &'a Instant>) {
        self.waiting.set(gauge_value(since.len()));
        let oldest = since.min().copied();
        *self
            .oldest_since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = oldest;
    }

    fn refresh(&self) {
        let oldest = *self
            .oldest_since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.oldest_wait_seconds
            .set(oldest.map_or(0.0, |since| since.elapsed().as_secs_f64()));
    }
}

/// `haptic_certificate_expiry_timestamp_seconds{file}`: the `notAfter` of
/// each certificate file in the newest validated bundle (the first
/// certificate of a chain: the one HAProxy presents), as Unix seconds.
#[derive(Debug, Default)]
pub struct CertificateExpiry {
    family: Family<FileLabels, Gauge>,
}

impl CertificateExpiry {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "certificate_expiry_timestamp_seconds",
            "When each certificate HAProxy serves expires (Unix seconds), by its file in the bundle",
            self.family.clone(),
        );
    }

    /// Replaces the figures with those of `bundle`'s certificate files.
    pub fn set_bundle(&self, bundle: &crate::protocol::Bundle) {
        let expiries: BTreeMap<&str, i64> = bundle
            .files
            .iter()
            .filter_map(|file| {
                crate::tls::first_certificate_not_after(&file.content)
                    .map(|not_after| (file.path.as_str(), not_after))
            })
            .collect();
        self.family.clear();
        for (file, not_after) in expiries {
            self.family
                .get_or_create(&FileLabels {
                    file: file.to_owned(),
                })
                .set(not_after);
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AnnotationLabels {
    /// Without its prefix: `rewrite-target`.
    pub annotation: String,
    /// `honoured`, `differs`, `not-honoured` or `invalid`.
    pub verdict: &'static str,
}

/// `haptic_ingress_nginx_annotations{annotation, verdict}`: how many
/// Ingresses served by the `ingress-nginx` library carry each annotation,
/// by what haptic does with it, from the same library output as
/// `haptic migrate report` and the Events.
#[derive(Debug, Default)]
pub struct IngressNginxAnnotations {
    family: Family<AnnotationLabels, Gauge>,
}

impl IngressNginxAnnotations {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "ingress_nginx_annotations",
            "Ingresses served by the ingress-nginx library carrying each annotation, by verdict (honoured, differs, not-honoured, invalid)",
            self.family.clone(),
        );
    }

    /// Replaces the figures with those of a render's report.
    pub fn set(&self, report: &crate::migrate::Report) {
        self.family.clear();
        for ((annotation, verdict), n) in report.counts() {
            self.family
                .get_or_create(&AnnotationLabels {
                    annotation,
                    verdict: verdict.label(),
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
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
        for result in RENDER_RESULTS {
            renders.get_or_create_owned(&ResultLabels { result });
        }
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
        for mode in DEPLOY_MODES {
            deploys.get_or_create_owned(&ModeLabels { mode });
        }
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
        let fleet_failed_pods = Gauge::default();
        registry.register(
            "fleet_failed_pods",
            "HAProxy pods whose last push failed: the agent was unreachable or refused the render",
            fleet_failed_pods.clone(),
        );
        let isolations = Counter::default();
        registry.register(
            "isolations",
            "Refused renders isolated to the objects they failed with (their changes withheld, the rest deployed)",
            isolations.clone(),
        );
        let isolation_probes = Histogram::new(exponential_buckets(1.0, 2.0, 7));
        registry.register(
            "isolation_probes",
            "Renders validated by one isolation",
            isolation_probes.clone(),
        );
        let isolation_seconds = seconds_histogram();
        registry.register(
            "isolation_duration_seconds",
            "Time from a refused render to its isolated, accepted one",
            isolation_seconds.clone(),
        );
        let objects_withheld = Gauge::default();
        registry.register(
            "objects_withheld",
            "Objects whose change a render failed with, withheld until they change again (the version deployed before, or nothing for a new object); each has a Warning Event (ObjectRefused)",
            objects_withheld.clone(),
        );
        let gates = GateWaits::default();
        gates.register(&mut registry);
        let certificates = CertificateExpiry::default();
        certificates.register(&mut registry);
        let ingress_nginx_annotations = IngressNginxAnnotations::default();
        ingress_nginx_annotations.register(&mut registry);
        let memory = MemoryGauges::default();
        memory.register(&mut registry);
        let seed = SeedPhases::default();
        seed.register(&mut registry);
        Self {
            seed,
            isolations,
            isolation_probes,
            isolation_seconds,
            objects_withheld,
            fleet_failed_pods,
            gates,
            certificates,
            ingress_nginx_annotations,
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
    /// Exports each library's error counter at 0, so its first error is an
    /// increase.
    pub fn init_libraries<'a>(&self, libraries: impl IntoIterator<Item = &'a str>) {
        for library in libraries {
            self.library_errors.get_or_create_owned(&LibraryLabels {
                library: library.to_owned(),
            });
        }
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        self.memory
            .resident_bytes
            .set(i64::try_from(resident_bytes()).unwrap_or(i64::MAX));
        self.gates.refresh();
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests;
