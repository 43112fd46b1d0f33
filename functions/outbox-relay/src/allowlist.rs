//! Which writers may publish where: the relay publishes an entry only when
//! the key prefix of the record that staged it is allowed its destination.
//!
//! Every writer role may put records in the idempotency table under its own
//! key prefix only (the template scopes each role with
//! `dynamodb:LeadingKeys`), so the prefix of a record's `id` says which
//! function wrote it. The allowlist (`OUTBOX_ALLOWLIST`, set by the
//! template) says where each prefix may publish: an entry whose destination
//! is not listed for its record's prefix is **refused**: not sent, logged as
//! an error with the record key, counted (`OutboxRefused`), never retried.

use std::collections::BTreeMap;

use crate::Destination;

/// The environment variable holding the allowlist: a JSON object from key
/// prefix to the destinations its records may publish to, each an SQS queue
/// URL or ARN, or an EventBridge bus name or ARN:
/// `{"orders.record": ["https://sqs.us-east-1.amazonaws.com/123456789012/notifications.fifo"]}`.
pub const ALLOWLIST_ENV: &str = "OUTBOX_ALLOWLIST";

/// Why an allowlist cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AllowlistError {
    /// The variable is not set (the relay publishes nothing without it).
    #[error("{ALLOWLIST_ENV} is not set: the relay publishes only what it allows")]
    Missing,
    /// Not a JSON object of string arrays.
    #[error("{ALLOWLIST_ENV} is not a JSON object of destination arrays")]
    NotJson(#[source] serde_json::Error),
    /// A prefix or destination it cannot match.
    #[error("{ALLOWLIST_ENV}: {0}")]
    Invalid(String),
}

/// A destination as the allowlist compares it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    /// A queue, by account and name (its URL's last two path segments, or
    /// its ARN's last two fields).
    Queue { account: String, name: String },
    /// A bus, by name (an ARN's part after `event-bus/`).
    Bus(String),
}

impl Target {
    fn queue_url(url: &str) -> Option<Self> {
        let path = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))?
            .split_once('/')?
            .1;
        let (account, name) = path.trim_end_matches('/').split_once('/')?;
        (!account.is_empty() && !name.is_empty() && !name.contains('/')).then(|| Self::Queue {
            account: account.to_owned(),
            name: name.to_owned(),
        })
    }

    fn parse(text: &str) -> Option<Self> {
        if let Some(rest) = text.strip_prefix("arn:") {
            let fields: Vec<&str> = rest.split(':').collect();
            return match fields.as_slice() {
                [_, "sqs", _, account, name] if !account.is_empty() && !name.is_empty() => {
                    Some(Self::Queue {
                        account: (*account).to_owned(),
                        name: (*name).to_owned(),
                    })
                }
                [_, "events", _, _, bus] => bus
                    .strip_prefix("event-bus/")
                    .filter(|name| !name.is_empty())
                    .map(|name| Self::Bus(name.to_owned())),
                _ => None,
            };
        }
        if text.contains("://") {
            return Self::queue_url(text);
        }
        (!text.is_empty()).then(|| Self::Bus(text.to_owned()))
    }

    fn of(destination: &Destination) -> Option<Self> {
        match destination {
            Destination::Sqs { queue_url } => Self::queue_url(queue_url),
            Destination::EventBridge { bus, .. } => match Self::parse(bus)? {
                bus @ Self::Bus(_) => Some(bus),
                Self::Queue { .. } => None,
            },
            _ => None,
        }
    }
}

/// Which key prefixes may publish to which destinations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowlist {
    /// `None`: every prefix everywhere ([`Allowlist::everything`]).
    by_prefix: Option<BTreeMap<String, Vec<Target>>>,
}

