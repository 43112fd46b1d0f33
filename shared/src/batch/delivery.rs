//! The source-neutral view of one delivered record: what the pipeline, the
//! key selectors and the log line know of an SQS message, a Kinesis record,
//! a Kafka record, ...

use std::any::Any;

/// One delivered record, whatever its source.
///
/// A source implements it on the record type its event carries
/// (`SqsMessage`, `KinesisEventRecord`, ...). Everything but [`id`],
/// [`source`] and [`as_any`] has a default for sources without the notion.
///
/// [`id`]: Delivery::id
/// [`source`]: Delivery::source
/// [`as_any`]: Delivery::as_any
pub trait Delivery {
    /// What names the record in the partial batch response
    /// (`batchItemFailures[].itemIdentifier`): the SQS `messageId`, the
    /// Kinesis `sequenceNumber`. Also what [`KeySelector::Id`] keys on.
    ///
    /// [`KeySelector::Id`]: crate::KeySelector::Id
    fn id(&self) -> Option<&str>;

    /// Its ordering lane: the FIFO `MessageGroupId`, the Kinesis shard, the
    /// Kafka topic-partition: what the partial batch response checkpoints.
    /// A stream source may order a lane's records by a narrower key (a
    /// partition key, an item). `None` for unordered sources.
    fn lane(&self) -> Option<&str> {
        None
    }

    /// Its position in its lane (a sequence number, an offset), when the
    /// source has one. Never a safe idempotency key: a producer's retry
    /// writes the same record at a new position.
    fn position(&self) -> Option<&str> {
        None
    }

    /// The raw body as delivered (an SQS body, a Kinesis record's decoded
    /// `data`).
    fn body(&self) -> Option<&[u8]> {
        None
    }

    /// A named attribute (an SQS message attribute, a Kafka header), for
    /// [`KeySelector::MessageAttribute`](crate::KeySelector::MessageAttribute).
    fn attribute(&self, _name: &str) -> Option<Attribute<'_>> {
        None
    }

    /// The source's own deduplication id (SQS FIFO
    /// `MessageDeduplicationId`), for
    /// [`KeySelector::DeduplicationId`](crate::KeySelector::DeduplicationId).
    fn deduplication_id(&self) -> Option<&str> {
        None
    }

    /// How often it was delivered (1 on the first delivery), when the source
    /// counts: it decides [`PreRead::OnRedelivery`](crate::batch::PreRead::OnRedelivery).
    fn receive_count(&self) -> Option<u32> {
        None
    }

    /// The names of its source's notions, for messages and log lines.
    fn source(&self) -> &'static SourceNames;

    /// The record itself, for key functions that need what the neutral view
    /// does not show: see [`KeyInput::raw`](crate::KeyInput::raw).
    fn as_any(&self) -> &dyn Any;
}

/// A named attribute's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attribute<'a> {
    /// A text value (a key can be made of it).
    Text(&'a str),
    /// Bytes (no key is made of them).
    Binary,
}

/// The log field a record's [`Delivery::id`] goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IdField {
    /// `message_id` (SQS; an HTTP request id).
    #[default]
    MessageId,
    /// `event_id` (EventBridge).
    EventId,
    /// `sequence_number` (Kinesis, DynamoDB Streams).
    SequenceNumber,
    /// `offset` (Kafka: `<topic-partition>@<offset>`).
    Offset,
}

/// The log field a record's [`Delivery::lane`] goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LaneField {
    /// `group` (SQS FIFO).
    #[default]
    Group,
    /// `shard` (Kinesis, DynamoDB Streams).
    Shard,
    /// `partition` (Kafka: topic-partition).
    Partition,
}

/// How a source names its notions, in failure messages and log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceNames {
    /// What its id is called (`messageId`, `sequenceNumber`).
    pub id: &'static str,
    /// The log field of its id.
    pub id_field: IdField,
    /// The log field of its lane.
    pub lane_field: LaneField,
    /// What [`KeySelector::DeduplicationId`](crate::KeySelector::DeduplicationId)
    /// reads, for the message when it is missing.
    pub deduplication_id: &'static str,
    /// A record without a lane, for [`FailureReason::NoLane`](crate::batch::FailureReason::NoLane)'s
    /// message (`FIFO record without a MessageGroupId attribute`).
    pub no_lane: &'static str,
}

