//! `haptic migrate report`: what haptic does with every
//! `nginx.ingress.kubernetes.io/*` annotation of every Ingress the
//! `ingress-nginx` library serves, read from that library's output.
//!
//! The library emits one warning item per annotation under a stable key
//! (`ingress-nginx-annotation:<namespace>/<name>:<annotation>`) whose reason
//! is the verdict ([`Verdict`]), and `IngressRefused` under
//! `ingress-nginx-ingress:<namespace>/<name>` for an Ingress it refuses. The
//! report, the controller's Events and its per-annotation metric all read
//! these items of one render, so they cannot disagree. An honoured
//! annotation is a record, not a problem: it makes no Event and is not
//! printed as a warning by `haptic render` ([`is_record`]).

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use crate::render::{PlannedWarning, Rendered};

/// The library whose output this reads.
pub const LIBRARY: &str = "ingress-nginx";
const ANNOTATION_KEY: &str = "ingress-nginx-annotation:";
const INGRESS_KEY: &str = "ingress-nginx-ingress:";
/// The reason of an honoured annotation.
pub const HONOURED_REASON: &str = "AnnotationHonoured";

/// What haptic does with one annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    Honoured,
    /// Honoured with a stated difference.
    Differs,
    NotHonoured,
    /// Its value does not parse; not applied.
    Invalid,
}

impl Verdict {
    /// All of them, in report order.
    pub const ALL: [Self; 4] = [
        Self::Honoured,
        Self::Differs,
        Self::NotHonoured,
        Self::Invalid,
    ];

    fn from_reason(reason: &str) -> Option<Self> {
        Some(match reason {
            HONOURED_REASON => Self::Honoured,
            "AnnotationDiffers" => Self::Differs,
            "AnnotationNotHonoured" => Self::NotHonoured,
            "AnnotationInvalid" => Self::Invalid,
            _ => return None,
        })
    }

    /// The metric label and the report's column.
    pub fn label(self) -> &'static str {
        match self {
            Self::Honoured => "honoured",
            Self::Differs => "differs",
            Self::NotHonoured => "not-honoured",
            Self::Invalid => "invalid",
        }
    }

    /// How the library's message words it, before the explanation.
    fn wording(self) -> &'static str {
        match self {
            Self::Honoured => "honoured: ",
            Self::Differs => "honoured with a difference: ",
            Self::NotHonoured => "not honoured: ",
            Self::Invalid => "not applied, its value is invalid: ",
        }
    }
}

/// Whether a library warning is a record of something done as asked (an
/// honoured annotation), which makes no Event and is not shown as a
/// warning.
pub fn is_record(library: &str, warning_reason: &str) -> bool {
    library == LIBRARY && warning_reason == HONOURED_REASON
}

/// One annotation of one Ingress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationLine {
    /// Without the prefix: `rewrite-target`.
    pub annotation: String,
    pub verdict: Verdict,
    /// What haptic does, and why.
    pub explanation: String,
}

/// One Ingress the library serves (or refused).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngressReport {
    pub annotations: Vec<AnnotationLine>,
    /// Why it is not served, when refused.
    pub refused: Option<String>,
    /// The library's other warnings about it (`TLSCertificateNotServed: ...`).
    pub other: Vec<String>,
}

/// The report of one render, by Ingress (`namespace/name`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub ingresses: BTreeMap<String, IngressReport>,
}

impl Report {
    /// Reads the `ingress-nginx` library's items of `rendered`.
    pub fn of(rendered: &Rendered) -> Self {
        Self::of_warnings(&rendered.warnings)
    }

    /// Reads them from a render's warnings.
    pub fn of_warnings(warnings: &[PlannedWarning]) -> Self {
        let mut report = Self::default();
        for (library, key, warning) in warnings {
            if &**library != LIBRARY {
                continue;
            }
            if let Some(rest) = key.strip_prefix(ANNOTATION_KEY)
                && let Some((ingress, annotation)) = rest.rsplit_once(':')
                && let Some(verdict) = Verdict::from_reason(&warning.reason)
            {
                let explanation = warning
                    .message
                    .split_once(verdict.wording())
                    .map_or(warning.message.as_str(), |(_, why)| why)
                    .to_owned();
                report
                    .ingresses
                    .entry(ingress.to_owned())
                    .or_default()
                    .annotations
                    .push(AnnotationLine {
                        annotation: annotation.to_owned(),
                        verdict,
                        explanation,
                    });
            } else if let Some(ingress) = key.strip_prefix(INGRESS_KEY) {
                report
                    .ingresses
                    .entry(ingress.to_owned())
                    .or_default()
                    .refused = Some(warning.message.clone());
            } else if let Some(object) = &warning.object {
                report
                    .ingresses
                    .entry(format!("{}/{}", object.namespace, object.name))
                    .or_default()
                    .other
                    .push(format!("{}: {}", warning.reason, warning.message));
            }
        }
        for ingress in report.ingresses.values_mut() {
            ingress
                .annotations
                .sort_by(|a, b| a.annotation.cmp(&b.annotation));
            ingress.other.sort();
        }
        report
    }

