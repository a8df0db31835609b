//! What a face hands to the engine for a change: the operation kind and its request, as the
//! noun's module builds them from a path and a body. The server submits it (or dry-runs it)
//! through the engine; nothing here calls a provider or writes the store.

use crate::operation::OperationKind;
use serde::Serialize;
use serde_json::Value;

/// An operation to submit: its kind and its request (the JSON the kind's workflow decodes).
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    pub kind: OperationKind,
    pub request: Value,
}

impl Submission {
    /// `request` as the request of an operation of `kind`.
    pub fn new<T: Serialize>(kind: OperationKind, request: &T) -> Self {
        // Every request type is a plain struct with string-keyed maps: it always serializes.
        let request = serde_json::to_value(request).expect("an operation request serializes to JSON");
        Submission { kind, request }
    }
}
