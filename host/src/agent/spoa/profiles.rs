//! What each route asks the SPOA for (an auth service, mirror targets),
//! written by libraries as bundle files
//! `spoa/<anything>.json` (docs/spoa.md) and read from the applied bundle's
//! directory. The configuration carries only a profile's name; the URL, the
//! sign-in page and the header names stay data the agent reads, never text
//! HAProxy parses.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::watch;

use crate::agent::disk::ConfigDir;

/// Where in a bundle the SPOA's profile files live.
pub const PROFILE_DIR: &str = "spoa";

/// One file's profiles (docs/spoa.md).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    #[serde(default)]
    auth: BTreeMap<String, AuthProfile>,
    #[serde(default)]
    mirror: BTreeMap<String, MirrorProfile>,
}

/// External authentication for one route: ingress-nginx's `auth-*`
/// annotations, or a Gateway API `ExternalAuth` filter.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AuthProfile {
    /// The auth service (`http://` or `https://`), nginx variables allowed.
    pub url: String,
    #[serde(default = "get")]
    pub method: String,
    /// Where a 401 sends the client (302), nginx variables allowed; without
    /// it the client gets the 401.
    #[serde(default)]
    pub signin: Option<String>,
    /// The sign-in URL's parameter carrying the original URL, added unless
    /// the URL already has it.
    #[serde(default = "rd")]
    pub signin_redirect_param: String,
    /// Headers of a 2xx answer copied to the request sent upstream.
    #[serde(default)]
    pub response_headers: Vec<String>,
    /// Headers added to the sub-request (values may use nginx variables).
    #[serde(default)]
    pub request_headers: BTreeMap<String, String>,
    /// `X-Auth-Request-Redirect`'s value; default the original request URI.
    #[serde(default)]
    pub request_redirect: Option<String>,
    /// Send the auth service's `Set-Cookie` back to the client whatever the
    /// answer (otherwise only when access is granted).
    #[serde(default)]
    pub always_set_cookie: bool,
    #[serde(default)]
    pub cache: Option<CacheRule>,
    /// How long the sub-request may take before the request fails closed.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// How the auth service's answer becomes the verdict.
    #[serde(default)]
    pub answers: Answers,
    /// The client's headers sent to the auth service: every one when
    /// absent (ingress-nginx), else only those named (the Gateway API's
    /// `allowedHeaders` and `Authorization`).
    #[serde(default)]
    pub client_headers: Option<Vec<String>>,
    /// The sub-request's Host header (nginx variables allowed); default the
    /// URL's authority.
    #[serde(default)]
    pub host: Option<String>,
    /// Keep the connection to the auth service for the next sub-request
    /// (the pool's); `false` closes it after each (`Connection: close`).
    #[serde(default = "yes")]
    pub keep_alive: bool,
}

/// How an auth service's answer becomes the verdict (docs/spoa.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Answers {
    /// ingress-nginx's `auth_request`: 2xx passes; 401 (or the sign-in
    /// page), 403; anything else is 500.
    #[default]
    IngressNginx,
    /// The Gateway API's `ExternalAuth` (HTTP): 200 passes; any other
    /// status is the client's answer, with the service's `Location`,
    /// `WWW-Authenticate` and `Set-Cookie`.
    PassThrough,
}

/// Answers of the auth service kept for a while (ingress-nginx's
/// `auth-cache-key` and `auth-cache-duration`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CacheRule {
    /// nginx variables; requests with the same expansion share an answer.
    pub key: String,
    /// Statuses kept, each for `seconds`.
    pub statuses: Vec<u16>,
    pub seconds: u64,
}

/// Request mirroring for one route: ingress-nginx's `mirror-*`
/// annotations, or a Gateway API `RequestMirror` filter (several targets).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MirrorProfile {
    pub targets: Vec<MirrorTarget>,
}

/// Where one copy of each request goes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MirrorTarget {
    /// `http://` or `https://`, nginx variables allowed; a URL without a
    /// path gets the original request's path and query.
    pub url: String,
    /// The copy's Host header (nginx variables allowed); default the URL's.
    #[serde(default)]
    pub host: Option<String>,
    /// Copy the request body (HAProxy sends bodies it holds whole, up to
    /// the limit docs/spoa.md states; longer ones are not mirrored).
    #[serde(default = "yes")]
    pub body: bool,
    /// The share of requests copied; default every one.
    #[serde(default)]
    pub fraction: Fraction,
    /// How long a copy may take before it is abandoned.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

impl MirrorTarget {
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.clamp(1, 60_000))
    }
}

/// `numerator` requests in `denominator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fraction {
    pub numerator: u32,
    pub denominator: u32,
}

impl Default for Fraction {
    fn default() -> Self {
        Self {
            numerator: 1,
            denominator: 1,
        }
    }
}

impl Fraction {
    /// Whether this request is one of the share (a fair draw each time).
    pub fn draw(self) -> bool {
        self.numerator >= self.denominator
            || (self.numerator > 0 && fastrand::u32(0..self.denominator) < self.numerator)
    }
}

fn yes() -> bool {
    true
}

fn get() -> String {
    "GET".to_owned()
}

fn rd() -> String {
    "rd".to_owned()
}

fn default_timeout_ms() -> u64 {
    5_000
}

impl AuthProfile {
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.clamp(1, 60_000))
    }
}

