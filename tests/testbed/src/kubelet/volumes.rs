//! Pod volumes, materialised under the pod's directory the way kubelet's
//! `AtomicWriter` lays them out (`..<timestamp>/` holding the files, `..data`
//! pointing at it, one top-level symlink per entry into `..data/`), so a
//! program that reads or watches a mounted ConfigMap sees what it would see in
//! a real pod. [`super::container`] bind-mounts them at each `mountPath`.
//!
//! Supported: configMap, secret, projected (serviceAccountToken via
//! TokenRequest bound to the pod, configMap, secret, downwardAPI),
//! downwardAPI, emptyDir, hostPath. Contents are written once when the pod
//! starts; kubelet's periodic refresh of ConfigMaps and tokens is not done
//! (tests are shorter than a token's hour).

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, KeyToPath, Pod, ServiceAccount, Volume};
use kube::api::PostParams;
use kube::{Api, Client};

use super::env::{self, Addresses};

/// Errors setting up a volume; kubelet reports them as `MountVolume.SetUp
/// failed` and keeps the pod in `ContainerCreating`, retrying.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A ConfigMap/Secret source failed (missing object or key).
    #[error("MountVolume.SetUp failed for volume \"{volume}\" : {source}")]
    Source {
        /// The volume.
        volume: String,
        /// What failed.
        #[source]
        source: env::Error,
    },
    /// The TokenRequest for the pod's service account failed.
    #[error("MountVolume.SetUp failed for volume \"{volume}\" : failed to fetch token: {source}")]
    Token {
        /// The volume.
        volume: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Writing the files failed.
    #[error("writing volume \"{volume}\" under {path}: {source}")]
    Io {
        /// The volume.
        volume: String,
        /// The path written.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A volume type this kubelet cannot provide.
    #[error(
        "volume \"{0}\" has a type the test bed's kubelet does not support (use configMap, secret, projected, downwardAPI, emptyDir or hostPath)"
    )]
    Unsupported(String),
}

#[derive(Debug)]
struct File {
    path: String,
    data: Vec<u8>,
    mode: u32,
}

/// Creates every volume of the pod under `root` and returns where each one's
/// contents live (for a hostPath, the host path itself).
pub(crate) async fn prepare(
    client: &Client,
    pod: &Pod,
    root: &Path,
    addrs: Addresses,
) -> Result<HashMap<String, PathBuf>, Error> {
    let mut out = HashMap::new();
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let dir = root.join(&volume.name);
        let path = match contents(client, pod, volume, addrs).await? {
            Contents::Files(files) => {
                write_atomic(&dir, &files).map_err(|source| Error::Io {
                    volume: volume.name.clone(),
                    path: dir.clone(),
                    source,
                })?;
                dir
            }
            Contents::EmptyDir => {
                std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
                    volume: volume.name.clone(),
                    path: dir.clone(),
                    source,
                })?;
                dir
            }
            Contents::Host(p) => p,
        };
        out.insert(volume.name.clone(), path);
    }
    Ok(out)
}

enum Contents {
    Files(Vec<File>),
    EmptyDir,
    Host(PathBuf),
}

async fn contents(
    client: &Client,
    pod: &Pod,
    volume: &Volume,
    addrs: Addresses,
) -> Result<Contents, Error> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = &volume.name;
    let src = |source| Error::Source {
        volume: name.clone(),
        source,
    };
    if let Some(cm) = &volume.config_map {
        let values = env::object_values(client, ns, false, &cm.name, cm.optional.unwrap_or(false))
            .await
            .map_err(src)?;
        let mode = cm.default_mode.map_or(0o644, |m| m as u32);
        return keyed(values, cm.items.as_deref(), mode, &cm.name, false, ns)
            .map(Contents::Files)
            .map_err(src);
    }
    if let Some(s) = &volume.secret {
        let secret_name = s.secret_name.clone().unwrap_or_default();
        let values =
            env::object_values(client, ns, true, &secret_name, s.optional.unwrap_or(false))
                .await
                .map_err(src)?;
        let mode = s.default_mode.map_or(0o644, |m| m as u32);
        return keyed(values, s.items.as_deref(), mode, &secret_name, true, ns)
            .map(Contents::Files)
            .map_err(src);
    }
    if let Some(d) = &volume.downward_api {
        let mode = d.default_mode.map_or(0o644, |m| m as u32);
        return downward(pod, d.items.as_deref().unwrap_or_default(), mode, addrs)
            .map(Contents::Files)
            .map_err(src);
    }
    if volume.empty_dir.is_some() {
        return Ok(Contents::EmptyDir);
    }
    if let Some(h) = &volume.host_path {
        return Ok(Contents::Host(PathBuf::from(&h.path)));
    }
    let Some(projected) = &volume.projected else {
        return Err(Error::Unsupported(name.clone()));
    };
    let mode = projected.default_mode.map_or(0o644, |m| m as u32);
    let mut files = Vec::new();
    for source in projected.sources.iter().flatten() {
        if let Some(t) = &source.service_account_token {
            let token = token(client, pod, t.audience.clone(), t.expiration_seconds)
                .await
                .map_err(|source| Error::Token {
                    volume: name.clone(),
                    source,
                })?;
            files.push(File {
                path: t.path.clone(),
                data: token.into_bytes(),
                mode,
            });
        }
        if let Some(cm) = &source.config_map {
            let values =
                env::object_values(client, ns, false, &cm.name, cm.optional.unwrap_or(false))
                    .await
                    .map_err(src)?;
            files.extend(
                keyed(values, cm.items.as_deref(), mode, &cm.name, false, ns).map_err(src)?,
            );
        }
        if let Some(s) = &source.secret {
            let values = env::object_values(client, ns, true, &s.name, s.optional.unwrap_or(false))
                .await
                .map_err(src)?;
            files.extend(keyed(values, s.items.as_deref(), mode, &s.name, true, ns).map_err(src)?);
        }
        if let Some(d) = &source.downward_api {
            let items = d.items.as_deref().unwrap_or_default();
            files.extend(downward(pod, items, mode, addrs).map_err(src)?);
        }
    }
    Ok(Contents::Files(files))
}

