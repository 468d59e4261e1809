//! The `haptic` binary: one entry point, a subcommand per job.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};

use haptic::agent::{self, disk::ConfigDir, haproxy::Haproxy, server};
use haptic::fixtures::{self, LibraryUnderTest};
use haptic::library::{LibraryRuntime, RuntimeConfig};
use haptic::migrate;
use haptic::offline::{self, Job};
use haptic::protocol::api_tls;
use haptic::tls::{DefaultCertificate, SecretPem};
use haptic::validate::Validator;
use haptic::values::Values;

#[derive(Debug, Parser)]
#[command(
    name = "haptic",
    version,
    about = "Kubernetes ingress controller for HAProxy, configured by WASM template libraries"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Render manifests into a validated haproxy.cfg, its files and planned status patches (no cluster needed).
    Render {
        /// Manifest files or directories (multi-document YAML, as `kubectl apply -f` takes them).
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        #[command(flatten)]
        libraries: LibraryArgs,
        /// Write haproxy.cfg, files and status-patches/ into this directory instead of stdout.
        #[arg(short, long)]
        out: Option<PathBuf>,
        /// Skip `haproxy -c` (not recommended: the result may not load).
        #[arg(long)]
        no_validate: bool,
    },
    /// The whole data path on this machine: the controller on a directory of
    /// manifests (watched for edits), local HAProxy processes with their
    /// agents, status shown at /status. Ctrl-C stops everything.
    Run(Box<RunArgs>),
    /// Run the controller: watch what the enabled libraries declare, render,
    /// validate with `haproxy -c`, deploy to every HAProxy pod's agent, and
    /// write status (the readiness gate) by server-side apply.
    Controller(Box<ControllerArgs>),
    /// Serve `haproxy -c` to the controller on a Unix socket: the chart runs
    /// it in a container of the controller pod that has no service-account
    /// token, since HAProxy runs code it parses (`lua-load`).
    Validator {
        /// The socket to listen on (an emptyDir shared with the controller).
        #[arg(long, env = "HAPTIC_VALIDATOR_SOCKET")]
        socket: PathBuf,
    },
    /// Serve the agent API beside HAProxy in a proxy pod: apply bundles from
    /// the controller (runtime commands or a reload), report what every live
    /// worker runs. HAProxy itself is started by `haptic haproxy`.
    Agent(AgentArgs),
    /// HAProxy's container entry point: prepare the configuration directory
    /// (the last applied bundle, or a bootstrap one), then exec HAProxy in
    /// master-worker mode with its master socket.
    Haproxy {
        #[command(flatten)]
        paths: ProxyPaths,
        /// Extra arguments passed to haproxy as they are.
        #[arg(last = true)]
        extra: Vec<String>,
    },
    /// HAProxy's preStop hook: wait --delay seconds (load balancers stop
    /// sending), send HAProxy SIGUSR1 (soft stop: workers finish their
    /// connections) and return once it has exited.
    SoftStop {
        /// Seconds to wait before stopping.
        #[arg(long, default_value = "0", value_name = "SECONDS")]
        delay: u64,
        /// HAProxy's process id (1: the container's main process).
        #[arg(long, default_value = "1")]
        pid: i32,
    },
    /// Why a rollout waits: the HAProxy fleet (each pod's workers and the
    /// render each routes per) and the readiness gates waiting, with what
    /// they wait for, from the controller's `/debug/fleet` and `/debug/gates`.
    /// Exits 1 when a gate has waited longer than --warn-after.
    Status(StatusArgs),
    /// What a change would do: renders OLD and NEW (manifest files or
    /// directories, each with its own values if given) and prints a unified
    /// diff of haproxy.cfg and every file (key material as changed/unchanged
    /// only), the status patches that change, and whether the agents would
    /// apply it at runtime or need a reload. Exits 1 when anything differs.
    Diff(Box<DiffArgs>),
    /// Moving off ingress-nginx.
    #[command(subcommand)]
    Migrate(MigrateCommand),
    /// Run a template library's fixture tests.
    #[command(after_long_help = fixtures::FORMAT)]
    Test {
        /// A bundled library's name (e.g. `kubernetes-backends`) or the path of a .wasm component.
        library: String,
        /// The directory holding one folder per case (default: `template-libraries/<library>/fixtures`
        /// for bundled ones, `./fixtures` for a .wasm).
        #[arg(long)]
        fixtures: Option<PathBuf>,
    },
    /// Start a template library of your own: a standalone Cargo project (SDK
    /// dependency, pinned toolchain, Makefile, fixtures), or with `--lang
    /// python` a Python module (Makefile, unit test, fixtures), whose `make
    /// test` builds it and passes `haptic test` as written.
    New {
        /// The directory to create; its last component names the library unless --name does.
        dir: PathBuf,
        /// The library's name (kebab-case, e.g. `ip-allow-list`).
        #[arg(long)]
        name: Option<String>,
        /// The language: `rust` (a Cargo project) or `python` (a module built with componentize-py).
        #[arg(long, value_enum, default_value_t)]
        lang: haptic::scaffold::Lang,
        /// The SDK to use: the haptic-sdk crate, or for Python the directory holding `haptic_sdk/`
        /// (default: the SDK of the checkout this haptic was built from).
        #[arg(long)]
        sdk: Option<PathBuf>,
    },
}

