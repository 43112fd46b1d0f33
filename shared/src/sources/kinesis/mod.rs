//! Kinesis Data Streams batches on the batch core: [`KinesisProcessor`],
//! lanes by partition key ([`KinesisOrder`]), the response a shard
//! checkpoint. The guide: [`guide::sources::kinesis`](crate::guide::sources::kinesis), the repository's `docs/sources/kinesis.md`.

mod aggregate;
mod delivery;

pub use aws_lambda_events::kinesis::{KinesisEvent, KinesisEventRecord};
pub use aws_lambda_events::streams::{KinesisBatchItemFailure, KinesisEventResponse};
pub use delivery::{Aggregated, KinesisDelivery};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::batch::malformed::{Salvage, StreamEvent, parse_stream, text};
use crate::batch::{BatchError, Delivery, Keyed, MalformedRecord};
use crate::batch::{Ordering, Parks, PartialResponse, Prepare, Prepared, Preparing, Reading};
use crate::batch::{Processor, Source, SourceNames, Within};
use crate::sources::check_size;
use crate::{batch::parking::Ticket, key::IdempotencyKey};

/// The default [`KinesisProcessor::max_data_bytes`]: 10 MiB, the largest
/// record Kinesis Data Streams accepts.
pub const DEFAULT_MAX_DATA_BYTES: usize = 10 * 1024 * 1024;

/// Processes Kinesis Data Streams batches ([`Processor`] over [`Kinesis`]).
pub type KinesisProcessor = Processor<Kinesis>;

/// The Kinesis source and its settings.
#[derive(Debug, Clone, Default)]
pub struct Kinesis {
    order: KinesisOrder,
    max_data_bytes: Option<usize>,
    /// KPL aggregates stay whole ([`KinesisProcessor::deaggregate`]).
    keep_aggregates: bool,
}

/// What a Kinesis record keeps its order with ([`KinesisProcessor::order`]);
/// whatever the lanes, the response is a shard checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KinesisOrder {
    /// The records of one partition key run one after another in sequence
    /// order, different keys concurrently; a failure holds back only its key.
    #[default]
    PartitionKey,
    /// The records of one shard run one after another, whatever their
    /// partition keys; each record then commits alone.
    Shard,
}

/// Kinesis records: their lane is the shard of their `eventID`.
static SALVAGE: Salvage = Salvage {
    names: SourceNames {
        id: "sequenceNumber",
        id_field: "sequence_number",
        lane_field: "shard",
        deduplication_id: "a deduplication id (Kinesis records have none)",
        no_lane: "Kinesis record without a shard (no eventID)",
    },
    expected: "a Kinesis",
    event_source: "aws:kinesis",
    event_source_fields: &["eventSource"],
    event_source_optional: false,
    noun: "a Kinesis record",
    id: "/kinesis/sequenceNumber",
    lane: |raw| shard_of(&text(raw, "/eventID")?).map(str::to_owned),
};

/// A Kinesis event as parsed: each record parsed on its own.
pub type KinesisStreamEvent = StreamEvent<KinesisEventRecord>;

impl From<KinesisEvent> for KinesisStreamEvent {
    fn from(event: KinesisEvent) -> Self {
        Self::new(event.records)
    }
}

/// Each record one delivery, KPL aggregates whole ([`Kinesis`] splits them
/// unless [`KinesisProcessor::deaggregate`] is off).
impl From<KinesisStreamEvent> for StreamEvent<KinesisDelivery> {
    fn from(event: KinesisStreamEvent) -> Self {
        let mut records = Vec::with_capacity(event.records.len());
        for record in event.records {
            records.push(record.map(KinesisDelivery::plain));
        }
        Self::parsed(records)
    }
}

/// Parses an invocation payload as a Kinesis Data Streams event: a `Records`
/// array whose items all have `eventSource` `aws:kinesis`.
pub fn parse_kinesis_event(value: Value) -> Result<KinesisStreamEvent, BatchError> {
    parse_stream(value, &SALVAGE)
}

impl Source for Kinesis {
    type Event = KinesisStreamEvent;
    type Raw = KinesisDelivery;
    type Response = KinesisEventResponse;
    type Error = BatchError;
    const ORDERING: Ordering = Ordering::StopLane;
    const NAMES: &'static SourceNames = &SALVAGE.names;

    fn parse(payload: Value) -> Result<KinesisStreamEvent, BatchError> {
        parse_kinesis_event(payload)
    }

    /// Each KPL aggregate split into its user records, unless
    /// [`KinesisProcessor::deaggregate`] is off.
    fn records(&self, event: KinesisStreamEvent) -> Vec<Result<KinesisDelivery, MalformedRecord>> {
        let mut out = Vec::with_capacity(event.records.len());
        for (index, record) in event.records.into_iter().enumerate() {
            match record {
                Ok(record) if !self.keep_aggregates => delivery::split(index, record, &mut out),
                Ok(record) => out.push(Ok(KinesisDelivery::plain(record))),
                Err(malformed) => out.push(Err(malformed)),
            }
        }
        out
    }

    fn within(&self, record: &KinesisDelivery) -> Within {
        self.within(Some(&record.record.kinesis.partition_key))
    }

