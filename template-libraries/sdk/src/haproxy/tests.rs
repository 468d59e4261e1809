use super::*;

#[test]
fn arguments_are_single_quoted_and_control_characters_refused() {
    assert_eq!(argument("plain").as_deref(), Ok("'plain'"));
    assert_eq!(
        argument("it's $HOME ${X} \"x\" # \\x41").as_deref(),
        Ok(r#"'it'\''s $HOME ${X} "x" # \x41'"#)
    );
    assert_eq!(argument("a\nb"), Err(TextError::Control));
    assert_eq!(argument("a\rb"), Err(TextError::Control));
    assert!(matches!(
        argument(&"a".repeat(MAX_ARGUMENT_BYTES + 1)),
        Err(TextError::TooLong { .. })
    ));
}

#[test]
fn log_format_text_has_no_fetch() {
    assert_eq!(log_format("100%[env(X)]").as_deref(), Ok("'100%%[env(X)]'"));
}

#[test]
fn map_lines_fit_the_read_buffer() {
    assert_eq!(
        map_line("a.example.com/x", "be").as_deref(),
        Ok("a.example.com/x be\n")
    );
    assert_eq!(map_line("a b", "be"), Err(TextError::Whitespace));
    assert_eq!(map_line("", "be"), Err(TextError::Empty));
    assert_eq!(map_line("/a#b", "be"), Err(TextError::Comment));
    assert_eq!(map_line("k", "a\nb"), Err(TextError::Control));
    // Measured: a line of 16,383 bytes (newline excluded) is one entry; at
    // 16,384 its last byte became an entry of its own.
    let value = "be";
    let longest = "/".repeat(MAP_LINE_MAX_BYTES - 1 - value.len());
    assert!(map_line(&longest, value).is_ok());
    let longer = format!("{longest}x");
    assert!(matches!(
        map_line(&longer, value),
        Err(TextError::TooLong {
            len: 16_384,
            max: 16_383,
            ..
        })
    ));
}

#[test]
fn crt_list_lines_split_at_the_word_limit() {
    let hosts: Vec<String> = (0..5_000).map(|i| format!("h{i}.example.com")).collect();
    let filters: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let (lines, refused) = crt_list_lines("certs/a.pem", Some("verify none"), &filters).unwrap();
    assert!(refused.is_empty());
    assert!(lines.len() >= 3);
    let mut seen = 0;
    for line in &lines {
        assert!(line.starts_with("certs/a.pem [verify none] "));
        assert!(line.split_whitespace().count() <= CRT_LIST_LINE_MAX_WORDS);
        assert!(line.len() <= CRT_LIST_LINE_MAX_BYTES);
        seen += line.split_whitespace().count() - 3;
    }
    assert_eq!(seen, 5_000);
    let (lines, refused) =
        crt_list_lines("certs/a.pem", None, &["a.example.com", "b\n.com", "[x]"]).unwrap();
    assert_eq!(lines, ["certs/a.pem a.example.com"]);
    assert_eq!(refused, ["b\n.com", "[x]"]);
    let (lines, _) = crt_list_lines("certs/a.pem", None, &["x y"]).unwrap();
    assert!(
        lines.is_empty(),
        "a line without filters would serve any name"
    );
    assert!(crt_list_lines("c.pem", Some("a]b"), &["a"]).is_err());
}

#[test]
fn long_word_lists_are_split_into_lines_of_63_words() {
    let cidrs: Vec<String> = (0..200).map(|i| format!("10.{i}.0.0/16")).collect();
    let lines = split_words("    acl allowed src", &cidrs, "").unwrap();
    assert_eq!(lines.len(), 4);
    for line in &lines {
        assert!(line.split_whitespace().count() <= MAX_WORDS_PER_LINE);
    }
    assert_eq!(lines[0].split_whitespace().count(), 63);
    let joined: Vec<&str> = lines
        .iter()
        .flat_map(|l| l.split_whitespace().skip(3))
        .collect();
    assert_eq!(joined.len(), 200);
    let many = "w ".repeat(63);
    assert_eq!(split_words(&many, &cidrs, ""), None);
}

#[test]
fn regexes_pcre2_refuses_are_refused() {
    // Each was refused by `haproxy -c` 2.6.12 and parsed by regex-syntax.
    for pattern in [
        "\\u0041",
        "\\U00000041",
        "(?u)a",
        "(?i-u)a",
        "\\x{100}",
        "[\\x{100}]",
        "\\p{Letter}",
        "\\p{Lowercase_Letter}",
        "a{70000}",
        "a{2,70000}",
    ] {
        assert!(
            matches!(check_regex(pattern), Err(TextError::RegexPcre2(_))),
            "{pattern}: {:?}",
            check_regex(pattern)
        );
    }
    // Accepted by both with different meanings: refused.
    for pattern in ["(?R)a", "\\b{start}", "[a&&b]", "[a[bc]]"] {
        assert!(check_regex(pattern).is_err(), "{pattern}");
    }
    // 40,893 bytes of alternatives: refused by haproxy -c ("too large").
    let origins: Vec<String> = (0..1_500)
        .map(|i| format!("https://o{i}\\.example\\.com"))
        .collect();
    let large = format!("^({})$", origins.join("|"));
    assert!(matches!(
        check_regex(&large),
        Err(TextError::TooLong { .. })
    ));
    // Not regexes, or refused by both.
    for pattern in ["a(", "(?=x)", "\\k<n>", "[\\d-z]", "a\nb"] {
        assert!(check_regex(pattern).is_err(), "{pattern}");
    }
    // Passed by haproxy -c 2.6.12.
    for pattern in [
        "\\x{41}",
        "\\xff",
        "\\p{L}",
        "\\pL",
        "\\p{Lu}",
        "\\p{Greek}",
        "a{65535}",
        "(?i)a",
        "(?im-sx)a",
        "(?U)a+",
        "[[:alpha:]]",
        "(?P<n>a)",
        "\\d\\w\\s",
        "^/api/v[0-9]+(/|$)(.*)",
    ] {
        assert_eq!(check_regex(pattern), Ok(pattern), "{pattern}");
    }
}

#[test]
fn escaped_text_matches_literally() {
    assert_eq!(regex_escape("a.b*c|d/é:#"), "a\\.b\\*c\\|d/é\\:\\#");
}
