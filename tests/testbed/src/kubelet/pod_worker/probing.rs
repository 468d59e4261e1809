//! Probing a started container: readiness and liveness loops, their
//! verdicts, and the extra probes kubelet runs on pod syncs.

use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::super::probe::{self, Tracker};
use super::{Event, RELIST, Worker};

impl Worker {
    /// Starts the probe loops of a just-started container instance, and
    /// schedules the pod sync PLEG would make at its next relist.
    pub(super) fn start_probes(&mut self, idx: usize, instance: u64, env: &[(String, String)]) {
        let ip = self.ip;
        let slot = &mut self.slots[idx];
        slot.tracker = Tracker::default();
        slot.live_tracker = Tracker::passing();
        slot.kill_at = None;
        slot.trigger = None;
        if let Some(spec) = slot.probe.clone() {
            let (env, events) = (env.to_vec(), self.events.clone());
            let trigger = Arc::new(Notify::new());
            slot.trigger = Some(trigger.clone());
            self.tasks.spawn(async move {
                tokio::time::sleep(spec.initial_delay).await;
                loop {
                    let ok = probe::attempt(&spec, ip, &env).await;
                    if events.send(Event::Probed { idx, instance, ok }).is_err() {
                        return;
                    }
                    tokio::select! {
                        () = tokio::time::sleep(spec.period) => {}
                        () = trigger.notified() => {}
                    }
                }
            });
        }
        if let Some(spec) = slot.liveness.clone() {
            let (env, events) = (env.to_vec(), self.events.clone());
            self.tasks.spawn(async move {
                tokio::time::sleep(spec.initial_delay).await;
                loop {
                    let ok = probe::attempt(&spec, ip, &env).await;
                    if events.send(Event::Live { idx, instance, ok }).is_err() {
                        return;
                    }
                    tokio::time::sleep(spec.period).await;
                }
            });
        }
        let since = Instant::now().saturating_duration_since(self.shared.epoch);
        let ticks = since.as_millis() / RELIST.as_millis() + 1;
        let tick = self.shared.epoch + RELIST * u32::try_from(ticks).unwrap_or(u32::MAX);
        self.relist_at = Some(self.relist_at.map_or(tick, |t| t.min(tick)));
    }

    pub(super) fn readiness_result(&mut self, idx: usize, instance: u64, ok: bool) {
        let slot = &mut self.slots[idx];
        if slot.instance == instance
            && slot.process.is_some()
            && let Some(spec) = &slot.probe
        {
            let before = slot.view.ready;
            slot.view.ready = slot.tracker.record(spec, ok);
            // A changed result syncs the pod (kubelet's readinessManager updates).
            if before != slot.view.ready {
                self.sync_probes();
            }
        }
    }

    /// kubelet kills a container whose liveness probe fails (SIGTERM, then
    /// SIGKILL after the probe's or the pod's grace period); the exit then
    /// follows the restart policy. Liveness stops once the pod terminates.
    pub(super) fn liveness_result(&mut self, idx: usize, instance: u64, ok: bool) {
        let pod_grace = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .and_then(|s| u64::try_from(s).ok())
            .unwrap_or(30);
        let terminating = self.terminating.is_some();
        let name = self.name();
        let slot = &mut self.slots[idx];
        let Some(spec) = &slot.liveness else {
            return;
        };
        if slot.instance != instance || terminating || slot.kill_at.is_some() {
            return;
        }
        if !slot.live_tracker.record(spec, ok)
            && let Some(p) = &slot.process
        {
            let grace = spec
                .termination_grace
                .unwrap_or(Duration::from_secs(pod_grace));
            tracing::info!(pod = %name, container = %slot.view.name, "failed liveness probe, will be restarted");
            p.signal_main(Signal::SIGTERM);
            slot.kill_at = Some(Instant::now() + grace);
        }
    }

    /// A pod sync: kubelet probes every running, not-ready container at once.
    pub(super) fn sync_probes(&self) {
        for slot in &self.slots {
            if slot.process.is_some()
                && !slot.view.ready
                && let Some(t) = &slot.trigger
            {
                t.notify_one();
            }
        }
    }
}
