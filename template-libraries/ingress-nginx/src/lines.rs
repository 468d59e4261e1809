//! Request rules whose user-written part can outgrow one HAProxy line:
//! lists of CIDRs and hosts. HAProxy reads at most
//! [`MAX_WORDS_PER_LINE`](haptic_sdk::haproxy::MAX_WORDS_PER_LINE) words
//! a line (about 60 CIDRs), and one line too long makes `haproxy -c`
//! refuse every namespace's render. A list is written as several lines
//! HAProxy combines: `acl` lines of one name are OR-ed, and a rule repeated
//! for each part of a list fires when any part matches.

use haptic_sdk::haproxy::split_words;
use haptic_sdk::names::sanitize;

/// The name of an ACL of Ingress `id` (`namespace/name`) for `what`:
/// namespaces and names hold no `_`, so `<namespace>_<name>` is unique.
pub fn acl_name(id: &str, what: &str) -> String {
    sanitize(&format!("ingress_nginx_{what}_{}", id.replace('/', "_")))
}

/// `acl <name> <fetch> <words...>` lines (unindented, without newline), as
/// many as the word limit needs. `words` are checked single words (CIDRs,
/// host names).
pub fn acl(name: &str, fetch: &str, words: &[String]) -> Vec<String> {
    split_words(&format!("acl {name} {fetch}"), words, "").unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use haptic_sdk::haproxy::MAX_WORDS_PER_LINE;

    #[test]
    fn long_lists_become_several_acl_lines_of_one_name() {
        let cidrs: Vec<String> = (0..130).map(|i| format!("10.0.{i}.0/24")).collect();
        let name = acl_name("team-a/web", "allow");
        assert_eq!(name, "ingress_nginx_allow_team-a_web");
        let lines = acl(&name, "src", &cidrs);
        assert_eq!(lines.len(), 3);
        for line in &lines {
            assert!(line.starts_with("acl ingress_nginx_allow_team-a_web src 10.0."));
            assert!(line.split_whitespace().count() <= MAX_WORDS_PER_LINE);
        }
    }
}
