//! `process-kubelet`: the test bed's kubelet for a person.
//!
//! ```text
//! process-kubelet [--node NAME] [--node-index 0-15] [--label KEY=VALUE]...
//!                 [--program IMAGE=PATH[ ARG...]]... [--state-dir DIR]
//!     Creates a pod network, starts a control plane and the kubelet inside it,
//!     prints how to reach them, runs until Ctrl-C.
//! process-kubelet --kubeconfig FILE [same options]
//!     Runs only the kubelet against FILE's cluster, in the current network
//!     namespace (which must have the pod CIDR local, e.g. one made by the
//!     first form: `nsenter -t PID -n process-kubelet --kubeconfig ...`).
//! ```
//!
//! `haptic.test/echo` maps to the `echo-server` next to this binary unless
//! `--program` says otherwise.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use haptic_testbed::control_plane::{ControlPlane, ControlPlaneOptions};
use haptic_testbed::kubelet::bed::{self, NODE_NAME};
use haptic_testbed::kubelet::{ECHO_IMAGE, Kubelet, KubeletConfig, NODE_IP, PodNetwork, Program};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::signal::unix::{SignalKind, signal};

const QUIET: &str = "info,kube_client::client::builder=off,kube_client::client::tls=error";

struct Options {
    kubeconfig: Option<PathBuf>,
    config: KubeletConfig,
}

fn options() -> anyhow::Result<Options> {
    let mut kubeconfig = None;
    let mut config =
        KubeletConfig::new(NODE_NAME).program(ECHO_IMAGE, Program::new(bed::echo_server_path()));
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .with_context(|| format!("{arg} needs a value; see --help"))
        };
        match arg.as_str() {
            "--kubeconfig" => kubeconfig = Some(PathBuf::from(value()?)),
            "--node" => config.node_name = value()?,
            "--state-dir" => config.state_dir = Some(PathBuf::from(value()?)),
            "--node-index" => {
                let v = value()?;
                config.node_index = v
                    .parse()
                    .ok()
                    .filter(|i| *i < 16)
                    .with_context(|| format!("--node-index {v:?}: expected 0 to 15"))?;
            }
            "--label" => {
                let v = value()?;
                let (k, val) = v
                    .split_once('=')
                    .with_context(|| format!("--label {v:?}: expected KEY=VALUE"))?;
                config = config.label(k, val);
            }
            "--program" => {
                let spec = value()?;
                let (image, command) = spec
                    .split_once('=')
                    .with_context(|| format!("--program {spec:?}: expected IMAGE=PATH[ ARG...]"))?;
                let mut words = command.split_whitespace();
                let path = words
                    .next()
                    .with_context(|| format!("--program {spec:?}: no path"))?;
                config = config.program(image, Program::new(path).args(words));
            }
            "--help" | "-h" => {
                // The module docs are the usage text.
                let usage: Vec<&str> = include_str!("process-kubelet.rs")
                    .lines()
                    .map_while(|l| l.strip_prefix("//!"))
                    .map(|l| l.strip_prefix(' ').unwrap_or(l))
                    .filter(|l| !l.starts_with("```"))
                    .collect();
                println!("{}", usage.join("\n"));
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}; see --help"),
        }
    }
    Ok(Options { kubeconfig, config })
}

async fn until_stopped() -> anyhow::Result<()> {
    let mut term = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    eprintln!("stopping");
    Ok(())
}

async fn kubelet_only(path: PathBuf, config: KubeletConfig) -> anyhow::Result<()> {
    let kubeconfig =
        Kubeconfig::read_from(&path).with_context(|| format!("reading {}", path.display()))?;
    let client_config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .with_context(|| format!("loading {}", path.display()))?;
    let server = client_config.cluster_url.to_string();
    let client = kube::Client::try_from(client_config).context("building the client")?;
    let config = config.api_server_url(&server)?;
    let kubelet = Kubelet::start(client, config).await?;
    eprintln!(
        "process kubelet {} serving {server}; pod files in {}",
        kubelet.node_name(),
        kubelet.state_dir().display()
    );
    until_stopped().await
}

async fn whole_bed(config: KubeletConfig) -> anyhow::Result<()> {
    let plane = ControlPlane::start_with(ControlPlaneOptions {
        apiserver_address: Some(NODE_IP.into()),
        ..ControlPlaneOptions::default()
    })
    .await
    .context("starting the control plane")?;
    let config = config.api_server_url(plane.server_url())?;
    let kubelet = Kubelet::start(plane.admin_client(), config).await?;
    let pid = std::process::id();
    eprintln!(
        "control plane at {} and process kubelet {} up (pod files in {})",
        plane.server_url(),
        kubelet.node_name(),
        kubelet.state_dir().display()
    );
    eprintln!("Everything lives in this process's network namespace; in another shell:");
    println!("export KUBECONFIG={}", plane.kubeconfig_path().display());
    println!(
        "alias kubectl='nsenter -t {pid} -n {}'",
        plane.bin_dir().join("kubectl").display()
    );
    println!("alias podnet='nsenter -t {pid} -n'   # e.g. podnet curl http://10.244.0.2:8080/");
    eprintln!("Ctrl-C stops it.");
    until_stopped().await?;
    drop(kubelet);
    plane.stop().await;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| QUIET.into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let opts = options()?;
    match opts.kubeconfig {
        Some(path) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("building the runtime")?
            .block_on(kubelet_only(path, opts.config)),
        None => PodNetwork::create()?.block_on(whole_bed(opts.config))?,
    }
}