/// The profiles of one bundle.
#[derive(Debug, Default)]
pub struct ProfileTable {
    pub bundle: Option<String>,
    pub auth: BTreeMap<String, Arc<AuthProfile>>,
    pub mirror: BTreeMap<String, Arc<MirrorProfile>>,
}

impl ProfileTable {
    /// Reads every `spoa/*.json` of the bundle in `dir`. A file that does not
    /// parse is logged and left out: its routes then fail closed (a missing
    /// profile is a 500), the others keep working.
    pub fn load(bundle: &str, dir: &Path) -> Self {
        let mut table = Self {
            bundle: Some(bundle.to_owned()),
            ..Self::default()
        };
        let Ok(entries) = std::fs::read_dir(dir.join(PROFILE_DIR)) else {
            return table;
        };
        let mut paths: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|e| e == "json"))
            .collect();
        paths.sort();
        for path in paths {
            let parsed = std::fs::read(&path)
                .map_err(|error| error.to_string())
                .and_then(|bytes| {
                    serde_json::from_slice::<ProfileFile>(&bytes).map_err(|error| error.to_string())
                });
            match parsed {
                Ok(file) => {
                    table
                        .auth
                        .extend(file.auth.into_iter().map(|(k, v)| (k, Arc::new(v))));
                    table
                        .mirror
                        .extend(file.mirror.into_iter().map(|(k, v)| (k, Arc::new(v))));
                }
                Err(error) => tracing::error!(
                    file = %path.display(),
                    %bundle,
                    %error,
                    "an SPOA profile file does not parse; the routes it describes fail closed (auth) or are not mirrored"
                ),
            }
        }
        table
    }
}

/// The profiles of the bundle the agent applied last, and of the one before
/// (what a worker leaving after a reload still runs). Reloaded when an apply
/// succeeds, never per message.
#[derive(Debug)]
pub struct Profiles {
    /// `None` for a fixed table (`haptic test`'s traffic checks).
    dir: Option<ConfigDir>,
    applied: Mutex<watch::Receiver<Option<String>>>,
    tables: Mutex<(Arc<ProfileTable>, Arc<ProfileTable>)>,
}

impl Profiles {
    /// `applied` names each bundle the agent applies
    /// ([`crate::agent::Applier::applied`]).
    pub fn new(dir: ConfigDir, applied: watch::Receiver<Option<String>>) -> Self {
        Self {
            dir: Some(dir),
            applied: Mutex::new(applied),
            tables: Mutex::new(Default::default()),
        }
    }

    /// The profiles of the bundle in `dir`, read once: a render under test.
    pub fn loaded(dir: &Path) -> Self {
        let table = Arc::new(ProfileTable::load("under test", dir));
        Self {
            dir: None,
            applied: Mutex::new(watch::Sender::new(None).subscribe()),
            tables: Mutex::new((table, Arc::default())),
        }
    }

    /// The auth profile `name`: the newest bundle's, else the previous one's.
    pub fn auth(&self, name: &str) -> Option<Arc<AuthProfile>> {
        self.find(name, |table| &table.auth)
    }

    /// The mirror profile `name`: the newest bundle's, else the previous one's.
    pub fn mirror(&self, name: &str) -> Option<Arc<MirrorProfile>> {
        self.find(name, |table| &table.mirror)
    }

    fn find<T>(
        &self,
        name: &str,
        kind: impl Fn(&ProfileTable) -> &BTreeMap<String, Arc<T>>,
    ) -> Option<Arc<T>> {
        let (current, previous) = self.tables();
        kind(&current)
            .get(name)
            .or_else(|| kind(&previous).get(name))
            .cloned()
    }

    fn tables(&self) -> (Arc<ProfileTable>, Arc<ProfileTable>) {
        let newest = {
            let mut applied = self
                .applied
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            applied
                .has_changed()
                .unwrap_or(false)
                .then(|| applied.borrow_and_update().clone())
        };
        let mut tables = self
            .tables
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let Some(dir) = &self.dir else {
            return (tables.0.clone(), tables.1.clone());
        };
        let stale = match &newest {
            Some(Some(id)) => tables.0.bundle.as_deref() != Some(id.as_str()),
            _ => tables.0.bundle.is_none() && dir.current().is_some(),
        };
        if stale {
            let id = match newest {
                Some(Some(id)) => Some(id),
                _ => dir.current().map(|current| current.id),
            };
            if let Some(id) = id {
                let table = Arc::new(ProfileTable::load(&id, &dir.bundle_dir(&id)));
                let previous = std::mem::replace(&mut tables.0, table);
                tables.1 = previous;
            }
        }
        (tables.0.clone(), tables.1.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_file_parses_with_defaults_and_refuses_unknown_fields() {
        let file: ProfileFile = serde_json::from_str(
            r#"{"auth": {"ingress-nginx.shop.web": {"url": "http://auth.test/check"}}}"#,
        )
        .expect("parses");
        let profile = &file.auth["ingress-nginx.shop.web"];
        assert_eq!(profile.method, "GET");
        assert_eq!(profile.signin_redirect_param, "rd");
        assert_eq!(profile.timeout(), Duration::from_secs(5));
        assert!(
            serde_json::from_str::<ProfileFile>(r#"{"auth": {"a": {"url": "u", "urll": 1}}}"#)
                .is_err()
        );
    }
}
