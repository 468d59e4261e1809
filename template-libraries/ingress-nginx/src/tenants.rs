//! Tenant isolation (issue 40): a hostile Ingress of namespace `attacker`
//! beside a victim Ingress of namespace `victim`. Each test asserts the
//! victim's routing is what it is without the hostile Ingress, and the
//! hostile one is inert or warned about. Each failed on the code before
//! the fix; the doc comment says what was broken and how it failed.

use haptic_sdk::Item;
use haptic_sdk::testing::Harness;
use serde_json::{Value, json};

use super::*;

fn class() -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
        "metadata": {"name": "nginx"},
        "spec": {"controller": "k8s.io/ingress-nginx"}
    })
}

fn service(namespace: &str) -> Value {
    json!({"metadata": {"namespace": namespace, "name": "web"}, "spec": {"ports": [{"name": "http", "port": 80}]}})
}

fn ingress(namespace: &str, name: &str, created: &str, annotations: Value, spec: Value) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"namespace": namespace, "name": name, "creationTimestamp": created, "annotations": annotations},
        "spec": spec
    })
}

fn rules(host: Option<&str>, path: &str, path_type: &str) -> Value {
    json!({
        "ingressClassName": "nginx",
        "rules": [{"host": host, "http": {"paths": [{"path": path, "pathType": path_type, "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]
    })
}

fn victim() -> Value {
    ingress(
        "victim",
        "web",
        "2026-01-01T00:00:00Z",
        json!({}),
        rules(Some("victim.test"), "/", "Prefix"),
    )
}

/// A harness with `values` as `templateLibraries.ingressNginx`.
fn harness(values: Value) -> Harness<IngressNginx> {
    let mut values = values;
    values["enabled"] = json!(true);
    let mut h = Harness::<IngressNginx>::new(json!({ "ingressNginx": values })).unwrap();
    h.apply(INGRESS_CLASSES, &class());
    h.apply(SERVICES, &service("victim"));
    h.apply(SERVICES, &service("attacker"));
    h.apply(INGRESSES, &victim());
    h
}

/// Every frontend line of the render, snippets of `http` in output order.
fn frontend_lines(h: &Harness<IngressNginx>) -> Vec<String> {
    h.output()
        .values()
        .filter_map(|item| match item {
            Item::Snippet { lines, .. } => {
                Some(lines.lines().map(str::to_owned).collect::<Vec<_>>())
            }
            _ => None,
        })
        .flatten()
        .collect()
}

/// The part of a line HAProxy reads: up to an unquoted `#`.
fn as_haproxy_reads(line: &str) -> &str {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// Written bare before (`log_format_literal(root)` unquoted), the `#` of
/// the app-root cut the line after `location ...://%[req.hdr(host)]/x`:
/// `if <acl> { path / }` was gone and every request of every host was
/// redirected. With the quote removed again this test failed: the line
/// HAProxy reads had no `if`.
#[test]
fn an_app_root_with_a_hash_keeps_its_condition() {
    let mut h = harness(json!({}));
    h.apply(
        INGRESSES,
        &ingress(
            "attacker",
            "root",
            "2026-01-02T00:00:00Z",
            json!({"nginx.ingress.kubernetes.io/app-root": "/x#y"}),
            rules(Some("attacker.test"), "/", "Prefix"),
        ),
    );
    h.render().unwrap();
    let redirects: Vec<String> = frontend_lines(&h)
        .into_iter()
        .filter(|l| l.contains("redirect location") && l.contains("code 302"))
        .collect();
    assert_eq!(redirects.len(), 1, "{redirects:?}");
    let read = as_haproxy_reads(&redirects[0]);
    assert!(
        read.contains("if { var(txn.haptic_ingress) -m str attacker/root } { path / }"),
        "HAProxy reads {read:?}"
    );
}

/// 200 CIDRs in one `whitelist-source-range` were one `src` list on one
/// line: 200 words, past HAProxy's 63 ("too many words" refused every
/// namespace's render). Reverting the split, this failed on the word count.
#[test]
fn a_long_source_range_list_fits_haproxys_lines() {
    let mut h = harness(json!({}));
    let cidrs: Vec<String> = (0..200).map(|i| format!("10.{i}.0.0/16")).collect();
    h.apply(
        INGRESSES,
        &ingress(
            "attacker",
            "ranges",
            "2026-01-02T00:00:00Z",
            json!({"nginx.ingress.kubernetes.io/whitelist-source-range": cidrs.join(","),
                   "nginx.ingress.kubernetes.io/denylist-source-range": cidrs.join(",")}),
            rules(Some("attacker.test"), "/", "Prefix"),
        ),
    );
    h.render().unwrap();
    let lines = frontend_lines(&h);
    for line in &lines {
        assert!(
            line.split_whitespace().count() <= haptic_sdk::haproxy::MAX_WORDS_PER_LINE,
            "{line}"
        );
    }
    let allowed: usize = lines
        .iter()
        .filter(|l| {
            l.trim_start()
                .starts_with("acl ingress_nginx_allow_attacker_ranges src ")
        })
        .map(|l| l.split_whitespace().count() - 3)
        .sum();
    assert_eq!(allowed, 200);
}

/// A regex path with `|` was written `^attacker\.test(?i)/a|victim\.test/`
/// into the regex map: the second branch matched the victim's host. Without
/// the `(?:...)` group the key's branch was unanchored and this failed.
#[test]
fn a_regex_path_stays_behind_its_host() {
    let mut h = harness(json!({}));
    h.apply(
        INGRESSES,
        &ingress(
            "attacker",
            "regex",
            "2026-01-02T00:00:00Z",
            json!({"nginx.ingress.kubernetes.io/use-regex": "true"}),
            rules(
                Some("attacker.test"),
                "/a|victim\\.test/",
                "ImplementationSpecific",
            ),
        ),
    );
    h.render().unwrap();
    let map = h.file(REGEX_MAP).unwrap();
    let key = map.lines().nth(1).unwrap().split(' ').next().unwrap();
    assert_eq!(key, "^attacker\\.test(?i)(?:/a|victim\\.test/)");
}

/// A host-less regex path was looked up (path alone) before the victim's
/// host in the exact and prefix maps: `/.*` took every host. The routing
/// now looks up all of a host's maps before the path alone; with the old
/// order this failed (the path-alone regex lookup came third, before any
/// exact or prefix lookup).
#[test]
fn a_host_less_regex_path_comes_after_every_host_route() {
    let mut h = harness(json!({}));
    h.apply(
        INGRESSES,
        &ingress(
            "attacker",
            "catch-all",
            "2026-01-02T00:00:00Z",
            json!({"nginx.ingress.kubernetes.io/use-regex": "true"}),
            rules(None, "/.*", "ImplementationSpecific"),
        ),
    );
    h.render().unwrap();
    let routing: Vec<String> = frontend_lines(&h)
        .into_iter()
        .filter(|l| l.trim_start().starts_with("use_backend %["))
        .collect();
    let host_prefix = routing
        .iter()
        .position(|l| l.contains("var(txn.haptic_key_host),map_beg("))
        .unwrap();
    let path_regex = routing
        .iter()
        .position(|l| l.contains("%[path,map_reg("))
        .unwrap();
    assert!(host_prefix < path_regex, "{routing:#?}");
}

/// A canary Ingress of another namespace joined the victim's route (same
/// host and path): weight 100 took all of it. With the namespace check
/// removed this failed: the canary rules named the attacker's backend.
#[test]
fn a_canary_of_another_namespace_does_not_join() {
    let mut h = harness(json!({}));
    h.apply(
        INGRESSES,
        &ingress(
            "attacker",
            "canary",
            "2026-01-02T00:00:00Z",
            json!({"nginx.ingress.kubernetes.io/canary": "true",
                   "nginx.ingress.kubernetes.io/canary-weight": "100"}),
            rules(Some("victim.test"), "/", "Prefix"),
        ),
    );
    h.render().unwrap();
    assert!(
        !frontend_lines(&h)
            .iter()
            .any(|l| l.contains("use_backend attacker_web_80")),
        "{:#?}",
        frontend_lines(&h)
    );
    assert!(
        h.warnings()
            .iter()
            .any(|(reason, message)| reason == "CanaryAcrossNamespaces"
                && message.contains("attacker/canary")
                && message.contains("victim/web")),
        "{:?}",
        h.warnings()
    );
    // An admin may widen it.
    let mut h = harness(json!({"canaryAcrossNamespaces": true}));
    h.apply(
        INGRESSES,
        &ingress(
            "attacker",
            "canary",
            "2026-01-02T00:00:00Z",
            json!({"nginx.ingress.kubernetes.io/canary": "true",
                   "nginx.ingress.kubernetes.io/canary-weight": "100"}),
            rules(Some("victim.test"), "/", "Prefix"),
        ),
    );
    h.render().unwrap();
    assert!(
        frontend_lines(&h)
            .iter()
            .any(|l| l.contains("use_backend attacker_web_80")),
        "{:#?}",
        h.warnings()
    );
}

/// 3,000 CORS origins made one regex PCRE2 refuses ("regular expression
/// is too large", measured past ~40 KB): `haproxy -c` refused every
/// namespace's render. The SDK's regex writer refuses it, with a warning on
/// the Ingress; before, the line was written (this test failed on it).
#[test]
fn thousands_of_cors_origins_are_refused_on_their_ingress() {
    let mut h = harness(json!({}));
    let origins: Vec<String> = (0..3_000)
        .map(|i| format!("https://o{i}.example.com"))
        .collect();
    h.apply(
        INGRESSES,
        &ingress(
            "attacker",
            "cors",
            "2026-01-02T00:00:00Z",
            json!({"nginx.ingress.kubernetes.io/enable-cors": "true",
                   "nginx.ingress.kubernetes.io/cors-allow-origin": origins.join(",")}),
            rules(Some("attacker.test"), "/", "Prefix"),
        ),
    );
    h.render().unwrap();
    assert!(
        !frontend_lines(&h)
            .iter()
            .any(|l| l.contains("req.hdr(origin) -m reg")),
        "the regex line is not written"
    );
    assert!(
        h.warnings()
            .iter()
            .any(|(_, message)| message.contains("attacker/cors")
                && message.contains("3000 origins make a regular expression")),
        "{:?}",
        h.warnings()
    );
}

/// The admin reserves `victim.test` for namespace `victim` (values
/// `base.hostClaims`): a newer Ingress of `attacker` adding a path under
/// it, and naming it as a `server-alias` of its own host, is refused with
/// `HostNotAllowed` warnings; its own host stays served. Without the
/// policy its path joined the victim's host (Kubernetes has no host
/// ownership).
#[test]
fn the_host_claim_policy_keeps_a_reserved_host_to_its_namespace() {
    let attacker = ingress(
        "attacker",
        "grab",
        "2026-02-01T00:00:00Z",
        json!({"nginx.ingress.kubernetes.io/server-alias": "victim.test"}),
        json!({
            "ingressClassName": "nginx",
            "rules": [
                {"host": "victim.test", "http": {"paths": [{"path": "/admin", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}},
                {"host": "attacker.test", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}
            ]
        }),
    );
    let run = |tree: Value| {
        let mut tree = tree;
        tree["ingressNginx"] = json!({"enabled": true});
        let mut h = Harness::<IngressNginx>::new(tree).unwrap();
        h.apply(INGRESS_CLASSES, &class());
        h.apply(SERVICES, &service("victim"));
        h.apply(SERVICES, &service("attacker"));
        h.apply(INGRESSES, &victim());
        h.apply(INGRESSES, &attacker);
        h.render().unwrap();
        h
    };
    let h = run(json!({"base": {"hostClaims": {"rules": [
        {"hosts": ["victim.test"], "namespaces": ["victim"]}
    ]}}}));
    let prefix = h.file(NGINX_MAPS.prefix).unwrap();
    assert!(prefix.contains("victim.test/ "), "{prefix}");
    assert!(prefix.contains("attacker.test/ "), "{prefix}");
    assert!(!prefix.contains("victim.test/admin"), "{prefix}");
    let refused: Vec<String> = h
        .warnings()
        .into_iter()
        .filter(|(reason, _)| reason == "HostNotAllowed")
        .map(|(_, message)| message)
        .collect();
    assert_eq!(refused.len(), 2, "{refused:#?}");
    assert!(
        refused
            .iter()
            .any(|m| m.contains("the rule for host victim.test"))
    );
    assert!(
        refused
            .iter()
            .any(|m| m.contains("server-alias victim.test"))
    );

    let open = run(json!({}));
    assert!(
        open.file(NGINX_MAPS.prefix)
            .unwrap()
            .contains("victim.test/admin")
    );
}
