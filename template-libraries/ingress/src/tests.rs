use haptic_sdk::testing::Harness;
use haptic_sdk::{Item, Slot};
use serde_json::{Value, json};

use super::*;

fn class(name: &str, controller: &str, default: bool) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
        "metadata": {"name": name, "annotations": {"ingressclass.kubernetes.io/is-default-class": default.to_string()}},
        "spec": {"controller": controller}
    })
}

fn service(name: &str) -> Value {
    json!({"metadata": {"namespace": "default", "name": name}, "spec": {"ports": [{"name": "http", "port": 80}, {"name": "admin", "port": 9000}]}})
}

fn ingress(name: &str, class: Option<&str>, rules: Value) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"namespace": "default", "name": name},
        "spec": {"ingressClassName": class, "rules": rules}
    })
}

fn rule(host: Option<&str>, path: &str, path_type: &str, service: &str, port: Value) -> Value {
    json!({"host": host, "http": {"paths": [{"path": path, "pathType": path_type, "backend": {"service": {"name": service, "port": port}}}]}})
}

const OURS: &str = "haproxy-haptic.org/controller";

fn harness(values: Value) -> Harness<IngressLibrary> {
    let mut h = Harness::<IngressLibrary>::new(values).unwrap();
    h.apply(INGRESS_CLASSES, &class("haptic", OURS, false));
    h.apply(
        INGRESS_CLASSES,
        &class("nginx", "k8s.io/ingress-nginx", false),
    );
    h.apply(SERVICES, &service("web"));
    h
}

fn map_lines(h: &Harness<IngressLibrary>, path: &str) -> Vec<String> {
    h.file(path)
        .unwrap()
        .lines()
        .skip(1)
        .map(str::to_owned)
        .collect()
}

#[test]
fn routes_of_served_ingresses_go_into_the_maps() {
    let mut h = harness(json!({}));
    h.apply(
        INGRESSES,
        &ingress(
            "a",
            Some("haptic"),
            json!([rule(
                Some("a.example.com"),
                "/api",
                "Prefix",
                "web",
                json!({"number": 80})
            )]),
        ),
    );
    h.apply(
        INGRESSES,
        &ingress(
            "b",
            Some("haptic"),
            json!([rule(
                Some("*.example.com"),
                "/exact",
                "Exact",
                "web",
                json!({"name": "admin"})
            )]),
        ),
    );
    h.apply(
        INGRESSES,
        &ingress(
            "other",
            Some("nginx"),
            json!([rule(
                Some("o.example.com"),
                "/",
                "Prefix",
                "web",
                json!({"number": 80})
            )]),
        ),
    );
    h.render().unwrap();
    assert_eq!(
        map_lines(&h, INGRESS_MAPS.exact),
        [
            "*.example.com/exact default_web_9000",
            "a.example.com/api default_web_80"
        ]
    );
    assert_eq!(
        map_lines(&h, INGRESS_MAPS.prefix),
        ["a.example.com/api/ default_web_80"]
    );
    assert!(
        h.status_patches().is_empty(),
        "no published address, no patches"
    );
}

#[test]
fn a_missing_service_or_port_routes_to_the_unavailable_backend() {
    let mut h = harness(json!({}));
    h.apply(
        INGRESSES,
        &ingress(
            "a",
            Some("haptic"),
            json!([
                rule(
                    Some("a.example.com"),
                    "/x",
                    "Exact",
                    "nope",
                    json!({"number": 80})
                ),
                rule(
                    Some("a.example.com"),
                    "/y",
                    "Exact",
                    "web",
                    json!({"name": "grpc"})
                )
            ]),
        ),
    );
    h.render().unwrap();
    assert_eq!(
        map_lines(&h, INGRESS_MAPS.exact),
        [
            "a.example.com/x haptic.unavailable",
            "a.example.com/y haptic.unavailable"
        ]
    );
    // The Service appears with the port: the route follows.
    h.apply(SERVICES, &json!({"metadata": {"namespace": "default", "name": "web"}, "spec": {"ports": [{"name": "grpc", "port": 50051}]}}));
    h.render().unwrap();
    assert!(
        map_lines(&h, INGRESS_MAPS.exact).contains(&"a.example.com/y default_web_50051".to_owned())
    );
}

