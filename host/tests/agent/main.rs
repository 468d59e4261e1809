//! `haptic agent` against the real HAProxy on loopback: real sockets, real
//! reloads, real HTTP. Each test is a proxy pod of its own (see `harness`).

mod auth_service;
mod harness;
mod mirror_target;
#[path = "../support/mod.rs"]
mod support;

mod abandoned;
mod applying;
mod certificates;
mod connections;
mod fleet;
mod restarts;
mod security;
mod spoa;
