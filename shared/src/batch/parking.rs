//! What a record of an ordered stream is parked as ([`Ticket`]) when it can
//! never succeed; the parking places are [`crate::parking`].

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use super::delivery::Delivery;
use super::report::FailureReason;
use crate::clock::{Clock, SystemClock};
use crate::parking::{ParkedRecord, Parking};

/// What a record would be parked as, taken when it is prepared (before the
/// handler takes the record): only when its processor parks.
#[derive(Debug)]
pub struct Ticket {
    source: String,
    event_source_arn: Option<String>,
    /// What names its source when it has no ARN (self-managed Kafka).
    cluster: Option<String>,
    lane: Option<String>,
    position: String,
    record: Box<dyn AsJson>,
}

/// A record kept for parking, turned into JSON only when it is parked.
trait AsJson: fmt::Debug + Send + Sync {
    fn json(&self) -> Option<Value>;
}

impl<T: Serialize + fmt::Debug + Send + Sync> AsJson for T {
    fn json(&self) -> Option<Value> {
        serde_json::to_value(self).ok()
    }
}

impl Ticket {
    /// The ticket of `delivery` (its lane and position) from `source`
    /// (`eventSource`) and `event_source_arn`, carrying `record` (the record
    /// as delivered, a copy or its JSON: it becomes JSON only if it is
    /// parked); `None` without a position: the copies of such a record
    /// could not be told apart, so it is not parked.
    pub fn new(
        source: &str,
        event_source_arn: Option<&str>,
        delivery: &dyn Delivery,
        record: impl Serialize + fmt::Debug + Send + Sync + 'static,
    ) -> Option<Self> {
        let position = delivery.position().filter(|p| !p.is_empty())?;
        Some(Self {
            source: source.to_owned(),
            event_source_arn: event_source_arn
                .filter(|a| !a.is_empty())
                .map(str::to_owned),
            cluster: None,
            lane: delivery.lane().filter(|l| !l.is_empty()).map(str::to_owned),
            position: position.to_owned(),
            record: Box::new(record),
        })
    }

    /// The ticket of `record`, parked as itself (a stream record as
    /// delivered): [`Ticket::new`] with a copy of it.
    pub fn of<R>(source: &str, event_source_arn: Option<&str>, record: &R) -> Option<Self>
    where
        R: Delivery + Serialize + Clone + fmt::Debug + Send + Sync + 'static,
    {
        Self::new(source, event_source_arn, record, record.clone())
    }

    /// The same ticket of a source without an ARN named by `cluster` (a
    /// self-managed Kafka cluster: its bootstrap servers), which its id
    /// then begins with: two clusters' records never share an id.
    pub(crate) fn in_cluster(mut self, cluster: Option<&str>) -> Self {
        self.cluster = cluster.filter(|c| !c.is_empty()).map(str::to_owned);
        self
    }

    /// The source position: `<eventSourceARN>/<lane>/<position>` (without
    /// an ARN, the cluster in its place), without what is unknown, and
    /// without the lane when it is the ARN.
    fn id(&self) -> String {
        let origin = (self.event_source_arn.as_deref()).or(self.cluster.as_deref());
        let lane = self.lane.as_deref().filter(|l| Some(*l) != origin);
        [origin, lane, Some(self.position.as_str())]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The message parking this record for `reason` gives, within
    /// `max_message_bytes` (the record left out when it would not fit).
    pub(crate) fn parked(self, reason: &FailureReason, max_message_bytes: usize) -> ParkedRecord {
        let record = self.record.json();
        let record_bytes = (record.as_ref())
            .and_then(|r| serde_json::to_string(r).ok())
            .map_or(0, |s| s.len());
        let mut parked = ParkedRecord {
            id: self.id(),
            source: self.source,
            event_source_arn: self.event_source_arn,
            lane: self.lane,
            position: self.position,
            reason: reason.to_string(),
            record,
            record_bytes,
            parked_at_ms: SystemClock.now_ms(),
        };
        // The message attributes (the id and the source, their names and
        // types) count towards SQS's limit too.
        let attributes = parked.id.len() + parked.source.len() + 64;
        let body = serde_json::to_string(&parked).map_or(usize::MAX, |s| s.len());
        if body.saturating_add(attributes) > max_message_bytes {
            parked.record = None;
        }
        parked
    }
}

impl Ticket {
    /// Parks the record that failed terminally for `reason` (`ident`, for
    /// the log): done ([`Outcome::Parked`](crate::Outcome::Parked)) once
    /// `parking` has it; if parking fails, the record fails for `reason` as
    /// it would without parking (its lane stops).
    pub(crate) async fn park<T>(
        self,
        parking: &dyn Parking,
        reason: FailureReason,
        ident: &str,
    ) -> Result<crate::Outcome<T>, FailureReason> {
        let parked = self.parked(&reason, parking.max_message_bytes());
        match parking.park(&parked).await {
            Ok(()) => Ok(crate::Outcome::Parked {
                id: parked.id,
                reason: parked.reason,
            }),
            Err(e) => {
                tracing::error!(
                    record = ident,
                    parked_id = parked.id.as_str(),
                    error = %crate::error::report(&e),
                    "parking failed: the record fails and its lane stops, as without parking"
                );
                Err(reason)
            }
        }
    }
}

#[cfg(test)]
mod tests;
