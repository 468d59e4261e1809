//! Checking a rendered configuration with the real `haproxy -c` before
//! anything is deployed: the only judge of what HAProxy accepts is HAProxy.
//!
//! The configuration and its auxiliary files (maps, certificates, error
//! pages) are written into a scratch directory laid out as on the HAProxy
//! pods, and HAProxy runs there, so relative paths resolve as they will in
//! production when the configuration says `default-path config` in `global`.
//! HAProxy's diagnostics come back parsed, with line numbers, so the caller
//! can name the library that wrote a refused line.

mod output;
pub mod remote;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use output::{Level, Message, parse as parse_messages};

/// The configuration's file name inside the scratch directory.
pub const CONFIG_FILE: &str = "haproxy.cfg";

/// Environment variable naming the haproxy binary to use.
pub const HAPROXY_ENV: &str = "HAPTIC_HAPROXY";

/// The oldest HAProxy haptic drives, as `major.minor`: the 3.0 LTS branch.
pub const MINIMUM_HAPROXY: &str = "3.0";

/// The environment variable every HAProxy haptic starts holds the bundle's
/// directory in: the validator's scratch copy, `haptic test`'s, and in a
/// pod `<config dir>/current` (a link that names the bundle being loaded
/// when a reload reads it). HAProxy 3.0 reads an SPOE filter's `config`
/// file relative to the directory it was started in rather than to
/// `default-path config`, and goes on parsing the configuration from the
/// directory of that file (measured: a `maps/...` path after a
/// `config "${HAPTIC_BUNDLE}/spoe/x.conf"` is looked up in `spoe/`). So a
/// library writes `config "${HAPTIC_BUNDLE}/<file>"`, the file at the
/// bundle's root next to haproxy.cfg; the policy takes that as a file of
/// the render, refuses one in a subdirectory, and every other variable
/// outside `bind`.
pub const BUNDLE_ENV: &str = "HAPTIC_BUNDLE";

/// How to get a HAProxy haptic can drive, for every error that lacks one.
const GET_HAPROXY: &str = "run `make setup` in a haptic checkout (it makes Debian trixie's \
    HAProxy 3.0 package, the one the image runs, usable here: image/host-haproxy.sh) or set \
    HAPTIC_HAPROXY to the path of a HAProxy 3.0 or newer (e.g. Debian trixie's `haproxy` package)";

/// The key under which the values tree every library's `configure`
/// receives carries [`HaproxyFacts`] (a camelCase library name never starts
/// with `_`, so it names no library). The SDK reads it as
/// `haptic_sdk::values::HaproxyFacts`: the JSON shape is the contract.
pub const HAPROXY_FACTS_KEY: &str = "_haproxy";

/// What libraries may know of the HAProxy that validates and serves their
/// output, so they write only what it loads (a QUIC bind only where it
/// serves QUIC).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HaproxyFacts {
    /// `3.0.11-1+deb13u5`.
    pub version: String,
    /// Built with QUIC (`+QUIC` in `haproxy -vv`'s feature list).
    pub quic: bool,
    /// QUIC through OpenSSL's compatibility layer (`+QUIC_OPENSSL_COMPAT`):
    /// QUIC listeners need `limited-quic` in `global`.
    pub quic_openssl_compat: bool,
}

/// An accepted configuration and what HAProxy said about it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validation {
    /// Warnings and notices (an accepted configuration has no alerts).
    pub warnings: Vec<Message>,
    /// HAProxy's raw output (stderr, then stdout).
    pub output: String,
}

