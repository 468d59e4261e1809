//! Leader election on a `coordination.k8s.io/v1` Lease, with
//! kube-lease-manager (a maintained crate, Lease updates by server-side
//! apply, tolerant of clock skew) doing the protocol.
//!
//! Only the leader deploys and writes status. Its **epoch** is the Lease's
//! `leaseTransitions` as it stood when this replica took the Lease: every
//! acquisition increments it, so a later leader always carries a higher
//! epoch than any earlier one, which is what the agents' fencing check
//! needs: a deposed leader's late push carries an older epoch and is refused.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use thiserror::Error;

/// Why leadership could not be taken or kept.
#[derive(Debug, Error)]
pub enum LeaderError {
    #[error(
        "the Lease {namespace}/{name}: {source}; check the controller's RBAC (get, create, update, patch on leases)"
    )]
    Lease {
        namespace: String,
        name: String,
        #[source]
        source: kube_lease_manager::LeaseManagerError,
    },
    #[error("reading the Lease {namespace}/{name}: {source}")]
    Read {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// Where the Lease is and who competes for it.
#[derive(Debug, Clone)]
pub struct ElectionSettings {
    pub namespace: String,
    pub lease_name: String,
    /// This replica (the pod name).
    pub identity: String,
    /// How long a leader that stopped renewing keeps the Lease.
    pub duration: Duration,
    /// How long before expiry the leader renews.
    pub grace: Duration,
}

/// Leadership held, with its fencing epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leadership {
    pub epoch: u64,
}

/// One replica's side of the election.
pub struct Elector {
    manager: LeaseManager,
    leases: Api<Lease>,
    settings: ElectionSettings,
}

impl std::fmt::Debug for Elector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elector")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Elector {
    pub async fn new(
        client: kube::Client,
        settings: ElectionSettings,
    ) -> Result<Self, LeaderError> {
        let manager = LeaseManagerBuilder::new(client.clone(), &settings.lease_name)
            .with_namespace(&settings.namespace)
            .with_identity(&settings.identity)
            .with_duration(settings.duration.as_secs().max(1))
            .with_grace(settings.grace.as_secs().max(1))
            .with_field_manager("haptic-leader-election")
            .build()
            .await
            .map_err(|source| lease_error(&settings, source))?;
        Ok(Self {
            manager,
            leases: Api::namespaced(client, &settings.namespace),
            settings,
        })
    }

    /// Waits until this replica holds the Lease, and returns the epoch.
    pub async fn acquire(&self) -> Result<Leadership, LeaderError> {
        loop {
            let leading = self.changed().await?;
            if !leading {
                continue;
            }
            let lease = self
                .leases
                .get(&self.settings.lease_name)
                .await
                .map_err(|source| LeaderError::Read {
                    namespace: self.settings.namespace.clone(),
                    name: self.settings.lease_name.clone(),
                    source,
                })?;
            let spec = lease.spec.unwrap_or_default();
            // Another replica may have taken it in between; then wait again.
            if spec.holder_identity.as_deref() == Some(self.settings.identity.as_str()) {
                let epoch = u64::try_from(spec.lease_transitions.unwrap_or(0)).unwrap_or(0);
                tracing::info!(identity = %self.settings.identity, epoch, "leading");
                return Ok(Leadership { epoch });
            }
        }
    }

    /// Renews the Lease while leading; returns when leadership is lost
    /// (another replica took it, or renewing failed past the Lease's term).
    pub async fn lost(&self) -> Result<(), LeaderError> {
        loop {
            let leading = self.changed().await?;
            if !leading {
                tracing::warn!(identity = %self.settings.identity, "lost the Lease");
                return Ok(());
            }
        }
    }

    /// Renews or waits, until this replica's leadership changes; whether
    /// it leads now.
    async fn changed(&self) -> Result<bool, LeaderError> {
        self.manager
            .changed()
            .await
            .map_err(|source| lease_error(&self.settings, source))
    }

    /// Gives the Lease up (on shutdown), so a follower takes over at once.
    pub async fn release(&self) -> Result<(), LeaderError> {
        self.manager
            .release()
            .await
            .map_err(|source| lease_error(&self.settings, source))
    }
}

fn lease_error(
    settings: &ElectionSettings,
    source: kube_lease_manager::LeaseManagerError,
) -> LeaderError {
    LeaderError::Lease {
        namespace: settings.namespace.clone(),
        name: settings.lease_name.clone(),
        source,
    }
}
