//! How the records are laid out in a table: the attribute names every store
//! counts a record's size with ([`Attributes`], `Record::item_size`), and
//! where the DynamoDB store keeps them ([`TableConfig`], [`TABLE_ENV`]): in
//! a table of their own keyed by the record's key, or beside a team's items
//! in a table with a partition and a sort key ([`KeyLayout`]).

use crate::config::parse_flag;
use crate::record::Record;

/// Attribute names of the idempotency table. The defaults match the layout of
/// Powertools for AWS Lambda, so one table can serve both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// Partition key (S): the record's key, or under a sort key
    /// ([`KeyLayout`]) `IDEMPOTENCY#<key>` or a fixed value.
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

/// Where a record's key goes in the table's key.
///
/// In a table of its own the record's key is the partition key
/// ([`KeyLayout::PartitionKey`]). In a table with a partition and a sort key
/// (a single-table design) records live beside the team's items in one of
/// two layouts; [`KeyLayout::Spread`] is the default, as the one that
/// spreads the records over partitions (`docs/stores/dynamodb.md`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KeyLayout {
    /// The table's only key attribute ([`Attributes::id`]) holds the
    /// record's key.
    #[default]
    PartitionKey,
    /// The partition key holds [`RECORD_KEY_PREFIX`] and the record's key
    /// (`IDEMPOTENCY#<key>`), the sort key (named `sort_key`) the constant
    /// [`RECORD_SORT_VALUE`]: every record its own partition key value, so
    /// the load spreads as a table of its own spreads it.
    Spread {
        /// The sort key attribute.
        sort_key: String,
    },
    /// Powertools' layout: the partition key holds `partition_value` for
    /// every record, the sort key (named `sort_key`) the record's key. Every
    /// record is in one partition key value: one partition's throughput
    /// for all of them.
    FixedPartition {
        /// The sort key attribute.
        sort_key: String,
        /// The partition key value of every record.
        partition_value: String,
    },
}

/// The partition key prefix of a record in [`KeyLayout::Spread`].
pub const RECORD_KEY_PREFIX: &str = "IDEMPOTENCY#";
/// The sort key value of a record in [`KeyLayout::Spread`], and the default
/// partition key value of [`KeyLayout::FixedPartition`].
pub const RECORD_SORT_VALUE: &str = "IDEMPOTENCY";

impl KeyLayout {
    /// The sort key attribute, if the table has one.
    pub fn sort_key(&self) -> Option<&str> {
        match self {
            KeyLayout::PartitionKey => None,
            KeyLayout::Spread { sort_key } | KeyLayout::FixedPartition { sort_key, .. } => {
                Some(sort_key)
            }
        }
    }

    /// The key of the record `id` as (attribute, string value) pairs: the
    /// partition key (named `partition_key`), then the sort key if any.
    pub fn key(&self, partition_key: &str, id: &str) -> Vec<(String, String)> {
        match self {
            KeyLayout::PartitionKey => vec![(partition_key.to_owned(), id.to_owned())],
            KeyLayout::Spread { sort_key } => vec![
                (partition_key.to_owned(), format!("{RECORD_KEY_PREFIX}{id}")),
                (sort_key.clone(), RECORD_SORT_VALUE.to_owned()),
            ],
            KeyLayout::FixedPartition {
                sort_key,
                partition_value,
            } => vec![
                (partition_key.to_owned(), partition_value.clone()),
                (sort_key.clone(), id.to_owned()),
            ],
        }
    }

    /// The record key of an item whose partition key value is `partition`
    /// and sort key value `sort`: `None` when the item is not a record in
    /// this layout (a team's own item beside the records). The store reads
    /// records and the relay recognises them by this rule.
    pub fn record_id<'a>(
        &self,
        partition: Option<&'a str>,
        sort: Option<&'a str>,
    ) -> Option<&'a str> {
        match self {
            KeyLayout::PartitionKey => partition,
            KeyLayout::Spread { .. } => partition?
                .strip_prefix(RECORD_KEY_PREFIX)
                .filter(|_| sort == Some(RECORD_SORT_VALUE)),
            KeyLayout::FixedPartition {
                partition_value, ..
            } => sort.filter(|_| partition == Some(partition_value.as_str())),
        }
    }

    /// How many bytes the key of record `id` adds to its item beyond the
    /// partition key holding `id` as is (what [`Record::item_size`]
    /// counts).
    pub fn extra_key_bytes(&self, partition_key: &str, id: &str) -> usize {
        let size: usize = self
            .key(partition_key, id)
            .iter()
            .map(|(name, value)| name.len() + value.len())
            .sum();
        size - (partition_key.len() + id.len())
    }
}

/// Environment variable naming the idempotency table.
pub const TABLE_ENV: &str = "IDEMPOTENCY_TABLE";

/// Environment variable of the opt-in
/// [`TableConfig::claims_routed_to_one_region`]: `true` accepts a global
/// table in multi-Region eventual consistency, on the deployment's word that
/// every claim of a key is sent to one Region.
pub const CLAIMS_ROUTED_ENV: &str = "IDEMPOTENCY_CLAIMS_ROUTED_TO_ONE_REGION";