/// The paths HAProxy and the agent share (one emptyDir in a pod).
#[derive(Debug, clap::Args)]
struct ProxyPaths {
    /// The configuration directory: bundles, `current/haproxy.cfg`, the agent's state.
    #[arg(
        long,
        env = "HAPTIC_CONFIG_DIR",
        default_value = "/var/lib/haptic/haproxy"
    )]
    config_dir: PathBuf,
    /// HAProxy's master CLI socket (default: `<config-dir>/master.sock`).
    #[arg(long, env = "HAPTIC_MASTER_SOCKET")]
    master_socket: Option<PathBuf>,
    /// The worker's admin stats socket the agent writes into every
    /// configuration (default: `<config-dir>/worker.sock`).
    #[arg(long, env = "HAPTIC_WORKER_SOCKET")]
    worker_socket: Option<PathBuf>,
    /// The haproxy binary (default: `$HAPTIC_HAPROXY`, else `haproxy` on PATH or in /usr/sbin).
    #[arg(long)]
    haproxy: Option<PathBuf>,
}

impl ProxyPaths {
    fn master_socket(&self) -> PathBuf {
        self.master_socket
            .clone()
            .unwrap_or_else(|| agent::default_master_socket(&self.config_dir))
    }

    fn worker_socket(&self) -> PathBuf {
        self.worker_socket
            .clone()
            .unwrap_or_else(|| agent::default_worker_socket(&self.config_dir))
    }

    fn config_dir(&self) -> ConfigDir {
        ConfigDir::new(self.config_dir.clone(), self.worker_socket())
    }

    fn validator(&self) -> Result<Validator> {
        Ok(match &self.haproxy {
            Some(binary) => Validator::new(binary.clone()),
            None => Validator::from_env()?,
        })
    }
}

#[derive(Debug, clap::Args)]
struct StatusArgs {
    /// The controller's metrics port (`kubectl port-forward` it to reach a cluster's).
    #[arg(
        long,
        env = "HAPTIC_CONTROLLER_URL",
        default_value = "http://127.0.0.1:8451"
    )]
    controller: String,
    /// Only this gated pod: what its readiness gate waits for.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pod: Option<String>,
    /// Exit 1 when a gate has waited longer than this many seconds.
    #[arg(long, default_value = "300", value_name = "SECONDS")]
    warn_after: u64,
    /// Print the reports as JSON instead.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum MigrateCommand {
    /// Per Ingress the `ingress-nginx` library serves, each
    /// nginx.ingress.kubernetes.io annotation as honoured, honoured with a
    /// stated difference, not honoured (and why) or invalid, with totals:
    /// the same library output the controller turns into Events and its
    /// haptic_ingress_nginx_annotations metric. Renders (and validates)
    /// exactly as `haptic render`, with the library enabled unless the
    /// values say otherwise.
    Report(Box<MigrateReportArgs>),
}

