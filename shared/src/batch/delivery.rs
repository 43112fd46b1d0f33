//! The source-neutral view of one delivered record: what the pipeline, the
//! key selectors and the log line know of an SQS message, a Kinesis record,
//! a Kafka record, ...

use std::any::Any;

/// One delivered record, whatever its source, implemented on the record
/// type its event carries. Everything but [`id`](Delivery::id) and
/// [`source`](Delivery::source) has a default for sources without the
/// notion.
pub trait Delivery: AsAny {
    /// What names the record in `batchItemFailures` (the SQS `messageId`,
    /// the Kinesis `sequenceNumber`); what [`KeySelector::Id`](crate::KeySelector::Id) keys on.
    fn id(&self) -> Option<&str>;

    /// Its ordering lane, what the partial batch response checkpoints (the
    /// FIFO `MessageGroupId`, the Kinesis shard, the Kafka topic-partition);
    /// `None` for unordered sources.
    fn lane(&self) -> Option<&str> {
        None
    }

    /// Its position in its lane (a sequence number, an offset): never a
    /// safe idempotency key (a producer's retry writes a new one). Default:
    /// its id.
    fn position(&self) -> Option<&str> {
        self.id()
    }

    /// The raw body as delivered (an SQS body, a Kinesis record's `data`).
    fn body(&self) -> Option<&[u8]> {
        None
    }

    /// A named attribute (an SQS message attribute, a Kafka header), for
    /// [`KeySelector::MessageAttribute`](crate::KeySelector::MessageAttribute).
    fn attribute(&self, _name: &str) -> Option<Attribute<'_>> {
        None
    }

    /// The id the wrapping service gave the event this record is, kept
    /// across its retries (an EventBridge event's `id`, an SNS
    /// notification's `MessageId`), for
    /// [`KeySelector::EventId`](crate::KeySelector::EventId). Default: none.
    fn event_id(&self) -> Option<&str> {
        None
    }

    /// The source's own deduplication id (SQS FIFO), for
    /// [`KeySelector::DeduplicationId`](crate::KeySelector::DeduplicationId).
    fn deduplication_id(&self) -> Option<&str> {
        None
    }

    /// How often it was delivered (1 the first time), when the source counts:
    /// it decides [`PreRead::OnRedelivery`](crate::batch::PreRead::OnRedelivery).
    fn receive_count(&self) -> Option<u32> {
        None
    }

    /// The names of its source's notions, for messages and log lines.
    fn source(&self) -> &'static SourceNames;
}

/// A record as itself, for [`KeyInput::raw`](crate::KeyInput::raw):
/// every `'static` type has it.
pub trait AsAny {
    /// The record itself.
    fn as_any(&self) -> &dyn Any;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A named attribute's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attribute<'a> {
    /// A text value (a key can be made of it).
    Text(&'a str),
    /// Bytes (no key is made of them).
    Binary,
}

/// The log field of an event's id on the single-event paths (EventBridge,
/// the tower layer): one of the names a [`SourceNames::id_field`] may be.
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

impl IdField {
    /// The log field's name (`message_id`, `event_id`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::MessageId => "message_id",
            Self::EventId => "event_id",
            Self::SequenceNumber => "sequence_number",
            Self::Offset => "offset",
        }
    }
}

impl From<IdField> for &'static str {
    fn from(field: IdField) -> Self {
        field.name()
    }
}

/// How a source names its notions, in failure messages and log lines; a
/// source outside the crate states its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceNames {
    /// What its id is called in messages (`messageId`, `sequenceNumber`).
    pub id: &'static str,
    /// The log field of its id: `message_id`, `event_id`,
    /// `sequence_number` and `offset` are fields of their own; any other
    /// name is logged as `id_field` (the name) and `id` (the value).
    pub id_field: &'static str,
    /// The log field of its lane: `group`, `shard` and `partition` are
    /// fields of their own; any other name is logged as `lane_field` (the
    /// name) and `lane` (the value).
    pub lane_field: &'static str,
    /// What [`KeySelector::DeduplicationId`](crate::KeySelector::DeduplicationId)
    /// reads, for the message when it is missing.
    pub deduplication_id: &'static str,
    /// A record without a lane, for [`FailureReason::NoLane`](crate::batch::FailureReason::NoLane)'s
    /// message (`FIFO record without a MessageGroupId attribute`).
    pub no_lane: &'static str,
}

/// Which records of its lane a record keeps its order with: the lane is
/// what the partial batch response checkpoints; the order may be narrower.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Within {
    /// Every record of its lane.
    #[default]
    Lane,
    /// The records of its lane with the same key (a Kinesis partition key, a
    /// DynamoDB item): a failure holds back only its key.
    Key(String),
    /// Ordered by key, but its key could not be read (a record that did not
    /// parse): the whole lane keeps one order in this batch.
    Unknown,
}

/// The identifiers of one record the pipeline keeps (owned).
#[derive(Debug, Clone, Default)]
pub(crate) struct Ids {
    pub(crate) id: Option<String>,
    pub(crate) lane: Option<String>,
    pub(crate) receive_count: Option<u32>,
    pub(crate) within: Within,
}

impl Ids {
    /// The identifiers of `delivery`, ordered `within` its lane.
    pub(crate) fn of(delivery: &dyn Delivery, within: Within) -> Self {
        Self {
            id: delivery.id().map(str::to_owned),
            lane: delivery.lane().map(str::to_owned),
            receive_count: delivery.receive_count(),
            within,
        }
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

/// How a source orders its records, and what a failure takes down (the
/// units of `docs/guarantees.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Ordering {
    /// SQS standard queues, SNS: each record is its own unit and fails
    /// alone; every failed record is named in the response.
    #[default]
    Unordered,
    /// SQS FIFO ([`FifoFailureMode::SkipGroup`](crate::sqs::FifoFailureMode::SkipGroup)):
    /// each lane is a unit; after a failure its later records fail without
    /// running, and every one of them is named.
    SkipLane,
    /// SQS FIFO ([`FifoFailureMode::StopBatch`](crate::sqs::FifoFailureMode::StopBatch)):
    /// the whole batch is one unit.
    StopBatch,
    /// Kinesis, DynamoDB Streams, Kafka: each lane (or each key of a lane
    /// ordered by key) is a unit; after a failure nothing later in it runs,
    /// and the response names only the lane's first failed record in batch
    /// order (the stream redelivers from there).
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