/// Why a configuration could not be validated, or was refused.
#[derive(Debug, thiserror::Error)]
pub enum ValidationError {
    /// No haproxy binary was found.
    #[error("cannot find haproxy ({detail}); {GET_HAPROXY}")]
    NotFound { detail: String },
    /// The haproxy binary is older than haptic's minimum.
    #[error(
        "{} is HAProxy {found}, older than the {MINIMUM_HAPROXY} haptic needs (its configurations \
         use 3.0's directives: QUIC binds, bandwidth limits); {GET_HAPROXY}",
        binary.display()
    )]
    TooOld { binary: PathBuf, found: String },
    /// The haproxy binary could not be started or waited for.
    #[error("cannot run {}: {source}; check that it is an executable haproxy binary", binary.display())]
    Run {
        binary: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An auxiliary file's path would leave the configuration directory or
    /// clash with another file.
    #[error(
        "auxiliary file path `{path}` {reason}; files must be relative paths inside the configuration directory"
    )]
    BadPath { path: String, reason: &'static str },
    /// The scratch directory could not be written.
    #[error("cannot write {} for validation: {source}; check the temporary directory (TMPDIR)", path.display())]
    Scratch {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// HAProxy refused the configuration.
    #[error(
        "haproxy -c refused the configuration:\n{}",
        describe(messages, output)
    )]
    Refused {
        messages: Vec<Message>,
        output: String,
    },
    /// HAProxy did not finish in time (it resolves server host names while
    /// parsing, which can hang without DNS).
    #[error(
        "{} -c did not finish within {} s; check for server addresses given as host names that cannot be resolved",
        binary.display(),
        timeout.as_secs()
    )]
    Timeout { binary: PathBuf, timeout: Duration },
    /// The validator process (`haptic validator`) did not answer.
    #[error(
        "the validator on {} did not check the configuration: {detail}; is the `haptic validator` \
         container of the controller pod running (see its log)?",
        socket.display()
    )]
    Validator { socket: PathBuf, detail: String },
    /// `haproxy -v` printed something unexpected.
    #[error("cannot read the version from `{} -v`, which printed: {output}", binary.display())]
    Version { binary: PathBuf, output: String },
}

fn describe(messages: &[Message], output: &str) -> String {
    let alerts: Vec<String> = messages
        .iter()
        .filter(|m| m.level == Level::Alert)
        .map(|m| format!("  {m}"))
        .collect();
    if alerts.is_empty() {
        output.trim_end().to_owned()
    } else {
        alerts.join("\n")
    }
}

/// Who runs `haproxy -c`: this process, or the validator process on a
/// socket (the controller in a cluster: see [`remote`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Checker {
    /// The haproxy found by [`Validator::from_env`], as a child process.
    #[default]
    Local,
    /// `haptic validator` listening on this Unix socket.
    Socket(PathBuf),
}

impl Checker {
    /// Validates `config` and `files` as [`validate`] does.
    pub fn validate(
        &self,
        config: &str,
        files: &[(String, String)],
    ) -> Result<Validation, ValidationError> {
        match self {
            Checker::Local => validate(config, files),
            Checker::Socket(socket) => remote::check(socket, config, files),
        }
    }
}

/// Whether the HAProxy version `found` (`3.0.11-1+deb13u5`, `2.6.12`,
/// `3.2-dev4`) is at least `minimum` (`major.minor`). A version that does
/// not start with two numbers is not.
fn at_least(found: &str, minimum: &str) -> bool {
    fn major_minor(version: &str) -> Option<(u32, u32)> {
        let mut parts = version.split(|c: char| !c.is_ascii_digit());
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    }
    match (major_minor(found), major_minor(minimum)) {
        (Some(found), Some(minimum)) => found >= minimum,
        _ => false,
    }
}

/// Validates with the haproxy found by [`Validator::from_env`].
pub fn validate(config: &str, files: &[(String, String)]) -> Result<Validation, ValidationError> {
    Validator::from_env()?.validate(config, files)
}

/// The version of the haproxy found by [`Validator::from_env`].
pub fn haproxy_version() -> Result<String, ValidationError> {
    Validator::from_env()?.version()
}

/// A haproxy binary and how long one check may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validator {
    pub binary: PathBuf,
    pub timeout: Duration,
}

