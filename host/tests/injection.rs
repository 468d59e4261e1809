//! Injection fuzzing of the bundled libraries: hostile strings (newlines,
//! `\r`, NUL, quotes, `#`, blanks, `%[`, `${`, backslashes, long values)
//! in every field a namespace user writes: Ingress hosts, paths, path
//! types, class, annotation values, backend Service and port names, TLS
//! hosts and Secret names; Service and port names, EndpointSlice names,
//! addresses, pod and host names; Pod names and readiness gates.
//!
//! Property, per case: the render succeeds, passes the directive policy and
//! the real `haproxy -c`, and has the same directive structure as the
//! benign render (every line's section, directive and word count as
//! HAProxy reads them, and the line and word counts of the maps and
//! crt-lists). When a warning names the object the library skipped, its
//! lines may be missing, never new; an object the library ignores (an
//! Ingress of another class) must render as if it were absent. `base` has no field a namespace user
//! writes; its lines are compared in every case all the same. `ingress-nginx` is enabled, with an
//! Ingress of class `nginx` carrying annotations of every kind of value it parses (durations,
//! sizes, CIDRs, URLs, paths, hosts, cookie names, regexes, rewrite targets, realms): a hostile
//! value is an `AnnotationInvalid` warning, never a line.
//!
//! Seeded and bounded: `HAPTIC_FUZZ_SEED` (default 23) and
//! `HAPTIC_FUZZ_CASES` (random cases per field on top of the fixed
//! attacks, default 3). A failure prints the seed, the field and the value.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use base64::Engine as _;
use haptic::engine::{self, Engine};
use haptic::haproxy_syntax::{section_of, words};
use haptic::library::{LibraryRuntime, LoadedLibrary, RuntimeConfig};
use haptic::render::{ClusterChange, ClusterObject, Rendered};
use haptic::values::Values;
use serde_json::{Value, json};

/// Values of the cluster under test: the readiness gate on, so the gate
/// library and the Pod watch render too.
const GATE_ON: &str = "templateLibraries.kubernetesBackends.podReadinessGate.enabled=true";
/// And the ingress-nginx library, with its annotations.
const NGINX_ON: &str = "templateLibraries.ingressNginx.enabled=true";

/// Attacks every field gets, before the random ones.
const ATTACKS: &[&str] = &[
    "a\nglobal\n    lua-load /tmp/x.lua",
    "a\r\nlua-load x.lua",
    "a\0b",
    "a b if TRUE",
    "a\"b'c",
    "a#b",
    "%[env(HOME)]",
    "\"${HOME}\"",
    "a\\",
    "x.example.com/ shop_web_80\nevil.example.com",
];

/// Pieces random values are made of.
const PIECES: &[&str] = &[
    "\n",
    "\r",
    "\0",
    "\"",
    "'",
    "#",
    " ",
    "\t",
    "%[",
    "${",
    "$HOME",
    "\\",
    "\\x2d",
    "}",
    "]",
    ")",
    ",",
    "{",
    "lua-load",
    "global",
    "program",
    "/",
    "..",
    ":",
    "*",
    "é",
    "if",
    "-f",
    "a",
    "web",
    "shop.example.com",
];

/// One field: the JSON pointers (into objects of [`cluster`], by index) that
/// must hold the same value, such as a Secret's name and the Ingress's
/// `secretName`.
struct Field {
    name: &'static str,
    places: &'static [(usize, &'static str)],
}

const INGRESS: usize = 2;
const DEFAULT_INGRESS: usize = 3;
const SERVICE: usize = 4;
const SLICE: usize = 5;
const POD: usize = 6;
const SECRET: usize = 7;
const NGINX_INGRESS: usize = 8;
const NGINX_CANARY: usize = 9;

/// A field of the ingress-nginx Ingress: one annotation's value.
macro_rules! nginx {
    ($annotation:literal) => {
        Field {
            name: concat!("ingress-nginx: ", $annotation),
            places: &[(
                NGINX_INGRESS,
                concat!(
                    "/metadata/annotations/nginx.ingress.kubernetes.io~1",
                    $annotation
                ),
            )],
        }
    };
}

