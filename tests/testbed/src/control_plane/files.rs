//! What the control plane needs on disk before it starts: binaries, ports, credentials and
//! kubeconfigs.

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::{ControlPlaneError, KUBERNETES_VERSION, TokenUser};

/// The binaries the test bed runs, built by `tests/testbed/scripts/build-binaries.sh`.
pub(crate) const BINARIES: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kubectl",
];

/// Finds the directory holding every control-plane binary.
///
/// `HAPTIC_TESTBED_BIN` wins; otherwise the build script's cache,
/// `${HAPTIC_TESTBED_CACHE:-$HOME/.cache/haptic-testbed}/k8s-<version>`.
pub(crate) fn find_bin_dir() -> Result<PathBuf, ControlPlaneError> {
    let dir = match std::env::var_os("HAPTIC_TESTBED_BIN") {
        Some(dir) => PathBuf::from(dir),
        None => cache_root().join(format!("k8s-{KUBERNETES_VERSION}")),
    };
    let missing: Vec<&str> = BINARIES
        .into_iter()
        .filter(|b| !dir.join(b).is_file())
        .collect();
    if missing.is_empty() {
        Ok(dir)
    } else {
        Err(ControlPlaneError::BinariesMissing {
            dir,
            missing: missing.join(", "),
        })
    }
}

fn cache_root() -> PathBuf {
    if let Some(root) = std::env::var_os("HAPTIC_TESTBED_CACHE") {
        return PathBuf::from(root);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    home.join(".cache").join("haptic-testbed")
}

/// 128 random bits as hex, for bearer tokens.
pub(crate) fn random_token() -> Result<String, ControlPlaneError> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|source| ControlPlaneError::Io {
            what: "read /dev/urandom for an API token".to_owned(),
            source,
        })?;
    Ok(bytes.iter().fold(String::with_capacity(32), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    }))
}

/// Writes the apiserver's `--token-auth-file`: `token,user,uid,"group1,group2"` per line.
pub(crate) fn write_token_file(
    path: &Path,
    users: &[(TokenUser, String)],
) -> Result<(), ControlPlaneError> {
    let mut text = String::new();
    for (user, token) in users {
        let _ = writeln!(
            text,
            "{token},{name},{name},\"{groups}\"",
            name = user.name,
            groups = user.groups.join(",")
        );
    }
    write(path, &text, "the token auth file")
}

/// Generates the service-account signing key (ECDSA P-256: fast to make, accepted by both
/// the apiserver's `--service-account-signing-key-file` and the controller manager's
/// `--service-account-private-key-file`).
pub(crate) async fn generate_service_account_key(path: &Path) -> Result<(), ControlPlaneError> {
    let out = tokio::process::Command::new("openssl")
        .args([
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
        ])
        .arg(path)
        .output()
        .await
        .map_err(|source| ControlPlaneError::Io {
            what: "run openssl to make the service-account key (is openssl installed?)".to_owned(),
            source,
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(ControlPlaneError::Openssl {
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// Writes a kubeconfig with one context per token user; `current` is the default context.
pub(crate) fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca_file: &Path,
    users: &[(TokenUser, String)],
    current: &str,
) -> Result<(), ControlPlaneError> {
    write(
        path,
        &kubeconfig_text(server, ca_file, users, current),
        "a kubeconfig",
    )
}

/// A kubeconfig with one context per token user; `current` is the default context.
///
/// Context, cluster-user and user names are the user's name, so `kubectl --context NAME`
/// acts as that user.
pub(crate) fn kubeconfig_text(
    server: &str,
    ca_file: &Path,
    users: &[(TokenUser, String)],
    current: &str,
) -> String {
    // Hand-written YAML keeps the file readable for a person; every value is quoted JSON,
    // which YAML accepts, so no name can break the syntax.
    let q = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
    let mut text = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    let _ = writeln!(
        text,
        "- name: testbed\n  cluster:\n    server: {}\n    certificate-authority: {}",
        q(server),
        q(&ca_file.to_string_lossy())
    );
    text.push_str("users:\n");
    for (user, token) in users {
        let _ = writeln!(
            text,
            "- name: {}\n  user:\n    token: {}",
            q(&user.name),
            q(token)
        );
    }
    text.push_str("contexts:\n");
    for (user, _) in users {
        let _ = writeln!(
            text,
            "- name: {n}\n  context:\n    cluster: testbed\n    user: {n}",
            n = q(&user.name)
        );
    }
    let _ = writeln!(text, "current-context: {}", q(current));
    text
}

fn write(path: &Path, text: &str, what: &str) -> Result<(), ControlPlaneError> {
    std::fs::write(path, text).map_err(|source| ControlPlaneError::Io {
        what: format!("write {what} to {}", path.display()),
        source,
    })
}
