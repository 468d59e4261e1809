use super::*;

/// Entries and what the host says of them, each checked against the real
/// `haproxy -c`: the host's "loads" must never be HAProxy's "refuses" (or
/// a map change skipping validation could break the next reload), and
/// where the host says "refuses", HAProxy must agree (or the host would
/// validate for nothing).
const CASES: &[(&str, &str, bool)] = &[
    ("map_beg", "shop.example.com/app/ default_web_80\n", true),
    ("map_str", "# a comment\n\nkey-only\n", true),
    ("map", "k \x01odd\tbytes and spaces  \n", true),
    ("map_dom", "example.com b\n", true),
    ("map_str_int", "a 10\nb -3\n", true),
    ("map_str_int", "a ten\n", false),
    ("map_str_int", "a\n", true),
    ("map_str_ip", "a\n", false),
    (
        "map_ip",
        "10.0.0.0/8 inside\n2001:db8::1 v6\n192.168.1.1 one\n",
        true,
    ),
    ("map_ip", "not-an-ip v\n", false),
    ("map_ip", "10.0.0.0/33 v\n", false),
    ("map_int", "42 answer\n", true),
    ("map_int", "forty-two answer\n", false),
    ("map_str_ip", "a 10.0.0.1\n", true),
    ("map_str_ip", "a somewhere\n", false),
];

#[test]
fn what_the_host_lets_through_haproxy_loads_and_what_it_stops_haproxy_refuses() {
    let mut disagreements = Vec::new();
    for (converter, content, host_says_loads) in CASES {
        let reader = MapReader::of_converter(converter)
            .unwrap_or_else(|| panic!("{converter} is judged by the host"));
        assert_eq!(
            reader.check(content).is_ok(),
            *host_says_loads,
            "{converter} {content:?}: {:?}",
            reader.check(content)
        );
        let config = format!(
            "defaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\nfrontend f\n  bind 127.0.0.1:18080\n  http-request set-var(txn.x) req.hdr(host),{converter}(maps/m.map)\n"
        );
        let validation =
            crate::validate::validate(&config, &[("maps/m.map".to_owned(), (*content).to_owned())]);
        let haproxy_loads = match validation {
            Ok(_) => true,
            Err(crate::validate::ValidationError::Refused { .. }) => false,
            Err(other) => panic!("haproxy -c could not run: {other}"),
        };
        if haproxy_loads != *host_says_loads {
            disagreements.push(format!(
                "{converter} {content:?}: host says {host_says_loads}, haproxy -c says {haproxy_loads}"
            ));
        }
    }
    assert!(disagreements.is_empty(), "{disagreements:#?}");
}

#[test]
fn regex_and_unknown_converters_are_not_judged() {
    for name in [
        "map_reg",
        "map_regm",
        "map_str_bin",
        "map_foo",
        "mapx",
        "map_str_int_x",
    ] {
        assert_eq!(MapReader::of_converter(name), None, "{name}");
    }
    assert!(MapReader::of_converter("map").is_some());
    assert!(MapReader::of_converter("map_beg").is_some());
}