const FIELDS: &[Field] = &[
    Field {
        name: "ingress: rule host",
        places: &[(INGRESS, "/spec/rules/0/host")],
    },
    Field {
        name: "ingress: path",
        places: &[(INGRESS, "/spec/rules/0/http/paths/1/path")],
    },
    Field {
        name: "ingress: pathType",
        places: &[(INGRESS, "/spec/rules/0/http/paths/1/pathType")],
    },
    Field {
        name: "ingress: ingressClassName",
        places: &[(INGRESS, "/spec/ingressClassName")],
    },
    Field {
        name: "ingress: ssl-redirect annotation",
        places: &[(
            INGRESS,
            "/metadata/annotations/haproxy-haptic.org~1ssl-redirect",
        )],
    },
    Field {
        name: "ingress: backend service name",
        places: &[(INGRESS, "/spec/rules/0/http/paths/0/backend/service/name")],
    },
    Field {
        name: "ingress: backend port name",
        places: &[(
            INGRESS,
            "/spec/rules/0/http/paths/0/backend/service/port/name",
        )],
    },
    Field {
        name: "ingress: TLS host",
        places: &[(INGRESS, "/spec/tls/0/hosts/0")],
    },
    Field {
        name: "ingress: TLS Secret name",
        places: &[
            (INGRESS, "/spec/tls/0/secretName"),
            (SECRET, "/metadata/name"),
        ],
    },
    Field {
        name: "ingress: Ingress name",
        places: &[(INGRESS, "/metadata/name")],
    },
    Field {
        name: "ingress: default backend service name",
        places: &[(DEFAULT_INGRESS, "/spec/defaultBackend/service/name")],
    },
    Field {
        name: "kubernetes-backends: Service name",
        places: &[
            (SERVICE, "/metadata/name"),
            (SLICE, "/metadata/labels/kubernetes.io~1service-name"),
            (INGRESS, "/spec/rules/0/http/paths/0/backend/service/name"),
        ],
    },
    Field {
        name: "kubernetes-backends: Service port name",
        places: &[
            (SERVICE, "/spec/ports/0/name"),
            (SLICE, "/ports/0/name"),
            (
                INGRESS,
                "/spec/rules/0/http/paths/0/backend/service/port/name",
            ),
        ],
    },
    Field {
        name: "kubernetes-backends: targetPort name",
        places: &[(SERVICE, "/spec/ports/0/targetPort")],
    },
    Field {
        name: "kubernetes-backends: EndpointSlice name",
        places: &[(SLICE, "/metadata/name")],
    },
    Field {
        name: "kubernetes-backends: endpoint address",
        places: &[(SLICE, "/endpoints/0/addresses/0")],
    },
    Field {
        name: "kubernetes-backends: endpoint pod name",
        places: &[
            (SLICE, "/endpoints/0/targetRef/name"),
            (POD, "/metadata/name"),
        ],
    },
    Field {
        name: "kubernetes-backends: endpoint hostname",
        places: &[(SLICE, "/endpoints/0/hostname")],
    },
    Field {
        name: "status-patches-150-pod-readiness-gate: readiness gate type",
        places: &[(POD, "/spec/readinessGates/0/conditionType")],
    },
    Field {
        name: "status-patches-150-pod-readiness-gate: condition type",
        places: &[(POD, "/status/conditions/0/type")],
    },
    Field {
        name: "ingress-nginx: regex path",
        places: &[(NGINX_INGRESS, "/spec/rules/0/http/paths/0/path")],
    },
    nginx!("rewrite-target"),
    nginx!("whitelist-source-range"),
    nginx!("denylist-source-range"),
    nginx!("permanent-redirect"),
    nginx!("permanent-redirect-code"),
    nginx!("app-root"),
    nginx!("x-forwarded-prefix"),
    nginx!("upstream-vhost"),
    // Not server-alias: a comma in it adds an alias (more routes) by design.
    nginx!("limit-rps"),
    nginx!("limit-whitelist"),
    nginx!("proxy-body-size"),
    nginx!("proxy-read-timeout"),
    nginx!("session-cookie-name"),
    nginx!("session-cookie-path"),
    nginx!("session-cookie-samesite"),
    nginx!("cors-allow-origin"),
    nginx!("cors-allow-methods"),
    nginx!("cors-allow-headers"),
    nginx!("auth-realm"),
    nginx!("auth-secret"),
    nginx!("upstream-hash-by"),
    nginx!("proxy-next-upstream"),
    nginx!("configuration-snippet"),
    Field {
        name: "ingress-nginx: canary-by-header-pattern",
        places: &[(
            NGINX_CANARY,
            "/metadata/annotations/nginx.ingress.kubernetes.io~1canary-by-header-pattern",
        )],
    },
    Field {
        name: "ingress-nginx: canary-by-cookie",
        places: &[(
            NGINX_CANARY,
            "/metadata/annotations/nginx.ingress.kubernetes.io~1canary-by-cookie",
        )],
    },
];