impl Allowlist {
    /// Parses the allowlist's JSON (see [`ALLOWLIST_ENV`]).
    pub fn parse(json: &str) -> Result<Self, AllowlistError> {
        let raw: BTreeMap<String, Vec<String>> =
            serde_json::from_str(json).map_err(AllowlistError::NotJson)?;
        let mut by_prefix = BTreeMap::new();
        for (prefix, destinations) in raw {
            if prefix.is_empty() || prefix.contains('#') {
                return Err(AllowlistError::Invalid(format!(
                    "the prefix {prefix:?} is not a key prefix"
                )));
            }
            let targets = destinations
                .iter()
                .map(|d| {
                    Target::parse(d).ok_or_else(|| {
                        AllowlistError::Invalid(format!(
                            "{d:?} (for {prefix:?}) is not a queue URL or ARN, or a bus name or ARN"
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            by_prefix.insert(prefix, targets);
        }
        Ok(Self {
            by_prefix: Some(by_prefix),
        })
    }

    /// From [`ALLOWLIST_ENV`]; an error when it is unset or malformed (the
    /// relay does not start: it never guesses who may publish).
    pub fn from_env() -> Result<Self, AllowlistError> {
        match std::env::var(ALLOWLIST_ENV) {
            Ok(json) => Self::parse(&json),
            Err(_) => Err(AllowlistError::Missing),
        }
    }

    /// Every prefix may publish everywhere: for local runs that only print
    /// what they would publish, and tests; never the default under Lambda.
    pub fn everything() -> Self {
        Self { by_prefix: None }
    }

    /// Whether the record keyed `record_key` (`<prefix>#<hash>`) may publish
    /// to `destination`; the reason when it may not.
    pub fn permits(&self, record_key: &str, destination: &Destination) -> Result<(), String> {
        let Some(by_prefix) = &self.by_prefix else {
            return Ok(());
        };
        let Some((prefix, _)) = record_key.rsplit_once('#') else {
            return Err(format!(
                "the record key {record_key:?} has no prefix to allow"
            ));
        };
        let Some(allowed) = by_prefix.get(prefix) else {
            return Err(format!(
                "the prefix {prefix:?} may not publish anything ({ALLOWLIST_ENV})"
            ));
        };
        match Target::of(destination) {
            Some(target) if allowed.contains(&target) => Ok(()),
            _ => Err(format!(
                "the prefix {prefix:?} may not publish to {} ({ALLOWLIST_ENV})",
                describe(destination)
            )),
        }
    }
}

fn describe(destination: &Destination) -> String {
    match destination {
        Destination::Sqs { queue_url } => format!("the queue {queue_url}"),
        Destination::EventBridge { bus, .. } => format!("the event bus {bus}"),
        _ => "an unknown destination".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a failed step is a failed test")]
    use super::*;

    const URL: &str = "https://sqs.us-east-1.amazonaws.com/123456789012/notifications.fifo";

    fn sqs(url: &str) -> Destination {
        Destination::Sqs {
            queue_url: url.to_owned(),
        }
    }

    fn bus(name: &str) -> Destination {
        Destination::EventBridge {
            bus: name.to_owned(),
            source: "s".to_owned(),
            detail_type: "d".to_owned(),
        }
    }

    #[test]
    fn a_prefix_publishes_only_where_it_is_allowed() {
        let list = Allowlist::parse(
            r#"{"orders.record": [
                "arn:aws:sqs:us-east-1:123456789012:notifications.fifo",
                "arn:aws:events:us-east-1:123456789012:event-bus/shop"],
                "payments.credit": ["https://sqs.us-east-1.amazonaws.com/123456789012/ledger", "default"]}"#,
        )
        .unwrap();
        let key = "orders.record#00ff";
        assert_eq!(list.permits(key, &sqs(URL)), Ok(()), "ARN matches URL");
        assert_eq!(
            list.permits(key, &bus("shop")),
            Ok(()),
            "bus name matches ARN"
        );
        assert_eq!(
            list.permits(
                key,
                &bus("arn:aws:events:us-east-1:123456789012:event-bus/shop")
            ),
            Ok(())
        );
        // Another queue, another bus, another writer's destination.
        let other = "https://sqs.us-east-1.amazonaws.com/123456789012/other.fifo";
        assert!(
            list.permits(key, &sqs(other))
                .unwrap_err()
                .contains("may not publish to")
        );
        assert!(list.permits(key, &bus("default")).is_err());
        assert!(
            list.permits(
                key,
                &sqs("https://sqs.us-east-1.amazonaws.com/123456789012/ledger")
            )
            .is_err()
        );
        assert!(
            list.permits(
                key,
                &sqs("https://sqs.us-east-1.amazonaws.com/999999999999/notifications.fifo")
            )
            .is_err(),
            "another account"
        );
        assert_eq!(list.permits("payments.credit#ab", &bus("default")), Ok(()));
        // Unknown prefixes, keys without a prefix, and a lookalike prefix.
        let err = list.permits("inventory.reserve#ab", &sqs(URL)).unwrap_err();
        assert!(err.contains("may not publish anything"), "{err}");
        assert!(list.permits("no-prefix", &sqs(URL)).is_err());
        assert!(list.permits("orders.recordx#ab", &sqs(URL)).is_err());
        assert!(list.permits(key, &sqs("not a url")).is_err());
    }

    #[test]
    fn malformed_allowlists_are_refused() {
        for bad in [
            "",
            "[]",
            r#"{"p": "https://q"}"#,
            r#"{"": ["default"]}"#,
            r#"{"a#b": ["default"]}"#,
            r#"{"p": [""]}"#,
            r#"{"p": ["arn:aws:s3:::bucket"]}"#,
            r#"{"p": ["https://host-only"]}"#,
        ] {
            assert!(Allowlist::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            Allowlist::parse("{}")
                .unwrap()
                .permits("p#a", &bus("default")),
            Err("the prefix \"p\" may not publish anything (OUTBOX_ALLOWLIST)".to_owned())
        );
        assert_eq!(Allowlist::everything().permits("x", &bus("any")), Ok(()));
    }
}
