//! Stopping a deleted pod: preStop hooks, SIGTERM, and after the containers
//! exit the terminal status and the final delete.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler};

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, Preconditions};
use tokio::time::Instant;

use super::super::status::{self, State, Terminated};
use super::{Event, Worker};
use crate::http;

impl Worker {
    pub(super) fn begin_termination(&mut self) {
        let grace = self
            .pod
            .metadata
            .deletion_grace_period_seconds
            .or_else(|| {
                self.pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
            })
            .unwrap_or(30)
            .max(0);
        tracing::info!(pod = %self.name(), grace, "terminating");
        self.terminating = Some(Instant::now() + Duration::from_secs(grace as u64));
        for idx in 0..self.slots.len() {
            let slot = &mut self.slots[idx];
            slot.restart_at = None;
            if slot.process.is_none() {
                continue;
            }
            let hook = slot
                .spec
                .lifecycle
                .as_ref()
                .and_then(|l| l.pre_stop.clone());
            let (events, instance, ip) = (self.events.clone(), slot.instance, self.ip);
            let container = slot.spec.clone();
            let env = slot
                .launch
                .as_ref()
                .map(|l| l.env.clone())
                .unwrap_or_default();
            self.tasks.spawn(async move {
                if let Some(h) = hook {
                    pre_stop(&h, &container, ip, &env).await;
                }
                let _ = events.send(Event::Term { idx, instance });
            });
        }
    }

    /// Terminal status, then the final delete (for a deleted pod).
    pub(super) async fn finish(&mut self, already_terminal: bool) {
        for slot in &mut self.slots {
            if let State::Terminated(_) = slot.view.state {
                continue;
            }
            slot.view.state =
                State::Terminated(slot.view.last_terminated.clone().unwrap_or_else(|| {
                    Terminated {
                        exit_code: 137,
                        signal: None,
                        reason: "ContainerStatusUnknown".into(),
                        started_at: String::new(),
                        finished_at: status::now(),
                        container_id: String::new(),
                    }
                }));
        }
        if !already_terminal {
            self.write_status().await;
        }
        let uid = self.pod.metadata.uid.clone();
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid,
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let name = self.pod.metadata.name.clone().unwrap_or_default();
        match self.api().delete(&name, &params).await {
            Ok(_) => tracing::info!(pod = %self.name(), "deleted"),
            Err(e) => tracing::info!(pod = %self.name(), "final delete: {e}"),
        }
        self.remove_volumes();
    }

    /// Volumes go with the pod (they hold its secrets); logs stay until the
    /// kubelet's state directory goes, for whoever debugs a failed test.
    pub(super) fn remove_volumes(&self) {
        let _ = std::fs::remove_dir_all(self.dir.join("volumes"));
    }
}

/// Runs a preStop hook (sleep, httpGet, or exec with the container's
/// environment); its outcome does not matter, only that SIGTERM waits for it.
async fn pre_stop(
    hook: &LifecycleHandler,
    container: &Container,
    ip: Ipv4Addr,
    env: &[(String, String)],
) {
    if let Some(s) = &hook.sleep {
        tokio::time::sleep(Duration::from_secs(u64::try_from(s.seconds).unwrap_or(0))).await;
    } else if let Some(g) = &hook.http_get {
        let port = match &g.port {
            IntOrString::Int(n) => u16::try_from(*n).unwrap_or(0),
            IntOrString::String(name) => container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .and_then(|p| u16::try_from(p.container_port).ok())
                .unwrap_or(0),
        };
        let path = g.path.clone().unwrap_or_else(|| "/".into());
        let addr = SocketAddr::from((ip, port));
        if let Err(e) = http::get(addr, None, &path, &[], Duration::from_secs(30)).await {
            tracing::info!(container = %container.name, "preStop httpGet: {e}");
        }
    } else if let Some(argv) = hook.exec.as_ref().and_then(|e| e.command.as_ref())
        && !argv.is_empty()
    {
        let status = super::super::container::exec_command(argv, env)
            .status()
            .await;
        if let Err(e) = status {
            tracing::info!(container = %container.name, "preStop exec: {e}");
        }
    }
}