/// A small cluster that exercises every library: an Ingress with host,
/// path, TLS and a redirect annotation, one with a default backend, a
/// Service with its EndpointSlice, a gated Pod and its TLS Secret.
fn cluster() -> Vec<Value> {
    static CERTIFICATE: LazyLock<(String, String)> = LazyLock::new(|| {
        let key = rcgen::KeyPair::generate().expect("key");
        let params =
            rcgen::CertificateParams::new(vec!["shop.example.com".to_owned()]).expect("params");
        let certificate = params.self_signed(&key).expect("certificate");
        (certificate.pem(), key.serialize_pem())
    });
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let backend = |port: Value| json!({"service": {"name": "web", "port": port}});
    vec![
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
               "metadata": {"name": "haptic"}, "spec": {"controller": "haproxy-haptic.org/controller"}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": "shop", "namespace": "shop",
                            "annotations": {"haproxy-haptic.org/ssl-redirect": "true"}},
               "spec": {"ingressClassName": "haptic",
                        "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}],
                        "rules": [{"host": "shop.example.com", "http": {"paths": [
                            {"path": "/", "pathType": "Prefix", "backend": backend(json!({"name": "http"}))},
                            {"path": "/api", "pathType": "Exact", "backend": backend(json!({"number": 80}))}]}}]}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": "fallback", "namespace": "shop"},
               "spec": {"ingressClassName": "haptic", "defaultBackend": backend(json!({"number": 80}))}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
               "spec": {"ports": [{"name": "http", "port": 80, "targetPort": "web"}]}}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": "web-abc12", "namespace": "shop",
                            "labels": {"kubernetes.io/service-name": "web"}},
               "addressType": "IPv4",
               "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
               "endpoints": [
                   {"addresses": ["10.244.0.5"], "hostname": "web-0",
                    "conditions": {"ready": false, "serving": false, "terminating": false},
                    "targetRef": {"kind": "Pod", "namespace": "shop", "name": "web-7d9c6-aaaaa"}},
                   {"addresses": ["10.244.0.6"],
                    "conditions": {"ready": true, "serving": true, "terminating": false},
                    "targetRef": {"kind": "Pod", "namespace": "shop", "name": "web-7d9c6-bbbbb"}}]}),
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "web-7d9c6-aaaaa", "namespace": "shop", "labels": {"app": "web"}},
               "spec": {"readinessGates": [{"conditionType": "haproxy-haptic.org/load-balancer-ready"}],
                        "containers": [{"name": "web", "image": "web"}]},
               "status": {"conditions": [{"type": "ContainersReady", "status": "True"}]}}),
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
               "metadata": {"name": "shop-tls", "namespace": "shop"},
               "data": {"tls.crt": b64(&CERTIFICATE.0), "tls.key": b64(&CERTIFICATE.1)}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": "legacy", "namespace": "legacy",
                            "creationTimestamp": "2026-01-01T00:00:00Z",
                            "annotations": nginx_annotations()},
               "spec": {"ingressClassName": "nginx",
                        "rules": [{"host": "legacy.example.com", "http": {"paths": [
                            {"path": "/legacy(/|$)(.*)", "pathType": "ImplementationSpecific",
                             "backend": {"service": {"name": "legacy", "port": {"number": 80}}}}]}}]}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": "legacy-canary", "namespace": "legacy",
                            "creationTimestamp": "2026-01-02T00:00:00Z",
                            "annotations": {
                                "nginx.ingress.kubernetes.io/canary": "true",
                                "nginx.ingress.kubernetes.io/canary-by-header": "X-Canary",
                                "nginx.ingress.kubernetes.io/canary-by-header-pattern": "beta-[0-9]+",
                                "nginx.ingress.kubernetes.io/canary-by-cookie": "canary",
                                "nginx.ingress.kubernetes.io/canary-weight": "10"}},
               "spec": {"ingressClassName": "nginx",
                        "rules": [{"host": "legacy.example.com", "http": {"paths": [
                            {"path": "/legacy(/|$)(.*)", "pathType": "ImplementationSpecific",
                             "backend": {"service": {"name": "canary", "port": {"number": 80}}}}]}}]}}),
        // In a namespace of their own, so their backends sort before every
        // renamed `shop` Service's and the sections keep their order.
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "canary", "namespace": "legacy"},
               "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "legacy", "namespace": "legacy"},
               "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}),
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
               "metadata": {"name": "users", "namespace": "legacy"},
               "data": {"auth": b64("alice:$6$abcdefgh$KQeXafAQAaOoKTevphVU215RvJdgzyfASRasIOuh12hO8u0r1bGW92ZnTmC9IjsiQ8VPiTXBiZF49dFL1U4wX/\n")}}),
    ]
}

