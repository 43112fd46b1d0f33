//! The check of the idempotency table at start: one `DescribeTable`, then a
//! decision on what it describes ([`check_description`], a pure function).
//!
//! In a global table in multi-Region *eventual* consistency (MREC) a
//! condition is evaluated against the local Region's copy and concurrent
//! writes resolve last-writer-wins: two Regions can both win the claim of
//! one key, and both apply its effect. Such a table is refused unless the
//! deployment says every claim of a key goes to one Region
//! ([`TableConfig::claims_routed_to_one_region`]). Multi-Region *strong*
//! consistency (MRSC) evaluates conditions against the latest replicated
//! state and is accepted, as is a table in one Region.

use aws_sdk_dynamodb::types::{MultiRegionConsistency, TableDescription};

use crate::store::{CLAIMS_ROUTED_ENV, TableConfig};

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
pub fn check_description(
    table: &TableConfig,
    described: &TableDescription,
) -> Result<TableCheck, TableCheckError> {
    let regions: Vec<String> = described
        .replicas()
        .iter()
        .map(|r| r.region_name().unwrap_or("(unnamed)").to_owned())
        .collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::ReplicaDescription;

    fn global(mode: Option<MultiRegionConsistency>) -> TableDescription {
        TableDescription::builder()
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
        let plain = TableDescription::builder().table_name("records").build();
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
