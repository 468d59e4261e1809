use super::*;
use crate::protocol::runtime_commands::CertPayload;
use crate::protocol::wire::BundleFile;

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
        vec![BundleFile::new("maps/exact.map", map)],
    )
}

fn maps() -> LoadedFiles {
    LoadedFiles {
        maps: vec!["maps/exact.map".to_owned()],
        certs: Vec::new(),
    }
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
    assert!(matches!(
        plan(&old, &next, &LoadedFiles::default()),
        Plan::Reload(_)
    ));
    // A new file.
    let mut more = next.clone();
    more.files
        .push(BundleFile::new("errors/503.http", "HTTP/1.0 503\r\n\r\n"));
    assert!(matches!(plan(&old, &more, &maps()), Plan::Reload(_)));
}

// ---- certificates

fn pem(generation: &str) -> String {
    format!(
        "-----BEGIN CERTIFICATE-----\nCERT{generation}\n-----END CERTIFICATE-----\n\
         -----BEGIN PRIVATE KEY-----\nKEY{generation}\n-----END PRIVATE KEY-----\n"
    )
}

fn tls_config() -> String {
    format!(
        "{CONFIG}\nfrontend https\n    bind :8443 ssl crt certs/default.pem crt-list certs/ingress.crt-list\n    default_backend shop_web_80\n"
    )
}

const CRT_LIST: &str = "certs/shop_web.pem shop.example.com\n";

/// The TLS bundle: the map, the default certificate, one Ingress's
/// certificate and the crt-list naming it.
fn tls_bundle(config: &str, map: &str, shop: &str, extra: &[BundleFile]) -> Bundle {
    let mut files = vec![
        BundleFile::new("maps/exact.map", map),
        BundleFile::new("certs/default.pem", pem("default")),
        BundleFile::new("certs/shop_web.pem", shop),
        BundleFile::new("certs/ingress.crt-list", CRT_LIST),
    ];
    files.extend_from_slice(extra);
    Bundle::new(config.to_owned(), files)
}

/// What `show map` and `show ssl cert` report for [`tls_config`].
fn loaded_tls() -> LoadedFiles {
    LoadedFiles {
        maps: vec!["maps/exact.map".into()],
        certs: vec!["certs/default.pem".into(), "certs/shop_web.pem".into()],
    }
}

fn replace_cert(cert: &str, content: &str) -> RuntimeCommand {
    RuntimeCommand::ReplaceCert {
        cert: cert.into(),
        pem: CertPayload::new(content).expect("payload"),
    }
}

#[test]
fn a_rotated_certificate_is_replaced_at_runtime() {
    let old = tls_bundle(&tls_config(), "", &pem("1"), &[]);
    let next = tls_bundle(&tls_config(), "", &pem("2"), &[]);
    assert_eq!(
        plan(&old, &next, &loaded_tls()),
        Plan::Runtime(vec![replace_cert("certs/shop_web.pem", &pem("2"))])
    );
    // Without `show ssl cert` naming it, the same change reloads.
    let maps_only = LoadedFiles {
        certs: Vec::new(),
        ..loaded_tls()
    };
    let Plan::Reload(reason) = plan(&old, &next, &maps_only) else {
        panic!("a certificate HAProxy did not load cannot be replaced at runtime");
    };
    let reason = reason.to_string();
    assert!(reason.contains("certs/shop_web.pem"), "{reason}");
}

#[test]
fn certificates_servers_and_maps_change_in_one_runtime_plan() {
    let old = tls_bundle(&tls_config(), "/a shop_web_80\n", &pem("1"), &[]);
    let next = tls_bundle(
        &tls_config().replace("10.244.0.1:8080\n", "10.244.0.1:8080 disabled\n"),
        "/b shop_web_80\n",
        &pem("2"),
        &[],
    );
    assert_eq!(
        plan(&old, &next, &loaded_tls()),
        Plan::Runtime(vec![
            state("web-a", false),
            replace_cert("certs/shop_web.pem", &pem("2")),
            RuntimeCommand::ReplaceMap {
                map: "maps/exact.map".into(),
                content: "/b shop_web_80\n".into(),
            },
        ])
    );
}

#[test]
fn commands_use_the_name_haproxy_reported() {
    let old = tls_bundle(&tls_config(), "", &pem("1"), &[]);
    let next = tls_bundle(&tls_config(), "", &pem("2"), &[]);
    // A crt-list may spell the path otherwise; HAProxy keeps one store per
    // spelling and refuses any other (`./certs/x.pem` for `certs/x.pem`).
    let loaded = LoadedFiles {
        maps: Vec::new(),
        certs: vec![
            "certs/default.pem".into(),
            "./certs/shop_web.pem".into(),
            "certs//shop_web.pem".into(),
        ],
    };
    assert_eq!(
        plan(&old, &next, &loaded),
        Plan::Runtime(vec![
            replace_cert("./certs/shop_web.pem", &pem("2")),
            replace_cert("certs//shop_web.pem", &pem("2")),
        ])
    );
}

