//! helm for the tests that install the chart: `$HELM`, else the build
//! `charts/scripts/install-helm.sh` makes once through the Go module proxy
//! and caches outside the repository. The release is always [`RELEASE`],
//! and every command names its cluster's kubeconfig (never the caller's
//! `$KUBECONFIG`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, ensure};

/// The release the tests install.
pub const RELEASE: &str = "haptic";

/// How long helm waits for the release's workloads (`--timeout`).
const TIMEOUT: &str = "180s";

/// The repository's root (the chart is `charts/haptic` under it).
///
/// Cargo sets `CARGO_MANIFEST_DIR` when it runs a test or bench, so the
/// checkout running is asked first: this library, built once in a target
/// dir that several clones share, may have been built by another clone
/// (whose path `env!` would have baked in), and that clone may be gone.
pub fn repo_root() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
        .join("../..")
}

/// The chart's directory.
pub fn chart_dir() -> PathBuf {
    repo_root().join("charts/haptic")
}

/// The helm binary: `$HELM`, else `charts/scripts/install-helm.sh`'s.
pub fn bin() -> anyhow::Result<PathBuf> {
    if let Some(helm) = std::env::var_os("HELM") {
        return Ok(PathBuf::from(helm));
    }
    let out = std::process::Command::new("bash")
        .arg(repo_root().join("charts/scripts/install-helm.sh"))
        .output()
        .context("running charts/scripts/install-helm.sh")?;
    ensure!(
        out.status.success(),
        "charts/scripts/install-helm.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

/// `helm install haptic <chart>` into `namespace` of the cluster behind
/// `kubeconfig`, with `--set` values, waiting until every workload is ready;
/// an error carries all helm said.
pub async fn install(kubeconfig: &Path, namespace: &str, sets: &[&str]) -> anyhow::Result<()> {
    helm(
        "install",
        Some(kubeconfig),
        namespace,
        &["--create-namespace", "--wait", "--timeout", TIMEOUT],
        sets,
    )
    .await
    .map(drop)
}

/// `helm upgrade haptic <chart> --reuse-values` with `--set` values, waiting
/// until every workload is ready again.
pub async fn upgrade(kubeconfig: &Path, namespace: &str, sets: &[&str]) -> anyhow::Result<()> {
    helm(
        "upgrade",
        Some(kubeconfig),
        namespace,
        &["--reuse-values", "--wait", "--timeout", TIMEOUT],
        sets,
    )
    .await
    .map(drop)
}

/// `helm uninstall haptic`, waiting until its objects are deleted.
pub async fn uninstall(kubeconfig: &Path, namespace: &str) -> anyhow::Result<()> {
    let mut args = vec!["uninstall", RELEASE, "--namespace", namespace, "--wait"];
    args.extend(["--timeout", TIMEOUT]);
    let kubeconfig = kubeconfig.as_os_str();
    let args = args
        .into_iter()
        .map(OsStr::new)
        .chain([OsStr::new("--kubeconfig"), kubeconfig]);
    output(&bin()?, args, None).await.map(drop)
}

/// `helm template` of the chart for `namespace` with `--set` values: the
/// manifests, as YAML documents.
pub async fn template(namespace: &str, sets: &[&str]) -> anyhow::Result<String> {
    helm("template", None, namespace, &[], sets).await
}

/// `helm <verb> haptic <chart> --namespace <namespace> <args> [--kubeconfig
/// <kubeconfig>] --set <set>...`; its stdout.
async fn helm(
    verb: &str,
    kubeconfig: Option<&Path>,
    namespace: &str,
    args: &[&str],
    sets: &[&str],
) -> anyhow::Result<String> {
    let chart = chart_dir();
    let mut argv: Vec<&OsStr> = [verb, RELEASE].map(OsStr::new).to_vec();
    argv.push(chart.as_os_str());
    argv.extend(["--namespace", namespace].map(OsStr::new));
    argv.extend(args.iter().map(OsStr::new));
    if let Some(kubeconfig) = kubeconfig {
        argv.extend([OsStr::new("--kubeconfig"), kubeconfig.as_os_str()]);
    }
    for set in sets {
        argv.extend(["--set", set].map(OsStr::new));
    }
    output(&bin()?, argv, None).await
}

/// Runs `program` with `args` (helm or kubectl: without the caller's
/// `$KUBECONFIG` and `$HELM_NAMESPACE`, so only what the test names is
/// touched) and `stdin`; its stdout, or an error naming the command with
/// everything it printed.
pub async fn output<I, S>(program: &Path, args: I, stdin: Option<&str>) -> anyhow::Result<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    use tokio::io::AsyncWriteExt as _;
    let args: Vec<_> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let command_line = std::iter::once(program.as_os_str())
        .chain(args.iter().map(|a| a.as_os_str()))
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let mut child = tokio::process::Command::new(program)
        .args(&args)
        .env_remove("KUBECONFIG")
        .env_remove("HELM_NAMESPACE")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting `{command_line}`"))?;
    if let Some(mut pipe) = child.stdin.take() {
        pipe.write_all(stdin.unwrap_or_default().as_bytes())
            .await
            .with_context(|| format!("writing to `{command_line}`"))?;
    }
    let out = child
        .wait_with_output()
        .await
        .with_context(|| format!("waiting for `{command_line}`"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    ensure!(
        out.status.success(),
        "`{command_line}` failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(stdout)
}