/// Environment variable naming the table's partition key attribute
/// ([`Attributes::id`], default `id`).
pub const PARTITION_KEY_ENV: &str = "IDEMPOTENCY_PARTITION_KEY_ATTR";

/// Environment variable naming the table's sort key attribute: set, records
/// live in a table with a partition and a sort key, laid out as
/// [`KEY_LAYOUT_ENV`] says.
pub const SORT_KEY_ENV: &str = "IDEMPOTENCY_SORT_KEY_ATTR";

/// Environment variable choosing the [`KeyLayout`] under a sort key:
/// `spread` (the default: [`KeyLayout::Spread`]) or `fixed-partition`
/// ([`KeyLayout::FixedPartition`], with [`PARTITION_VALUE_ENV`]).
pub const KEY_LAYOUT_ENV: &str = "IDEMPOTENCY_KEY_LAYOUT";

/// Environment variable of [`KeyLayout::FixedPartition`]'s partition key
/// value (default [`RECORD_SORT_VALUE`]).
pub const PARTITION_VALUE_ENV: &str = "IDEMPOTENCY_PARTITION_VALUE";

/// Where idempotency records live in DynamoDB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableConfig {
    /// Table name.
    pub table_name: String,
    /// Attribute names.
    pub attributes: Attributes,
    /// Where the record's key goes in the table's key.
    pub key_layout: KeyLayout,
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
            key_layout: KeyLayout::PartitionKey,
            claims_routed_to_one_region: false,
        }
    }

    /// This table with its partition key attribute named `name`.
    pub fn partition_key(mut self, name: impl Into<String>) -> Self {
        self.attributes.id = name.into();
        self
    }

    /// This table with the record's key laid out as `layout`.
    pub fn key_layout(mut self, layout: KeyLayout) -> Self {
        self.key_layout = layout;
        self
    }

    /// The key of the record `id` in this table, as (attribute, value)
    /// pairs ([`KeyLayout::key`]).
    pub fn record_key(&self, id: &str) -> Vec<(String, String)> {
        self.key_layout.key(&self.attributes.id, id)
    }

    /// DynamoDB's size of the item of `record` in this table: its
    /// [`Record::item_size`] with the key as this table lays it out.
    pub fn item_size(&self, record: &Record) -> usize {
        record.item_size(&self.attributes)
            + self
                .key_layout
                .extra_key_bytes(&self.attributes.id, &record.id)
    }

    /// This table with [`TableConfig::claims_routed_to_one_region`] set.
    pub fn claims_routed_to_one_region(mut self, routed: bool) -> Self {
        self.claims_routed_to_one_region = routed;
        self
    }

    /// The table named by [`TABLE_ENV`], if set and not empty, with
    /// [`CLAIMS_ROUTED_ENV`] read as a flag and its key as
    /// [`PARTITION_KEY_ENV`], [`SORT_KEY_ENV`], [`KEY_LAYOUT_ENV`] and
    /// [`PARTITION_VALUE_ENV`] say. A layout that is not one, or one
    /// without a sort key, is an error naming the variable.
    pub fn from_env() -> Result<Option<Self>, String> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// [`TableConfig::from_env`] over any source of variables.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, String> {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let Some(table) = set(TABLE_ENV) else {
            return Ok(None);
        };
        let routed = var(CLAIMS_ROUTED_ENV).is_some_and(|v| parse_flag(&v));
        let mut config = Self::new(table.trim()).claims_routed_to_one_region(routed);
        if let Some(pk) = set(PARTITION_KEY_ENV) {
            config = config.partition_key(pk.trim());
        }
        let layout = set(KEY_LAYOUT_ENV).map(|l| l.trim().to_ascii_lowercase());
        let partition_value = set(PARTITION_VALUE_ENV);
        config.key_layout = match (set(SORT_KEY_ENV), layout.as_deref()) {
            (None, None) if partition_value.is_none() => KeyLayout::PartitionKey,
            (None, _) => {
                return Err(format!(
                    "{KEY_LAYOUT_ENV} and {PARTITION_VALUE_ENV} lay records out under a sort \
                     key: set {SORT_KEY_ENV} to the table's sort key attribute"
                ));
            }
            (Some(sort_key), None | Some("spread")) if partition_value.is_none() => {
                KeyLayout::Spread {
                    sort_key: sort_key.trim().to_owned(),
                }
            }
            (Some(sort_key), Some("fixed-partition")) => KeyLayout::FixedPartition {
                sort_key: sort_key.trim().to_owned(),
                partition_value: partition_value.unwrap_or_else(|| RECORD_SORT_VALUE.to_owned()),
            },
            (Some(_), None | Some("spread")) => {
                return Err(format!(
                    "{PARTITION_VALUE_ENV} is the partition key value of \
                     {KEY_LAYOUT_ENV}=fixed-partition; the spread layout has none"
                ));
            }
            (Some(_), Some(other)) => {
                return Err(format!(
                    "{KEY_LAYOUT_ENV}={other:?} is not a layout: spread (the default) or \
                     fixed-partition"
                ));
            }
        };
        Ok(Some(config))
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

    #[test]
    fn each_layout_keys_a_record_and_recognises_only_records() {
        let spread = KeyLayout::Spread {
            sort_key: "SK".into(),
        };
        let fixed = KeyLayout::FixedPartition {
            sort_key: "SK".into(),
            partition_value: "IDEMPOTENCY".into(),
        };
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter().map(|(a, b)| ((*a).into(), (*b).into())).collect()
        };
        assert_eq!(
            KeyLayout::PartitionKey.key("id", "p#h"),
            pairs(&[("id", "p#h")])
        );
        assert_eq!(
            spread.key("PK", "p#h"),
            pairs(&[("PK", "IDEMPOTENCY#p#h"), ("SK", "IDEMPOTENCY")])
        );
        assert_eq!(
            fixed.key("PK", "p#h"),
            pairs(&[("PK", "IDEMPOTENCY"), ("SK", "p#h")])
        );
        for layout in [&KeyLayout::PartitionKey, &spread, &fixed] {
            let key = layout.key("PK", "p#h");
            let value = |i: usize| key.get(i).map(|(_, v)| v.as_str());
            assert_eq!(
                layout.record_id(value(0), value(1)),
                Some("p#h"),
                "{layout:?}"
            );
            let extra = layout.extra_key_bytes("PK", "p#h");
            let size: usize = key.iter().map(|(a, v)| a.len() + v.len()).sum();
            assert_eq!(size, "PK".len() + "p#h".len() + extra);
        }
        // A team's items beside the records are not records.
        for (pk, sk) in [
            (Some("ORDER#1"), Some("IDEMPOTENCY")),
            (Some("IDEMPOTENCY#p#h"), Some("ITEM")),
            (Some("IDEMPOTENCY#p#h"), None),
        ] {
            assert_eq!(spread.record_id(pk, sk), None, "{pk:?} {sk:?}");
        }
        assert_eq!(fixed.record_id(Some("ORDER#1"), Some("p#h")), None);
        assert_eq!(fixed.record_id(Some("IDEMPOTENCY"), None), None);
    }

    #[test]
    fn the_environment_names_the_key_and_defaults_to_the_spread_layout() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(TableConfig::from_vars(env(&[])), Ok(None));
        let plain = TableConfig::from_vars(env(&[(TABLE_ENV, "t")]))
            .unwrap()
            .unwrap();
        assert_eq!(plain, TableConfig::new("t"));
        let spread = TableConfig::from_vars(env(&[
            (TABLE_ENV, "app"),
            (PARTITION_KEY_ENV, "PK"),
            (SORT_KEY_ENV, "SK"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(spread.attributes.id, "PK");
        assert_eq!(
            spread.key_layout,
            KeyLayout::Spread {
                sort_key: "SK".into()
            }
        );
        let fixed = TableConfig::from_vars(env(&[
            (TABLE_ENV, "app"),
            (SORT_KEY_ENV, "sk"),
            (KEY_LAYOUT_ENV, "Fixed-Partition"),
            (PARTITION_VALUE_ENV, "idempotency#orders"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            fixed.key_layout,
            KeyLayout::FixedPartition {
                sort_key: "sk".into(),
                partition_value: "idempotency#orders".into()
            }
        );
        for (vars, says) in [
            (
                env(&[(TABLE_ENV, "t"), (KEY_LAYOUT_ENV, "spread")]),
                SORT_KEY_ENV,
            ),
            (
                env(&[
                    (TABLE_ENV, "t"),
                    (SORT_KEY_ENV, "sk"),
                    (KEY_LAYOUT_ENV, "hot"),
                ]),
                "\"hot\" is not a layout",
            ),
            (
                env(&[
                    (TABLE_ENV, "t"),
                    (SORT_KEY_ENV, "sk"),
                    (PARTITION_VALUE_ENV, "x"),
                ]),
                KEY_LAYOUT_ENV,
            ),
        ] {
            let err = TableConfig::from_vars(vars).unwrap_err();
            assert!(err.contains(says), "{says:?} in {err}");
        }
    }

    #[test]
    fn the_item_size_counts_the_key_as_the_table_lays_it_out() {
        let r = Record {
            id: "p#h".into(),
            status: Status::Completed,
            expiration: 1_700_000_000,
            in_progress_expiration: None,
            data: None,
            error: None,
            validation: None,
            owner: None,
            outbox: None,
        };
        let plain = TableConfig::new("t");
        let spread = TableConfig::new("t").key_layout(KeyLayout::Spread {
            sort_key: "sk".into(),
        });
        assert_eq!(
            spread.item_size(&r),
            plain.item_size(&r) + "IDEMPOTENCY#".len() + "sk".len() + "IDEMPOTENCY".len()
        );
    }
}