/// The ingress-nginx Ingress's annotations: one of every kind of value.
fn nginx_annotations() -> Value {
    let mut annotations = serde_json::Map::new();
    for (name, value) in [
        ("use-regex", "true"),
        ("rewrite-target", "/$2"),
        ("whitelist-source-range", "10.0.0.0/8, 192.0.2.1"),
        ("denylist-source-range", "10.9.0.0/16"),
        ("permanent-redirect", "https://new.example.com/landing"),
        ("permanent-redirect-code", "308"),
        ("app-root", "/app"),
        ("x-forwarded-prefix", "/legacy"),
        ("upstream-vhost", "internal.example.com"),
        ("server-alias", "old.example.com"),
        ("limit-rps", "10"),
        ("limit-whitelist", "10.1.0.0/16"),
        ("proxy-body-size", "8m"),
        ("proxy-read-timeout", "120"),
        ("affinity", "cookie"),
        ("session-cookie-name", "route"),
        ("session-cookie-path", "/legacy"),
        ("session-cookie-samesite", "Lax"),
        ("enable-cors", "true"),
        ("cors-allow-origin", "https://app.example.com"),
        ("cors-allow-methods", "GET, POST"),
        ("cors-allow-headers", "Content-Type,Authorization"),
        ("auth-type", "basic"),
        ("auth-secret", "users"),
        ("auth-realm", "Legacy"),
        ("upstream-hash-by", "$request_uri"),
        ("proxy-next-upstream", "error timeout http_502"),
        ("configuration-snippet", "more_set_headers \"X: y\";"),
    ] {
        annotations.insert(
            format!("nginx.ingress.kubernetes.io/{name}"),
            Value::from(value),
        );
    }
    Value::Object(annotations)
}

/// The bundled libraries, loaded once.
fn libraries() -> Vec<LoadedLibrary> {
    static LIBRARIES: LazyLock<(LibraryRuntime, Vec<LoadedLibrary>)> = LazyLock::new(|| {
        let runtime = LibraryRuntime::new(RuntimeConfig::default()).expect("runtime");
        let libraries = engine::load_libraries(&runtime, &[]).expect("bundled libraries");
        (runtime, libraries)
    });
    LIBRARIES.1.clone()
}

