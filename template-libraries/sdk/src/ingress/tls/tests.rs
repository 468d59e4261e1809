use super::trust::ca_certificates;
use super::*;

#[test]
fn references_and_hosts_are_checked() {
    assert_eq!(parse_reference("shop/web-tls"), Some(("shop", "web-tls")));
    assert_eq!(parse_reference("web-tls"), None);
    assert_eq!(parse_reference("shop/"), None);
    assert_eq!(parse_reference("Shop/x"), None);
    assert!(valid_host("*.example.com"));
    assert!(!valid_host("a b"));
    assert!(!valid_host(""));
}

#[test]
fn the_first_serving_library_writes_the_bind_naming_every_crt_list() {
    let values = |tree| Values::new(tree, "ingress-nginx", &serde_json::json!({})).unwrap();
    let both = HttpsBind::from_values(&values(serde_json::json!({
        "ingress": {"tls": {"enabled": true}},
        "ingressNginx": {"tls": {"enabled": true}},
    })));
    assert!(both.is_written_by("ingress") && !both.is_written_by("ingress-nginx"));
    assert_eq!(
        both.crt_lists().collect::<Vec<_>>(),
        ["certs/ingress.crt-list", "certs/ingress-nginx.crt-list"]
    );
    let nginx_only = HttpsBind::from_values(&values(serde_json::json!({
        "ingress": {"tls": {"enabled": false}},
        "ingressNginx": {"tls": {"enabled": true}},
    })));
    assert!(nginx_only.is_written_by("ingress-nginx"));
    assert_eq!(
        nginx_only.crt_lists().collect::<Vec<_>>(),
        ["certs/ingress-nginx.crt-list"]
    );
    let none = HttpsBind::from_values(&values(serde_json::json!({})));
    assert!(!none.is_written_by("ingress") && none.crt_lists().next().is_none());
    assert_eq!(none.passthrough(), None);
}

#[test]
fn passthrough_takes_the_writers_public_address() {
    let values = |tree| Values::new(tree, "ingress-nginx", &serde_json::json!({})).unwrap();
    let bind = HttpsBind::from_values(&values(serde_json::json!({
        "ingress": {"tls": {"enabled": true, "bind": ":443"}},
        "ingressNginx": {"tls": {"enabled": true, "bind": ":9443"},
                         "sslPassthrough": {"enabled": true}},
    })));
    assert_eq!(
        bind.passthrough(),
        Some(&Passthrough {
            public: ":443".into(),
            internal: PASSTHROUGH_INTERNAL_BIND.into()
        })
    );
    let off = HttpsBind::from_values(&values(serde_json::json!({
        "ingressNginx": {"tls": {"enabled": true}, "sslPassthrough": {"enabled": false}},
    })));
    assert_eq!(off.passthrough(), None);
}

#[test]
fn ca_files_keep_certificate_blocks_only() {
    // A certificate's outer shape (SEQUENCE { SEQUENCE {} }), base64 split
    // over lines, with text and a key around it that must not survive.
    let der = [0x30, 0x03, 0x30, 0x01, 0x00];
    let block = base64::engine::general_purpose::STANDARD.encode(der);
    let pem = format!(
        "subject=CN=ca\n-----BEGIN CERTIFICATE-----\n{}\n{}\n-----END CERTIFICATE-----\n\
         -----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n",
        &block[..4],
        &block[4..]
    );
    let kept = ca_certificates(&pem).expect("one certificate block");
    assert_eq!(
        kept,
        format!("-----BEGIN CERTIFICATE-----\n{block}\n-----END CERTIFICATE-----\n")
    );
    assert!(!kept.contains("c2VjcmV0"));
    let garbage = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n";
    assert_eq!(
        ca_certificates(garbage).err().as_deref(),
        Some("holds a CERTIFICATE block that is not a certificate")
    );
    assert!(ca_certificates("no pem here").is_err());
    let only_ca = trust_material(|key| Ok((key == "ca.crt").then(|| pem.clone().into_bytes())))
        .expect("a CA alone is usable");
    assert!(only_ca.ca.is_some() && only_ca.client.is_none());
    assert_eq!(
        trust_material(|key| Ok((key == "tls.key").then(|| b"k".to_vec())))
            .err()
            .as_deref(),
        Some("it has `tls.key` but no `tls.crt`")
    );
    assert!(trust_material(|_| Ok(None)).is_err());
}

#[test]
fn secret_debug_shows_no_data() {
    let secret = TlsSecret {
        type_: "kubernetes.io/tls".into(),
        data: [("tls.key".to_owned(), "c2VjcmV0".to_owned())].into(),
    };
    let shown = format!("{secret:?}");
    assert!(
        shown.contains("tls.key") && !shown.contains("c2VjcmV0"),
        "{shown}"
    );
}

#[test]
fn bad_secret_data_is_described_without_quoting_it() {
    let secret = TlsSecret {
        type_: "kubernetes.io/tls".into(),
        data: [
            ("tls.crt".to_owned(), "bm90IGEgY2VydA==".to_owned()),
            ("tls.key".to_owned(), "!!!c2VjcmV0!!!".to_owned()),
        ]
        .into(),
    };
    let Err(problem) = usable(&secret) else {
        panic!("bad base64 is unusable");
    };
    assert_eq!(problem, "its `tls.key` is not base64");
    let missing = TlsSecret::default();
    assert_eq!(
        usable(&missing).err().as_deref(),
        Some("it has no `tls.crt`")
    );
}