    /// An aggregate that cannot be read holds user records of unknown
    /// partition keys: the whole shard keeps one order after it.
    fn within_malformed(&self, raw: &Value) -> Within {
        if !self.keep_aggregates && delivery::is_aggregate(raw) {
            return self.within(None);
        }
        self.within(raw.pointer("/kinesis/partitionKey").and_then(Value::as_str))
    }

    fn ticket(&self, record: &KinesisDelivery) -> Option<Ticket> {
        Ticket::of(
            SALVAGE.event_source,
            record.record.event_source_arn.as_deref(),
            record,
        )
    }
}

impl PartialResponse for KinesisEventResponse {
    /// Names the Kinesis record of `id`: a user record's aggregate, once.
    fn add_item_failure(&mut self, id: &str) {
        let sequence_number = delivery::checkpoint_of(id);
        let named =
            |f: &KinesisBatchItemFailure| f.item_identifier.as_deref() == Some(sequence_number);
        if !self.batch_item_failures.iter().any(named) {
            self.add_failure(sequence_number);
        }
    }
}

impl Parks for Kinesis {}

impl Kinesis {
    /// What a record with partition key `key` (`None`: unreadable) keeps
    /// its order with.
    fn within(&self, key: Option<&str>) -> Within {
        match (self.order, key) {
            (KinesisOrder::Shard, _) => Within::Lane,
            (KinesisOrder::PartitionKey, Some(key)) if !key.is_empty() => {
                Within::Key(key.to_owned())
            }
            (KinesisOrder::PartitionKey, _) => Within::Unknown,
        }
    }
}

impl Processor<Kinesis> {
    /// What records keep their order with. Default
    /// [`KinesisOrder::PartitionKey`].
    pub fn order(mut self, order: KinesisOrder) -> Self {
        self.source.order = order;
        self
    }

    /// Records whose decoded `data` is over `bytes` fail without being
    /// parsed. Default [`DEFAULT_MAX_DATA_BYTES`].
    pub fn max_data_bytes(mut self, bytes: usize) -> Self {
        self.source.max_data_bytes = Some(bytes);
        self
    }

    /// Whether records packed by the Kinesis Producer Library (KPL
    /// aggregates: the magic bytes `F3 89 9A C2`, a protobuf, its MD5) are
    /// split into their user records, each its own delivery with the id
    /// `<sequenceNumber>:<subSequenceNumber>`. Default `true`; `false`: an
    /// aggregate is one record whose `data` is the packed bytes.
    pub fn deaggregate(mut self, on: bool) -> Self {
        self.source.keep_aggregates = !on;
        self
    }
}

/// The shard of an `eventID` (`<shardId>:<sequenceNumber>`).
fn shard_of(event_id: &str) -> Option<&str> {
    let (shard, _) = event_id.split_once(':')?;
    Some(shard).filter(|shard| !shard.is_empty())
}

impl Delivery for KinesisEventRecord {
    fn id(&self) -> Option<&str> {
        Some(self.kinesis.sequence_number.as_str()).filter(|s| !s.is_empty())
    }

    fn lane(&self) -> Option<&str> {
        shard_of(self.event_id.as_deref()?)
    }

    fn body(&self) -> Option<&[u8]> {
        Some(self.kinesis.data.as_slice())
    }

    fn source(&self) -> &'static SourceNames {
        &SALVAGE.names
    }
}

/// One Kinesis record as the handler sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct KinesisRecord<M> {
    /// The `data`, base64-decoded, then read by the handler's type
    /// ([`crate::PayloadKind`]): parsed as JSON, or taken as text or bytes.
    pub body: M,
    /// The record as Lambda delivered it (`sequenceNumber`, `partitionKey`,
    /// the raw `data`, the arrival time); a user record of a KPL aggregate
    /// has its own `partitionKey` and `data`, the rest is its aggregate's.
    pub record: KinesisEventRecord,
    /// The record's idempotency key (`None` when running unprotected).
    pub key: Option<IdempotencyKey>,
    /// Where a user record of a KPL aggregate sits in it; `None` for a
    /// plain record.
    pub aggregated: Option<Aggregated>,
}

impl<M> KinesisRecord<M> {
    /// A record (handler unit tests).
    pub fn new(body: M, record: KinesisEventRecord) -> Self {
        Self {
            body,
            record,
            key: None,
            aggregated: None,
        }
    }

    /// The shard, from the `eventID`.
    pub fn shard_id(&self) -> Option<&str> {
        self.record.lane()
    }
}

impl<M: DeserializeOwned> Prepare<KinesisRecord<M>> for Kinesis {
    type Body = M;

    fn prepare<'r>(&self, at: &Reading<'_>, delivery: &'r KinesisDelivery) -> Preparing<'r, M> {
        let ident = at.ident();
        let data = delivery.record.kinesis.data.as_slice();
        check_size(data.len(), self.max_data_bytes, DEFAULT_MAX_DATA_BYTES)?;
        Prepared::from_payload(ident, "data", Some(data))
    }

    fn record(&self, delivery: KinesisDelivery, body: M, keyed: Keyed) -> KinesisRecord<M> {
        let (record, aggregated) = delivery.into_parts();
        let mut record = KinesisRecord::new(body, record);
        (record.aggregated, record.key) = (aggregated, keyed.key);
        record
    }
}

#[cfg(test)]
mod tests;