impl Validator {
    /// `$HAPTIC_HAPROXY` when set, else `haproxy` on `PATH` (or in the
    /// sbin directories Debian installs it to, which a non-root `PATH` lacks).
    pub fn from_env() -> Result<Self, ValidationError> {
        let binary = match std::env::var_os(HAPROXY_ENV).filter(|v| !v.is_empty()) {
            Some(explicit) => {
                let binary = PathBuf::from(explicit);
                if !binary.is_file() {
                    return Err(ValidationError::NotFound {
                        detail: format!("{HAPROXY_ENV}={} is not a file", binary.display()),
                    });
                }
                binary
            }
            None => find_on_path().ok_or_else(|| ValidationError::NotFound {
                detail: "no `haproxy` on PATH, /usr/sbin or /usr/local/sbin".to_owned(),
            })?,
        };
        let validator = Self::new(binary);
        validator.check_minimum()?;
        Ok(validator)
    }

    /// Refuses a HAProxy older than [`MINIMUM_HAPROXY`] (asked once per
    /// binary: [`Validator::version`] is cached), so no configuration it
    /// cannot load is ever rendered for it.
    pub fn check_minimum(&self) -> Result<(), ValidationError> {
        let found = self.version()?;
        if at_least(&found, MINIMUM_HAPROXY) {
            Ok(())
        } else {
            Err(ValidationError::TooOld {
                binary: self.binary.clone(),
                found,
            })
        }
    }

    /// A validator for `binary` with a 30 s timeout.
    pub fn new(binary: PathBuf) -> Self {
        Self {
            binary,
            timeout: Duration::from_secs(30),
        }
    }

    /// Writes `config` as `haproxy.cfg` and `files` beside it into a fresh
    /// scratch directory and runs `haproxy -c -f haproxy.cfg` there.
    pub fn validate(
        &self,
        config: &str,
        files: &[(String, String)],
    ) -> Result<Validation, ValidationError> {
        let checked = check_paths(files)?;
        let dir = tempfile::Builder::new()
            .prefix("haptic-validate-")
            .tempdir()
            .map_err(|source| ValidationError::Scratch {
                path: std::env::temp_dir(),
                source,
            })?;
        write(&dir.path().join(CONFIG_FILE), config)?;
        for (relative, (_, content)) in checked.iter().zip(files) {
            write(&dir.path().join(relative), content)?;
        }
        self.check_dir(dir.path(), CONFIG_FILE)
    }

    /// [`Validator::validate`] without parsing the verdict: whether HAProxy
    /// accepted, and its output (what the validator process sends back).
    pub fn validate_raw(
        &self,
        config: &str,
        files: &[(String, String)],
    ) -> Result<(bool, String), ValidationError> {
        match self.validate(config, files) {
            Ok(validation) => Ok((true, validation.output)),
            Err(ValidationError::Refused { output, .. }) => Ok((false, output)),
            Err(other) => Err(other),
        }
    }

    /// Runs `haproxy -c -f <config>` in `dir`, where the configuration and
    /// its files already are (the agent validates a staged bundle in place).
    pub fn check_dir(&self, dir: &Path, config: &str) -> Result<Validation, ValidationError> {
        let (success, output) = self.run(&["-c", "-f", config], dir)?;
        let messages = output::parse(&output);
        if success {
            Ok(Validation {
                warnings: messages,
                output,
            })
        } else {
            Err(ValidationError::Refused { messages, output })
        }
    }

    /// The version `haproxy -v` reports (`2.6.12-1+deb12u4`), cached per binary.
    pub fn version(&self) -> Result<String, ValidationError> {
        static CACHE: OnceLock<Mutex<HashMap<PathBuf, String>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        if let Some(version) = cache.lock().ok().and_then(|c| c.get(&self.binary).cloned()) {
            return Ok(version);
        }
        let (_, output) = self.run(&["-v"], &std::env::temp_dir())?;
        let version = output
            .lines()
            .find_map(|line| line.strip_prefix("HAProxy version "))
            .and_then(|rest| rest.split_whitespace().next())
            .ok_or_else(|| ValidationError::Version {
                binary: self.binary.clone(),
                output: output.trim().to_owned(),
            })?
            .to_owned();
        if let Ok(mut cache) = cache.lock() {
            cache.insert(self.binary.clone(), version.clone());
        }
        Ok(version)
    }

