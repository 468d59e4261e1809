//! The extension points as the SDK documents them (`haptic_sdk::extending`,
//! template-libraries/README.md), checked by rendering the real components:
//! where each bundled library's lines land in `frontend http`, and where a
//! custom library's snippet lands by slot, priority and library order.

use std::path::PathBuf;

use haptic::library::{LibraryRuntime, RuntimeConfig};
use haptic::offline::{self, Job};

const MANIFESTS: &str = r#"
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: haptic
  annotations: {ingressclass.kubernetes.io/is-default-class: "true"}
spec: {controller: haproxy-haptic.org/controller}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  ports: [{port: 80}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  namespace: shop
  annotations:
    maintenance.haproxy-haptic.org/enabled: "true"
    allow-list.haproxy-haptic.org/source-ranges: "10.0.0.0/8"
spec:
  defaultBackend:
    service: {name: web, port: {number: 80}}
  rules:
    - host: shop.example.com
      http:
        paths:
          - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
"#;

#[test]
fn frontend_http_follows_the_documented_order() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manifests = dir.path().join("manifests.yaml");
    std::fs::write(&manifests, MANIFESTS).expect("manifests");
    let custom = vec![
        PathBuf::from(haptic::guests::EXAMPLE_MAINTENANCE_MODE_PATH),
        PathBuf::from(haptic::guests::EXAMPLE_SOURCE_ALLOW_LIST_PATH),
    ];
    let job = Job {
        inputs: vec![manifests],
        custom_libraries: custom.clone(),
        validate: true,
        ..Job::default()
    };
    let runtime = LibraryRuntime::new(RuntimeConfig::default()).expect("runtime starts");
    let libraries = offline::load_libraries(&runtime, &custom).expect("libraries load");
    let rendered = offline::render(&job, libraries).expect("renders").rendered;

    let config = &rendered.config;
    let start = config
        .lines()
        .position(|line| line == "frontend http")
        .expect("base defines frontend http");
    let section: Vec<(usize, &str)> = config
        .lines()
        .enumerate()
        .skip(start)
        .take_while(|(_, line)| !line.is_empty())
        .collect();
    // Each anchor: the start of a line, and the library that must write it.
    // The lines must come in exactly this order.
    // HTTP/3 lines come where the HAProxy in use serves QUIC (3.0 with
    // QUIC, as make setup and the image provide).
    let quic = haptic::validate::Validator::from_env()
        .and_then(|validator| validator.facts())
        .is_ok_and(|facts| facts.quic);
    let mut documented = vec![
        ("frontend http", "base"),
        ("bind :8080", "base"),
        ("default_backend haptic.not-found", "base"),
        // Request rules at -100, tied: library order (both 500), then name.
        ("http-request return status 503", "maintenance-mode"),
        ("http-request deny deny_status 403", "source-allow-list"),
        // Request rules at 0: the public variables.
        ("http-request set-var(txn.haptic_host) ", "ingress"),
        ("http-request set-var(txn.haptic_wildcard) ", "ingress"),
        ("http-request set-var-fmt(txn.haptic_key_host) ", "ingress"),
        (
            "http-request set-var-fmt(txn.haptic_key_wildcard) ",
            "ingress",
        ),
        // Request rules at 10: TLS, reading txn.haptic_host.
        ("http-request set-header X-Forwarded-Proto https", "ingress"),
        ("http-request set-var(txn.haptic_tls) ", "ingress"),
        ("http-request redirect scheme https ", "ingress"),
        // Response rules: HTTP/3's advertisement on HTTPS answers.
        ("http-response set-header alt-svc ", "ingress"),
        // Routing at 0, then an Ingress's default backend at 1000.
        (
            "use_backend %[var(txn.haptic_key_host),map_str(maps/ingress-exact.map)]",
            "ingress",
        ),
        (
            "use_backend %[path,map_beg(maps/ingress-prefix.map)]",
            "ingress",
        ),
        ("use_backend shop_web_80", "ingress"),
        // Other: the HTTPS bind (a bind may stand anywhere in a frontend),
        // then its QUIC twin.
        ("bind :8443 ssl crt certs/default.pem", "ingress"),
        ("bind quic4@:8443 ssl crt certs/default.pem", "ingress"),
    ];
    if !quic {
        documented.retain(|(anchor, _)| !anchor.contains("alt-svc") && !anchor.contains("quic4@"));
    }
    let mut previous: Option<usize> = None;
    for (anchor, library) in documented {
        let Some(&(line, _)) = section
            .iter()
            .find(|(_, text)| text.trim_start().starts_with(anchor))
        else {
            panic!("frontend http has no line starting `{anchor}`:\n{config}");
        };
        assert!(
            previous.is_none_or(|previous| previous < line),
            "`{anchor}` is out of the documented order:\n{config}"
        );
        assert_eq!(
            rendered.library_at_line(line + 1),
            Some(library),
            "`{anchor}` is written by `{library}`"
        );
        previous = Some(line);
    }
    let last = if quic {
        "bind quic4@:8443 ssl crt certs/default.pem crt-list certs/ingress.crt-list alpn h3"
    } else {
        "bind :8443 ssl crt certs/default.pem crt-list certs/ingress.crt-list alpn h2,http/1.1"
    };
    assert_eq!(
        section.last().map(|(_, text)| text.trim()),
        Some(last),
        "the HTTPS binds (slot Other) are the section's last lines:\n{config}"
    );
}
