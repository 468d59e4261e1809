//! Status conditions as the Gateway API names them, built without a clock:
//! the host's status applier stamps `lastTransitionTime` when it writes a
//! changed condition, so a render is a function of its input.

use serde_json::{Value, json};

/// One `metav1.Condition` without its transition time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Condition {
    pub fn new(
        type_: &'static str,
        status: bool,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            status,
            reason,
            message: message.into(),
        }
    }

    /// The condition as JSON for the object's `generation`.
    pub fn to_json(&self, generation: i64) -> Value {
        json!({
            "type": self.type_,
            "status": if self.status { "True" } else { "False" },
            "reason": self.reason,
            "message": self.message,
            "observedGeneration": generation,
        })
    }
}

/// Conditions as a JSON list, in the order given.
pub fn list(conditions: &[Condition], generation: i64) -> Value {
    Value::Array(conditions.iter().map(|c| c.to_json(generation)).collect())
}