    /// What `haproxy -vv` says of this binary (cached per binary): its
    /// version and whether it serves QUIC.
    pub fn facts(&self) -> Result<HaproxyFacts, ValidationError> {
        static CACHE: OnceLock<Mutex<HashMap<PathBuf, HaproxyFacts>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        if let Some(facts) = cache.lock().ok().and_then(|c| c.get(&self.binary).cloned()) {
            return Ok(facts);
        }
        let version = self.version()?;
        let (_, output) = self.run(&["-vv"], &std::env::temp_dir())?;
        let features: Vec<&str> = output
            .lines()
            .find_map(|line| line.trim_start().strip_prefix("Feature list :"))
            .map(|list| list.split_whitespace().collect())
            .unwrap_or_default();
        let facts = HaproxyFacts {
            version,
            quic: features.contains(&"+QUIC"),
            quic_openssl_compat: features.contains(&"+QUIC_OPENSSL_COMPAT"),
        };
        if let Ok(mut cache) = cache.lock() {
            cache.insert(self.binary.clone(), facts.clone());
        }
        Ok(facts)
    }

    /// Runs haproxy with `args` in `cwd`; (exited successfully, stderr then stdout).
    fn run(&self, args: &[&str], cwd: &Path) -> Result<(bool, String), ValidationError> {
        let run_error = |source| ValidationError::Run {
            binary: self.binary.clone(),
            source,
        };
        let mut child = Command::new(&self.binary)
            .args(args)
            .current_dir(cwd)
            .env(BUNDLE_ENV, cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(run_error)?;
        // Drain both pipes concurrently so a chatty haproxy cannot block on a
        // full pipe while we wait for it to exit.
        let stdout = child.stdout.take().map(drain);
        let stderr = child.stderr.take().map(drain);
        let started = Instant::now();
        let mut pause = Duration::from_millis(1);
        let status = loop {
            if let Some(status) = child.try_wait().map_err(run_error)? {
                break status;
            }
            if started.elapsed() > self.timeout {
                // Best effort: the error below is what matters.
                let _ = child.kill();
                let _ = child.wait();
                return Err(ValidationError::Timeout {
                    binary: self.binary.clone(),
                    timeout: self.timeout,
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        };
        let collect = |handle: Option<std::thread::JoinHandle<String>>| {
            handle.and_then(|h| h.join().ok()).unwrap_or_default()
        };
        let mut output = collect(stderr);
        output.push_str(&collect(stdout));
        Ok((status.success(), output))
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        // A read error leaves what was read so far, which is all we can show.
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

fn find_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join("haproxy"))
        .find(|candidate| candidate.is_file())
}

/// Normalised relative paths for `files`, refusing any that would leave the
/// directory, overwrite the configuration or another file.
pub fn check_paths(files: &[(String, String)]) -> Result<Vec<PathBuf>, ValidationError> {
    let mut seen = HashSet::new();
    let mut checked = Vec::with_capacity(files.len());
    for (path, _) in files {
        let bad = |reason| ValidationError::BadPath {
            path: path.clone(),
            reason,
        };
        let mut normal = PathBuf::new();
        for component in Path::new(path).components() {
            match component {
                Component::Normal(part) => normal.push(part),
                Component::CurDir => {}
                Component::ParentDir => return Err(bad("contains `..`")),
                Component::RootDir | Component::Prefix(_) => return Err(bad("is absolute")),
            }
        }
        if normal.as_os_str().is_empty() {
            return Err(bad("is empty"));
        }
        if normal == Path::new(CONFIG_FILE) {
            return Err(bad("would overwrite the configuration itself"));
        }
        if !seen.insert(normal.clone()) {
            return Err(bad("is given twice"));
        }
        checked.push(normal);
    }
    Ok(checked)
}

fn write(path: &Path, content: &str) -> Result<(), ValidationError> {
    let scratch = |source| ValidationError::Scratch {
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(scratch)?;
    }
    std::fs::write(path, content).map_err(scratch)
}
