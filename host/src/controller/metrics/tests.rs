use std::time::Duration;

use super::*;
use crate::protocol::{Bundle, BundleFile};

/// The sample lines of `metric` in the exposition text.
fn samples<'a>(text: &'a str, metric: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|line| line.starts_with(metric) && !line.starts_with('#'))
        .collect()
}

#[test]
fn series_the_alerts_read_are_exported_at_zero_before_anything_happened() {
    let text = Metrics::default().encode();
    for series in [
        "haptic_gates_waiting 0",
        "haptic_gate_oldest_wait_seconds 0.0",
        "haptic_fleet_failed_pods 0",
        r#"haptic_renders_total{result="refused"} 0"#,
        r#"haptic_renders_total{result="render-failed"} 0"#,
        r#"haptic_deploys_total{mode="failed"} 0"#,
    ] {
        assert!(
            text.lines().any(|line| line == series),
            "{series} missing from:\n{text}"
        );
    }
}

#[test]
fn the_oldest_gate_wait_grows_when_scraped_and_clears() {
    let metrics = Metrics::default();
    let now = Instant::now();
    let starts = [now - Duration::from_secs(90), now - Duration::from_secs(5)];
    metrics.gates.set(starts.iter());
    let text = metrics.encode();
    assert_eq!(
        samples(&text, "haptic_gates_waiting"),
        ["haptic_gates_waiting 2"]
    );
    let oldest: f64 = samples(&text, "haptic_gate_oldest_wait_seconds")[0]
        .rsplit(' ')
        .next()
        .and_then(|value| value.parse().ok())
        .expect("a number");
    assert!((90.0..120.0).contains(&oldest), "oldest wait {oldest}");
    metrics.gates.set([].iter());
    let text = metrics.encode();
    assert_eq!(
        samples(&text, "haptic_gate_oldest_wait_seconds"),
        ["haptic_gate_oldest_wait_seconds 0.0"]
    );
}

#[test]
fn certificate_expiry_follows_the_bundle_files() {
    let key = rcgen::KeyPair::generate().expect("ring generates keys");
    let mut params =
        rcgen::CertificateParams::new(vec!["shop.example.com".to_owned()]).expect("a name");
    params.not_after = rcgen::date_time_ymd(2030, 1, 1);
    let certificate = params.self_signed(&key).expect("self-signing works");
    let pem = format!("{}{}", certificate.pem(), key.serialize_pem());
    let metrics = Metrics::default();
    metrics.certificates.set_bundle(&Bundle::new(
        "global\n".to_owned(),
        vec![
            BundleFile::new("certs/shop_tls.pem", pem),
            BundleFile::new("maps/hosts.map", "shop.example.com be_shop\n"),
        ],
    ));
    let text = metrics.encode();
    assert_eq!(
        samples(&text, "haptic_certificate_expiry_timestamp_seconds"),
        [r#"haptic_certificate_expiry_timestamp_seconds{file="certs/shop_tls.pem"} 1893456000"#]
    );
    // A later bundle without the certificate drops its series.
    metrics
        .certificates
        .set_bundle(&Bundle::new("global\n".to_owned(), Vec::new()));
    assert!(
        samples(
            &metrics.encode(),
            "haptic_certificate_expiry_timestamp_seconds"
        )
        .is_empty()
    );
}

#[test]
fn seed_figures_keep_the_start_and_ignore_later_lists_and_renders() {
    let metrics = Metrics::default();
    metrics.seed.record("render", Duration::from_millis(250));
    metrics.seed.record("render", Duration::from_secs(9));
    metrics.seed.listed("pods".to_owned());
    std::thread::sleep(Duration::from_millis(50));
    metrics.seed.listed("pods".to_owned());
    let text = metrics.encode();
    assert_eq!(
        samples(&text, "haptic_seed_phase_seconds"),
        [r#"haptic_seed_phase_seconds{phase="render"} 0.25"#],
        "a later render replaced the seed's:\n{text}"
    );
    let listed = samples(&text, "haptic_seed_list_seconds");
    assert_eq!(listed.len(), 1, "{text}");
    let seconds: f64 = listed[0]
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .expect("a number");
    assert!(
        seconds < 0.05,
        "a re-list replaced the first list's time ({seconds} s):\n{text}"
    );
}
