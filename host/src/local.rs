//! `haptic run`: the whole data path on one machine. The controller (the
//! same render loop, deploy path and status applier as in a cluster) reads a
//! directory of manifests instead of the Kubernetes API and deploys to local
//! HAProxy processes, each with its own `haptic agent`, exactly as it
//! deploys to HAProxy pods.
//!
//! - Proxies: `--proxies N` pairs of `haptic haproxy` and `haptic agent`
//!   (this binary, as child processes) in a scratch directory. One bundle
//!   serves them all, so the HTTP and health ports come from the
//!   environment: `base` binds `"127.0.0.1:${HAPTIC_HTTP_PORT-8080}"` (quoted: HAProxy expands a default only inside double quotes) and
//!   each HAProxy gets its own port (8080, 8081, ... by default).
//! - Status: the patches the controller would apply land on the in-memory
//!   objects, one log line per change, and `GET /status` shows them.
//! - `--demo-backends`: an echo server on every endpoint address of the
//!   manifests (loopback addresses), so the example answers by itself.
//! - Ctrl-C stops everything: the children are killed with the run.
//!
//! Its parts reach the controller through [`Parts`]: [`files`] (the file
//! source and the in-memory status, also `/status`'s view) and [`events`]
//! (failure events as log lines).

mod events;
pub mod files;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::process::{Child, Command};

use crate::controller::fleet::{FleetSettings, ProxyPod};
use crate::controller::proxies::ProxySettings;
use crate::controller::run::{Parts, Settings, State};
use crate::echo;
use crate::engine::Engine;
use crate::status_writes::StatusApplier;
use crate::values::Values;
use events::LogEvents;
use files::LocalStatus;

/// What `haptic run` was asked for.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub inputs: Vec<PathBuf>,
    pub values: Values,
    /// Local HAProxy instances.
    pub proxies: usize,
    /// The first HAProxy's HTTP port; the others count up from it.
    pub http_port: u16,
    pub demo_backends: bool,
    /// Scratch directory (default: a temporary one, removed at exit).
    pub dir: Option<PathBuf>,
    /// `/status`, `/metrics`, `/healthz`, `/readyz`.
    pub listen: SocketAddr,
    /// Where the render tells HAProxy the SPOA is (`--spoa-address`): the
    /// first proxy's agent serves it for every local HAProxy, since they
    /// share one render and one machine.
    pub spoa_address: String,
}

/// `--spoa-listen` of the agents that serve no SPOA.
const SPOA_OFF: &str = "none";

/// A local HAProxy's HTTPS port: 8443 beside 8080, counting up alike.
fn https_port(http_port: u16) -> u16 {
    http_port.saturating_add(363)
}

/// The values `haptic run` needs unless the user set them: local ports.
pub fn local_values(mut values: Values) -> anyhow::Result<Values> {
    let libraries = values.template_libraries();
    let set = |path: &[&str]| {
        let mut node = libraries.get(path[0]);
        for key in &path[1..] {
            node = node.and_then(|n| n.get(*key));
        }
        node.is_some()
    };
    if !set(&["base", "frontends", "http", "bind"]) {
        values.set(
            "templateLibraries.base.frontends.http.bind",
            r#"'"127.0.0.1:${HAPTIC_HTTP_PORT-8080}"'"#,
        )?;
    }
    if !set(&["base", "frontends", "healthz", "bind"]) {
        values.set(
            "templateLibraries.base.frontends.healthz.bind",
            r#"'"127.0.0.1:${HAPTIC_HEALTHZ_PORT-9080}"'"#,
        )?;
    }
    // gateway-api (when enabled): Gateways on 127.0.0.1, each listener on
    // its own port, as no Service maps ports here.
    if !set(&["gatewayApi", "bindAddress"]) {
        values.set("templateLibraries.gatewayApi.bindAddress", "127.0.0.1")?;
    }
    if !set(&["gatewayApi", "ports", "sameAsListener"]) {
        values.set("templateLibraries.gatewayApi.ports.sameAsListener", "true")?;
    }
    if !set(&["ingress", "tls", "bind"]) {
        values.set(
            "templateLibraries.ingress.tls.bind",
            r#"'"127.0.0.1:${HAPTIC_HTTPS_PORT-8443}"'"#,
        )?;
    }
    Ok(values)
}

/// One local HAProxy and its agent.
struct LocalProxy {
    http_port: u16,
    haproxy: Child,
    agent: Child,
}