/// One line as HAProxy reads it: (section keyword, directive, word count).
type LineShape = (String, String, usize);

/// What must not change: the configuration's lines, and the lines of every
/// map and crt-list (by directory and extension, as paths carry names).
#[derive(Debug, PartialEq)]
struct Shape {
    config: Vec<LineShape>,
    files: BTreeMap<String, Vec<usize>>,
}

fn shape(rendered: &Rendered) -> Shape {
    let mut section = String::new();
    let mut config = Vec::new();
    for line in rendered.config.split('\n') {
        let words = words::split(line);
        let Some(first) = words.words.first() else {
            continue;
        };
        if section_of(first).is_some() {
            section = first.clone();
        }
        // A server's state is data (set at runtime without a reload), not
        // structure: a pod that is no longer gated is only disabled.
        let state =
            usize::from(first == "server" && words.words.last().is_some_and(|w| w == "disabled"));
        config.push((section.clone(), first.clone(), words.words.len() - state));
    }
    let mut files: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (path, content) in &rendered.files {
        let kind = match (path.split('/').next(), path.rsplit('.').next()) {
            (Some(dir), Some(ext)) if ext == "map" || ext == "crt-list" => format!("{dir}/*.{ext}"),
            _ => continue,
        };
        let counts = files.entry(kind).or_default();
        counts.extend(
            content
                .split('\n')
                .filter(|l| !l.is_empty())
                .map(|l| l.split_whitespace().count()),
        );
        counts.sort_unstable();
    }
    Shape { config, files }
}

fn render(objects: &[Value]) -> Result<Rendered, String> {
    let mut values = Values::default();
    values.set_assignment(GATE_ON).expect("values");
    values.set_assignment(NGINX_ON).expect("values");
    let mut engine = Engine::new(libraries(), values).map_err(|e| e.to_string())?;
    let changes = objects
        .iter()
        .filter_map(|object| ClusterObject::from_value(object.clone()))
        .map(ClusterChange::Applied)
        .collect();
    let rendered = engine
        .render(changes)
        .map_err(|e| format!("render failed: {e}"))?;
    engine
        .validate(&rendered)
        .map_err(|e| format!("refused: {e}"))?;
    Ok(rendered)
}

/// A random hostile value: benign text around one to four pieces, now and
/// then made long.
fn random_value(rng: &mut fastrand::Rng) -> String {
    let mut value = String::from("a");
    for _ in 0..rng.usize(1..=4) {
        value.push_str(PIECES[rng.usize(..PIECES.len())]);
        if rng.bool() {
            value.push('b');
        }
    }
    if rng.u8(..8) == 0 {
        value.push_str(&"x".repeat(rng.usize(300..5000)));
    }
    value
}

/// Whether a warning of `rendered` (not in the benign one) names one of
/// `objects` (by key or in its message).
fn skipped_with_warning(
    rendered: &Rendered,
    benign: &Rendered,
    objects: &[(String, String)],
) -> bool {
    rendered.warnings.iter().any(|(_, _, warning)| {
        let new = !benign
            .warnings
            .iter()
            .any(|(_, _, w)| w.message == warning.message);
        let named = objects.iter().any(|(namespace, name)| {
            warning
                .object
                .as_ref()
                .is_some_and(|key| &key.namespace == namespace && &key.name == name)
                || warning.message.contains(&format!("{namespace}/{name}"))
        });
        new && named
    })
}

