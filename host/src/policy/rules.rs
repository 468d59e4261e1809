//! What a line of haproxy.cfg may do, by section: the directives that run
//! code or touch the process, and the words that name a file HAProxy reads.
//!
//! Taken from HAProxy 2.6's configuration manual (Debian ships it as
//! `/usr/share/doc/haproxy/configuration.txt.gz`): section 3.1 (process
//! management and security), 3.7 (programs), 3.9 (rings), the proxy
//! keywords of section 4 and the bind and server options of section 5.

use crate::haproxy_syntax::Section;
use crate::haproxy_syntax::words::Words;

/// One thing a line does that the policy judges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// A directive that runs code or touches the process; `why` says what it does.
    Forbidden {
        directive: String,
        why: &'static str,
    },
    /// A word that names a file (or directory) HAProxy reads.
    File { directive: String, path: String },
    /// An `env(NAME)` sample fetch: HAProxy reads the variable at run time.
    EnvironmentFetch { variable: String },
}

/// Directives of `global` that run code or act on the process itself.
const GLOBAL_FORBIDDEN: &[(&str, &str)] = &[
    (
        "lua-load",
        "runs Lua code inside HAProxy, already while `haproxy -c` reads the configuration",
    ),
    (
        "lua-load-per-thread",
        "runs Lua code inside HAProxy, already while `haproxy -c` reads the configuration",
    ),
    (
        "lua-prepend-path",
        "changes where HAProxy loads Lua code from",
    ),
    ("external-check", "lets health checks run programs"),
    ("insecure-fork-wanted", "lets HAProxy start programs"),
    ("insecure-setuid-wanted", "lets HAProxy run setuid programs"),
    ("setenv", "changes the process environment"),
    ("presetenv", "changes the process environment"),
    ("resetenv", "changes the process environment"),
    ("unsetenv", "changes the process environment"),
    ("ssl-engine", "loads an OpenSSL engine (native code)"),
    ("ssl-mode-async", "hands TLS work to an OpenSSL engine"),
    ("ssl-provider", "loads an OpenSSL provider (native code)"),
    (
        "ssl-provider-path",
        "changes where OpenSSL providers are loaded from",
    ),
    (
        "set-dumpable",
        "lets the process dump its memory, private keys included",
    ),
    (
        "tune.ssl.keylog",
        "exposes TLS session secrets to log formats and headers",
    ),
    ("chroot", "changes the process's root directory"),
    (
        "daemon",
        "detaches HAProxy from the process that supervises it",
    ),
    ("uid", "changes the process's identity"),
    ("gid", "changes the process's identity"),
    ("user", "changes the process's identity"),
    ("group", "changes the process's identity"),
    (
        "pidfile",
        "writes a file outside the configuration directory",
    ),
    (
        "unix-bind",
        "changes the owner and mode of the sockets HAProxy creates",
    ),
    (
        "expose-experimental-directives",
        "turns on directives HAProxy does not support",
    ),
    (
        "ca-base",
        "changes where certificate paths resolve, so they can leave the configuration directory",
    ),
    (
        "crt-base",
        "changes where certificate paths resolve, so they can leave the configuration directory",
    ),
    (
        "server-state-base",
        "changes where server-state paths resolve, so they can leave the configuration directory",
    ),
];

/// Directives of `global` whose first argument is a file HAProxy reads.
const GLOBAL_FILES: &[&str] = &[
    "h1-case-adjust-file",
    "httpclient.ssl.ca-file",
    "issuers-chain-path",
    "ssl-dh-param-file",
    "server-state-file",
    "51degrees-data-file",
    "deviceatlas-json-file",
    "wurfl-data-file",
];

/// Options of `bind`, `server` and `default-server` whose argument is a file.
const SOCKET_FILE_OPTIONS: &[&str] = &[
    "crt",
    "crt-list",
    "ca-file",
    "crl-file",
    "ca-verify-file",
    "ca-sign-file",
];

/// Converters and actions whose first argument is a map or pattern file.
const FILE_FUNCTIONS: &[&str] = &["set-map", "del-map", "add-acl", "del-acl"];

/// Address prefixes that reach a socket of the host rather than the network.
const LOCAL_ADDRESSES: &[&str] = &["/", "unix@", "abns@", "fd@", "sockpair@"];

/// `log` targets that are the process's own output, though spelled as a
/// descriptor (`stdout` and `stderr` are these too).
const OUTPUT_DESCRIPTORS: &[&str] = &["fd@1", "fd@2"];

/// `path` without a leading `${HAPTIC_BUNDLE}/` (the bundle's directory,
/// [`crate::validate::BUNDLE_ENV`]): the file of the render it names.
pub fn bundle_relative(path: &str) -> Option<&str> {
    path.strip_prefix(BUNDLE_PREFIX)
        .filter(|rest| !rest.is_empty())
}

