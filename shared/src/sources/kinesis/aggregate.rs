//! Records packed by the Kinesis Producer Library (KPL aggregation, also
//! written by the awslabs `kinesis-aggregation` libraries): the 4 magic
//! bytes `F3 89 9A C2`, a protobuf `AggregatedRecord`, then the MD5 of the
//! protobuf bytes. [`unpack`] reads one Kinesis record's `data`; the
//! batch is split into deliveries in [`super::delivery`].

use md5::{Digest, Md5};
use prost::Message;

/// The bytes a KPL aggregate starts with.
pub const KPL_MAGIC: [u8; 4] = [0xF3, 0x89, 0x9A, 0xC2];

/// The MD5 trailer's length.
const DIGEST_BYTES: usize = 16;

/// The KPL's `AggregatedRecord` (proto2, `messages.proto` of the KPL and
/// of `kinesis-aggregation`).
#[derive(Clone, PartialEq, Message)]
struct AggregatedRecord {
    #[prost(string, repeated, tag = "1")]
    partition_key_table: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    explicit_hash_key_table: Vec<String>,
    #[prost(message, repeated, tag = "3")]
    records: Vec<Record>,
}

/// One user record of an `AggregatedRecord`.
#[derive(Clone, PartialEq, Message)]
struct Record {
    #[prost(uint64, required, tag = "1")]
    partition_key_index: u64,
    #[prost(uint64, optional, tag = "2")]
    explicit_hash_key_index: Option<u64>,
    #[prost(bytes = "vec", required, tag = "3")]
    data: Vec<u8>,
    #[prost(message, repeated, tag = "4")]
    tags: Vec<Tag>,
}

/// A user record's tag (read and dropped: Kinesis does not deliver them).
#[derive(Clone, PartialEq, Message)]
struct Tag {
    #[prost(string, required, tag = "1")]
    key: String,
    #[prost(string, optional, tag = "2")]
    value: Option<String>,
}

/// One user record unpacked from an aggregate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UserRecord {
    /// Its own partition key.
    pub(crate) partition_key: String,
    /// Its explicit hash key, when its producer set one.
    pub(crate) explicit_hash_key: Option<String>,
    /// Its data.
    pub(crate) data: Vec<u8>,
}

/// Why a record that starts with [`KPL_MAGIC`] is no aggregate: it can
/// never be read, so it is one poison record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AggregateError {
    /// Too short to hold a digest after the magic bytes.
    #[error("{0} bytes, too short for the magic bytes and an MD5 digest")]
    TooShort(usize),
    /// The trailer is not the MD5 of the protobuf bytes.
    #[error("its MD5 digest does not match its protobuf bytes")]
    Digest,
    /// The protobuf bytes do not decode as an `AggregatedRecord`.
    #[error("its protobuf does not decode as an AggregatedRecord: {0}")]
    Protobuf(String),
    /// A user record names a table entry that is not there.
    #[error("user record {record} has {what} index {index}, past the table's {len} entries")]
    Index {
        /// The user record's sub-sequence number.
        record: usize,
        /// `partition key` or `explicit hash key`.
        what: &'static str,
        /// The index it names.
        index: u64,
        /// How many entries the table has.
        len: usize,
    },
    /// No user record in it.
    #[error("it holds no user record")]
    Empty,
}

/// Whether `data` is a KPL aggregate (it starts with [`KPL_MAGIC`]).
pub(crate) fn is_aggregate(data: &[u8]) -> bool {
    data.starts_with(&KPL_MAGIC)
}

/// The user records of `data` in sub-sequence order, `None` when it is a
/// plain record (no magic bytes); an aggregate that cannot be read is an
/// error.
pub(crate) fn unpack(data: &[u8]) -> Result<Option<Vec<UserRecord>>, AggregateError> {
    let Some(rest) = data.strip_prefix(&KPL_MAGIC) else {
        return Ok(None);
    };
    let Some(split) = rest.len().checked_sub(DIGEST_BYTES) else {
        return Err(AggregateError::TooShort(data.len()));
    };
    let (body, digest) = rest.split_at(split);
    if Md5::digest(body)[..] != digest[..] {
        return Err(AggregateError::Digest);
    }
    let aggregate = AggregatedRecord::decode(body)
        .map_err(|e| AggregateError::Protobuf(crate::error::report(&e)))?;
    if aggregate.records.is_empty() {
        return Err(AggregateError::Empty);
    }
    let keys = aggregate.partition_key_table;
    let hash_keys = aggregate.explicit_hash_key_table;
    let entry = |table: &[String], record, what, index: u64| {
        usize::try_from(index)
            .ok()
            .and_then(|i| table.get(i).cloned())
            .ok_or(AggregateError::Index {
                record,
                what,
                index,
                len: table.len(),
            })
    };
    let mut users = Vec::with_capacity(aggregate.records.len());
    for (i, record) in aggregate.records.into_iter().enumerate() {
        let partition_key = entry(&keys, i, "partition key", record.partition_key_index)?;
        let explicit_hash_key = record
            .explicit_hash_key_index
            .map(|index| entry(&hash_keys, i, "explicit hash key", index))
            .transpose()?;
        users.push(UserRecord {
            partition_key,
            explicit_hash_key,
            data: record.data,
        });
    }
    Ok(Some(users))
}

/// `records` packed as the KPL packs them (tests: aggregates that no
/// aggregator writes, such as one naming a missing table entry).
#[cfg(test)]
pub(crate) fn pack(keys: &[&str], records: &[(u64, Option<u64>, &[u8])]) -> Vec<u8> {
    let aggregate = AggregatedRecord {
        partition_key_table: keys.iter().map(|k| (*k).to_owned()).collect(),
        explicit_hash_key_table: vec!["170141183460469231731687303715884105728".to_owned()],
        records: (records.iter())
            .map(|(pk, ehk, data)| Record {
                partition_key_index: *pk,
                explicit_hash_key_index: *ehk,
                data: data.to_vec(),
                tags: Vec::new(),
            })
            .collect(),
    };
    let body = aggregate.encode_to_vec();
    let mut out = KPL_MAGIC.to_vec();
    out.extend_from_slice(&body);
    out.extend_from_slice(&Md5::digest(&body));
    out
}
