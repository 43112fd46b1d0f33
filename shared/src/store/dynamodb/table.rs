//! The check of the idempotency table at start: one `DescribeTable`, then a
//! decision on what it describes ([`check_description`], a pure function):
//! its key schema is the configured one ([`TableConfig::key_layout`]: a
//! partition key alone, or a partition and a sort key), and its replication
//! keeps one claim per key.
//!
//! In a global table in multi-Region *eventual* consistency (MREC) a
//! condition is evaluated against the local Region's copy and concurrent
//! writes resolve last-writer-wins: two Regions can both win the claim of
//! one key, and both apply its effect. Such a table is refused unless the
//! deployment says every claim of a key goes to one Region
//! ([`TableConfig::claims_routed_to_one_region`]). Multi-Region *strong*
//! consistency (MRSC) evaluates conditions against the latest replicated
//! state and is accepted, as is a table in one Region.
//!
//! A replica of a global table of version 2017.11.29 (Legacy) is not
//! described as one by `DescribeTable`: "To determine if a table is a global
//! tables version 2017.11.29 (Legacy) replica, invoke the
//! `describe-global-table` command" (DynamoDB guide, "Determining the version
//! of a global table"); `Replicas` is filled for version 2019.11.21 only.
//! Such a table replicates last writer wins, as MREC does, and is refused the
//! same way. Every replica of one has "DynamoDB Streams enabled, with the
//! stream containing both the new and the old images of the item"
//! (`CreateGlobalTable`), so only a table with such a stream and no replicas
//! listed costs one more request at start, `DescribeGlobalTable`
//! (`may_be_legacy_global`, `check_legacy_global`); a table whose stream
//! has new images only (the template's) or none never does.

use aws_sdk_dynamodb::types::{
    GlobalTableDescription, KeySchemaElement, KeyType, MultiRegionConsistency, ReplicaDescription,
    StreamViewType, TableDescription,
};

use crate::store::{CLAIMS_ROUTED_ENV, PARTITION_KEY_ENV, SORT_KEY_ENV, TableConfig};

/// An idempotency table the check accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TableCheck {
    /// A table in one Region (no replicas).
    SingleRegion,
    /// A global table in multi-Region strong consistency.
    StrongGlobal {
        /// The replicas' Regions.
        regions: Vec<String>,
    },
    /// A global table in multi-Region eventual consistency, accepted on the
    /// opt-in that every claim of a key is sent to one Region.
    RoutedEventualGlobal {
        /// The replicas' Regions.
        regions: Vec<String>,
    },
}

/// Why the idempotency table was refused at start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TableCheckError {
    /// A global table in multi-Region eventual consistency, without the
    /// opt-in.
    #[error(
        "idempotency table {table} is a global table in multi-Region eventual consistency \
         (MultiRegionConsistency {mode}, replicas in {regions}): a condition is evaluated \
         against the local Region's copy and conflicts resolve last writer wins, so two Regions \
         can both win the claim of one key and both apply its effect. Use a global table in \
         multi-Region strong consistency (MRSC) for the idempotency records, or, if the \
         deployment sends every claim of a key to one Region, set {CLAIMS_ROUTED_ENV}=true",
        regions = .regions.join(", ")
    )]
    EventualGlobalTable {
        /// The table.
        table: String,
        /// The consistency mode described (`EVENTUAL`, or `unset` which
        /// DynamoDB reads as `EVENTUAL`).
        mode: String,
        /// The replicas' Regions.
        regions: Vec<String>,
    },
    /// A replica of a global table of version 2017.11.29 (Legacy), without
    /// the opt-in: it replicates last writer wins, as MREC does.
    #[error(
        "idempotency table {table} is a replica of a global table of version 2017.11.29 \
         (Legacy; replicas in {regions}): it replicates last writer wins, like multi-Region \
         eventual consistency, so two Regions can both win the claim of one key and both \
         apply its effect. Use a global table in multi-Region strong consistency (MRSC) for the \
         idempotency records, or, if the deployment sends every claim of a key to one Region, \
         set {CLAIMS_ROUTED_ENV}=true",
        regions = .regions.join(", ")
    )]
    LegacyGlobalTable {
        /// The table.
        table: String,
        /// The Regions of its replication group.
        regions: Vec<String>,
    },
    /// The table may be a replica of a global table of version 2017.11.29
    /// (`may_be_legacy_global`) and `DescribeGlobalTable` failed, so
    /// whether it is one is unknown.
    #[error(
        "idempotency table {table} could not be checked: it has a stream of new and old images, \
         as every replica of a global table of version 2017.11.29 (Legacy) has, and \
         DescribeGlobalTable (needed at start to tell whether it is one) failed: {reason}. \
         Grant dynamodb:DescribeGlobalTable on the global table of that name, or, if the \
         deployment sends every claim of a key to one Region, set {CLAIMS_ROUTED_ENV}=true"
    )]
    DescribeGlobal {
        /// The table.
        table: String,
        /// The service's answer.
        reason: String,
    },
    /// The table's key schema is not the one the configuration lays records
    /// out in: every claim would fail, or records would miss their key.
    #[error(
        "idempotency table {table} has the key {found}, but the configuration expects \
         {expected}: set {PARTITION_KEY_ENV} and {SORT_KEY_ENV} (unset for a table without a \
         sort key) to the table's key attributes, or use a table with the expected key"
    )]
    KeySchema {
        /// The table.
        table: String,
        /// The key the configuration expects (`partition key id`,
        /// `partition key PK, sort key SK`).
        expected: String,
        /// The key `DescribeTable` described, in the same words.
        found: String,
    },
    /// `DescribeTable` failed, so the table's consistency is unknown.
    #[error(
        "idempotency table {table} could not be checked: DescribeTable (needed at start to \
         check the table's multi-Region consistency) failed: {reason}"
    )]
    Describe {
        /// The table.
        table: String,
        /// The service's answer.
        reason: String,
    },
}