    /// How many Ingresses carry each annotation with each verdict: the
    /// controller's metric.
    pub fn counts(&self) -> BTreeMap<(String, Verdict), u64> {
        let mut counts = BTreeMap::new();
        for ingress in self.ingresses.values() {
            for line in &ingress.annotations {
                *counts
                    .entry((line.annotation.clone(), line.verdict))
                    .or_default() += 1;
            }
        }
        counts
    }

    /// Totals by verdict.
    pub fn totals(&self) -> BTreeMap<Verdict, usize> {
        let mut totals: BTreeMap<Verdict, usize> = Verdict::ALL.iter().map(|v| (*v, 0)).collect();
        for line in self.ingresses.values().flat_map(|i| &i.annotations) {
            *totals.entry(line.verdict).or_default() += 1;
        }
        totals
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ingresses.is_empty() {
            return writeln!(
                f,
                "No Ingress is served by the ingress-nginx library (enable it with --set templateLibraries.ingressNginx.enabled=true; it serves the classes in templateLibraries.ingressNginx.classNames, default nginx)."
            );
        }
        let width = self
            .ingresses
            .values()
            .flat_map(|i| &i.annotations)
            .map(|l| l.annotation.len())
            .max()
            .unwrap_or(0);
        for (name, ingress) in &self.ingresses {
            match &ingress.refused {
                Some(why) => writeln!(f, "Ingress {name}: REFUSED ({why})")?,
                None => writeln!(f, "Ingress {name}: served")?,
            }
            if ingress.annotations.is_empty() {
                writeln!(f, "  (no nginx.ingress.kubernetes.io annotations)")?;
            }
            for line in &ingress.annotations {
                writeln!(
                    f,
                    "  {:<12} {:<width$}  {}",
                    line.verdict.label(),
                    line.annotation,
                    line.explanation
                )?;
            }
            for other in &ingress.other {
                writeln!(f, "  also: {other}")?;
            }
        }
        let totals = self.totals();
        let mut summary = String::new();
        for (verdict, n) in &totals {
            let _ = write!(summary, ", {n} {}", verdict.label());
        }
        let refused = self
            .ingresses
            .values()
            .filter(|i| i.refused.is_some())
            .count();
        writeln!(
            f,
            "Total: {} Ingresses ({refused} refused), {} annotations{summary}",
            self.ingresses.len(),
            totals.values().sum::<usize>()
        )
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::library::types::{ObjectKey, Warning};

    fn warning(key: &str, reason: &str, message: &str) -> PlannedWarning {
        (
            Arc::from(LIBRARY),
            key.to_owned(),
            Arc::new(Warning {
                object: Some(ObjectKey {
                    watch: "ingresses".into(),
                    namespace: "shop".into(),
                    name: "web".into(),
                }),
                reason: reason.into(),
                message: message.into(),
            }),
        )
    }

    #[test]
    fn reads_the_verdicts_under_their_keys() {
        let report = Report::of_warnings(&[
            warning(
                "ingress-nginx-annotation:shop/web:rewrite-target",
                "AnnotationHonoured",
                "Ingress \"shop/web\": annotation nginx.ingress.kubernetes.io/rewrite-target honoured: the path is rewritten",
            ),
            warning(
                "ingress-nginx-annotation:shop/web:auth-url",
                "AnnotationNotHonoured",
                "Ingress \"shop/web\": annotation nginx.ingress.kubernetes.io/auth-url not honoured: needs a subrequest",
            ),
            warning(
                "warning:TLSCertificateNotServed:x",
                "TLSCertificateNotServed",
                "Ingress \"shop/web\" has spec.tls",
            ),
        ]);
        let web = &report.ingresses["shop/web"];
        assert_eq!(web.annotations[0].annotation, "auth-url");
        assert_eq!(web.annotations[0].verdict, Verdict::NotHonoured);
        assert_eq!(web.annotations[0].explanation, "needs a subrequest");
        assert_eq!(web.annotations[1].explanation, "the path is rewritten");
        assert_eq!(web.other.len(), 1);
        assert_eq!(
            report.counts()[&("rewrite-target".to_owned(), Verdict::Honoured)],
            1
        );
        let text = report.to_string();
        assert!(
            text.contains("Total: 1 Ingresses (0 refused), 2 annotations, 1 honoured, 0 differs, 1 not-honoured, 0 invalid"),
            "{text}"
        );
    }

    #[test]
    fn another_librarys_warnings_are_not_read() {
        let mut other = warning(
            "ingress-nginx-annotation:shop/web:x",
            "AnnotationHonoured",
            "m",
        );
        other.0 = Arc::from("ingress");
        assert!(Report::of_warnings(&[other]).ingresses.is_empty());
        assert!(!is_record("ingress", HONOURED_REASON));
        assert!(is_record(LIBRARY, HONOURED_REASON));
    }
}
