//! The Lua scripts the Valkey store runs (each one round trip, atomic on the
//! server) and the record's hash encoding.
//!
//! A record is a hash under `<key prefix><record id>` with the fields of
//! [`FIELDS`], and a key TTL from its expiration. Every script checks the
//! key's type first: a key holding something else (a string, a list) is
//! answered as `WRONGTYPE` data, never a server error, so the caller can
//! name the key in a clear error.

use crate::error::StoreError;
use crate::record::{Record, Status};

/// Hash field of the status.
pub(super) const STATUS: &str = "status";
/// Hash field of the expiration (epoch seconds).
pub(super) const EXPIRATION: &str = "expiration";
/// Hash field of the lease expiry (epoch milliseconds).
pub(super) const LEASE: &str = "in_progress_expiration";
/// Hash field of the stored response.
pub(super) const DATA: &str = "data";
/// Hash field of the recorded terminal error.
pub(super) const ERROR: &str = "error";
/// Hash field of the payload hash.
pub(super) const VALIDATION: &str = "validation";
/// Hash field of the owner token.
pub(super) const OWNER: &str = "owner_token";

/// A hash's field/value pairs, as the server sent them.
pub(super) type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Every field a record may carry (the names of the DynamoDB layout).
pub(super) const FIELDS: [&str; 7] = [STATUS, EXPIRATION, LEASE, DATA, ERROR, VALIDATION, OWNER];

/// Claim: write the record (ARGV[3..], field/value pairs) with a TTL of
/// ARGV[2] ms if the key is absent, its record expired (`expiration <
/// now_s`) or its lease lapsed (`in_progress_expiration < now_ms`), at
/// ARGV[1] = now_ms. Replies `{"ACQUIRED"}`, `{"EXISTING", HGETALL}` or
/// `{"WRONGTYPE", type}`. A hash whose expiration is not a number is
/// returned as it is (the caller reports it as corrupt), never replaced.
pub(super) const CLAIM: &str = r"
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'hash' then
  local f = redis.call('HMGET', KEYS[1], 'status', 'expiration', 'in_progress_expiration')
  local now_ms = tonumber(ARGV[1])
  local exp = tonumber(f[2])
  local lease = tonumber(f[3])
  local claimable = false
  if exp ~= nil and exp < math.floor(now_ms / 1000) then claimable = true end
  if f[1] == 'INPROGRESS' and lease ~= nil and lease < now_ms then claimable = true end
  if exp == nil or not claimable then
    return {'EXISTING', redis.call('HGETALL', KEYS[1])}
  end
elseif t ~= 'none' then
  return {'WRONGTYPE', t}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {'ACQUIRED'}
";

/// Fenced completion: replace the record (ARGV[3..]) with a TTL of ARGV[2]
/// ms only while it is in progress and owned by ARGV[1]. Replies `{"OK"}`,
/// `{"LOST", HGETALL}` (empty when absent) or `{"WRONGTYPE", type}`.
pub(super) const COMPLETE: &str = r"
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then return {'LOST', {}} end
if t ~= 'hash' then return {'WRONGTYPE', t} end
local f = redis.call('HMGET', KEYS[1], 'status', 'owner_token')
if f[1] ~= 'INPROGRESS' or f[2] ~= ARGV[1] then
  return {'LOST', redis.call('HGETALL', KEYS[1])}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {'OK'}
";

/// Fenced release: delete the record only while it is in progress and
/// owned by ARGV[1]. Replies `{"OK"}`, `{"LOST"}` or `{"WRONGTYPE", type}`.
pub(super) const RELEASE: &str = r"
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then return {'LOST'} end
if t ~= 'hash' then return {'WRONGTYPE', t} end
local f = redis.call('HMGET', KEYS[1], 'status', 'owner_token')
if f[1] ~= 'INPROGRESS' or f[2] ~= ARGV[1] then return {'LOST'} end
redis.call('DEL', KEYS[1])
return {'OK'}
";

