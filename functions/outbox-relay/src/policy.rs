//! What the relay trusts: the record layout and who may publish where.

use crate::Allowlist;

/// What the relay trusts: the record layout's attribute names (the
/// library's [`lambda_idempotency::store::Attributes`]) and which writers may publish where.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The idempotency table's attribute names.
    pub attributes: lambda_idempotency::store::Attributes,
    /// Which key prefixes may publish to which destinations.
    pub allowlist: Allowlist,
}

impl Policy {
    /// The default attribute names and `allowlist`.
    pub fn new(allowlist: Allowlist) -> Self {
        Self {
            attributes: lambda_idempotency::store::Attributes::default(),
            allowlist,
        }
    }

    /// Other attribute names (a table laid out with custom ones).
    pub fn with_attributes(mut self, attributes: lambda_idempotency::store::Attributes) -> Self {
        self.attributes = attributes;
        self
    }
}