const BUNDLE_PREFIX: &str = concat!("${", "HAPTIC_BUNDLE", "}/");

/// What `words` (in `section`) does that the policy judges.
pub fn findings(section: Section, words: &Words) -> Vec<Finding> {
    let mut found = Vec::new();
    let directive = words.get(0);
    let forbidden = |directive: &str, why| Finding::Forbidden {
        directive: directive.to_owned(),
        why,
    };
    let file = |directive: &str, path: &str| Finding::File {
        directive: directive.to_owned(),
        path: bundle_relative(path).unwrap_or(path).to_owned(),
    };
    match section {
        Section::Global => {
            if let Some((name, why)) = GLOBAL_FORBIDDEN.iter().find(|(d, _)| *d == directive) {
                found.push(forbidden(name, why));
            }
            if directive.starts_with("lua-load") {
                found.push(file(directive, words.get(1)));
            }
            if GLOBAL_FILES.contains(&directive) {
                found.push(file(directive, words.get(1)));
            }
            if directive == "default-path" && words.words.get(1..) != Some(&["config".to_owned()]) {
                found.push(forbidden(
                    directive,
                    "makes relative paths resolve somewhere other than the configuration \
                     directory (only `default-path config` is accepted)",
                ));
            }
            if directive == "stats" && words.get(1) == "socket" {
                found.push(forbidden(
                    "stats socket",
                    "opens HAProxy's runtime API (the agent adds the one it needs)",
                ));
            }
        }
        Section::Proxy => {
            let option = match directive {
                "option" => words.get(1),
                "no" if words.get(1) == "option" => words.get(2),
                _ => "",
            };
            if option == "external-check" {
                found.push(forbidden(
                    "option external-check",
                    "runs programs as health checks",
                ));
            }
            if directive == "external-check" {
                found.push(forbidden(directive, "names a program health checks run"));
            }
            if directive == "errorfile" {
                found.push(file(directive, words.get(2)));
            }
            if directive == "server-state-file-name" && !words.get(1).is_empty() {
                let name = words.get(1);
                if name != "use-backend-name" {
                    found.push(file(directive, name));
                }
            }
            if directive == "filter" && words.get(1) == "spoe" {
                found.extend(after(words, "config").map(|path| file("filter spoe", path)));
            }
            if matches!(
                directive,
                "http-request" | "http-response" | "http-after-response" | "http-error"
            ) {
                for keyword in ["file", "lf-file"] {
                    found.extend(after(words, keyword).map(|path| file(directive, path)));
                }
            }
            found.extend(after(words, "-f").map(|path| file("-f (pattern file)", path)));
            for word in &words.words {
                found.extend(map_files(word).map(|(function, path)| file(function, path)));
            }
            found.extend(
                env_fetches(words).map(|variable| Finding::EnvironmentFetch {
                    variable: variable.to_owned(),
                }),
            );
        }
        Section::HttpErrors if directive == "errorfile" => {
            found.push(file(directive, words.get(2)));
        }
        Section::Ring if directive == "backing-file" => {
            found.push(forbidden(
                directive,
                "writes a file outside the configuration directory",
            ));
        }
        _ => {}
    }
    // `log <target> ...` in global, defaults and proxies: stdout, stderr,
    // rings and network addresses stay in the pod's own output or network.
    if directive == "log" && matches!(section, Section::Global | Section::Proxy) {
        let target = words.get(1);
        if LOCAL_ADDRESSES.iter().any(|p| target.starts_with(p))
            && !OUTPUT_DESCRIPTORS.contains(&target)
        {
            found.push(forbidden(
                "log",
                "sends logs to a socket or file descriptor of the HAProxy host instead of \
                 stdout, stderr, a ring or a network address",
            ));
        }
    }
    if matches!(directive, "bind" | "server" | "default-server") {
        for option in SOCKET_FILE_OPTIONS {
            found.extend(after(words, option).map(|path| file(option, path)));
        }
        let address = match directive {
            "bind" => words.get(1),
            "server" => words.get(2),
            _ => "",
        };
        if LOCAL_ADDRESSES.iter().any(|p| address.starts_with(p)) {
            found.push(forbidden(
                directive,
                "reaches a socket or file descriptor of the HAProxy host instead of a network address",
            ));
        }
    }
    found
}

/// The word after each occurrence of `keyword` (from the second word on).
fn after<'a>(words: &'a Words, keyword: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    words
        .words
        .iter()
        .enumerate()
        .skip(1)
        .filter(move |(_, word)| *word == keyword)
        .map(|(index, _)| words.get(index + 1))
}

