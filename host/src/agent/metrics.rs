//! The agent's Prometheus metrics (prometheus-client), prefixed `haptic_agent_`.
//!
//! What to alert on: `applies_total{result="failed"}` rising (a pod that
//! cannot take configurations), `workers{role="leaving"}` staying above zero
//! (a long-lived connection holding an old configuration, which also holds
//! the readiness gate), and `refused_bundles_total` (a controller sending
//! what this pod will not take).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::spoa::SpoaMetrics;
use crate::protocol::wire::ApplyMode;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApplyLabels {
    /// [`crate::protocol::wire::ApplyMode::as_str`].
    pub mode: &'static str,
    /// `applied` or `failed`.
    pub result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModeLabels {
    pub mode: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// The error code of the refusal (`bad-id`, `stale-token`, `refused`, ...).
    pub reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RoleLabels {
    pub role: &'static str,
}

/// Every metric the agent exports, registered once.
#[derive(Debug)]
pub struct Metrics {
    pub registry: Registry,
    pub applies: Family<ApplyLabels, Counter>,
    pub apply_seconds: Family<ModeLabels, Histogram>,
    pub refused: Family<ReasonLabels, Counter>,
    pub workers: Family<RoleLabels, Gauge>,
    /// The SPOA's, `haptic_spoa_*`.
    pub spoa: SpoaMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut root = Registry::default();
        let spoa = SpoaMetrics::register(root.sub_registry_with_prefix("haptic_spoa"));
        let registry = root.sub_registry_with_prefix("haptic_agent");
        let applies = Family::<ApplyLabels, Counter>::default();
        registry.register(
            "applies",
            "Bundles applied, by the mode used and the result",
            applies.clone(),
        );
        let apply_seconds = Family::<ModeLabels, Histogram>::new_with_constructor(|| {
            // 0.5 ms .. ~16 s
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        registry.register(
            "apply_duration_seconds",
            "Time from an apply request to the current worker running the bundle, by mode",
            apply_seconds.clone(),
        );
        let refused = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "refused_bundles",
            "Apply requests refused before anything changed, by reason",
            refused.clone(),
        );
        let workers = Family::<RoleLabels, Gauge>::default();
        registry.register(
            "workers",
            "Live HAProxy worker processes, current or leaving after a reload",
            workers.clone(),
        );
        // Every label value known up front is exported at 0 from the start:
        // a series that appears only with its first increase hides that
        // increase from `rate()` and from alerts.
        for mode in [ApplyMode::Unchanged, ApplyMode::Runtime, ApplyMode::Reload] {
            let mode = mode.as_str();
            for result in ["applied", "failed"] {
                applies.get_or_create_owned(&ApplyLabels { mode, result });
            }
            apply_seconds.get_or_create_owned(&ModeLabels { mode });
        }
        for role in ["current", "leaving"] {
            workers.get_or_create_owned(&RoleLabels { role });
        }
        Self {
            registry: root,
            applies,
            apply_seconds,
            refused,
            workers,
            spoa,
        }
    }
}

impl Metrics {
    /// Every metric, with `refused_bundles_total` exported at 0 for each of
    /// `reasons` (the applier's error codes) from the start.
    pub fn with_refusal_reasons(reasons: &[&str]) -> Self {
        let metrics = Self::default();
        for reason in reasons {
            metrics.refused.get_or_create_owned(&ReasonLabels {
                reason: (*reason).to_owned(),
            });
        }
        metrics
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
