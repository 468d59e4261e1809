use std::collections::BTreeMap;

use super::*;

fn rendered(config: &str, files: &[(&str, &str)]) -> Rendered {
    Rendered {
        config: config.to_owned(),
        files: files
            .iter()
            .map(|(path, content)| ((*path).to_owned(), (*content).to_owned()))
            .collect::<BTreeMap<_, _>>(),
        ..Rendered::default()
    }
}

const CONFIG: &str = "frontend http
    bind :8080
    use_backend %[req.hdr(host),lower,map_str(maps/hosts.map)]

backend shop_web
    server web-a 10.244.0.1:8080
";

#[test]
fn a_map_entry_goes_in_at_runtime() {
    let old = rendered(CONFIG, &[("maps/hosts.map", "a.example.com shop_web\n")]);
    let new = rendered(
        CONFIG,
        &[(
            "maps/hosts.map",
            "a.example.com shop_web\nb.example.com shop_web\n",
        )],
    );
    let difference = compare(&old, &new);
    assert_eq!(difference.config, None);
    assert_eq!(
        difference.apply,
        Apply::Runtime(vec![
            "replace the entries of map maps/hosts.map (2 lines)".into()
        ])
    );
    let text = difference.to_string();
    assert!(text.contains("+b.example.com shop_web"), "{text}");
    assert!(
        text.contains("apply: runtime (1 command on the running workers, no reload)"),
        "{text}"
    );
}

#[test]
fn a_new_backend_needs_a_reload() {
    let files = [("maps/hosts.map", "a.example.com shop_web\n")];
    let old = rendered(CONFIG, &files);
    let new = rendered(
        &format!("{CONFIG}\nbackend shop_api\n    server api-a 10.244.0.2:8080\n"),
        &files,
    );
    let difference = compare(&old, &new);
    assert!(
        matches!(difference.apply, Apply::Reload(_)),
        "{difference:?}"
    );
    let text = difference.to_string();
    assert!(text.contains("+backend shop_api"), "{text}");
    assert!(
        text.contains("apply: reload (the configuration has"),
        "{text}"
    );
}

#[test]
fn key_material_is_shown_as_changed_only() {
    let key = "-----BEGIN PRIVATE KEY-----\nsecret-one\n-----END PRIVATE KEY-----\n";
    let other = "-----BEGIN PRIVATE KEY-----\nsecret-two\n-----END PRIVATE KEY-----\n";
    let mut old = rendered(CONFIG, &[("certs/shop.pem", key)]);
    let mut new = rendered(
        CONFIG,
        &[("certs/shop.pem", other), ("certs/new.pem", other)],
    );
    old.secret_files.insert("certs/shop.pem".into());
    new.secret_files.insert("certs/shop.pem".into());
    new.secret_files.insert("certs/new.pem".into());
    let text = compare(&old, &new).to_string();
    assert!(!text.contains("secret-"), "{text}");
    assert!(
        text.contains("file certs/shop.pem: changed (key material, not shown)"),
        "{text}"
    );
    assert!(
        text.contains("file certs/new.pem: added (key material, not shown)"),
        "{text}"
    );
}

#[test]
fn equal_renders_say_so() {
    let old = rendered(CONFIG, &[]);
    let difference = compare(&old, &old.clone());
    assert!(difference.is_empty());
    assert_eq!(
        difference.to_string(),
        "no difference: the same configuration, files and status\n"
    );
}

#[test]
fn secret_configuration_text_is_shown_redacted_and_its_change_is_said() {
    let config = "userlist users\n    user alice password $6$salt$one\n";
    let mut old = rendered(config, &[]);
    old.secret_lines = std::iter::once(2..3).collect();
    let mut new = rendered(&config.replace("$one", "$two"), &[]);
    new.secret_lines = std::iter::once(2..3).collect();
    let text = compare(&old, &new).to_string();
    assert!(!text.contains("$6$"), "{text}");
    assert!(
        text.contains("haproxy.cfg: secret lines changed (not shown)"),
        "{text}"
    );
}