/// The files named by `map*(` converters and the map and ACL actions in
/// one word (`%[req.hdr(host),lower,map_str(maps/hosts.map,default)]`).
fn map_files(word: &str) -> impl Iterator<Item = (&'static str, &str)> + '_ {
    calls(word).filter_map(|(name, argument)| {
        let function = if name == "map" || name.starts_with("map_") {
            Some("map converter")
        } else {
            FILE_FUNCTIONS.iter().find(|f| **f == name).copied()
        };
        function.map(|function| (function, argument))
    })
}

/// The variables of the `env()` sample fetches HAProxy evaluates in a
/// proxy line, and only those: a fetch in a log-format argument
/// (`%[env(X)]`, but not the literal text `%%[env(X)]`) or a fetch in a
/// fetch position (a condition after `if`/`unless`/`{`/`||`/`!`, an `acl`'s
/// criterion, the expression of `set-var(...)`, `capture`, `set-src`...).
/// A user's string that merely contains `env(` where HAProxy reads text (a
/// realm, a regex, an escaped rewrite) is not a fetch: if the policy refused
/// it, any namespace user could stop every deploy with an annotation.
fn env_fetches(words: &Words) -> impl Iterator<Item = &str> + '_ {
    const FETCH: &str = "env(";
    let formats = log_format_positions(words);
    let in_formats = formats.into_iter().flat_map(move |index| {
        let word = words.get(index);
        word.match_indices("%[").filter_map(move |(at, _)| {
            let percents = word[..=at].bytes().rev().take_while(|b| *b == b'%').count();
            let expression = &word[at + 2..];
            (percents % 2 == 1 && expression.starts_with(FETCH))
                .then(|| argument(&expression[FETCH.len()..]))
        })
    });
    let rule = matches!(
        words.get(0),
        "http-request" | "http-response" | "http-after-response" | "tcp-request" | "tcp-response"
    );
    let in_positions = words
        .words
        .iter()
        .enumerate()
        .filter_map(move |(index, word)| {
            let previous = index.checked_sub(1).map_or("", |i| words.get(i));
            let fetch_position = matches!(previous, "if" | "unless" | "{" | "||" | "!" | "or")
                || previous.starts_with("set-var(")
                || (rule
                    && index == 2
                    && matches!(
                        previous,
                        "capture" | "set-src" | "set-dst" | "set-src-port" | "set-dst-port"
                    ))
                || (rule && previous.starts_with("track-sc"))
                || (words.get(0) == "acl" && index == 2);
            let word = word.trim_start_matches('!');
            (fetch_position && word.starts_with(FETCH)).then(|| argument(&word[FETCH.len()..]))
        });
    in_formats.chain(in_positions)
}

/// Which words of a proxy line HAProxy reads as log-format strings (where
/// `%[...]` is evaluated), from section 4.2 of its 2.6 manual.
fn log_format_positions(words: &Words) -> Vec<usize> {
    let action = words.get(1);
    let mut positions = Vec::new();
    match words.get(0) {
        "http-request" | "http-response" | "http-after-response" => {
            let index = match action {
                "set-header" | "add-header" | "early-hint" | "redirect" => Some(3),
                "replace-header" | "replace-value" => Some(4),
                "set-path" | "set-pathq" | "set-query" | "set-uri" | "set-method" => Some(2),
                "replace-path" | "replace-pathq" | "replace-uri" => Some(3),
                a if a.starts_with("set-var-fmt(") => Some(2),
                _ => None,
            };
            positions.extend(index);
            // `return ... lf-string <fmt>` and `hdr <name> <fmt>`.
            for (index, word) in words.words.iter().enumerate() {
                match word.as_str() {
                    "lf-string" => positions.push(index + 1),
                    "hdr" if action == "return" => positions.push(index + 2),
                    _ => {}
                }
            }
        }
        "use_backend" | "use-server" | "log-format" | "log-format-sd" | "unique-id-format"
        | "error-log-format" => positions.push(1),
        _ => {}
    }
    positions
}

/// The first argument of a call, from just after its `(`.
fn argument(rest: &str) -> &str {
    rest.split([',', ')']).next().unwrap_or_default().trim()
}

/// Each `name(first-argument` call in one word: sample fetches, converters
/// and actions (`%[env(HOME)]`, `map_str(maps/hosts.map,default)`).
fn calls(word: &str) -> impl Iterator<Item = (&str, &str)> + '_ {
    word.match_indices('(').map(move |(open, _)| {
        let before = &word[..open];
        let name_start = before
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .map_or(0, |i| i + 1);
        (&before[name_start..], argument(&word[open + 1..]))
    })
}