#[test]
fn new_certificates_crt_list_changes_and_unsendable_payloads_reload() {
    let old = tls_bundle(&tls_config(), "", &pem("1"), &[]);
    let new_cert = {
        let mut files = tls_bundle(&tls_config(), "", &pem("1"), &[]).files;
        files.retain(|f| f.path != "certs/ingress.crt-list");
        files.push(BundleFile::new(
            "certs/ingress.crt-list",
            format!("{CRT_LIST}certs/blog_web.pem blog.example.com\n"),
        ));
        files.push(BundleFile::new("certs/blog_web.pem", pem("blog")));
        Bundle::new(tls_config(), files)
    };
    let crt_list_only = {
        let mut files = old.files.clone();
        for file in &mut files {
            if file.path == "certs/ingress.crt-list" {
                file.content = "certs/shop_web.pem shop.example.com www.shop.example.com\n".into();
            }
        }
        Bundle::new(tls_config(), files)
    };
    let empty_line_in_block = tls_bundle(
        &tls_config(),
        "",
        &pem("2").replace("CERT2\n", "CERT2\n\nMORE\n"),
        &[],
    );
    let huge = tls_bundle(
        &tls_config(),
        "",
        &pem(format!("{}\n", "A".repeat(64)).repeat(300).trim_end()),
        &[],
    );
    for (next, expected) in [
        (&new_cert, "the set of auxiliary files changed"),
        (
            &crt_list_only,
            "certs/ingress.crt-list changed and is neither",
        ),
        (&empty_line_in_block, "empty line inside a PEM block"),
        (&huge, "more than the"),
    ] {
        let Plan::Reload(reason) = plan(&old, next, &loaded_tls()) else {
            panic!("{expected}: not a reload");
        };
        let reason = reason.to_string();
        assert!(reason.contains(expected), "{reason}");
        assert!(!reason.contains("KEY"), "reasons are logged: {reason}");
    }
}

#[test]
fn key_material_is_never_a_map_payload() {
    let old = bundle(CONFIG, "/a x\n");
    let next = bundle(CONFIG, &format!("/a y\n# {}", pem("1")));
    let Plan::Reload(reason) = plan(&old, &next, &maps()) else {
        panic!("a map holding a key must not be sent as a payload");
    };
    let reason = reason.to_string();
    assert!(reason.contains("holds key material"), "{reason}");
}

#[test]
fn plans_show_no_key_material() {
    let old = tls_bundle(&tls_config(), "", &pem("1"), &[]);
    let next = tls_bundle(&tls_config(), "", &pem("secret2"), &[]);
    let planned = plan(&old, &next, &loaded_tls());
    let shown = format!("{planned:?}");
    assert!(shown.contains("certs/shop_web.pem"), "{shown}");
    assert!(
        !shown.contains("KEYsecret2") && !shown.contains("PRIVATE"),
        "{shown}"
    );
}

#[test]
fn expected_loads_are_the_maps_and_certificates_the_configuration_reads() {
    let config = "frontend https
    bind :8443 ssl crt certs/default.pem crt-list certs/ingress.crt-list
    use_backend %[var(txn.host),map_beg(maps/prefix.map)] if { var(txn.host),map_beg(maps/prefix.map) -m found }
    use_backend %[path,map(maps/exact.map,be_default)]
    http-request set-var(txn.x) str(maps/unlisted.map)
";
    let bundle = Bundle::new(
        config.to_owned(),
        vec![
            BundleFile::new("certs/default.pem", "pem"),
            BundleFile::new(
                "certs/ingress.crt-list",
                "certs/shop.pem [alpn h2] shop.example.com\n# certs/old.pem\n",
            ),
            BundleFile::new("certs/shop.pem", "pem"),
            BundleFile::new("maps/exact.map", ""),
            BundleFile::new("maps/prefix.map", ""),
            BundleFile::new("maps/unlisted.map", ""),
        ],
    );
    let loaded = expected_loads(&bundle);
    assert_eq!(loaded.maps, ["maps/prefix.map", "maps/exact.map"]);
    assert_eq!(loaded.certs, ["certs/default.pem", "certs/shop.pem"]);
    // What the agent would do with a map entry change, predicted from them.
    let next = Bundle::new(
        config.to_owned(),
        bundle
            .files
            .iter()
            .map(|f| match f.path.as_str() {
                "maps/exact.map" => BundleFile::new(f.path.clone(), "/shop be_shop\n"),
                _ => f.clone(),
            })
            .collect(),
    );
    assert!(matches!(plan(&bundle, &next, &loaded), Plan::Runtime(_)));
    assert!(matches!(
        plan(&bundle, &next, &LoadedFiles::default()),
        Plan::Reload(_)
    ));
}