/// Runs until Ctrl-C or SIGTERM.
pub async fn run_locally(
    options: RunOptions,
    engine: Engine,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let temp;
    let dir = match &options.dir {
        Some(dir) => dir.clone(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("haptic-run-")
                .tempdir()
                .context("creating a scratch directory")?;
            temp.path().to_path_buf()
        }
    };
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("creating the scratch directory {}", dir.display()))?;
    let token = random_token()?;
    let token_file = dir.join("agent-token");
    std::fs::write(&token_file, &token).context("writing the agents' token")?;

    let mut backends = Vec::new();
    if options.demo_backends {
        // Loopback endpoints only: this machine's network is shared.
        let endpoints = echo::endpoints(&options.inputs)?;
        for addr in endpoints
            .iter()
            .map(|e| e.addr)
            .filter(|a| a.ip().is_loopback())
        {
            match tokio::net::TcpListener::bind(addr).await {
                Ok(listener) => backends.push(tokio::spawn(echo::serve(listener))),
                Err(error) => tracing::warn!(%addr, %error, "no demo backend on this endpoint"),
            }
        }
        eprintln!("haptic run: {} demo backends", backends.len());
    }

    let exe = std::env::current_exe().context("finding the haptic binary")?;
    let mut proxies = Vec::new();
    let mut members = Vec::new();
    let mut listing = Vec::new();
    for index in 0..options.proxies.max(1) {
        let offset = u16::try_from(index).unwrap_or(u16::MAX);
        let http_port = options.http_port.saturating_add(offset);
        let agent_port = free_port().context("finding a free port for an agent")?;
        let spoa_listen = if index == 0 {
            options.spoa_address.as_str()
        } else {
            SPOA_OFF
        };
        let ports = ProxyPorts {
            http: http_port,
            agent: agent_port,
        };
        let proxy = start_proxy(&exe, &dir, index, ports, spoa_listen, &token_file)
            .with_context(|| format!("starting local HAProxy {index}"))?;
        let endpoint = format!("http://127.0.0.1:{agent_port}");
        listing.push(serde_json::json!({
            "name": format!("haproxy-{index}"), "httpPort": http_port,
            "httpsPort": https_port(http_port), "agent": endpoint,
            "configDir": dir.join(format!("haproxy-{index}")),
        }));
        members.push(ProxyPod {
            name: format!("local/haproxy-{index}"),
            endpoint,
        });
        proxies.push(proxy);
    }
    // For scripts and tests: where each proxy and its agent are.
    std::fs::write(
        dir.join("proxies.json"),
        serde_json::Value::Array(listing).to_string(),
    )
    .context("writing proxies.json")?;

    let status = Arc::new(LocalStatus::default());
    let state = Arc::new(State::default());
    let settings = Settings {
        identity: "haptic-run".into(),
        proxies: ProxySettings {
            namespace: "local".into(),
            selector: "(local processes)".into(),
            scheme: "http",
            agent_port: 0,
        },
        fleet: FleetSettings {
            token: Some(token),
            timeout: Duration::from_secs(35),
            ..FleetSettings::default()
        },
        election: None,
        listen: Some(options.listen),
        convergence_wait: Duration::from_secs(30),
        resync: Duration::from_secs(30),
    };
    let inputs = options.inputs.clone();
    let source_status = status.clone();
    let parts = Parts {
        source: Box::new(move |targets, events| {
            files::spawn(inputs, source_status, targets, events)
        }),
        proxies: Box::new(move |out| {
            tokio::spawn(async move {
                let _ = out.send(Some(members));
                // Static: the sender lives as long as the run.
                std::future::pending::<()>().await;
            })
        }),
        status: StatusApplier::with_writer(status.clone()),
        owned: None,
        events: Arc::new(LogEvents),
        elector: None,
        status_view: Some(status.clone()),
    };
    let ports: Vec<String> = proxies
        .iter()
        .map(|p| format!("{} (HTTPS {})", p.http_port, https_port(p.http_port)))
        .collect();
    eprintln!(
        "haptic run: {} HAProxy on 127.0.0.1 port {}; status at http://{}/status; Ctrl-C stops everything",
        proxies.len(),
        ports.join(", "),
        options.listen
    );
    if let Some(first) = proxies.first() {
        eprintln!(
            "  try: curl -H 'Host: shop.example.com' localhost:{}/   then edit a file under {} and watch it redeploy",
            first.http_port,
            options
                .inputs
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    let result = crate::controller::run::run_with(parts, engine, settings, state, shutdown).await;
    for backend in backends {
        backend.abort();
    }
    for mut proxy in proxies {
        stop(&mut proxy.agent).await;
        stop(&mut proxy.haproxy).await;
    }
    result
}

/// A port nothing listens on now (the kernel's pick).
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A local proxy's ports: HAProxy's HTTP bind and its agent's API.
struct ProxyPorts {
    http: u16,
    agent: u16,
}

fn start_proxy(
    exe: &Path,
    dir: &Path,
    index: usize,
    ports: ProxyPorts,
    spoa_listen: &str,
    token_file: &Path,
) -> anyhow::Result<LocalProxy> {
    let ProxyPorts {
        http: http_port,
        agent: agent_port,
    } = ports;
    let config_dir = dir.join(format!("haproxy-{index}"));
    std::fs::create_dir_all(&config_dir)?;
    let healthz_port = http_port.saturating_add(1000);
    let env = [
        ("HAPTIC_HTTP_PORT", http_port.to_string()),
        ("HAPTIC_HTTPS_PORT", https_port(http_port).to_string()),
        ("HAPTIC_HEALTHZ_PORT", healthz_port.to_string()),
    ];
    let haproxy = Command::new(exe)
        .arg("haproxy")
        .arg("--config-dir")
        .arg(&config_dir)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .kill_on_drop(true)
        .spawn()
        .context("starting `haptic haproxy`")?;
    let agent = Command::new(exe)
        .arg("agent")
        .arg("--config-dir")
        .arg(&config_dir)
        .arg("--listen")
        .arg(format!("127.0.0.1:{agent_port}"))
        .arg("--token-file")
        .arg(token_file)
        .arg("--spoa-listen")
        .arg(spoa_listen)
        // Everything is on this machine, auth services too.
        .arg("--spoa-allow-loopback")
        // The agent validates with `haproxy -c`, which expands the ports too.
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .kill_on_drop(true)
        .spawn()
        .context("starting `haptic agent`")?;
    Ok(LocalProxy {
        http_port,
        haproxy,
        agent,
    })
}

/// SIGTERM, then SIGKILL after 5 s.
async fn stop(child: &mut Child) {
    if let Some(pid) = child.id() {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        if tokio::time::timeout(Duration::from_secs(5), child.wait())
            .await
            .is_ok()
        {
            return;
        }
    }
    let _ = child.kill().await;
}

fn random_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .context("reading /dev/urandom for the agents' token")?;
    Ok(hex::encode(bytes))
}