/// The decision on a described table: a table in one Region or a global
/// table in strong consistency is accepted; a global table in eventual
/// consistency (or with its mode unset, which DynamoDB reads as eventual,
/// or an unknown mode) only with [`TableConfig::claims_routed_to_one_region`].
///
/// A table described with `GlobalTableVersion` 2017.11.29 is a legacy
/// global table (`check_legacy_global`'s rule). A table with no replicas
/// is in one Region as far as `DescribeTable` tells; `may_be_legacy_global`
/// says when to ask `DescribeGlobalTable` too.
pub fn check_description(
    table: &TableConfig,
    described: &TableDescription,
) -> Result<TableCheck, TableCheckError> {
    check_key_schema(table, described.key_schema())?;
    let regions = region_names(described.replicas());
    if described.global_table_version() == Some(LEGACY_GLOBAL_TABLE_VERSION) {
        return legacy(table, regions);
    }
    if regions.is_empty() {
        return Ok(TableCheck::SingleRegion);
    }
    match described.multi_region_consistency() {
        Some(MultiRegionConsistency::Strong) => Ok(TableCheck::StrongGlobal { regions }),
        _ if table.claims_routed_to_one_region => Ok(TableCheck::RoutedEventualGlobal { regions }),
        mode => Err(TableCheckError::EventualGlobalTable {
            table: table.table_name.clone(),
            mode: mode.map_or("unset".to_owned(), |m| m.as_str().to_owned()),
            regions,
        }),
    }
}

/// The key schema `described` is the one `table` lays records out in: its
/// partition key [`Attributes::id`](crate::store::Attributes::id), and its
/// sort key [`KeyLayout::sort_key`](crate::store::KeyLayout::sort_key) or
/// none. Otherwise [`TableCheckError::KeySchema`], naming both.
pub fn check_key_schema(
    table: &TableConfig,
    described: &[KeySchemaElement],
) -> Result<(), TableCheckError> {
    let words = |partition: Option<&str>, sort: Option<&str>| {
        let mut text = format!("partition key {}", partition.unwrap_or("(none)"));
        if let Some(sort) = sort {
            text.push_str(&format!(", sort key {sort}"));
        }
        text
    };
    let of = |kind: KeyType| {
        described
            .iter()
            .find(|k| *k.key_type() == kind)
            .map(|k| k.attribute_name())
    };
    let (partition, sort) = (of(KeyType::Hash), of(KeyType::Range));
    let expected = (
        Some(table.attributes.id.as_str()),
        table.key_layout.sort_key(),
    );
    if (partition, sort) == expected {
        return Ok(());
    }
    Err(TableCheckError::KeySchema {
        table: table.table_name.clone(),
        expected: words(expected.0, expected.1),
        found: words(partition, sort),
    })
}

/// The version of global tables whose replicas `DescribeTable` does not
/// list.
pub const LEGACY_GLOBAL_TABLE_VERSION: &str = "2017.11.29";

fn region_names(replicas: &[ReplicaDescription]) -> Vec<String> {
    replicas
        .iter()
        .map(|r| r.region_name().unwrap_or("(unnamed)").to_owned())
        .collect()
}

