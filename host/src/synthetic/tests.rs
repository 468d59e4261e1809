use std::collections::{BTreeMap, HashSet};

use super::*;

fn of_kind<'a>(cluster: &'a Cluster, kind: &str) -> Vec<&'a Value> {
    cluster.objects().filter(|o| o["kind"] == kind).collect()
}

fn endpoint_count(cluster: &Cluster) -> usize {
    of_kind(cluster, "EndpointSlice")
        .iter()
        .map(|s| s["endpoints"].as_array().map_or(0, Vec::len))
        .sum()
}

#[test]
fn the_benchmark_preset_has_the_design_sizes() {
    let cluster = Cluster::generate(ClusterSpec::benchmark());
    assert_eq!(of_kind(&cluster, "Ingress").len(), 800);
    assert_eq!(of_kind(&cluster, "Service").len(), 1_000);
    assert_eq!(endpoint_count(&cluster), 10_000);
    assert_eq!(of_kind(&cluster, "Pod").len(), 10_000);
    assert_eq!(of_kind(&cluster, "IngressClass").len(), 1);
    assert_eq!(of_kind(&cluster, "Namespace").len(), 20);
}

#[test]
fn generation_is_deterministic_and_every_object_loads_as_a_manifest() {
    let a = Cluster::generate(ClusterSpec::small());
    assert_eq!(a, Cluster::generate(ClusterSpec::small()));
    let manifests = a.manifests().expect("built-in kinds, no duplicates");
    assert_eq!(manifests.len(), a.objects().count());
    let versions: HashSet<_> = manifests
        .iter()
        .map(|m| m.object.resource_version.clone())
        .collect();
    assert_eq!(
        versions.len(),
        manifests.len(),
        "resourceVersions are unique like etcd revisions"
    );
    assert!(
        manifests
            .iter()
            .all(|m| m.object.resource_version.parse::<u64>().is_ok())
    );
}

#[test]
fn endpoints_have_unique_loopback_addresses_and_point_at_existing_pods() {
    let cluster = Cluster::generate(ClusterSpec {
        gated: true,
        ..ClusterSpec::small()
    });
    let pods: BTreeMap<(String, String), &Value> = of_kind(&cluster, "Pod")
        .into_iter()
        .map(|p| {
            let key = (
                p["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            );
            (key, p)
        })
        .collect();
    let mut addresses = HashSet::new();
    let mut states = BTreeMap::new();
    for slice in of_kind(&cluster, "EndpointSlice") {
        let service = slice["metadata"]["labels"]["kubernetes.io/service-name"]
            .as_str()
            .expect("label");
        assert!(
            slice["metadata"]["name"]
                .as_str()
                .expect("name")
                .starts_with(&format!("{service}-"))
        );
        for endpoint in slice["endpoints"].as_array().expect("endpoints") {
            let address: Ipv4Addr = endpoint["addresses"][0]
                .as_str()
                .expect("address")
                .parse()
                .expect("IPv4");
            assert!(
                address.is_loopback() && address != Ipv4Addr::LOCALHOST,
                "{address}"
            );
            assert!(addresses.insert(address), "{address} used twice");
            let target = &endpoint["targetRef"];
            let pod = pods
                .get(&(
                    target["namespace"].as_str().unwrap_or_default().to_owned(),
                    target["name"].as_str().unwrap_or_default().to_owned(),
                ))
                .unwrap_or_else(|| panic!("no pod for {target}"));
            assert_eq!(pod["status"]["podIP"], address.to_string());
            assert_eq!(
                pod["spec"]["readinessGates"][0]["conditionType"],
                GATE_CONDITION
            );
            let c = &endpoint["conditions"];
            *states
                .entry((
                    c["ready"].as_bool(),
                    c["serving"].as_bool(),
                    c["terminating"].as_bool(),
                ))
                .or_insert(0) += 1;
        }
    }
    assert_eq!(addresses.len(), 24);
    // small(): 8 services x 3 endpoints; service 3 has a not-ready endpoint,
    // service 5 a terminating one.
    assert_eq!(
        states.get(&(Some(false), Some(false), Some(false))),
        Some(&1),
        "{states:?}"
    );
    assert_eq!(
        states.get(&(Some(false), Some(true), Some(true))),
        Some(&1),
        "{states:?}"
    );
    assert_eq!(
        states.get(&(Some(true), Some(true), Some(false))),
        Some(&22),
        "{states:?}"
    );
}

#[test]
fn gated_not_ready_pods_have_ready_containers_and_wait_for_the_gate() {
    let status = |gated: bool| {
        let cluster = Cluster::generate(ClusterSpec {
            gated,
            ..ClusterSpec::small()
        });
        let pod = of_kind(&cluster, "Pod")
            .into_iter()
            .find(|p| {
                p["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter().any(|c| {
                        c["type"] == "Ready"
                            && c["status"] == "False"
                            && p["metadata"].get("deletionTimestamp").is_none()
                    })
                })
            })
            .cloned()
            .expect("a not-ready pod");
        pod["status"]["conditions"].clone()
    };
    let find = |conditions: &Value, kind: &str| {
        conditions
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == kind).cloned())
    };
    let gated = status(true);
    assert_eq!(
        find(&gated, "ContainersReady").expect("condition")["status"],
        "True"
    );
    assert_eq!(
        find(&gated, "Ready").expect("condition")["reason"],
        "ReadinessGatesNotReady"
    );
    assert!(find(&gated, GATE_CONDITION).is_none());
    let plain = status(false);
    assert_eq!(
        find(&plain, "ContainersReady").expect("condition")["status"],
        "False"
    );
}