#[derive(Debug, clap::Args)]
struct MigrateReportArgs {
    /// Manifest files or directories (e.g. `kubectl get ingress,service,endpointslice,ingressclass -A -o yaml`).
    #[arg(required_unless_present = "cluster", conflicts_with = "cluster")]
    inputs: Vec<PathBuf>,
    /// Read the objects from the cluster of the current kubeconfig context
    /// instead (list only, what the enabled libraries watch; nothing is written).
    #[arg(long)]
    cluster: bool,
    #[command(flatten)]
    libraries: LibraryArgs,
}

#[derive(Debug, clap::Args)]
struct DiffArgs {
    /// The manifests as they are (files or directories).
    old: PathBuf,
    /// The manifests as they would be.
    new: PathBuf,
    #[command(flatten)]
    libraries: LibraryArgs,
    /// Values for OLD instead of --values.
    #[arg(long, value_name = "FILE")]
    old_values: Option<PathBuf>,
    /// Values for NEW instead of --values.
    #[arg(long, value_name = "FILE")]
    new_values: Option<PathBuf>,
    /// Skip `haproxy -c` of both renders.
    #[arg(long)]
    no_validate: bool,
}

#[derive(Debug, clap::Args)]
struct AgentArgs {
    #[command(flatten)]
    paths: ProxyPaths,
    /// Address of the API (`/v1/state`, `/v1/apply`, `/healthz`, `/readyz`, `/metrics`).
    #[arg(long, env = "HAPTIC_AGENT_LISTEN", default_value = "0.0.0.0:8450")]
    listen: std::net::SocketAddr,
    /// File holding the bearer token the controller must send (re-read when it changes).
    #[arg(long, env = "HAPTIC_AGENT_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// PEM certificate to serve the API over TLS with.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// PEM CA: clients of /v1 must present a certificate it signed (mutual TLS).
    #[arg(long, requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// How long a reload may take to bring up a worker on the new bundle.
    #[arg(long, default_value = "30", value_name = "SECONDS")]
    reload_timeout: u64,
    /// Largest bundle taken (configuration plus files, bytes).
    #[arg(long, default_value_t = agent::Limits::default().max_bundle_bytes)]
    max_bundle_bytes: usize,
    /// Most auxiliary files in one bundle.
    #[arg(long, default_value_t = agent::Limits::default().max_files)]
    max_files: usize,
}

/// The libraries and values every rendering command takes.
#[derive(Debug, clap::Args)]
struct LibraryArgs {
    /// A Helm-style values file (`templateLibraries.<name>...` or `controller.templateLibraries...`).
    #[arg(short = 'f', long = "values", env = "HAPTIC_VALUES")]
    values: Option<PathBuf>,
    /// Override a value, e.g. `--set templateLibraries.kubernetesBackends.podReadinessGate.enabled=true`.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    set: Vec<String>,
    /// A custom template library (.wasm component) to render with the bundled ones.
    #[arg(short = 'l', long = "library")]
    libraries: Vec<PathBuf>,
    /// The certificate and key (one PEM file) served when SNI matches no TLS
    /// host, unless values name a Secret for it. Created 0600 with a fresh
    /// self-signed certificate when missing, so it stays the same across
    /// runs. Default: `~/.local/state/haptic/default-certificate.pem` for
    /// `render` and `run`; one generated in memory for `controller`.
    #[arg(long, env = "HAPTIC_DEFAULT_CERTIFICATE", value_name = "FILE")]
    default_certificate: Option<PathBuf>,
}

impl LibraryArgs {
    /// The values file (or none) with every `--set` applied.
    fn values(&self) -> Result<Values> {
        self.values_from(self.values.as_deref())
    }

