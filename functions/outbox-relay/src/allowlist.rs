//! Which writers (record key prefixes) may publish where, destinations
//! compared by partition, Region, account and name (`docs/handlers.md`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::Destination;

/// The environment variable holding the allowlist: a JSON object from key
/// prefix to queue URLs or ARNs and bus names or ARNs (`docs/handlers.md`).
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

/// Partition, Region and account; `None`: the relay's own ([`Allowlist::set_home`]).
type Place = [Option<String>; 3];

/// A destination as compared: a queue (`true`) or a bus, its place and name.
type Target = (bool, Place, String);

/// The place of an ARN's fields after `arn:`, all non-empty.
fn arn_place(fields: &[&str]) -> Option<Place> {
    let [partition, _, region, account, ..] = fields else {
        return None;
    };
    let some = |s: &str| (!s.is_empty()).then(|| Some(s.to_owned()));
    Some([some(partition)?, some(region)?, some(account)?])
}

/// The Region an SQS endpoint host names (`sqs.us-east-1.amazonaws.com`,
/// `vpce-1a2b.sqs.eu-west-1.vpce.amazonaws.com`, `us-east-1.queue.…`).
fn host_region(host: &str) -> Option<String> {
    let host = host.split(':').next()?.to_ascii_lowercase();
    let labels: Vec<&str> = host.split('.').collect();
    let at = |label| labels.iter().position(|l| *l == label);
    let region = match at("sqs") {
        Some(i) => labels.get(i + 1),
        None => at("queue").and_then(|i| labels.get(i.checked_sub(1)?)),
    };
    let is_region = |r: &&&str| r.contains('-') && r.ends_with(|c: char| c.is_ascii_digit());
    region.filter(is_region).map(|r| (*r).to_owned())
}

/// A queue URL: its host's Region, its path's account and name.
fn queue_url(url: &str) -> Option<Target> {
    let (scheme, rest) = url.split_once("://")?;
    let (host, path) = rest
        .split_once('/')
        .filter(|_| ["https", "http"].contains(&scheme))?;
    let (account, name) = path.trim_end_matches('/').split_once('/')?;
    let ok = !account.is_empty() && !name.is_empty() && !name.contains('/');
    let place = [None, host_region(host), Some(account.to_owned())];
    ok.then(|| (true, place, name.to_owned()))
}

/// A queue URL or ARN, a bus ARN (`…:event-bus/NAME`) or bare name.
fn target(text: &str) -> Option<Target> {
    let Some(rest) = text.strip_prefix("arn:") else {
        return match text.contains("://") {
            true => queue_url(text),
            false => (!text.is_empty()).then(|| (false, Place::default(), text.to_owned())),
        };
    };
    let fields: Vec<&str> = rest.split(':').collect();
    let place = arn_place(&fields)?;
    let (queue, name) = match fields.as_slice() {
        [_, "sqs", _, _, name] => (true, *name),
        [_, "events", _, _, bus] => (false, bus.strip_prefix("event-bus/")?),
        _ => return None,
    };
    (!name.is_empty()).then(|| (queue, place, name.to_owned()))
}

/// `target` with what it leaves to the relay taken from `home`.
fn within((queue, place, name): &Target, home: &Place) -> Target {
    let place = std::array::from_fn(|i| place[i].clone().or_else(|| home[i].clone()));
    (*queue, place, name.clone())
}

/// Which key prefixes may publish to which destinations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowlist {
    /// `None`: every prefix everywhere ([`Allowlist::everything`]).
    by_prefix: Option<BTreeMap<String, Vec<Target>>>,
    /// The relay's own place, once known ([`Allowlist::set_home`]).
    home: OnceLock<Place>,
}

impl Allowlist {
    /// Parses the allowlist's JSON (see [`ALLOWLIST_ENV`]).
    pub fn parse(json: &str) -> Result<Self, AllowlistError> {
        let raw: BTreeMap<String, Vec<String>> =
            serde_json::from_str(json).map_err(AllowlistError::NotJson)?;
        let mut by_prefix = BTreeMap::new();
        for (prefix, destinations) in raw {
            let invalid = |e: String| Err(AllowlistError::Invalid(e));
            if prefix.is_empty() || prefix.contains('#') {
                return invalid(format!("the prefix {prefix:?} is not a key prefix"));
            }
            let mut targets = Vec::new();
            for d in &destinations {
                let Some(t) = target(d) else {
                    let what = "is not a queue URL or ARN, or a bus name or ARN";
                    return invalid(format!("{d:?} (for {prefix:?}) {what}"));
                };
                targets.push(t);
            }
            by_prefix.insert(prefix, targets);
        }
        let by_prefix = Some(by_prefix);
        let home = OnceLock::new();
        Ok(Self { by_prefix, home })
    }

    /// From [`ALLOWLIST_ENV`]; an error when it is unset or malformed.
    pub fn from_env() -> Result<Self, AllowlistError> {
        Self::parse(&std::env::var(ALLOWLIST_ENV).map_err(|_| AllowlistError::Missing)?)
    }

    /// Every prefix may publish everywhere: local runs that only print.
    pub fn everything() -> Self {
        let (by_prefix, home) = (None, OnceLock::new());
        Self { by_prefix, home }
    }

    /// Learns the relay's own partition, Region and account from its
    /// function ARN, the first that parses; whether the home is known.
    pub fn set_home(&self, function_arn: &str) -> bool {
        let rest = function_arn.strip_prefix("arn:").unwrap_or("");
        let fields: Vec<&str> = rest.split(':').collect();
        if let Some(place) = arn_place(&fields).filter(|_| fields.get(1) == Some(&"lambda")) {
            let _ = self.home.set(place);
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
        let target = match destination {
            Destination::Sqs { queue_url: url } => queue_url(url),
            Destination::EventBridge { bus, .. } => target(bus).filter(|t| !t.0),
            _ => None,
        };
        let target = target.map(|t| within(&t, &home));
        if target.is_some_and(|t| allowed.iter().any(|a| within(a, &home) == t)) {
            return Ok(());
        }
        let what = match destination {
            Destination::Sqs { queue_url } => format!("the queue {queue_url}"),
            Destination::EventBridge { bus, .. } => format!("the event bus {bus}"),
            _ => "an unknown destination".to_owned(),
        };
        Err(format!(
            "the prefix {prefix:?} may not publish to {what} ({ALLOWLIST_ENV})"
        ))
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
