use super::*;

/// A certificate for `names`, valid from `from` to `until` (years), and its key.
fn issue(names: &[&str], from: i32, until: i32) -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("ring generates keys");
    let mut params = rcgen::CertificateParams::new(
        names
            .iter()
            .map(|name| (*name).to_owned())
            .collect::<Vec<_>>(),
    )
    .expect("test names are valid");
    params.not_before = rcgen::date_time_ymd(from, 1, 1);
    params.not_after = rcgen::date_time_ymd(until, 1, 1);
    let certificate = params.self_signed(&key).expect("self-signing works");
    (certificate.pem(), key.serialize_pem())
}

fn key_body(key: &str) -> String {
    key.lines()
        .nth(1)
        .expect("a PEM key has a body line")
        .to_owned()
}

#[test]
fn a_matching_pair_reports_its_names_and_window() {
    let (certificate, key) = issue(&["foo.bar.com", "*.shop.example.com"], 2020, 2120);
    let info = check_certificate(&certificate, &key, unix_now()).expect("a good pair passes");
    assert_eq!(info.dns_names, ["foo.bar.com", "*.shop.example.com"]);
    assert!(info.not_before < unix_now() && unix_now() < info.not_after);
}

#[test]
fn the_common_name_counts_when_there_are_no_alternative_names() {
    let pem = generate_self_signed().expect("generates");
    let (certificate, key) = split_bundle(pem.expose());
    let info = check_certificate(&certificate, &key, unix_now()).expect("the default passes");
    assert_eq!(info.dns_names, ["haptic default certificate"]);
}

#[test]
fn a_key_of_another_certificate_is_refused_without_quoting_it() {
    let (certificate, _) = issue(&["foo.bar.com"], 2020, 2120);
    let (_, other_key) = issue(&["foo.bar.com"], 2020, 2120);
    let error = check_certificate(&certificate, &other_key, unix_now()).expect_err("mismatch");
    assert_eq!(error, CertificateError::KeyMismatch);
    let error = error.to_string();
    assert_eq!(error, "the private key does not match the certificate");
    assert!(!error.contains(&key_body(&other_key)));
}

#[test]
fn expired_and_not_yet_valid_certificates_are_refused() {
    let (certificate, key) = issue(&["old.example.com"], 2000, 2001);
    let error = check_certificate(&certificate, &key, unix_now())
        .expect_err("expired")
        .to_string();
    assert!(error.starts_with("the certificate expired on "), "{error}");
    assert!(error.contains("2001"), "{error}");

    let (certificate, key) = issue(&["new.example.com"], 2200, 2201);
    let error = check_certificate(&certificate, &key, unix_now())
        .expect_err("not yet valid")
        .to_string();
    assert!(
        error.starts_with("the certificate is not valid before "),
        "{error}"
    );
}

#[test]
fn malformed_input_is_described_not_quoted() {
    let (certificate, key) = issue(&["foo.bar.com"], 2020, 2120);
    let error = check_certificate("not a certificate", &key, unix_now())
        .expect_err("no PEM")
        .to_string();
    assert_eq!(error, "the certificate holds no `BEGIN CERTIFICATE` block");

    let broken = certificate.replacen('M', "!", 3);
    let error = check_certificate(&broken, &key, unix_now())
        .expect_err("bad base64")
        .to_string();
    assert!(
        error.starts_with("the certificate is not valid PEM"),
        "{error}"
    );

    let error = check_certificate(&certificate, "garbage", unix_now())
        .expect_err("no key")
        .to_string();
    assert!(error.starts_with("the private key is not a PEM"), "{error}");
    let encrypted =
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n";
    let error = check_certificate(&certificate, encrypted, unix_now())
        .expect_err("encrypted")
        .to_string();
    assert!(error.contains("encrypted"), "{error}");

    let swapped = check_certificate(&key, &certificate, unix_now())
        .expect_err("swapped")
        .to_string();
    assert!(!swapped.contains(&key_body(&key)), "{swapped}");
}

#[test]
fn private_keys_are_recognised_in_any_pem_flavour() {
    let (certificate, key) = issue(&["foo.bar.com"], 2020, 2120);
    assert!(holds_private_key(&format!("{certificate}{key}")));
    assert!(holds_private_key("-----BEGIN RSA PRIVATE KEY-----\n"));
    assert!(holds_private_key("-----BEGIN EC PRIVATE KEY-----\n"));
    assert!(!holds_private_key(&certificate));
    assert!(!holds_private_key("shop.example.com backend_shop\n"));
}

#[test]
fn secret_pem_debug_shows_no_content() {
    let pem = generate_self_signed().expect("generates");
    let shown = format!("{pem:?}");
    assert!(
        shown.starts_with("SecretPem(<") && !shown.contains("BEGIN"),
        "{shown}"
    );
}

#[test]
fn the_default_certificate_is_created_once_and_kept() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("state/haptic/default.pem");
    let first = DefaultCertificate::load_or_create(&path).expect("created");
    let mode = std::fs::metadata(&path)
        .expect("written")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let parent_mode = std::fs::metadata(path.parent().expect("has a parent"))
        .expect("parent exists")
        .permissions()
        .mode();
    assert_eq!(parent_mode & 0o077, 0, "the state directory is private");
    let second = DefaultCertificate::load_or_create(&path).expect("loaded");
    assert_eq!(first.pem, second.pem, "stable across restarts");

    std::fs::write(&path, "broken").expect("overwrite");
    let error = DefaultCertificate::load_or_create(&path)
        .expect_err("unusable")
        .to_string();
    assert!(error.to_string().contains("is unusable"), "{error}");
}

#[test]
fn the_expiry_metric_reads_the_first_certificate_of_a_bundle_file() {
    let (leaf, key) = issue(&["leaf.example.com"], 2020, 2030);
    let (intermediate, _) = issue(&["ca.example.com"], 2020, 2040);
    let file = format!("{leaf}{intermediate}{key}");
    // 2030-01-01T00:00:00Z
    assert_eq!(first_certificate_not_after(&file), Some(1_893_456_000));
    assert_eq!(first_certificate_not_after(&key), None);
    assert_eq!(first_certificate_not_after("backend app\n"), None);
    assert_eq!(
        first_certificate_not_after("-----BEGIN CERTIFICATE-----\nbroken\n"),
        None
    );
}