/// Which records of its lane a record keeps its order with: its lane is
/// what the partial batch response checkpoints (a shard, a
/// topic-partition); its order may be narrower (a partition key, an item).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Within {
    /// Every record of its lane (SQS FIFO groups, Kafka partitions, Kinesis
    /// shards with [`KinesisOrder::Shard`](crate::kinesis::KinesisOrder::Shard)).
    #[default]
    Lane,
    /// The records of its lane with the same key: records of other keys run
    /// concurrently with it, and a failure holds back only its key.
    Key(String),
    /// Ordered by key, but its key could not be read (a record that did not
    /// parse): it could belong with any record of its lane, so the whole
    /// lane keeps one order in this batch.
    Unknown,
}

/// The identifiers of one record the pipeline keeps (owned).
#[derive(Debug, Clone, Default)]
pub(crate) struct Ids {
    /// [`Delivery::id`].
    pub(crate) id: Option<String>,
    /// [`Delivery::lane`].
    pub(crate) lane: Option<String>,
    /// [`Delivery::receive_count`].
    pub(crate) receive_count: Option<u32>,
    /// Which records of its lane it keeps its order with (set by the
    /// adapter: a Kinesis partition key, a DynamoDB item's keys).
    pub(crate) within: Within,
}

impl Ids {
    /// The identifiers of `delivery`.
    pub(crate) fn of(delivery: &dyn Delivery) -> Self {
        Self {
            id: delivery.id().map(str::to_owned),
            lane: delivery.lane().map(str::to_owned),
            receive_count: delivery.receive_count(),
            within: Within::Lane,
        }
    }

    /// These identifiers, ordered `within` their lane.
    pub(crate) fn within(mut self, within: Within) -> Self {
        self.within = within;
        self
    }

    /// The id, or a description of the record at `index` when it has none
    /// (`id_name`: what the id is called).
    pub(crate) fn ident(&self, index: usize, id_name: &str) -> String {
        match self.id.as_deref() {
            Some(id) if !id.is_empty() => id.to_owned(),
            _ => format!("record #{index} (no {id_name})"),
        }
    }
}

/// How a source orders its records, and what a failure takes down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Ordering {
    /// SQS standard queues, SNS: every record is its own unit (all
    /// concurrent); each fails alone, and every failed record is named in
    /// the response.
    #[default]
    Unordered,
    /// SQS FIFO ([`FifoFailureMode::SkipGroup`](crate::sqs::FifoFailureMode::SkipGroup)):
    /// each lane (message group) is a unit; after a failure the lane's later
    /// records fail without running, and every one of them is named in the
    /// response (SQS must deliver each again).
    SkipLane,
    /// SQS FIFO ([`FifoFailureMode::StopBatch`](crate::sqs::FifoFailureMode::StopBatch)):
    /// the whole batch is one unit.
    StopBatch,
    /// Kinesis, DynamoDB Streams, Kafka: each lane (shard,
    /// topic-partition) is a unit, or, when its records order by key (a
    /// Kinesis partition key, a DynamoDB item, a Kafka record key), each key
    /// of the lane is; after a failure nothing later in that unit runs, and
    /// the response names only the lane's first failed record in batch
    /// order: the lowest among its keys' first failures (the stream
    /// checkpoints before it and redelivers from there; what other keys
    /// committed after it replays). Units run in parallel.
    StopLane,
}

impl Ordering {
    /// Whether records are kept in order within their lane.
    pub fn is_ordered(self) -> bool {
        !matches!(self, Self::Unordered)
    }

    /// A short name for logs.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Unordered => "unordered",
            Self::SkipLane => "skip_lane",
            Self::StopBatch => "stop_batch",
            Self::StopLane => "stop_lane",
        }
    }
}