#[test]
fn the_oldest_default_backend_catches_the_rest() {
    let mut h = harness(json!({}));
    let mut newer = ingress("newer", Some("haptic"), json!([]));
    newer["metadata"]["creationTimestamp"] = json!("2026-02-01T00:00:00Z");
    newer["spec"]["defaultBackend"] = json!({"service": {"name": "web", "port": {"number": 9000}}});
    let mut older = ingress("older", Some("haptic"), json!([]));
    older["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
    older["spec"]["defaultBackend"] = json!({"service": {"name": "web", "port": {"number": 80}}});
    h.apply(INGRESSES, &newer);
    h.apply(INGRESSES, &older);
    h.render().unwrap();
    let defaults: Vec<_> = h
        .output()
        .values()
        .filter_map(|item| match item {
            Item::Snippet {
                slot: Slot::Routing,
                priority: 1000,
                lines,
                ..
            } => Some(lines.trim().to_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(defaults, ["use_backend default_web_80"]);
}

#[test]
fn served_ingresses_get_the_published_address_and_others_nothing() {
    let mut h = harness(json!({"ingress": {"publishedAddress": {"ip": "192.0.2.10"}}}));
    assert_eq!(h.plan().patches_status_of, ["networking.k8s.io/v1/Ingress"]);
    h.apply(INGRESSES, &ingress("mine", Some("haptic"), json!([])));
    h.apply(INGRESSES, &ingress("theirs", Some("nginx"), json!([])));
    h.render().unwrap();
    assert_eq!(
        h.status_patches(),
        [(
            "default/mine".to_owned(),
            json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}})
        )]
    );
    // Changing the class of an Ingress away from ours drops its patch.
    h.apply(INGRESSES, &ingress("mine", Some("nginx"), json!([])));
    let delta = h.render().unwrap();
    assert_eq!(
        delta.removals,
        ["status:deployed:networking.k8s.io/v1:Ingress:default/mine"]
    );
}

#[test]
fn served_ingresses_publish_the_address_the_cluster_gave_the_published_service() {
    let mut h = harness(json!({"ingress": {"publishedService": "haptic/haptic-haproxy"}}));
    assert_eq!(h.plan().patches_status_of, ["networking.k8s.io/v1/Ingress"]);
    h.apply(INGRESSES, &ingress("mine", Some("haptic"), json!([])));
    h.render().unwrap();
    assert!(h.status_patches().is_empty(), "no Service yet, no address");
    let service = |status: serde_json::Value| {
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "haptic-haproxy", "namespace": "haptic"},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.90.0.9"},
            "status": status
        })
    };
    h.apply(PUBLISHED_SERVICE, &service(json!({})));
    h.render().unwrap();
    assert!(
        h.status_patches().is_empty(),
        "a LoadBalancer without its address publishes nothing, not its cluster IP"
    );
    h.apply(
        PUBLISHED_SERVICE,
        &service(json!({"loadBalancer": {"ingress": [{"ip": "10.89.0.200"}]}})),
    );
    h.render().unwrap();
    assert_eq!(
        h.status_patches(),
        [(
            "default/mine".to_owned(),
            json!({"loadBalancer": {"ingress": [{"ip": "10.89.0.200"}]}})
        )]
    );
    // A fixed address wins and needs no Service.
    let mut h = harness(json!({"ingress": {
        "publishedService": "haptic/haptic-haproxy",
        "publishedAddress": {"hostname": "lb.example.com"}
    }}));
    h.apply(INGRESSES, &ingress("mine", Some("haptic"), json!([])));
    h.render().unwrap();
    assert_eq!(
        h.status_patches(),
        [(
            "default/mine".to_owned(),
            json!({"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}})
        )]
    );
}

#[test]
fn the_routing_lines_read_the_maps_in_precedence_order() {
    let rules = routes::routing_rules(&INGRESS_MAPS);
    let lines: Vec<&str> = rules.lines().map(str::trim).collect();
    assert_eq!(lines.len(), 6);
    assert!(
        lines[0]
            .starts_with("use_backend %[var(txn.haptic_key_host),map_str(maps/ingress-exact.map)]")
    );
    assert!(
        lines[1].starts_with(
            "use_backend %[var(txn.haptic_key_host),map_beg(maps/ingress-prefix.map)]"
        )
    );
    assert!(lines[2].contains("haptic_key_wildcard"));
    assert!(lines[5].starts_with("use_backend %[path,map_beg(maps/ingress-prefix.map)]"));
}
