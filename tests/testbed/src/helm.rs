//! helm for the tests that install the chart: `$HELM`, else the build
//! `charts/scripts/install-helm.sh` makes once through the Go module proxy
//! and caches outside the repository.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, ensure};

/// The repository's root (the chart is `charts/haptic` under it).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
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
/// `kubeconfig` (never the caller's `$KUBECONFIG`), with `--set` values,
/// waiting until every workload is ready; an error carries all helm said.
pub async fn install(kubeconfig: &Path, namespace: &str, sets: &[&str]) -> anyhow::Result<()> {
    let mut command = tokio::process::Command::new(bin()?);
    command
        .args(["install", "haptic"])
        .arg(chart_dir())
        .args(["--namespace", namespace, "--create-namespace"])
        .args(["--wait", "--timeout", "180s", "--kubeconfig"])
        .arg(kubeconfig)
        .env_remove("KUBECONFIG");
    for value in sets {
        command.args(["--set", value]);
    }
    let out = command.output().await.context("starting helm")?;
    ensure!(
        out.status.success(),
        "helm install failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
