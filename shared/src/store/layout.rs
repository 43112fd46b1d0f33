//! How the records are laid out in a table: the attribute names every store
//! counts a record's size with ([`Attributes`], `Record::item_size`), and
//! where the DynamoDB store keeps them ([`TableConfig`], [`TABLE_ENV`]).

use crate::config::parse_flag;
use crate::record::Record;

/// Attribute names of the idempotency table. The defaults match the layout of
/// Powertools for AWS Lambda, so one table can serve both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// Partition key (S).
    pub id: String,
    /// `INPROGRESS` or `COMPLETED` (S).
    pub status: String,
    /// Record expiry in epoch seconds (N): the table's TTL attribute.
    pub expiration: String,
    /// Lease expiry in epoch milliseconds (N).
    pub in_progress_expiration: String,
    /// Stored response, JSON text (S).
    pub data: String,
    /// Payload hash (S).
    pub validation: String,
    /// Owner token of the invocation holding the claim (S).
    pub owner: String,
    /// Recorded terminal error (S).
    pub error: String,
    /// Messages to publish, JSON text (S): the relay's filter and input.
    pub outbox: String,
}

impl Default for Attributes {
    fn default() -> Self {
        Self {
            id: "id".into(),
            status: "status".into(),
            expiration: "expiration".into(),
            in_progress_expiration: "in_progress_expiration".into(),
            data: "data".into(),
            validation: "validation".into(),
            owner: "owner_token".into(),
            error: "error".into(),
            outbox: "outbox".into(),
        }
    }
}

impl Record {
    /// DynamoDB's item size for this record with the given attribute names,
    /// by the library's one size rule ([`crate::value::item_size`]: strings
    /// their UTF-8 bytes, numbers [`crate::value::number_size`]), without
    /// building the item.
    pub fn item_size(&self, names: &Attributes) -> usize {
        fn attr(name: &str, len: usize) -> usize {
            name.len() + len
        }
        let digits = |n: u64| crate::value::number_size(&n.to_string());
        let mut size = attr(&names.id, self.id.len())
            + attr(&names.status, self.status.as_str().len())
            + attr(&names.expiration, digits(self.expiration));
        if let Some(t) = self.in_progress_expiration {
            size += attr(&names.in_progress_expiration, digits(t));
        }
        for (name, value) in [
            (&names.data, &self.data),
            (&names.error, &self.error),
            (&names.validation, &self.validation),
            (&names.owner, &self.owner),
            (&names.outbox, &self.outbox),
        ] {
            if let Some(v) = value {
                size += attr(name, v.len());
            }
        }
        size
    }
}

/// Environment variable naming the idempotency table.
pub const TABLE_ENV: &str = "IDEMPOTENCY_TABLE";

/// Environment variable of the opt-in
/// [`TableConfig::claims_routed_to_one_region`]: `true` accepts a global
/// table in multi-Region eventual consistency, on the deployment's word that
/// every claim of a key is sent to one Region.
pub const CLAIMS_ROUTED_ENV: &str = "IDEMPOTENCY_CLAIMS_ROUTED_TO_ONE_REGION";

/// Where idempotency records live in DynamoDB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableConfig {
    /// Table name.
    pub table_name: String,
    /// Attribute names.
    pub attributes: Attributes,
    /// Opt-in (off by default): the deployment routes every claim of a key
    /// to one Region, so a global table in multi-Region *eventual*
    /// consistency is accepted by
    /// [`DynamoDbStore::checked`](crate::DynamoDbStore::checked). Off, such
    /// a table is refused: two Regions could both win one key's claim.
    pub claims_routed_to_one_region: bool,
}

impl TableConfig {
    /// The table `name` with the default attribute names.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            table_name: name.into(),
            attributes: Attributes::default(),
            claims_routed_to_one_region: false,
        }
    }

    /// This table with [`TableConfig::claims_routed_to_one_region`] set.
    pub fn claims_routed_to_one_region(mut self, routed: bool) -> Self {
        self.claims_routed_to_one_region = routed;
        self
    }

    /// The table named by [`TABLE_ENV`], if set and not empty, with
    /// [`CLAIMS_ROUTED_ENV`] read as a flag.
    pub fn from_env() -> Option<Self> {
        let routed = std::env::var(CLAIMS_ROUTED_ENV).is_ok_and(|v| parse_flag(&v));
        std::env::var(TABLE_ENV)
            .ok()
            .filter(|t| !t.trim().is_empty())
            .map(|t| Self::new(t).claims_routed_to_one_region(routed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Status;

    #[test]
    fn item_size_counts_names_and_values() {
        let names = Attributes::default();
        let mut r = Record {
            id: "p#h".into(),
            status: Status::Completed,
            expiration: 1_700_000_000,
            in_progress_expiration: None,
            data: None,
            error: None,
            validation: None,
            owner: Some("o".into()),
            outbox: None,
        };
        let base = r.item_size(&names);
        r.data = Some("x".repeat(1000));
        assert_eq!(r.item_size(&names), base + "data".len() + 1000);
    }
}
