//! The parked record's id and size rules.

use super::*;
use crate::batch::SourceNames;
use crate::parking::SQS_MAX_MESSAGE_BYTES;
use serde_json::json;

static NAMES: SourceNames = SourceNames {
    id: "sequenceNumber",
    id_field: "sequence_number",
    lane_field: "shard",
    deduplication_id: "none",
    no_lane: "record without a shard",
};

struct Raw(Option<&'static str>, Option<&'static str>);

impl Delivery for Raw {
    fn id(&self) -> Option<&str> {
        self.1
    }
    fn lane(&self) -> Option<&str> {
        self.0
    }
    fn position(&self) -> Option<&str> {
        self.1
    }
    fn source(&self) -> &'static SourceNames {
        &NAMES
    }
}

fn parked(arn: Option<&str>, lane: Option<&'static str>, max: usize) -> Option<ParkedRecord> {
    let ticket = Ticket::new(
        "aws:kinesis",
        arn,
        &Raw(lane, Some("42")),
        json!({"k": "v"}),
    )?;
    Some(ticket.parked(&FailureReason::Parse("bad".into()), max))
}

#[test]
fn the_id_is_the_source_position() {
    let p = parked(Some("arn:s"), Some("shard-1"), SQS_MAX_MESSAGE_BYTES).unwrap();
    assert_eq!(p.id, "arn:s/shard-1/42");
    assert_eq!(p.record, Some(json!({"k": "v"})));
    assert_eq!(p.record_bytes, r#"{"k":"v"}"#.len());
    assert_eq!(p.reason, "unparseable record: bad");
    // A lane that is the ARN (a DynamoDB stream) is not repeated.
    let p = parked(Some("arn:s"), Some("arn:s"), SQS_MAX_MESSAGE_BYTES).unwrap();
    assert_eq!(p.id, "arn:s/42");
    // Without a position, nothing is parked.
    let ticket = Ticket::new("aws:kinesis", None, &Raw(Some("l"), None), json!(1));
    assert!(ticket.is_none());
}

#[test]
fn a_message_over_the_limit_keeps_a_reference_only() {
    let fits = parked(Some("arn:s"), Some("l"), SQS_MAX_MESSAGE_BYTES).unwrap();
    let size = serde_json::to_string(&fits).unwrap().len();
    let limit = size + fits.id.len() + fits.source.len() + 64;
    assert!(
        parked(Some("arn:s"), Some("l"), limit)
            .unwrap()
            .record
            .is_some()
    );
    let p = parked(Some("arn:s"), Some("l"), limit - 1).unwrap();
    assert_eq!(p.record, None);
    assert_eq!(p.record_bytes, fits.record_bytes);
}
