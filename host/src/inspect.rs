//! Operators' tools that explain rather than act: `haptic status` ([`rollout`]: why a
//! rollout waits, from the controller's `/debug` reports) and `haptic diff`
//! (what a change of manifests or values would do to HAProxy).

pub mod diff;
pub mod rollout;
