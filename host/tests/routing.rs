//! Real traffic through a rendered configuration: the bundled libraries
//! render an Ingress, the real HAProxy serves it on loopback, and requests
//! show which backend server answered. Pins the Kubernetes path and host
//! matching semantics where they differ from naive string matching.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener};

mod support;

use haptic::library::{LibraryRuntime, RuntimeConfig};
use haptic::offline::{self, Job};
use haptic::values::Values;
use support::{free_port, http_get, start_haproxy};

/// A tiny HTTP server that answers every request with its own name.
fn spawn_named_server(name: &'static str, address: SocketAddr) -> SocketAddr {
    let listener = TcpListener::bind(address).expect("bind test server");
    let local = listener.local_addr().expect("local address");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer);
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{name}",
                name.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    local
}

/// Sends one request; returns (status, body).
fn get(port: u16, host: &str, path: &str) -> (u16, String) {
    let response = http_get(port, host, path);
    (response.status, response.body)
}

fn manifests(port: u16) -> String {
    let slice = |service: &str, endpoints: &[(&str, &str, bool)]| {
        let endpoints: String = endpoints
            .iter()
            .map(|(pod, ip, ready)| {
                format!(
                    "  - addresses: [\"{ip}\"]\n    conditions: {{ready: {ready}, serving: {ready}, terminating: false}}\n    targetRef: {{kind: Pod, namespace: app, name: {pod}}}\n"
                )
            })
            .collect();
        format!(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {service}-1\n  namespace: app\n  labels: {{kubernetes.io/service-name: {service}}}\naddressType: IPv4\nports:\n  - {{name: http, port: {port}, protocol: TCP}}\nendpoints:\n{endpoints}---\napiVersion: v1\nkind: Service\nmetadata: {{name: {service}, namespace: app}}\nspec:\n  ports:\n  - {{name: http, port: 80, targetPort: {port}}}\n---\n"
        )
    };
    let mut text = String::from(
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: haptic}\nspec: {controller: haproxy-haptic.org/controller}\n---\n",
    );
    text += &slice("web", &[("web-1", "127.0.77.1", true)]);
    text += &slice(
        "api",
        &[
            ("api-1", "127.0.77.2", true),
            ("api-2", "127.0.77.3", false),
        ],
    );
    text += &slice("wild", &[("wild-1", "127.0.77.4", true)]);
    text += "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: routes, namespace: app}
spec:
  ingressClassName: haptic
  rules:
  - host: a.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {name: http}}}}
      - {path: /api, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}
      - {path: /exact, pathType: Exact, backend: {service: {name: api, port: {number: 80}}}}
  - host: \"*.wild.test\"
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: wild, port: {number: 80}}}}
";
    text
}

#[test]
fn ingress_routes_follow_kubernetes_matching_rules() {
    let backend_port = free_port();
    let first = spawn_named_server("web", SocketAddr::from(([127, 0, 77, 1], backend_port)));
    spawn_named_server("api", SocketAddr::from(([127, 0, 77, 2], first.port())));
    spawn_named_server(
        "api-not-ready",
        SocketAddr::from(([127, 0, 77, 3], first.port())),
    );
    spawn_named_server("wild", SocketAddr::from(([127, 0, 77, 4], first.port())));

    let dir = tempfile::tempdir().expect("temp dir");
    let manifests_path = dir.path().join("cluster.yaml");
    std::fs::write(&manifests_path, manifests(first.port())).expect("write manifests");
    let http_port = free_port();
    let mut values = Values::default();
    values
        .set_assignment(&format!(
            "templateLibraries.base.frontends.http.bind=127.0.0.1:{http_port}"
        ))
        .expect("bind value");
    values
        .set_assignment(&format!(
            "templateLibraries.base.frontends.healthz.bind=127.0.0.1:{}",
            free_port()
        ))
        .expect("healthz value");
    values
        .set_assignment(&format!(
            "templateLibraries.ingress.tls.bind=127.0.0.1:{}",
            free_port()
        ))
        .expect("https value");
    // Default values otherwise: HAProxy must start under whatever
    // file-descriptor limit the machine has (a fixed maxconn above it made
    // HAProxy refuse to start).
    let job = Job {
        inputs: vec![manifests_path],
        values,
        custom_libraries: Vec::new(),
        validate: true,
    };
    let runtime = LibraryRuntime::new(RuntimeConfig::default()).expect("runtime");
    let libraries = offline::load_libraries(&runtime, &job.custom_libraries).expect("libraries");
    let output = offline::render(&job, libraries).expect("render");
    let out = dir.path().join("out");
    offline::write_dir(&output, &out).expect("write render");
    let _haproxy = start_haproxy(&out, http_port);

    let cases = [
        ("a.test", "/", 200, "web"),
        ("a.test", "/api", 200, "api"),
        ("a.test", "/api/", 200, "api"),
        ("a.test", "/api/v1/users", 200, "api"),
        // Prefix matching is per path element: /apix is not under /api.
        ("a.test", "/apix", 200, "web"),
        ("a.test", "/exact", 200, "api"),
        // Exact means exact: a trailing slash falls back to the / prefix.
        ("a.test", "/exact/", 200, "web"),
        // Host names are case-insensitive and the port is ignored.
        ("A.Test:8080", "/api", 200, "api"),
        // A wildcard covers exactly one label.
        ("x.wild.test", "/anything", 200, "wild"),
        ("y.x.wild.test", "/", 404, ""),
        ("wild.test", "/", 404, ""),
        ("unknown.test", "/", 404, ""),
    ];
    let mut failures = Vec::new();
    for (host, path, status, body) in cases {
        let (got_status, got_body) = get(http_port, host, path);
        if got_status != status || (status == 200 && got_body != body) {
            failures.push(format!(
                "{host}{path}: expected {status} {body:?}, got {got_status} {got_body:?}"
            ));
        }
    }
    // The not-ready endpoint is in the file but disabled: it never answers.
    for _ in 0..6 {
        let (_, body) = get(http_port, "a.test", "/api");
        if body != "api" {
            failures.push(format!(
                "a.test/api answered by {body:?}, not the ready server"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "routing mismatches:\n{}\n\nconfig:\n{}",
        failures.join("\n"),
        output.rendered.config
    );
}