fn keyed(
    values: Option<BTreeMap<String, Vec<u8>>>,
    items: Option<&[KeyToPath]>,
    mode: u32,
    object: &str,
    secret: bool,
    ns: &str,
) -> Result<Vec<File>, env::Error> {
    let Some(values) = values else {
        return Ok(Vec::new());
    };
    let Some(items) = items.filter(|i| !i.is_empty()) else {
        return Ok(values
            .into_iter()
            .map(|(path, data)| File { path, data, mode })
            .collect());
    };
    items
        .iter()
        .map(|item| {
            let data = values
                .get(&item.key)
                .cloned()
                .ok_or_else(|| env::Error::MissingKey {
                    kind: if secret { "Secret" } else { "ConfigMap" },
                    namespace: ns.to_string(),
                    name: object.to_string(),
                    key: item.key.clone(),
                })?;
            Ok(File {
                path: item.path.clone(),
                data,
                mode: item.mode.map_or(mode, |m| m as u32),
            })
        })
        .collect()
}

fn downward(
    pod: &Pod,
    items: &[DownwardAPIVolumeFile],
    mode: u32,
    addrs: Addresses,
) -> Result<Vec<File>, env::Error> {
    items
        .iter()
        .filter_map(|item| item.field_ref.as_ref().map(|f| (item, f)))
        .map(|(item, f)| {
            Ok(File {
                path: item.path.clone(),
                data: env::field_ref(pod, &f.field_path, addrs)?.into_bytes(),
                mode: item.mode.map_or(mode, |m| m as u32),
            })
        })
        .collect()
}

/// A token for the pod's service account, bound to the pod (so it dies with
/// it), as kubelet's projected `serviceAccountToken` source requests it.
async fn token(
    client: &Client,
    pod: &Pod,
    audience: Option<String>,
    expiration: Option<i64>,
) -> Result<String, kube::Error> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let sa = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .unwrap_or_else(|| "default".into());
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: audience.into_iter().filter(|a| !a.is_empty()).collect(),
            expiration_seconds: Some(expiration.unwrap_or(3607)),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            }),
        },
        ..Default::default()
    };
    let issued = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_token_request(&sa, &PostParams::default(), &request)
        .await?;
    Ok(issued.status.map(|s| s.token).unwrap_or_default())
}

/// kubelet's AtomicWriter layout (first write only).
fn write_atomic(dir: &Path, files: &[File]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let stamp = format!("..{}", status_stamp());
    let data_dir = dir.join(&stamp);
    std::fs::create_dir_all(&data_dir)?;
    let mut top = Vec::new();
    for f in files {
        let target = data_dir.join(&f.path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, &f.data)?;
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(f.mode & 0o777))?;
        let first = f.path.split('/').next().unwrap_or(&f.path).to_string();
        if !top.contains(&first) {
            top.push(first);
        }
    }
    replace_symlink(Path::new(&stamp), &dir.join("..data"))?;
    for name in top {
        replace_symlink(&Path::new("..data").join(&name), &dir.join(&name))?;
    }
    Ok(())
}

fn replace_symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(link) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::os::unix::fs::symlink(target, link)
}

fn status_stamp() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y_%m_%d_%H_%M_%S.%f")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lays_files_out_like_kubelets_atomic_writer() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("vol");
        let files = [
            File {
                path: "ca.crt".into(),
                data: b"pem".to_vec(),
                mode: 0o644,
            },
            File {
                path: "nested/token".into(),
                data: b"t".to_vec(),
                mode: 0o600,
            },
        ];
        write_atomic(&dir, &files).unwrap();
        assert_eq!(std::fs::read(dir.join("ca.crt")).unwrap(), b"pem");
        assert_eq!(std::fs::read(dir.join("nested/token")).unwrap(), b"t");
        assert_eq!(
            std::fs::read_link(dir.join("ca.crt")).unwrap(),
            Path::new("..data/ca.crt")
        );
        let data = std::fs::read_link(dir.join("..data")).unwrap();
        assert!(data.to_string_lossy().starts_with(".."), "{data:?}");
    }

    #[test]
    fn items_pick_and_rename_keys_and_a_missing_key_is_an_error() {
        let values: BTreeMap<String, Vec<u8>> = [
            ("a".to_string(), b"1".to_vec()),
            ("b".to_string(), b"2".to_vec()),
        ]
        .into();
        let items = [KeyToPath {
            key: "b".into(),
            path: "renamed".into(),
            mode: Some(0o600),
        }];
        let files = keyed(Some(values.clone()), Some(&items), 0o644, "cm", false, "ns").unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!((files[0].path.as_str(), files[0].mode), ("renamed", 0o600));
        let missing = [KeyToPath {
            key: "zz".into(),
            path: "x".into(),
            mode: None,
        }];
        let err = keyed(Some(values), Some(&missing), 0o644, "cm", false, "ns").unwrap_err();
        assert_eq!(err.to_string(), "couldn't find key zz in ConfigMap ns/cm");
    }
}
