use serde_json::json;

use super::*;

fn policy(tree: serde_json::Value) -> HostClaims {
    HostClaims::from_written(Some(&tree)).expect("valid policy")
}

fn shop() -> HostClaims {
    policy(json!({"rules": [
        {"hosts": ["shop.example.com", "*.shop.example.com"], "namespaces": ["shop", "shop-*"]},
        {"hosts": ["*.example.com"], "namespaces": ["platform"]},
    ]}))
}

fn allowed(p: &HostClaims, namespace: &str, host: &str) -> bool {
    p.check(namespace, Claim::Host(host)).is_ok()
}

#[test]
fn no_policy_and_a_disabled_base_allow_everything() {
    let open = HostClaims::from_written(None).unwrap();
    assert!(open.is_open());
    assert!(allowed(&open, "anyone", "shop.example.com"));
    assert!(open.check("anyone", Claim::AnyHost).is_ok());
    assert!(policy(json!(null)).is_open());
}

#[test]
fn a_reserved_host_only_for_its_namespaces() {
    let p = shop();
    assert!(allowed(&p, "shop", "shop.example.com"));
    assert!(allowed(&p, "shop-staging", "shop.example.com"));
    assert!(allowed(&p, "shop", "api.shop.example.com"));
    assert!(
        allowed(&p, "shop", "SHOP.example.com"),
        "hosts are case-insensitive"
    );
    assert!(!allowed(&p, "attacker", "shop.example.com"));
    assert!(
        !allowed(&p, "attacker", "a.b.shop.example.com"),
        "wildcards cover every depth"
    );
    assert!(
        !allowed(&p, "shopping", "shop.example.com"),
        "shop-* is not shop*"
    );
}

/// The rule for `*.example.com` gives `platform` the rest of the zone, not
/// the host a narrower rule reserves for `shop`.
#[test]
fn the_most_specific_pattern_decides() {
    let p = shop();
    assert!(allowed(&p, "platform", "blog.example.com"));
    assert!(!allowed(&p, "platform", "shop.example.com"));
    assert!(!allowed(&p, "platform", "x.shop.example.com"));
    assert!(!allowed(&p, "shop", "blog.example.com"));
    // Not covered by any rule: the default (allow).
    assert!(allowed(&p, "attacker", "example.com"));
    assert!(allowed(&p, "attacker", "other.test"));
}

/// A wildcard serves every host beneath it that has no route of its own,
/// so claiming `*.example.com` would serve `shop.example.com` until shop
/// routes it: it needs shop's rule too.
#[test]
fn a_wildcard_or_host_less_claim_needs_every_rule_beneath_it() {
    let p = shop();
    let refusal = p
        .check("platform", Claim::Host("*.example.com"))
        .unwrap_err();
    let text = refusal.to_string();
    assert!(
        text.contains("rules[0] reserves *.shop.example.com"),
        "{text}"
    );
    assert!(text.contains("beneath"), "{text}");
    assert!(allowed(&p, "shop", "*.shop.example.com"));
    assert!(!allowed(&p, "attacker", "*.example.com"));
    assert!(!allowed(&p, "attacker", "*.com"));
    assert!(p.check("attacker", Claim::AnyHost).is_err());
    assert!(p.check("shop", Claim::AnyHost).is_err());
    let everyone = policy(json!({"rules": [
        {"hosts": ["shop.example.com"], "namespaces": ["shop", "edge"]},
        {"hosts": ["*"], "namespaces": ["edge"]},
    ]}));
    assert!(everyone.check("edge", Claim::AnyHost).is_ok());
    assert!(
        !allowed(&everyone, "shop", "other.test"),
        "* is a rule like any other"
    );
}

#[test]
fn default_deny_refuses_hosts_no_rule_covers() {
    let p = policy(json!({"default": "deny", "rules": [
        {"hosts": ["*.team-a.test"], "namespaces": ["team-a"]},
    ]}));
    assert!(allowed(&p, "team-a", "web.team-a.test"));
    let refusal = p.check("team-a", Claim::Host("web.test")).unwrap_err();
    assert!(matches!(refusal, Refusal::Denied { .. }));
    assert!(refusal.to_string().contains("default is deny"));
    assert!(!p.is_open());
    assert!(!policy(json!({"default": "deny"})).is_open());
}

#[test]
fn rules_holding_one_pattern_merge_their_namespaces() {
    let p = policy(json!({"rules": [
        {"hosts": ["a.test"], "namespaces": ["one"]},
        {"hosts": ["a.test"], "namespaces": ["two"]},
    ]}));
    assert!(allowed(&p, "one", "a.test"));
    assert!(allowed(&p, "two", "a.test"));
    let text = p
        .check("three", Claim::Host("a.test"))
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("rules[0] reserves a.test for namespaces one, two"),
        "{text}"
    );
    assert!(text.contains("add three to that rule"), "{text}");
}

#[test]
fn bad_policies_are_refused_by_path() {
    let bad = |tree: serde_json::Value| HostClaims::from_written(Some(&tree)).unwrap_err();
    assert_eq!(
        bad(json!({"rules": [{"hosts": ["Shop.test"], "namespaces": ["a"]}]})),
        PolicyError::InvalidHost {
            rule: 0,
            host: "Shop.test".into()
        }
    );
    assert_eq!(
        bad(json!({"rules": [{"hosts": ["a.*.test"], "namespaces": ["a"]}]})),
        PolicyError::InvalidHost {
            rule: 0,
            host: "a.*.test".into()
        }
    );
    assert_eq!(
        bad(json!({"rules": [{"hosts": ["a.test"], "namespaces": ["a b"]}]})),
        PolicyError::InvalidNamespace {
            rule: 0,
            namespace: "a b".into()
        }
    );
    assert_eq!(
        bad(json!({"rules": [{"hosts": ["a.test"]}]})),
        PolicyError::EmptyRule { rule: 0 }
    );
    assert!(matches!(
        bad(json!({"default": "maybe"})),
        PolicyError::Shape(_)
    ));
    assert!(matches!(bad(json!({"rulez": []})), PolicyError::Shape(_)));
    let text = bad(json!({"rules": [{"hosts": ["a.test"], "namespaces": []}]})).to_string();
    assert!(
        text.starts_with("templateLibraries.base.hostClaims.rules[0]"),
        "{text}"
    );
}

#[test]
fn namespace_globs() {
    assert!(glob("shop-*", "shop-a"));
    assert!(glob("shop-*", "shop-"));
    assert!(!glob("shop-*", "shop"));
    assert!(glob("*", "anything"));
    assert!(glob("*-prod", "a-b-prod"));
    assert!(glob("a*b*c", "axxbyyc"));
    assert!(!glob("a*b*c", "axxbyy"));
    assert!(glob("shop", "shop"));
    assert!(!glob("shop", "shops"));
}

#[test]
fn claims_the_libraries_never_route_are_left_to_them() {
    // Not a DNS name: the libraries skip it with their own warning.
    assert!(allowed(&shop(), "attacker", "shop.example.com:80"));
}
