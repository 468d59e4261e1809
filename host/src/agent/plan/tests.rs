use super::*;
use crate::agent::wire::BundleFile;

const CONFIG: &str = "global
    default-path config

frontend http
    bind :8080
    use_backend %[path,map_str(maps/exact.map)]

backend shop_web_80
    balance roundrobin
    server web-a 10.244.0.1:8080
    server web-b 10.244.0.2:8080 disabled
    server web-c 10.244.0.3:8080 weight 10 check
";

fn bundle(config: &str, map: &str) -> Bundle {
    Bundle::new(
        config.to_owned(),
        vec![BundleFile {
            path: "maps/exact.map".into(),
            content: map.into(),
        }],
    )
}

fn maps() -> Vec<String> {
    vec!["maps/exact.map".to_owned()]
}

fn state(server: &str, enabled: bool) -> RuntimeCommand {
    RuntimeCommand::ServerState {
        backend: "shop_web_80".into(),
        server: server.into(),
        enabled,
    }
}

#[test]
fn identical_bundles_need_nothing() {
    let a = bundle(CONFIG, "/ shop_web_80\n");
    assert_eq!(plan(&a, &a.clone(), &maps()), Plan::Unchanged);
}

#[test]
fn readiness_flips_are_state_commands_in_a_safe_order() {
    let old = bundle(CONFIG, "");
    let next = bundle(
        &CONFIG
            .replace("10.244.0.1:8080\n", "10.244.0.1:8080 disabled\n")
            .replace("10.244.0.2:8080 disabled", "10.244.0.2:8080"),
        "",
    );
    assert_eq!(
        plan(&old, &next, &maps()),
        Plan::Runtime(vec![state("web-a", false), state("web-b", true)])
    );
}

#[test]
fn address_and_weight_change_before_the_server_is_enabled() {
    let old = bundle(CONFIG, "");
    let next = bundle(
        &CONFIG.replace(
            "web-b 10.244.0.2:8080 disabled",
            "web-b 10.244.0.9:9090 weight 5",
        ),
        "",
    );
    assert_eq!(
        plan(&old, &next, &maps()),
        Plan::Runtime(vec![
            RuntimeCommand::ServerAddress {
                backend: "shop_web_80".into(),
                server: "web-b".into(),
                address: "10.244.0.9".into(),
                port: 9090,
            },
            RuntimeCommand::ServerWeight {
                backend: "shop_web_80".into(),
                server: "web-b".into(),
                weight: 5,
            },
            state("web-b", true),
        ])
    );
}

#[test]
fn map_entries_replace_the_whole_map() {
    let old = bundle(CONFIG, "# header\n/a shop_web_80\n");
    let next = bundle(CONFIG, "# header\n/a shop_web_80\n/b shop_web_80\n");
    assert_eq!(
        plan(&old, &next, &maps()),
        Plan::Runtime(vec![RuntimeCommand::ReplaceMap {
            map: "maps/exact.map".into(),
            content: "# header\n/a shop_web_80\n/b shop_web_80\n".into(),
        }])
    );
    // A comment-only change rewrites the file and touches no worker.
    let comment = bundle(CONFIG, "# other header\n/a shop_web_80\n");
    assert_eq!(plan(&old, &comment, &maps()), Plan::Runtime(vec![]));
}

#[test]
fn structural_changes_reload() {
    let old = bundle(CONFIG, "");
    let cases = [
        // a new server
        CONFIG.replace(
            "    server web-c",
            "    server web-d 10.244.0.4:8080\n    server web-c",
        ),
        // a renamed server
        CONFIG.replace("web-a ", "web-z "),
        // an option on a server
        CONFIG.replace("weight 10 check", "weight 10"),
        // a host name is not an address the runtime can take
        CONFIG.replace("10.244.0.1:8080", "web.local:8080"),
        // an out-of-range weight
        CONFIG.replace("weight 10", "weight 300"),
        // anything outside server lines
        CONFIG.replace("balance roundrobin", "balance leastconn"),
        CONFIG.replace("bind :8080", "bind :8081"),
    ];
    for config in cases {
        let next = bundle(&config, "");
        assert!(
            matches!(plan(&old, &next, &maps()), Plan::Reload(_)),
            "{config}"
        );
    }
    // A server-like line outside a backend is not a server.
    let frontend_old = "frontend f\n    server a 10.0.0.1:80\n";
    let frontend_new = "frontend f\n    server a 10.0.0.2:80\n";
    assert!(matches!(
        plan(
            &bundle(frontend_old, ""),
            &bundle(frontend_new, ""),
            &maps()
        ),
        Plan::Reload(_)
    ));
}

#[test]
fn files_that_are_not_loaded_maps_reload() {
    let old = bundle(CONFIG, "/a x\n");
    let next = bundle(CONFIG, "/a y\n");
    // Same change, but HAProxy did not load the file as a map.
    assert!(matches!(plan(&old, &next, &[]), Plan::Reload(_)));
    // A new file.
    let mut more = next.clone();
    more.files.push(BundleFile {
        path: "errors/503.http".into(),
        content: "HTTP/1.0 503\r\n\r\n".into(),
    });
    assert!(matches!(plan(&old, &more, &maps()), Plan::Reload(_)));
}
