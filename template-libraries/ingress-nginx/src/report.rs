//! The migration report as library output: one warning item per annotation
//! of every served Ingress, under a stable key, so the controller (Events,
//! the per-annotation metric) and `haptic migrate report` read the same
//! thing from the same render.
//!
//! - key: `ingress-nginx-annotation:<namespace>/<name>:<annotation>` (the
//!   annotation without its prefix, e.g. `rewrite-target`);
//! - reason: one of [`Status::reason`]: `AnnotationHonoured` (the host
//!   records it without an Event), `AnnotationDiffers`,
//!   `AnnotationNotHonoured`, `AnnotationInvalid`;
//! - object: the Ingress; message: what haptic does with it, and why.
//!
//! An Ingress refused because of them (`unsupportedAnnotations: refuse`)
//! gets one more warning, reason `IngressRefused`, under
//! `ingress-nginx-ingress:<namespace>/<name>`.

use haptic_sdk::{Item, ObjectKey, Output, Result};

/// Key prefix of the per-annotation items.
pub const ANNOTATION_KEY: &str = "ingress-nginx-annotation";
/// Key prefix of the per-Ingress refusal.
pub const INGRESS_KEY: &str = "ingress-nginx-ingress";
/// Reason of the refusal.
pub const REFUSED_REASON: &str = "IngressRefused";

/// What haptic does with one annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Applied with ingress-nginx's semantics.
    Honoured(String),
    /// Applied, with a difference the message states.
    Differs(String),
    /// Not applied: HAProxy 2.6 cannot express it, haptic does not do it
    /// yet, or it is nginx code.
    NotHonoured(String),
    /// Not applied: the value does not parse.
    Invalid(String),
}

impl Status {
    /// The warning's reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Honoured(_) => "AnnotationHonoured",
            Self::Differs(_) => "AnnotationDiffers",
            Self::NotHonoured(_) => "AnnotationNotHonoured",
            Self::Invalid(_) => "AnnotationInvalid",
        }
    }

    /// Whether `unsupportedAnnotations: refuse` refuses the Ingress for it.
    pub fn is_unsupported(&self) -> bool {
        matches!(self, Self::NotHonoured(_) | Self::Invalid(_))
    }

    /// What haptic does with the annotation, and why.
    pub fn text(&self) -> &str {
        match self {
            Self::Honoured(text)
            | Self::Differs(text)
            | Self::NotHonoured(text)
            | Self::Invalid(text) => text,
        }
    }

    /// The verdict in words (`honoured`, `not honoured`, ...).
    pub fn verdict(&self) -> &'static str {
        match self {
            Self::Honoured(_) => "honoured",
            Self::Differs(_) => "honoured with a difference",
            Self::NotHonoured(_) => "not honoured",
            Self::Invalid(_) => "not applied, its value is invalid",
        }
    }
}

/// One annotation's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Without the prefix: `rewrite-target`.
    pub annotation: String,
    pub status: Status,
}

/// Emits the findings of one Ingress (and its refusal, when refused).
pub fn emit(
    out: &mut Output,
    ingress: &ObjectKey,
    prefix: &str,
    findings: &[Finding],
    refused: bool,
) -> Result<()> {
    let id = format!("{}/{}", ingress.namespace, ingress.name);
    for finding in findings {
        out.put(
            format!("{ANNOTATION_KEY}:{id}:{}", finding.annotation),
            Item::Warning {
                object: Some(ingress.clone()),
                reason: finding.status.reason().to_owned(),
                message: format!(
                    // Quoted: offline, the name reaches here unchecked.
                    "Ingress {id:?}: annotation {prefix}/{} {}: {}",
                    finding.annotation,
                    finding.status.verdict(),
                    finding.status.text()
                ),
            },
        )?;
    }
    if refused {
        let unsupported: Vec<&str> = findings
            .iter()
            .filter(|f| f.status.is_unsupported())
            .map(|f| f.annotation.as_str())
            .collect();
        out.put(
            format!("{INGRESS_KEY}:{id}"),
            Item::Warning {
                object: Some(ingress.clone()),
                reason: REFUSED_REASON.to_owned(),
                message: format!(
                    "Ingress {id:?} is not served: templateLibraries.ingressNginx.unsupportedAnnotations is refuse and it carries annotations haptic does not honour ({}); remove them, or set unsupportedAnnotations: warn",
                    unsupported.join(", ")
                ),
            },
        )?;
    }
    Ok(())
}