/// Whether the table `described` may be a replica of a global table of
/// version 2017.11.29, which `DescribeTable` does not say: no replicas
/// listed, not described as a global table of another version, and a
/// stream of new and old images, which every such replica has. Only then
/// does the check ask `DescribeGlobalTable`
/// ([`DynamoDbStore::check`](super::DynamoDbStore::check)).
pub fn may_be_legacy_global(described: &TableDescription) -> bool {
    described.replicas().is_empty()
        && described.global_table_version().is_none()
        && described.stream_specification().is_some_and(|stream| {
            stream.stream_enabled()
                && stream.stream_view_type() == Some(&StreamViewType::NewAndOldImages)
        })
}

/// The decision on the table when `DescribeGlobalTable` describes a global
/// table of its name (version 2017.11.29): it is treated as a global table
/// in multi-Region eventual consistency, refused unless
/// [`TableConfig::claims_routed_to_one_region`].
pub fn check_legacy_global(
    table: &TableConfig,
    global: &GlobalTableDescription,
) -> Result<TableCheck, TableCheckError> {
    legacy(table, region_names(global.replication_group()))
}

/// A legacy global table in `regions`: last writer wins, as MREC.
fn legacy(table: &TableConfig, regions: Vec<String>) -> Result<TableCheck, TableCheckError> {
    if table.claims_routed_to_one_region {
        return Ok(TableCheck::RoutedEventualGlobal { regions });
    }
    Err(TableCheckError::LegacyGlobalTable {
        table: table.table_name.clone(),
        regions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::StreamSpecification;

    fn stream(view: StreamViewType) -> StreamSpecification {
        StreamSpecification::builder()
            .stream_enabled(true)
            .stream_view_type(view)
            .build()
            .unwrap()
    }

    /// A described table keyed as today's records are (`id`, HASH).
    fn keyed() -> aws_sdk_dynamodb::types::builders::TableDescriptionBuilder {
        TableDescription::builder().key_schema(key("id", KeyType::Hash))
    }

    fn key(name: &str, kind: KeyType) -> KeySchemaElement {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .unwrap()
    }

    #[test]
    fn a_table_keyed_otherwise_than_configured_is_refused_naming_both() {
        use crate::store::KeyLayout;
        let composite = |pk: &str, sk: &str| {
            TableDescription::builder()
                .table_name("app")
                .key_schema(key(pk, KeyType::Hash))
                .key_schema(key(sk, KeyType::Range))
                .build()
        };
        let spread = TableConfig::new("app")
            .partition_key("PK")
            .key_layout(KeyLayout::Spread {
                sort_key: "SK".into(),
            });
        assert_eq!(
            check_description(&spread, &composite("PK", "SK")),
            Ok(TableCheck::SingleRegion)
        );
        let fixed = spread.clone().key_layout(KeyLayout::FixedPartition {
            sort_key: "SK".into(),
            partition_value: "IDEMPOTENCY".into(),
        });
        assert_eq!(
            check_description(&fixed, &composite("PK", "SK")),
            Ok(TableCheck::SingleRegion)
        );
        for (config, table, expected, found) in [
            // A composite table, configured as a table of its own.
            (
                TableConfig::new("app"),
                composite("PK", "SK"),
                "partition key id",
                "partition key PK, sort key SK",
            ),
            // A table of its own, configured with a sort key.
            (
                spread.clone(),
                keyed().table_name("app").build(),
                "partition key PK, sort key SK",
                "partition key id",
            ),
            // The sort key named otherwise.
            (
                spread.clone(),
                composite("PK", "sk"),
                "partition key PK, sort key SK",
                "partition key PK, sort key sk",
            ),
        ] {
            let err = check_description(&config, &table).unwrap_err();
            assert_eq!(
                err,
                TableCheckError::KeySchema {
                    table: "app".into(),
                    expected: expected.into(),
                    found: found.into(),
                }
            );
            let text = err.to_string();
            for says in [expected, found, "app", PARTITION_KEY_ENV, SORT_KEY_ENV] {
                assert!(text.contains(says), "{says:?} in {text}");
            }
        }
    }

    fn region(name: &str) -> ReplicaDescription {
        ReplicaDescription::builder().region_name(name).build()
    }

    /// What `DescribeTable` answers for a replica of a global table of
    /// version 2017.11.29: no `Replicas`, a stream of new and old images.
    /// And `DescribeGlobalTable`'s answer for it. Built with the SDK's
    /// builders: moto has neither global tables nor `DescribeGlobalTable`.
    #[test]
    fn a_legacy_global_table_is_refused_as_mrec_is() {
        let described = keyed()
            .table_name("records")
            .stream_specification(stream(StreamViewType::NewAndOldImages))
            .build();
        let config = TableConfig::new("records");
        // DescribeTable alone says one Region: the check must ask further.
        assert_eq!(
            check_description(&config, &described),
            Ok(TableCheck::SingleRegion)
        );
        assert!(may_be_legacy_global(&described));
        let global = GlobalTableDescription::builder()
            .global_table_name("records")
            .replication_group(region("us-east-1"))
            .replication_group(region("eu-west-1"))
            .build();
        let err = check_legacy_global(&config, &global).unwrap_err();
        assert_eq!(
            err,
            TableCheckError::LegacyGlobalTable {
                table: "records".into(),
                regions: vec!["us-east-1".into(), "eu-west-1".into()],
            }
        );
        let text = err.to_string();
        for says in [
            "2017.11.29",
            "both win the claim",
            "MRSC",
            CLAIMS_ROUTED_ENV,
        ] {
            assert!(text.contains(says), "{says:?} in {text}");
        }
        // The opt-in accepts it, as it accepts MREC.
        let routed = config.clone().claims_routed_to_one_region(true);
        assert_eq!(
            check_legacy_global(&routed, &global),
            Ok(TableCheck::RoutedEventualGlobal {
                regions: vec!["us-east-1".into(), "eu-west-1".into()]
            })
        );
        // Described with its version, it is refused without asking further.
        let versioned = keyed()
            .table_name("records")
            .global_table_version(LEGACY_GLOBAL_TABLE_VERSION)
            .build();
        assert!(matches!(
            check_description(&config, &versioned),
            Err(TableCheckError::LegacyGlobalTable { .. })
        ));
    }

    #[test]
    fn only_a_table_that_can_be_a_legacy_replica_costs_a_describe_global_table() {
        let plain = keyed().table_name("records").build();
        let new_image = keyed()
            .table_name("records")
            .stream_specification(stream(StreamViewType::NewImage))
            .build();
        let current = keyed()
            .table_name("records")
            .stream_specification(stream(StreamViewType::NewAndOldImages))
            .global_table_version("2019.11.21")
            .replicas(region("us-east-1"))
            .build();
        for table in [plain, new_image, current] {
            assert!(!may_be_legacy_global(&table), "{table:?}");
        }
    }

    fn global(mode: Option<MultiRegionConsistency>) -> TableDescription {
        keyed()
            .table_name("records")
            .replicas(
                ReplicaDescription::builder()
                    .region_name("us-east-1")
                    .build(),
            )
            .replicas(
                ReplicaDescription::builder()
                    .region_name("eu-west-1")
                    .build(),
            )
            .set_multi_region_consistency(mode)
            .build()
    }

    #[test]
    fn a_single_region_table_is_accepted() {
        let plain = keyed().table_name("records").build();
        assert_eq!(
            check_description(&TableConfig::new("records"), &plain),
            Ok(TableCheck::SingleRegion)
        );
    }

    #[test]
    fn a_strongly_consistent_global_table_is_accepted() {
        assert_eq!(
            check_description(
                &TableConfig::new("records"),
                &global(Some(MultiRegionConsistency::Strong))
            ),
            Ok(TableCheck::StrongGlobal {
                regions: vec!["us-east-1".into(), "eu-west-1".into()]
            })
        );
    }

    #[test]
    fn an_eventually_consistent_global_table_is_refused_saying_why_and_what_to_do() {
        for (mode, shown) in [
            (Some(MultiRegionConsistency::Eventual), "EVENTUAL"),
            (None, "unset"),
            (Some(MultiRegionConsistency::from("LATER")), "LATER"),
        ] {
            let err = check_description(&TableConfig::new("records"), &global(mode)).unwrap_err();
            assert_eq!(
                err,
                TableCheckError::EventualGlobalTable {
                    table: "records".into(),
                    mode: shown.into(),
                    regions: vec!["us-east-1".into(), "eu-west-1".into()],
                }
            );
            let text = err.to_string();
            for says in [
                "records",
                "us-east-1, eu-west-1",
                "both win the claim",
                "strong consistency (MRSC)",
                "IDEMPOTENCY_CLAIMS_ROUTED_TO_ONE_REGION=true",
            ] {
                assert!(text.contains(says), "{says:?} in {text}");
            }
        }
    }

    #[test]
    fn the_opt_in_accepts_an_eventually_consistent_global_table() {
        let routed = TableConfig::new("records").claims_routed_to_one_region(true);
        assert_eq!(
            check_description(&routed, &global(Some(MultiRegionConsistency::Eventual))),
            Ok(TableCheck::RoutedEventualGlobal {
                regions: vec!["us-east-1".into(), "eu-west-1".into()]
            })
        );
    }
}