    /// `file` (or none) with every `--set` applied.
    fn values_from(&self, file: Option<&Path>) -> Result<Values> {
        let mut values = match file {
            Some(path) => Values::load(path)?,
            None => Values::default(),
        };
        for assignment in &self.set {
            values.set_assignment(assignment)?;
        }
        Ok(values)
    }

    /// The library runtime, with the default certificate from
    /// `--default-certificate`, else (when `local`) from the user's state
    /// directory, else generated for this process.
    fn runtime(&self, local: bool) -> Result<LibraryRuntime> {
        let path = self
            .default_certificate
            .clone()
            .or_else(|| local.then(DefaultCertificate::local_path).flatten());
        let default_certificate = match path {
            Some(path) => Some(DefaultCertificate::load_or_create(&path)?.pem),
            None => None,
        };
        runtime_with(default_certificate)
    }
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Manifest files or directories (watched; subdirectories too).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    #[command(flatten)]
    libraries: LibraryArgs,
    /// How many local HAProxy instances (each with its agent) to deploy to.
    #[arg(long, default_value_t = 1)]
    proxies: usize,
    /// The first HAProxy's HTTP port on 127.0.0.1; the others count up from it.
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Start an echo server on every (loopback) endpoint address of the manifests.
    #[arg(long)]
    demo_backends: bool,
    /// Scratch directory for the HAProxy configuration directories (default: a temporary one).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Address of /status, /metrics, /healthz and /readyz.
    #[arg(long, default_value = "127.0.0.1:8451")]
    listen: std::net::SocketAddr,
}

#[derive(Debug, clap::Args)]
struct ControllerArgs {
    /// The release's namespace: where the HAProxy pods and the Lease are.
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    namespace: String,
    /// This replica's name (Lease holder, Events' reporting instance).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Label selector of the HAProxy pods in --namespace.
    #[arg(
        long,
        env = "HAPTIC_PROXY_SELECTOR",
        default_value = "app.kubernetes.io/component=haproxy"
    )]
    proxy_selector: String,
    /// The agents' API port on each HAProxy pod.
    #[arg(long, default_value_t = 8450)]
    agent_port: u16,
    /// File holding the agents' bearer token (re-read at start).
    #[arg(long, env = "HAPTIC_AGENT_TOKEN_FILE")]
    agent_token_file: Option<PathBuf>,
    /// PEM CA that signed the agents' serving certificates (then https).
    #[arg(long)]
    agent_ca: Option<PathBuf>,
    /// PEM client certificate for agents that require mutual TLS.
    #[arg(long, requires = "agent_client_key", requires = "agent_ca")]
    agent_client_cert: Option<PathBuf>,
    /// PEM private key of --agent-client-cert.
    #[arg(long, requires = "agent_client_cert")]
    agent_client_key: Option<PathBuf>,
    #[command(flatten)]
    libraries: LibraryArgs,
    /// Load every `*.wasm` in this directory as a custom library (a mounted ConfigMap).
    #[arg(long)]
    library_dir: Option<PathBuf>,
    /// Validate through `haptic validator` on this Unix socket instead of
    /// running `haproxy -c` in this process (the chart's default).
    #[arg(long, env = "HAPTIC_VALIDATOR_SOCKET")]
    validator_socket: Option<PathBuf>,
    /// The Lease for leader election, in --namespace.
    #[arg(long, default_value = "haptic-controller")]
    lease_name: String,
    /// How long a leader that stopped renewing keeps the Lease.
    #[arg(long, default_value = "15", value_name = "SECONDS")]
    lease_duration: u64,
    /// Lead without a Lease (a single replica only: two would both deploy).
    #[arg(long)]
    no_leader_election: bool,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "HAPTIC_CONTROLLER_LISTEN", default_value = "0.0.0.0:8451")]
    listen: std::net::SocketAddr,
    /// One push to one agent, including its reload.
    #[arg(long, default_value = "35", value_name = "SECONDS")]
    agent_timeout: u64,
}

