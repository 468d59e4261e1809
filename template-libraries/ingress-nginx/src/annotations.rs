//! One Ingress's annotations under the prefix, taken one by one as the
//! policy reads them ([`crate::policy`] and the annotation families beside
//! it: [`crate::tls`], [`crate::rewrites`]); whatever is left is reported
//! from the [`catalogue`]. A leaf below every family, so a family reading
//! its annotations never imports the policy that collects them.

use std::collections::BTreeMap;

use crate::catalogue;
use crate::parse::Invalid;
use crate::report::{Finding, Status};

/// An Ingress's annotations under the prefix, taken one by one as the
/// policy reads them; whatever is left is reported from the catalogue.
pub struct Annotations<'a> {
    values: BTreeMap<String, &'a str>,
    findings: Vec<Finding>,
}

impl<'a> Annotations<'a> {
    /// The annotations of `all` under `prefix` (`nginx.ingress.kubernetes.io`).
    pub fn new(all: impl IntoIterator<Item = (&'a String, &'a String)>, prefix: &str) -> Self {
        let values = all
            .into_iter()
            .filter_map(|(k, v)| {
                let name = k.strip_prefix(prefix)?.strip_prefix('/')?;
                Some((name.to_owned(), v.as_str()))
            })
            .collect();
        Self {
            values,
            findings: Vec::new(),
        }
    }

    /// Whether the Ingress carries any of them.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty() && self.findings.is_empty()
    }

    pub(crate) fn take(&mut self, name: &str) -> Option<(String, &'a str)> {
        self.values.remove_entry(name)
    }

    pub(crate) fn record(&mut self, annotation: String, status: Status) {
        self.findings.push(Finding { annotation, status });
    }

    /// Parses one annotation: `None` when absent or invalid (then recorded
    /// as invalid); the caller records the verdict of a good value.
    pub(crate) fn parsed<T>(
        &mut self,
        name: &str,
        parse: impl FnOnce(&str) -> Result<T, Invalid>,
    ) -> Option<(String, T)> {
        let (key, value) = self.take(name)?;
        match parse(value) {
            Ok(parsed) => Some((key, parsed)),
            Err(why) => {
                self.record(key, Status::Invalid(why.into_reason()));
                None
            }
        }
    }

    /// Records each of `names` present as not honoured, for `why`: the
    /// annotations of a family whose switch is off (`canary` not
    /// "true", no `auth-tls-secret`) are not applied, and say so.
    pub(crate) fn not_honoured(&mut self, names: &[&str], why: &str) {
        for name in names {
            if let Some((key, _)) = self.take(name) {
                self.record(key, Status::NotHonoured(why.to_owned()));
            }
        }
    }

    /// Records every annotation not read yet as not honoured, for `why`
    /// (an Ingress whose kind makes the rest ignored, as a canary's).
    pub(crate) fn not_honoured_rest(&mut self, why: &str) {
        for (name, _) in std::mem::take(&mut self.values) {
            self.record(name, Status::NotHonoured(why.to_owned()));
        }
    }

    /// Parses one annotation and records a good value as honoured, with
    /// the text `honoured` gives for it: the one verdict most annotations
    /// get.
    pub(crate) fn honoured<T>(
        &mut self,
        name: &str,
        parse: impl FnOnce(&str) -> Result<T, Invalid>,
        honoured: impl FnOnce(&T) -> String,
    ) -> Option<T> {
        let (key, value) = self.parsed(name, parse)?;
        self.record(key, Status::Honoured(honoured(&value)));
        Some(value)
    }

    /// Every annotation's verdict, the unread ones from the catalogue.
    pub fn finish(mut self) -> Vec<Finding> {
        for (name, _) in std::mem::take(&mut self.values) {
            let why = catalogue::not_honoured(&name).map_or_else(
                || {
                    "haptic does not know this annotation (not one of ingress-nginx's, or misspelt)"
                        .to_owned()
                },
                str::to_owned,
            );
            self.record(name, Status::NotHonoured(why));
        }
        self.findings
            .sort_by(|a, b| a.annotation.cmp(&b.annotation));
        self.findings
    }
}