/// The field/value pairs of `record`'s hash.
pub(super) fn fields(record: &Record) -> Vec<(&'static str, String)> {
    let mut out = vec![
        (STATUS, record.status.as_str().to_owned()),
        (EXPIRATION, record.expiration.to_string()),
    ];
    if let Some(t) = record.in_progress_expiration {
        out.push((LEASE, t.to_string()));
    }
    for (name, value) in [
        (DATA, &record.data),
        (ERROR, &record.error),
        (VALIDATION, &record.validation),
        (OWNER, &record.owner),
    ] {
        if let Some(v) = value {
            out.push((name, v.clone()));
        }
    }
    out
}

/// Reads the record `id` from its hash's field/value pairs. Unknown fields
/// are ignored; a missing or malformed required field, or a value that is
/// not UTF-8, is [`StoreError::Corrupt`].
pub(super) fn from_fields(id: &str, pairs: Pairs) -> Result<Record, StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt {
        id: id.to_owned(),
        reason,
    };
    let mut record = Record {
        id: id.to_owned(),
        status: Status::InProgress,
        expiration: 0,
        in_progress_expiration: None,
        data: None,
        error: None,
        validation: None,
        owner: None,
        outbox: None,
    };
    let (mut status, mut expiration) = (None, None);
    for (name, value) in pairs {
        let Ok(name) = std::str::from_utf8(&name) else {
            continue;
        };
        if !FIELDS.contains(&name) {
            continue;
        }
        let value = String::from_utf8(value)
            .map_err(|e| corrupt(format!("field {name} is not UTF-8 ({e})")))?;
        let number = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| corrupt(format!("field {name} is not a whole number: {v:.40}")))
        };
        match name {
            STATUS => {
                status = Some(
                    Status::parse(&value)
                        .ok_or_else(|| corrupt(format!("unknown status {value:.40}")))?,
                );
            }
            EXPIRATION => expiration = Some(number(&value)?),
            LEASE => record.in_progress_expiration = Some(number(&value)?),
            DATA => record.data = Some(value),
            ERROR => record.error = Some(value),
            VALIDATION => record.validation = Some(value),
            _ => record.owner = Some(value),
        }
    }
    record.status = status.ok_or_else(|| corrupt(format!("no {STATUS} field")))?;
    record.expiration = expiration.ok_or_else(|| corrupt(format!("no {EXPIRATION} field")))?;
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(fields: &[(&str, &[u8])]) -> Pairs {
        fields
            .iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.to_vec()))
            .collect()
    }

    #[test]
    fn round_trips() {
        let record = Record {
            id: "p#h".into(),
            status: Status::InProgress,
            expiration: 1_800_000_000,
            in_progress_expiration: Some(1_800_000_000_123),
            data: Some("{\"a\":1}".into()),
            error: Some("no".into()),
            validation: Some("v".into()),
            owner: Some("o".into()),
            outbox: None,
        };
        let encoded = fields(&record)
            .into_iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.into_bytes()))
            .collect();
        assert_eq!(from_fields("p#h", encoded).unwrap(), record);
    }

    #[test]
    fn foreign_hashes_are_corrupt_not_panics() {
        let no_status = from_fields("k", pairs(&[(EXPIRATION, b"1")])).unwrap_err();
        assert!(
            no_status.to_string().contains("no status field"),
            "{no_status}"
        );
        let bad_status =
            from_fields("k", pairs(&[(STATUS, b"DONE"), (EXPIRATION, b"1")])).unwrap_err();
        assert!(bad_status.to_string().contains("unknown status DONE"));
        let bad_number = from_fields("k", pairs(&[(STATUS, b"COMPLETED"), (EXPIRATION, b"soon")]));
        assert!(bad_number.is_err());
        let not_utf8 = from_fields(
            "k",
            pairs(&[
                (STATUS, b"COMPLETED"),
                (EXPIRATION, b"1"),
                (DATA, &[0xff, 0xfe]),
            ]),
        )
        .unwrap_err();
        assert!(
            not_utf8.to_string().contains("data is not UTF-8"),
            "{not_utf8}"
        );
        let extra = from_fields(
            "k",
            pairs(&[(STATUS, b"COMPLETED"), (EXPIRATION, b"1"), ("x", b"y")]),
        )
        .unwrap();
        assert_eq!(extra.status, Status::Completed);
    }
}