/// `haptic render`'s exit status when it rendered and validated the
/// configuration without the objects it failed with (each named on stderr).
const RENDERED_WITH_WITHHELD: u8 = 3;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The offline jobs print their result; the long-running ones report
    // what they do (deploys, status changes) at info.
    let default_filter = match cli.command {
        Command::Render { .. }
        | Command::Diff(_)
        | Command::Migrate(_)
        | Command::Status(_)
        | Command::Test { .. }
        | Command::New { .. }
        | Command::Haproxy { .. }
        | Command::SoftStop { .. } => "warn",
        _ => "warn,haptic=info",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HAPTIC_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, not in pod logs.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match dispatch(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The library runtime with a default certificate generated in memory.
fn runtime() -> Result<LibraryRuntime> {
    runtime_with(None)
}

fn runtime_with(default_certificate: Option<SecretPem>) -> Result<LibraryRuntime> {
    let cache_dir = std::env::var_os("HAPTIC_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/haptic")));
    if let (Some(cache), Some(precompiled)) =
        (&cache_dir, std::env::var_os("HAPTIC_PRECOMPILED_DIR"))
    {
        // Without it every library is compiled again: slower, still correct.
        if let Err(error) = haptic::precompiled::seed(Path::new(&precompiled), cache) {
            tracing::warn!(
                "cannot copy the precompiled libraries of {} into {}: {error}",
                Path::new(&precompiled).display(),
                cache.display()
            );
        }
    }
    LibraryRuntime::new(RuntimeConfig {
        cache_dir,
        default_certificate,
        ..RuntimeConfig::default()
    })
    .context("starting the template library runtime")
}