/// Checks one value in one field; `Err` says how the property broke.
fn check(
    field: &Field,
    value: &str,
    benign: &Rendered,
    benign_shape: &Shape,
) -> Result<bool, String> {
    let mut objects = cluster();
    for (index, pointer) in field.places {
        let slot = objects[*index]
            .pointer_mut(pointer)
            .unwrap_or_else(|| panic!("{}: no {pointer} in the cluster", field.name));
        *slot = Value::String(value.to_owned());
    }
    let touched: Vec<(String, String)> = field
        .places
        .iter()
        .map(|(index, _)| {
            let metadata = &objects[*index]["metadata"];
            let text = |key: &str| metadata[key].as_str().unwrap_or_default().to_owned();
            (text("namespace"), text("name"))
        })
        .collect();
    let rendered = render(&objects)?;
    let got = shape(&rendered);
    if got == *benign_shape {
        return Ok(false);
    }
    // Ignored as if it were not there (an Ingress of another class).
    let absent: Vec<Value> = cluster()
        .into_iter()
        .enumerate()
        .filter(|(index, _)| !field.places.iter().any(|(i, _)| i == index))
        .map(|(_, object)| object)
        .collect();
    if render(&absent).is_ok_and(|r| shape(&r) == got) {
        return Ok(true);
    }
    if !skipped_with_warning(&rendered, benign, &touched) {
        let warnings: Vec<String> = rendered
            .warnings
            .iter()
            .map(|(library, _, w)| format!("{library}: {:?} {}: {}", w.object, w.reason, w.message))
            .collect();
        return Err(format!(
            "the structure changed and no warning names the object (warnings: {warnings:#?}):\n{}",
            difference(benign_shape, &got)
        ));
    }
    let known: Vec<&LineShape> = benign_shape.config.iter().collect();
    // A line that lost words (an option of an annotation whose value was
    // refused, such as a cookie's SameSite) is not new: words may go,
    // never come.
    let shortened = |line: &LineShape| {
        known
            .iter()
            .any(|k| k.0 == line.0 && k.1 == line.1 && k.2 > line.2)
    };
    if let Some(new) = got
        .config
        .iter()
        .find(|line| !known.contains(line) && !shortened(line))
    {
        return Err(format!(
            "the object was skipped with a warning, but a new line appeared: {new:?}\n{}",
            difference(benign_shape, &got)
        ));
    }
    for (kind, counts) in &got.files {
        let before = benign_shape.files.get(kind).cloned().unwrap_or_default();
        if counts.len() > before.len() || counts.iter().any(|c| !before.contains(c)) {
            return Err(format!("{kind}: lines {before:?} became {counts:?}"));
        }
    }
    Ok(true)
}

fn difference(before: &Shape, after: &Shape) -> String {
    let (before, after) = (format!("{before:#?}"), format!("{after:#?}"));
    let diff = similar::TextDiff::from_lines(&before, &after)
        .unified_diff()
        .context_radius(2)
        .to_string();
    diff.chars().take(4000).collect()
}

#[test]
fn hostile_strings_in_user_fields_never_change_the_directive_structure() {
    let seed: u64 = std::env::var("HAPTIC_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(23);
    let random_cases: usize = std::env::var("HAPTIC_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let benign = render(&cluster()).expect("the benign cluster renders and validates");
    let benign_shape = shape(&benign);
    assert!(
        benign.config.contains("crt-list") && benign.config.contains("server web-7d9c6-aaaaa"),
        "the benign cluster no longer exercises TLS and the gate:\n{}",
        benign.config
    );
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut failures = Vec::new();
    let (mut cases, mut skipped) = (0, 0);
    for field in FIELDS {
        let values: Vec<String> = ATTACKS
            .iter()
            .map(|a| (*a).to_owned())
            .chain((0..random_cases).map(|_| random_value(&mut rng)))
            .collect();
        for value in values {
            cases += 1;
            match check(field, &value, &benign, &benign_shape) {
                Ok(true) => skipped += 1,
                Ok(false) => {}
                Err(why) => failures.push(format!("{} = {value:?}: {why}", field.name)),
            }
        }
    }
    println!(
        "{cases} cases over {} fields (seed {seed}): {skipped} skipped with a warning",
        FIELDS.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {cases} cases broke the property (HAPTIC_FUZZ_SEED={seed}):\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