#[test]
fn ingresses_mix_exact_and_prefix_paths_and_port_names() {
    let cluster = Cluster::generate(ClusterSpec::small());
    let ingresses = of_kind(&cluster, "Ingress");
    let hosts: Vec<_> = ingresses
        .iter()
        .map(|i| i["spec"]["rules"][0]["host"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        hosts[..3],
        [
            "app-0.ns-0.example.com",
            "app-1.ns-0.example.com",
            "app-2.ns-0.example.com"
        ]
    );
    let paths: Vec<&Value> = ingresses
        .iter()
        .flat_map(|i| {
            i["spec"]["rules"][0]["http"]["paths"]
                .as_array()
                .into_iter()
                .flatten()
        })
        .collect();
    assert!(paths.iter().any(|p| p["pathType"] == "Exact"));
    assert!(paths.iter().any(|p| p["pathType"] == "Prefix"));
    assert!(
        paths
            .iter()
            .any(|p| p["backend"]["service"]["port"]["name"] == "admin")
    );
    assert!(
        paths
            .iter()
            .any(|p| p["backend"]["service"]["port"]["number"] == 80)
    );
    assert!(
        ingresses
            .iter()
            .all(|i| i["spec"]["ingressClassName"] == INGRESS_CLASS)
    );
    let class = &of_kind(&cluster, "IngressClass")[0];
    assert_eq!(class["spec"]["controller"], CONTROLLER);
}

#[test]
fn flipping_an_endpoint_changes_slice_and_pod_and_twice_restores_them() {
    let mut cluster = Cluster::generate(ClusterSpec::small());
    let original = cluster.clone();
    let changed = cluster.flip_endpoint(1, 2, 0).expect("exists");
    let [slice, pod] = &changed[..] else {
        panic!("two objects: {changed:?}")
    };
    assert_eq!(
        (
            slice["kind"].as_str(),
            slice["metadata"]["namespace"].as_str()
        ),
        (Some("EndpointSlice"), Some("ns-1"))
    );
    assert_eq!(slice["endpoints"][0]["conditions"]["ready"], false);
    assert_eq!(
        pod["metadata"]["name"],
        slice["endpoints"][0]["targetRef"]["name"]
    );
    assert!(
        pod["status"]["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "False")
    );
    let before: u64 = original
        .objects()
        .filter_map(|o| o["metadata"]["resourceVersion"].as_str()?.parse().ok())
        .max()
        .expect("versions");
    let after: u64 = slice["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .expect("version");
    assert!(after > before);
    assert_ne!(cluster, original);
    cluster.flip_endpoint(1, 2, 0).expect("exists");
    let strip = |c: &Cluster| -> Vec<Value> {
        c.objects()
            .cloned()
            .map(|mut o| {
                o["metadata"]["resourceVersion"] = Value::Null;
                o
            })
            .collect()
    };
    assert_eq!(strip(&cluster), strip(&original));
    let error = cluster
        .flip_endpoint(0, 0, 3)
        .expect_err("only 3 endpoints");
    assert!(
        error.to_string().contains("3 endpoints per service"),
        "{error}"
    );
}

#[test]
fn added_ingresses_are_new_objects() {
    let mut cluster = Cluster::generate(ClusterSpec::small());
    let first = cluster.add_ingress();
    let second = cluster.add_ingress();
    assert_eq!(first["metadata"]["name"], "app-3");
    assert_eq!(first["metadata"]["namespace"], "ns-0");
    assert_eq!(second["metadata"]["namespace"], "ns-1");
    assert_eq!(first["spec"]["rules"][0]["host"], "app-3.ns-0.example.com");
    assert_eq!(of_kind(&cluster, "Ingress").len(), 8);
    cluster.manifests().expect("no duplicates after adding");
}

#[test]
fn written_yaml_loads_back_as_the_same_objects() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cluster = Cluster::generate(ClusterSpec {
        gated: true,
        ..ClusterSpec::small()
    });
    cluster.add_ingress();
    let files = cluster.write_yaml(dir.path()).expect("written");
    assert_eq!(files.len(), 5);
    let loaded =
        crate::manifests::load_paths(&[dir.path()], &crate::manifests::WatchedKinds::new())
            .expect("loads");
    let loaded: Vec<Value> = loaded.into_iter().map(|m| m.object.value()).collect();
    let generated: Vec<Value> = cluster
        .manifests()
        .expect("manifests")
        .into_iter()
        .map(|m| m.object.value())
        .collect();
    assert_eq!(loaded, generated);
}
