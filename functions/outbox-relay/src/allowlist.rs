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
//!
//! Destinations are compared by partition, Region, account and name, never
//! by name alone: an allowed `arn:aws:events:us-east-1:123456789012:event-bus/shop`
//! does not let a writer publish to a bus `shop` of another account or
//! Region, nor an allowed queue to the queue of that name in another Region.
//! A bare bus name, and a queue URL whose host names no Region, are in the
//! relay's own partition, Region and account, which its function ARN gives
//! at the first invocation ([`Allowlist::set_home`]); while those are unknown
//! (a local run), a bare name matches only the same bare name.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::Destination;

/// The environment variable holding the allowlist: a JSON object from key
/// prefix to the destinations its records may publish to, each an SQS queue
/// URL or ARN, or an EventBridge bus name or ARN, compared by partition,
/// Region, account and name (a bare bus name, and a queue URL whose host
/// names no Region, are in the relay's own account and Region):
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

/// Where a queue or bus lives. `None`: the relay's own (a bare bus name; a
/// queue URL's partition, and its Region when its host does not name one),
/// filled in from the relay's function ARN ([`Allowlist::set_home`]) before
/// comparing. Left unknown, it matches only another `None`: a bare name is
/// never taken for another account's or Region's ARN.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Place {
    partition: Option<String>,
    region: Option<String>,
    account: Option<String>,
}

impl Place {
    /// The partition, Region and account of an ARN's fields after `arn:`
    /// (`aws`, `sqs`, `us-east-1`, `123456789012`, ...), all non-empty.
    fn of_arn(fields: &[&str]) -> Option<Self> {
        let [partition, _, region, account, ..] = fields else {
            return None;
        };
        let some = |s: &&str| (!s.is_empty()).then(|| (*s).to_owned());
        Some(Self {
            partition: Some(some(partition)?),
            region: Some(some(region)?),
            account: Some(some(account)?),
        })
    }

    /// Each part unknown here taken from `home`.
    fn within(&self, home: &Place) -> Place {
        Place {
            partition: self.partition.clone().or_else(|| home.partition.clone()),
            region: self.region.clone().or_else(|| home.region.clone()),
            account: self.account.clone().or_else(|| home.account.clone()),
        }
    }
}

/// A destination as the allowlist compares it: partition, Region, account
/// and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    /// A queue: its URL's account and name (the last two path segments,
    /// the Region from an SQS host, `sqs.<region>.…` or
    /// `<region>.queue.…`), or its ARN's.
    Queue { place: Place, name: String },
    /// A bus: its ARN's (the part after `event-bus/`), or a bare name, in
    /// the relay's own account and Region.
    Bus { place: Place, name: String },
}

/// The Region an SQS endpoint host names (`sqs.us-east-1.amazonaws.com`,
/// `vpce-1a2b.sqs.eu-west-1.vpce.amazonaws.com`,
/// `us-east-1.queue.amazonaws.com`); `None` for another host (a local
/// endpoint).
fn region_of_host(host: &str) -> Option<String> {
    let host = host.split(':').next()?.to_ascii_lowercase();
    let labels: Vec<&str> = host.split('.').collect();
    let is_region =
        |label: &str| label.contains('-') && label.ends_with(|c: char| c.is_ascii_digit());
    let region = match labels.iter().position(|l| *l == "sqs") {
        Some(i) => labels.get(i + 1).copied(),
        None => labels
            .iter()
            .position(|l| *l == "queue")
            .and_then(|i| i.checked_sub(1))
            .map(|i| labels[i]),
    };
    region.filter(|r| is_region(r)).map(str::to_owned)
}