fn dispatch(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Render {
            inputs,
            libraries,
            out,
            no_validate,
        } => {
            let runtime = libraries.runtime(true)?;
            let job = Job {
                inputs,
                values: libraries.values()?,
                custom_libraries: libraries.libraries,
                validate: !no_validate,
            };
            let loaded = offline::load_libraries(&runtime, &job.custom_libraries)?;
            let output = offline::render(&job, loaded)?;
            for warning in &output.warnings {
                eprintln!("haproxy warning: {warning}");
            }
            let mut records = 0usize;
            for (library, _, warning) in &output.rendered.warnings {
                if migrate::is_record(library, &warning.reason) {
                    records += 1;
                    continue;
                }
                eprintln!(
                    "warning from {library} ({}): {}",
                    warning.reason, warning.message
                );
            }
            if records > 0 {
                eprintln!(
                    "{records} ingress-nginx annotation(s) honoured as ingress-nginx does (`haptic migrate report` lists every annotation)"
                );
            }
            for warning in &output.self_loops {
                eprintln!("warning: {warning}");
            }
            for withheld in &output.withheld {
                eprintln!(
                    "warning ({}): {}",
                    haptic::engine::WITHHELD_REASON,
                    withheld.message()
                );
            }
            if let Some(isolation) = &output.isolation {
                eprintln!(
                    "the render failed with {} object(s), left out above; finding them took {} validation(s), {} ms",
                    isolation.withheld.len(),
                    isolation.probes,
                    isolation.elapsed.as_millis()
                );
            }
            let validated = match &output.validated_by {
                Some(by) => format!("validated by {by}"),
                None => "NOT validated (--no-validate): HAProxy may refuse it".to_owned(),
            };
            match out {
                Some(dir) => {
                    offline::write_dir(&output, &dir)
                        .with_context(|| format!("writing the render to {}", dir.display()))?;
                    eprintln!(
                        "wrote haproxy.cfg ({} lines), {} files and {} status patches to {}; {validated}",
                        output.rendered.config.lines().count(),
                        output.rendered.files.len(),
                        output
                            .rendered
                            .status_patches
                            .values()
                            .map(Vec::len)
                            .sum::<usize>(),
                        dir.display()
                    );
                }
                None => {
                    print!("{}", offline::to_text(&output));
                    eprintln!("haproxy.cfg {validated}");
                }
            }
            // Rendered, but not everything: a pipeline that checks
            // manifests with `haptic render` must notice.
            Ok(if output.withheld.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(RENDERED_WITH_WITHHELD)
            })
        }
        Command::Status(args) => status(&args),
        Command::Diff(args) => diff(&args),
        Command::Migrate(MigrateCommand::Report(args)) => migrate_report(&args),
        Command::New {
            dir,
            name,
            lang,
            sdk,
        } => new_library(dir, name, lang, sdk),
        Command::Agent(args) => run_agent(args),
        Command::Validator { socket } => run_validator(&socket),
        Command::Controller(args) => run_controller(*args),
        Command::Run(args) => run_local(*args),
        Command::Haproxy { paths, extra } => {
            let error = agent::launch::exec_haproxy(
                &paths.validator()?,
                &paths.config_dir(),
                &paths.master_socket(),
                &extra,
            );
            Err(anyhow::Error::new(error))
        }
        Command::SoftStop { delay, pid } => {
            agent::stop::soft_stop(pid, std::time::Duration::from_secs(delay))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Test {
            library,
            fixtures: dir,
        } => {
            let under_test = if library.ends_with(".wasm") {
                LibraryUnderTest::Custom(PathBuf::from(&library))
            } else {
                LibraryUnderTest::Bundled(library.clone())
            };
            let dir = dir.unwrap_or_else(|| match &under_test {
                LibraryUnderTest::Bundled(name) => PathBuf::from("template-libraries")
                    .join(name)
                    .join("fixtures"),
                LibraryUnderTest::Custom(_) => PathBuf::from("fixtures"),
            });
            let reports = fixtures::run_cases(&runtime()?, &under_test, &dir)?;
            let failed = reports.iter().filter(|r| !r.passed()).count();
            for report in &reports {
                let mark = if report.passed() { "ok  " } else { "FAIL" };
                println!("{mark} {} - {}", report.name, report.description);
                for failure in &report.failures {
                    println!("       {}", failure.replace('\n', "\n       "));
                }
                if !report.passed() {
                    println!(
                        "       whole configuration: {}",
                        render_command(&dir.join(&report.name), &under_test)
                    );
                }
            }
            println!("{} passed, {} failed", reports.len() - failed, failed);
            if reports.is_empty() {
                anyhow::bail!(
                    "no fixture cases found in {} (each case is a folder with expect.yaml)",
                    dir.display()
                );
            }
            Ok(if failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

/// The `haptic render` that shows a fixture case's whole configuration.
fn render_command(case: &std::path::Path, library: &LibraryUnderTest) -> String {
    let mut command = format!("haptic render {}", case.join("manifests.yaml").display());
    let values = case.join("values.yaml");
    if values.is_file() {
        command.push_str(&format!(" -f {}", values.display()));
    }
    if let LibraryUnderTest::Custom(path) = library {
        command.push_str(&format!(" -l {}", path.display()));
    }
    command
}

fn new_library(
    dir: PathBuf,
    name: Option<String>,
    lang: haptic::scaffold::Lang,
    sdk: Option<PathBuf>,
) -> Result<ExitCode> {
    use haptic::scaffold::{self, NewLibrary};

    let name = match name {
        Some(name) => name,
        None => dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .context("the directory has no last component to name the library by; pass --name")?,
    };
    let haptic = std::env::current_exe().context("finding this haptic binary for the Makefile")?;
    let new = NewLibrary {
        dir: dir.clone(),
        name,
        lang,
        sdk: sdk.unwrap_or_else(|| scaffold::default_sdk(lang)),
        haptic,
    };
    let written = scaffold::create(&new)?;
    println!(
        "created template library `{}` in {} ({} files)",
        new.name,
        dir.display(),
        written.len()
    );
    println!("next: cd {} && make test", dir.display());
    Ok(ExitCode::SUCCESS)
}

fn status(args: &StatusArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let (fleet, gates) = runtime.block_on(haptic::inspect::status::fetch(
        &args.controller,
        std::time::Duration::from_secs(10),
    ))?;
    let warn_after = std::time::Duration::from_secs(args.warn_after);
    let (text, late) =
        haptic::inspect::status::describe(&fleet, &gates, args.pod.as_deref(), warn_after);
    if args.json {
        let reports = serde_json::json!({"fleet": fleet, "gates": gates});
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        print!("{text}");
    }
    Ok(if late {
        eprintln!(
            "a readiness gate has waited longer than --warn-after ({}s)",
            args.warn_after
        );
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn diff(args: &DiffArgs) -> Result<ExitCode> {
    let runtime = args.libraries.runtime(true)?;
    let render = |inputs: &Path, values_file: Option<&PathBuf>| -> Result<offline::JobOutput> {
        let values = args.libraries.values_from(
            values_file
                .or(args.libraries.values.as_ref())
                .map(PathBuf::as_path),
        )?;
        let job = Job {
            inputs: vec![inputs.to_path_buf()],
            values,
            custom_libraries: args.libraries.libraries.clone(),
            validate: !args.no_validate,
        };
        let loaded = offline::load_libraries(&runtime, &job.custom_libraries)?;
        offline::render(&job, loaded).with_context(|| format!("rendering {}", inputs.display()))
    };
    let old = render(&args.old, args.old_values.as_ref())?;
    let new = render(&args.new, args.new_values.as_ref())?;
    let difference = haptic::inspect::diff::compare_jobs(&old, &new);
    print!("{difference}");
    Ok(if difference.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn migrate_report(args: &MigrateReportArgs) -> Result<ExitCode> {
    let runtime = args.libraries.runtime(true)?;
    let mut values = args.libraries.values()?;
    let library = migrate::LIBRARY;
    let set_by_user = values
        .template_libraries()
        .get(&haptic::values::camel_case(library))
        .is_some_and(|settings| settings.get("enabled").is_some());
    if !set_by_user {
        values.set("templateLibraries.ingressNginx.enabled", "true")?;
    }
    let job = Job {
        inputs: args.inputs.clone(),
        values,
        custom_libraries: args.libraries.libraries.clone(),
        validate: true,
    };
    let loaded = offline::load_libraries(&runtime, &job.custom_libraries)?;
    let output = if args.cluster {
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        offline::render_listed(&job, loaded, |targets| {
            tokio.block_on(haptic::controller::watch::list_once(targets))
        })?
    } else {
        offline::render(&job, loaded)?
    };
    print!("{}", migrate::Report::of(&output.rendered));
    if let Some(by) = &output.validated_by {
        eprintln!("the configuration behind this report was validated by {by}");
    }
    Ok(ExitCode::SUCCESS)
}

fn run_local(args: RunArgs) -> Result<ExitCode> {
    let values = haptic::local::local_values(args.libraries.values()?)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async {
        let libraries = haptic::engine::load_libraries(
            &args.libraries.runtime(true)?,
            &args.libraries.libraries,
        )?;
        let engine = haptic::engine::Engine::new(libraries, values.clone())?;
        let options = haptic::local::RunOptions {
            inputs: args.inputs,
            values,
            proxies: args.proxies,
            http_port: args.port,
            demo_backends: args.demo_backends,
            dir: args.dir,
            listen: args.listen,
        };
        haptic::local::run_locally(options, engine, shutdown_signal()).await
    })?;
    Ok(ExitCode::SUCCESS)
}

fn run_controller(args: ControllerArgs) -> Result<ExitCode> {
    use haptic::controller::{self, ElectionSettings, FleetSettings, proxies::ProxySettings};

    let values = args.libraries.values()?;
    let mut custom = args.libraries.libraries.clone();
    if let Some(dir) = &args.library_dir {
        let entries = std::fs::read_dir(dir)
            .with_context(|| format!("reading the library directory {}", dir.display()))?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "wasm"))
            .collect();
        found.sort();
        custom.extend(found);
    }
    let identity = match args.identity.clone() {
        Some(identity) => identity,
        None => std::env::var("HOSTNAME").unwrap_or_else(|_| "haptic-controller".into()),
    };
    let token = match &args.agent_token_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading the agent token file {}", path.display()))?
                .trim()
                .to_owned(),
        ),
        None => None,
    };
    let tls = args.agent_ca.clone().map(|ca| api_tls::ClientTls {
        ca,
        identity: args
            .agent_client_cert
            .clone()
            .zip(args.agent_client_key.clone()),
    });
    let settings = controller::Settings {
        identity: identity.clone(),
        proxies: ProxySettings {
            namespace: args.namespace.clone(),
            selector: args.proxy_selector.clone(),
            scheme: if tls.is_some() { "https" } else { "http" },
            agent_port: args.agent_port,
        },
        fleet: FleetSettings {
            token,
            tls,
            timeout: std::time::Duration::from_secs(args.agent_timeout),
            ..FleetSettings::default()
        },
        election: (!args.no_leader_election).then(|| ElectionSettings {
            namespace: args.namespace.clone(),
            lease_name: args.lease_name.clone(),
            identity,
            duration: std::time::Duration::from_secs(args.lease_duration.max(2)),
            grace: std::time::Duration::from_secs((args.lease_duration / 3).max(1)),
        }),
        listen: Some(args.listen),
        convergence_wait: std::time::Duration::from_secs(30),
        resync: std::time::Duration::from_secs(30),
    };

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the controller's runtime")?;
    runtime.block_on(async {
        let started = std::time::Instant::now();
        let libraries = haptic::engine::load_libraries(&args.libraries.runtime(false)?, &custom)?;
        let mut engine = haptic::engine::Engine::new(libraries, values)?;
        if let Some(socket) = &args.validator_socket {
            engine.set_checker(haptic::validate::Checker::Socket(socket.clone()));
        }
        let client = kube::Client::try_default().await.context(
            "connecting to the Kubernetes API (in-cluster service account, or KUBECONFIG)",
        )?;
        let state = std::sync::Arc::new(controller::State::default());
        state.metrics.seed.record("load", started.elapsed());
        controller::run_in_cluster(client, engine, settings, state, shutdown_signal()).await
    })?;
    Ok(ExitCode::SUCCESS)
}

fn run_validator(socket: &std::path::Path) -> Result<ExitCode> {
    let validator = haptic::validate::Validator::from_env()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the validator's runtime")?;
    runtime.block_on(async {
        tokio::select! {
            served = haptic::validate::remote::serve(socket, validator) => served.map_err(anyhow::Error::from),
            () = shutdown_signal() => Ok(()),
        }
    })?;
    Ok(ExitCode::SUCCESS)
}

fn run_agent(args: AgentArgs) -> Result<ExitCode> {
    let paths = &args.paths;
    let dir = paths.config_dir();
    let applier = agent::Applier::new(
        Haproxy {
            master_socket: paths.master_socket(),
            worker_socket: paths.worker_socket(),
        },
        dir,
        paths.validator()?,
        agent::Limits {
            max_bundle_bytes: args.max_bundle_bytes,
            max_files: args.max_files,
        },
        std::time::Duration::from_secs(args.reload_timeout),
    )
    .context("starting the agent")?;
    let config = server::ServerConfig {
        listen: args.listen,
        token_file: args.token_file,
        tls: match (args.tls_cert, args.tls_key) {
            (Some(cert), Some(key)) => Some(api_tls::ServerTls {
                cert,
                key,
                client_ca: args.tls_client_ca,
            }),
            _ => None,
        },
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the agent's runtime")?;
    runtime.block_on(async {
        let serving = server::serve(std::sync::Arc::new(applier), config);
        tokio::select! {
            result = serving => result.context("serving the agent API"),
            _ = shutdown_signal() => Ok(()),
        }
    })?;
    Ok(ExitCode::SUCCESS)
}

/// SIGTERM or Ctrl-C. The agent holds nothing that needs flushing: every
/// apply is on disk before it is answered, and HAProxy is not its child.
async fn shutdown_signal() {
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async {
            match terminate.as_mut() {
                Some(signal) => { signal.recv().await; }
                None => std::future::pending::<()>().await,
            }
        } => {}
    }
}
