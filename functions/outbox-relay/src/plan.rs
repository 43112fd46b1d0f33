//! What a stream record asks to publish: the entries of a completed
//! record's outbox, those that can never be published as written (poison)
//! and those its writer may not publish (refused).

use lambda_idempotency::Item;
use lambda_idempotency::dynamodb_streams::{DynamoDbRecord, EventRecord, to_item};
use lambda_idempotency::store::Status;

use crate::{OutboxEntry, Policy};

/// What one stream record asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordPlan {
    /// The record's `SequenceNumber`.
    pub sequence_number: Option<String>,
    /// The idempotency key (`id`), for logs and the allowlist.
    pub key: Option<String>,
    /// The entries to publish, in outbox order.
    pub entries: Vec<OutboxEntry>,
    /// Entries (or the whole outbox) skipped as poison: (entry id, reason).
    pub poison: Vec<(Option<String>, String)>,
    /// Entries refused by the allowlist: (entry id, reason).
    pub refused: Vec<(String, String)>,
    /// Why nothing is to be published, when it is not a completed record
    /// with an outbox.
    pub ignored: Option<&'static str>,
}

fn string<'a>(image: Option<&'a Item>, name: &str) -> Option<&'a str> {
    image?.get(name)?.as_s()
}

/// Reads one stream record. Only `INSERT` and `MODIFY` records whose
/// `NewImage` has the status `COMPLETED` and an outbox publish (attribute
/// names from `policy`); a `MODIFY` whose `OldImage` was already completed
/// with the same outbox is ignored (its messages went out with the earlier
/// record). Entries are read by [`lambda_idempotency::outbox::decode_each`];
/// one whose destination the allowlist does not give the key's prefix is
/// refused.
pub fn plan_record(record: &DynamoDbRecord, policy: &Policy) -> RecordPlan {
    let images = [
        Some(&record.keys),
        record.new_image.as_ref(),
        record.old_image.as_ref(),
    ];
    plan_images(&record.record, images, policy)
}

/// [`plan_record`] of `record` as delivered, its images converted as
/// [`DynamoDbRecord::new`] converts them, without copying the record;
/// `None` when an image is not valid (the processor then parks the record).
pub(crate) fn plan_raw(record: &EventRecord, policy: &Policy) -> Option<RecordPlan> {
    let image = |item: &serde_dynamo::Item| match item.is_empty() {
        true => Ok(None),
        false => to_item(item).map(Some),
    };
    let change = &record.change;
    let keys = image(&change.keys).ok()?.unwrap_or_default();
    let (new, old) = (
        image(&change.new_image).ok()?,
        image(&change.old_image).ok()?,
    );
    Some(plan_images(
        record,
        [Some(&keys), new.as_ref(), old.as_ref()],
        policy,
    ))
}

/// The plan of `record` whose `Keys`, `NewImage` and `OldImage` are `images`.
fn plan_images(record: &EventRecord, images: [Option<&Item>; 3], policy: &Policy) -> RecordPlan {
    let names = &policy.attributes;
    let completed = Some(Status::Completed.as_str());
    let [keys, new, old] = images;
    let key = string(new, &names.id).or_else(|| string(keys, &names.id));
    let mut plan = RecordPlan {
        sequence_number: record.change.sequence_number.clone(),
        key: key.map(str::to_owned),
        ..RecordPlan::default()
    };
    let outbox = match new.and_then(|image| image.get(&names.outbox)) {
        _ if !matches!(record.event_name.as_str(), "INSERT" | "MODIFY") => {
            Err("not an INSERT or MODIFY")
        }
        _ if string(new, &names.status) != completed => Err("not COMPLETED"),
        None => Err("no outbox"),
        Some(v)
            if v.as_s().is_some()
                && string(old, &names.status) == completed
                && string(old, &names.outbox) == v.as_s() =>
        {
            Err("outbox already published with an earlier record")
        }
        Some(value) => Ok(value.as_s()),
    };
    let entries = match outbox {
        Err(ignored) => {
            plan.ignored = Some(ignored);
            return plan;
        }
        Ok(Some(outbox)) => lambda_idempotency::outbox::decode_each(outbox),
        Ok(None) => Err("the outbox attribute is not of type S".to_owned()),
    };
    let entries = entries.unwrap_or_else(|reason| vec![Err((None, reason))]);
    for entry in entries {
        match entry {
            Err(poison) => plan.poison.push(poison),
            Ok(e) => match policy
                .allowlist
                .permits(key.unwrap_or(""), &e.message.destination)
            {
                Ok(()) => plan.entries.push(e),
                Err(reason) => plan.refused.push((e.id, reason)),
            },
        }
    }
    plan
}
