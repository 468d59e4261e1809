//! The error a library returns from `plan` or `render`.

use crate::ObjectKey;

/// Why a library could not plan or render. The host reports it with the
/// library's name and keeps the last good configuration deployed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The values tree handed to `configure` is not a JSON object.
    #[error("values are not a JSON object: {0}")]
    ValuesNotObject(String),
    /// A library's subtree of the values tree does not fit its schema.
    #[error(
        "values of `templateLibraries.{library}` are invalid: {source}; fix them in the Helm values"
    )]
    InvalidValues {
        /// camelCase library name, as in the values tree.
        library: String,
        #[source]
        source: serde_json::Error,
    },
    /// The admin's host-claim policy (`templateLibraries.base.hostClaims`)
    /// cannot be used.
    #[error(transparent)]
    HostClaims(#[from] crate::claims::PolicyError),
    /// A watched object could not be parsed into the type its watch declares.
    #[error("cannot read {key} (resourceVersion {resource_version}) as {type_name}: {source}")]
    InvalidObject {
        key: ObjectKey,
        resource_version: String,
        type_name: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// The host sent an object for a watch the library did not plan.
    #[error(
        "received {key} for a watch the library did not plan; the host and library disagree about the plan"
    )]
    UnknownWatch {
        /// The offending object.
        key: ObjectKey,
    },
    /// Library code asked for a watch with a different type than it declared.
    #[error(
        "watch `{watch}` holds {declared}, but the library asked for {requested} (a bug in the library)"
    )]
    WrongType {
        watch: String,
        declared: &'static str,
        requested: &'static str,
    },
    /// Library code asked for a watch it never planned.
    #[error("watch `{0}` is not part of the current plan (a bug in the library)")]
    NotPlanned(String),
    /// Two output items of one render share a key.
    #[error(
        "two output items share the key `{0}`: each section, file and status patch may be emitted once per render"
    )]
    DuplicateKey(String),
    /// An error the library itself describes, optionally about one object.
    #[error("{message}")]
    Library {
        message: String,
        object: Option<ObjectKey>,
    },
}

impl Error {
    /// A library's own error message.
    pub fn msg(message: impl Into<String>) -> Self {
        Self::Library {
            message: message.into(),
            object: None,
        }
    }

    /// A library's own error about one object, so the host can name it.
    pub fn object(key: &ObjectKey, message: impl Into<String>) -> Self {
        Self::Library {
            message: message.into(),
            object: Some(key.clone()),
        }
    }

    /// The object this error is about, if any.
    pub fn object_key(&self) -> Option<&ObjectKey> {
        match self {
            Self::InvalidObject { key, .. } | Self::UnknownWatch { key } => Some(key),
            Self::Library { object, .. } => object.as_ref(),
            _ => None,
        }
    }
}

/// Result of library code.
pub type Result<T, E = Error> = std::result::Result<T, E>;
