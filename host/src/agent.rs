//! `haptic agent`: the process beside HAProxy in every proxy pod. The
//! controller decides what every pod should run; the agent applies it to
//! its HAProxy by the cheapest correct means and reports, from HAProxy
//! itself, what every live worker routes per.
//!
//! Process model (a sidecar): HAProxy runs in master-worker mode in its own
//! container, started by [`launch`] (`haptic haproxy`) from the last applied
//! files; the agent reaches it through the shared configuration directory
//! and HAProxy's sockets, and is never its parent. An agent restart, even a
//! `kill -9`, leaves HAProxy, its configuration and its connections alone;
//! an HAProxy restart starts from `current/` on disk, which only ever holds
//! a validated bundle.
//!
//! What the controller and the agent say to each other (the API's types,
//! the apply plan, runtime commands, the client, the API's TLS) is
//! [`crate::protocol`], which both import.
//!
//! - [`haproxy`]: the master CLI and the worker stats socket.
//! - [`disk`]: the configuration directory, written atomically.
//! - [`applier`]: one apply at a time; what each worker runs.
//! - [`server`], [`metrics`]: the HTTP API and its metrics.
//! - [`launch`]: `haptic haproxy`, HAProxy's own container entry point.
//!
//! # Certificates
//!
//! A bundle's certificate files (chain + key, flagged
//! [`crate::protocol::BundleFile::secret`]) are written 0600 in 0700 directories, and never
//! appear in a log line, an error, Debug output, a metric or `/v1/state`
//! ([`crate::protocol::wire::holds_private_key`] is the one rule, applied whatever the
//! flag says). When a bundle changes only the content of certificate files
//! the current worker loaded, they are replaced at runtime, in the same
//! plan as server and map changes; a new certificate file or a changed
//! crt-list reloads. Measured on HAProxy 2.6.12 (Debian), pinned by
//! `tests/agent/certificates.rs`:
//!
//! - `show ssl cert` lists loaded files by the name the configuration or
//!   crt-list wrote, verbatim: `certs/a.pem`, `./certs/a.pem`, an absolute
//!   path, `dir/a.pem` for `crt dir/`. One file under two spellings is two
//!   stores, and a command must use the listed spelling: `set ssl cert
//!   ./certs/a.pem` for a store listed as `certs/a.pem` answers `Can't
//!   replace a certificate which is not referenced by the configuration!`.
//! - `set ssl cert <name> <<` + the PEM (chain and key, either order) +
//!   an empty line answers `Transaction created for certificate <name>!`;
//!   `commit ssl cert <name>` answers `Committing <name>.` + `Success!`,
//!   and from then on new handshakes get the new certificate.
//!   `set` + `commit` + `abort` on one connection took 1.5 ms (p50, 7.3 ms
//!   max, 40 rotations of one P-256 certificate); a whole apply (request
//!   in -> answer) 8.8 ms p50 / 41 ms p99, and a new TLS handshake
//!   presented the new certificate 12.3 ms p50 / 66 ms p99 after the
//!   request went in (`make bench-agent`, 2 cores at load 8). The first
//!   handshake after the apply answers gets it.
//! - A payload ends at its first empty line and what follows is read as
//!   commands, so empty lines between PEM blocks are dropped; one inside a
//!   block, or CRLF line ends, make the plan a reload. HAProxy reads a
//!   command and its payload into one 16 kB buffer: 16,235 bytes were
//!   taken, 16,479 made it close the connection without an answer, so a
//!   file over 14 KiB reloads.
//! - Refusals, none of which echoes the payload: a certificate that does
//!   not parse fails at `set` (`unable to load certificate from file
//!   '<name>'.` / `Can't load the payload`); a key that does not match is
//!   taken by `set` and refused by `commit` (`inconsistencies between
//!   private key and certificate loaded '<name>'.` / `Can't commit
//!   <name>!`). Either way the agent falls back to the validated reload,
//!   which `haproxy -c` refuses with the same words: the old certificate
//!   keeps serving and the error names the file.
//! - One transaction exists at a time, process-wide, and outlives its
//!   connection: a refused commit leaves it open, and `set ssl cert B`
//!   while A's is open updates A's (answering `Transaction updated for
//!   certificate A!`). So the agent checks that each answer names its
//!   file, ends every rotation with `abort ssl cert <name>` (after a
//!   commit: `No ongoing transaction!`), and first aborts a leftover one
//!   (listed by `show ssl cert` under `# transaction` as `*<name>`).

pub mod applier;
pub mod disk;
pub mod haproxy;
pub mod launch;
pub mod metrics;
pub mod server;
pub mod spoa;
pub mod stop;

pub use applier::{Applier, ApplyError, Limits};

use std::path::{Path, PathBuf};

/// The sockets' default paths inside the configuration directory, shared by
/// `haptic agent` and `haptic haproxy` so the two agree without flags.
pub fn default_master_socket(config_dir: &Path) -> PathBuf {
    config_dir.join("master.sock")
}

/// See [`default_master_socket`].
pub fn default_worker_socket(config_dir: &Path) -> PathBuf {
    config_dir.join("worker.sock")
}