impl Target {
    fn queue_url(url: &str) -> Option<Self> {
        let (host, path) = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))?
            .split_once('/')?;
        let (account, name) = path.trim_end_matches('/').split_once('/')?;
        (!account.is_empty() && !name.is_empty() && !name.contains('/')).then(|| Self::Queue {
            place: Place {
                partition: None,
                region: region_of_host(host),
                account: Some(account.to_owned()),
            },
            name: name.to_owned(),
        })
    }

    fn parse(text: &str) -> Option<Self> {
        if let Some(rest) = text.strip_prefix("arn:") {
            let fields: Vec<&str> = rest.split(':').collect();
            let place = Place::of_arn(&fields)?;
            return match fields.as_slice() {
                [_, "sqs", _, _, name] if !name.is_empty() => Some(Self::Queue {
                    place,
                    name: (*name).to_owned(),
                }),
                [_, "events", _, _, bus] => bus
                    .strip_prefix("event-bus/")
                    .filter(|name| !name.is_empty())
                    .map(|name| Self::Bus {
                        place,
                        name: name.to_owned(),
                    }),
                _ => None,
            };
        }
        if text.contains("://") {
            return Self::queue_url(text);
        }
        (!text.is_empty()).then(|| Self::Bus {
            place: Place::default(),
            name: text.to_owned(),
        })
    }

    fn of(destination: &Destination) -> Option<Self> {
        match destination {
            Destination::Sqs { queue_url } => Self::queue_url(queue_url),
            Destination::EventBridge { bus, .. } => match Self::parse(bus)? {
                bus @ Self::Bus { .. } => Some(bus),
                Self::Queue { .. } => None,
            },
            _ => None,
        }
    }

    /// This target with what it leaves to the relay taken from `home`.
    fn within(&self, home: &Place) -> Self {
        match self {
            Self::Queue { place, name } => Self::Queue {
                place: place.within(home),
                name: name.clone(),
            },
            Self::Bus { place, name } => Self::Bus {
                place: place.within(home),
                name: name.clone(),
            },
        }
    }
}

