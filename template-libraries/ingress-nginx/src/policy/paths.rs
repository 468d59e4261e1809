//! `use-regex` and `rewrite-target`: the Ingress's paths as regexes and the
//! path rewritten with their capture groups.

use crate::annotations::Annotations;
use crate::parse;
use crate::report::Status;

use super::Policy;
use crate::regex;

impl Policy {
    pub(super) fn read_paths(&mut self, a: &mut Annotations<'_>, paths: &[&str]) {
        if let Some((key, on)) = a.parsed("use-regex", parse::boolean) {
            self.regex_paths = on;
            let text = if on {
                "paths are PCRE2 regexes matched case-insensitively from the start of the path, as nginx's `~*`; every other path of the host, every Ingress's, becomes a regex location too, exact paths first, then the longest first, as ingress-nginx orders them"
            } else {
                "the paths are not regexes (unless rewrite-target makes them so)"
            };
            a.record(key, Status::Honoured(text.into()));
        }
        if let Some((key, target)) = a.take("rewrite-target") {
            let groups = paths
                .iter()
                .filter_map(|p| regex::path_regex(p).ok())
                .map(|r| regex::capture_groups(&r))
                .min()
                .unwrap_or(0);
            match regex::rewrite_target(target, groups) {
                Ok(replacement) => {
                    self.regex_paths = true;
                    self.rewrite = Some(replacement);
                    a.record(key, Status::Honoured("the path is rewritten by HAProxy's replace-path in the Service's backend, capture groups as \\1, the query kept; the paths are regexes (implied, as in ingress-nginx)".into()));
                }
                Err(why) => a.record(key, Status::Invalid(why.into_reason())),
            }
        }
    }
}