/// Which key prefixes may publish to which destinations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowlist {
    /// `None`: every prefix everywhere ([`Allowlist::everything`]).
    by_prefix: Option<BTreeMap<String, Vec<Target>>>,
    /// The relay's own partition, Region and account, once known
    /// ([`Allowlist::set_home`]).
    home: OnceLock<Place>,
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
            home: OnceLock::new(),
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
        Self {
            by_prefix: None,
            home: OnceLock::new(),
        }
    }

    /// Learns the relay's own partition, Region and account from its
    /// function ARN (`arn:aws:lambda:us-east-1:123456789012:function:…`,
    /// the invocation context's `invoked_function_arn`), which a bare bus
    /// name and a queue URL stand in: the first ARN that parses is kept.
    /// Until then (a local run) they are unknown, and a bare name matches
    /// only a bare name, never an ARN. Whether the home is known after.
    pub fn set_home(&self, function_arn: &str) -> bool {
        if self.home.get().is_none()
            && let Some(rest) = function_arn.strip_prefix("arn:")
        {
            let fields: Vec<&str> = rest.split(':').collect();
            if fields.get(1) == Some(&"lambda")
                && let Some(place) = Place::of_arn(&fields)
            {
                let _ = self.home.set(place);
            }
        }
        self.home.get().is_some()
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
        let home = self.home.get().cloned().unwrap_or_default();
        match Target::of(destination).map(|t| t.within(&home)) {
            Some(target) if allowed.iter().any(|a| a.within(&home) == target) => Ok(()),
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
    /// The relay's function ARN: account 123456789012, us-east-1.
    const HOME: &str = "arn:aws:lambda:us-east-1:123456789012:function:relay";
    const SHOP: &str = "arn:aws:events:us-east-1:123456789012:event-bus/shop";

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
        assert!(list.set_home(HOME));
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

    /// A bus is compared by partition, Region, account and name; a bare
    /// name is the relay's own account and Region.
    #[test]
    fn an_allowed_bus_arn_refuses_the_bus_of_that_name_elsewhere() {
        let json = format!(r#"{{"orders.record": ["{SHOP}"]}}"#);
        let key = "orders.record#00ff";
        let at = |home: &str| {
            let list = Allowlist::parse(&json).unwrap();
            assert!(list.set_home(home), "{home}");
            list
        };
        let home = at(HOME);
        assert_eq!(home.permits(key, &bus("shop")), Ok(()));
        assert_eq!(home.permits(key, &bus(SHOP)), Ok(()));
        for elsewhere in [
            "arn:aws:events:us-east-1:999999999999:event-bus/shop",
            "arn:aws:events:eu-west-1:123456789012:event-bus/shop",
            "arn:aws-cn:events:us-east-1:123456789012:event-bus/shop",
            "arn:aws:events:us-east-1:123456789012:event-bus/shop2",
        ] {
            assert!(home.permits(key, &bus(elsewhere)).is_err(), "{elsewhere}");
        }
        // The bare name `shop` of a relay in another account or Region.
        for other in [
            "arn:aws:lambda:us-east-1:999999999999:function:relay",
            "arn:aws:lambda:eu-west-1:123456789012:function:relay",
        ] {
            let err = at(other).permits(key, &bus("shop")).unwrap_err();
            assert!(
                err.contains("may not publish to the event bus shop"),
                "{err}"
            );
        }
        // The relay's own account unknown: a bare name is not the ARN.
        let unknown = Allowlist::parse(&json).unwrap();
        assert!(!unknown.set_home(""), "no ARN: still unknown");
        assert!(!unknown.set_home("arn:aws:sqs:us-east-1:123456789012:q"));
        assert!(unknown.permits(key, &bus("shop")).is_err());
        assert_eq!(unknown.permits(key, &bus(SHOP)), Ok(()));
        // A bare name allowed matches the bare name, wherever the relay is.
        let bare = Allowlist::parse(r#"{"p": ["shop"]}"#).unwrap();
        assert_eq!(bare.permits("p#a", &bus("shop")), Ok(()));
        assert!(bare.set_home(HOME));
        assert_eq!(bare.permits("p#a", &bus(SHOP)), Ok(()));
        assert!(
            bare.permits(
                "p#a",
                &bus("arn:aws:events:us-east-1:999999999999:event-bus/shop")
            )
            .is_err()
        );
        // The first home learned stays.
        assert!(bare.set_home("arn:aws:lambda:eu-west-1:999999999999:function:x"));
        assert_eq!(bare.permits("p#a", &bus(SHOP)), Ok(()));
    }

    /// A queue is compared by partition, Region, account and name: a queue
    /// of the same name and account in another Region is refused.
    #[test]
    fn an_allowed_queue_refuses_the_queue_of_that_name_in_another_region() {
        let by_url = Allowlist::parse(&format!(r#"{{"p": ["{URL}"]}}"#)).unwrap();
        let by_arn =
            Allowlist::parse(r#"{"p": ["arn:aws:sqs:us-east-1:123456789012:notifications.fifo"]}"#)
                .unwrap();
        for list in [&by_url, &by_arn] {
            assert!(list.set_home(HOME));
            assert_eq!(list.permits("p#a", &sqs(URL)), Ok(()));
            for elsewhere in [
                "https://sqs.eu-west-1.amazonaws.com/123456789012/notifications.fifo",
                "https://eu-west-1.queue.amazonaws.com/123456789012/notifications.fifo",
                "https://vpce-1a2b.sqs.eu-west-1.vpce.amazonaws.com/123456789012/notifications.fifo",
                "https://sqs.us-east-1.amazonaws.com/999999999999/notifications.fifo",
            ] {
                let err = list.permits("p#a", &sqs(elsewhere)).unwrap_err();
                assert!(err.contains("may not publish to the queue"), "{err}");
            }
            // Another SQS host form of the same queue.
            assert_eq!(
                list.permits(
                    "p#a",
                    &sqs("https://us-east-1.queue.amazonaws.com/123456789012/notifications.fifo")
                ),
                Ok(())
            );
        }
        // A URL whose host names no Region (a local endpoint) is in the
        // relay's Region.
        let local = "http://127.0.0.1:4566/123456789012/notifications.fifo";
        assert_eq!(by_arn.permits("p#a", &sqs(local)), Ok(()));
        let in_ireland =
            Allowlist::parse(r#"{"p": ["arn:aws:sqs:us-east-1:123456789012:notifications.fifo"]}"#)
                .unwrap();
        assert!(in_ireland.set_home("arn:aws:lambda:eu-west-1:123456789012:function:relay"));
        assert!(in_ireland.permits("p#a", &sqs(local)).is_err());
        // The same local URL on both sides, the home unknown: one queue.
        let same = Allowlist::parse(&format!(r#"{{"p": ["{local}"]}}"#)).unwrap();
        assert_eq!(same.permits("p#a", &sqs(local)), Ok(()));
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
            r#"{"p": ["arn:aws:sqs::123456789012:q"]}"#,
            r#"{"p": ["arn:aws:events:us-east-1::event-bus/shop"]}"#,
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
