//! `SqsParking` on moto: a parked record is one message whose body reads
//! back as the record and whose `parked-id` attribute is its source
//! position; on a FIFO queue a record parked twice (a crash after parking)
//! is one message.

use lambda_idempotency::parking::{ParkedRecord, Parking, SqsParking};
use serde_json::json;
use test_kit::{moto, unique_name};

fn parked(position: &str) -> ParkedRecord {
    let stream = "arn:aws:kinesis:us-east-1:123456789012:stream/payments";
    serde_json::from_value(json!({
        "id": format!("{stream}/shardId-000000000001/{position}"),
        "source": "aws:kinesis",
        "event_source_arn": stream,
        "lane": "shardId-000000000001",
        "position": position,
        "reason": "unparseable record: data is not JSON",
        "record": {"kinesis": {"data": "bm90IGpzb24=", "sequenceNumber": position}},
        "record_bytes": 60,
        "parked_at_ms": 1_796_083_210_000u64,
    }))
    .unwrap()
}

/// Every message of `url` (each deleted): its body and `parked-id`.
async fn drain(url: &str) -> Vec<(ParkedRecord, String)> {
    let sqs = moto().sqs().await;
    let mut out = Vec::new();
    loop {
        let got = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap();
        if got.messages().is_empty() {
            return out;
        }
        for m in got.messages() {
            let id = m.message_attributes().unwrap()["parked-id"]
                .string_value()
                .unwrap()
                .to_owned();
            out.push((serde_json::from_str(m.body().unwrap()).unwrap(), id));
            sqs.delete_message()
                .queue_url(url)
                .receipt_handle(m.receipt_handle().unwrap())
                .send()
                .await
                .unwrap();
        }
    }
}

#[tokio::test]
async fn a_parked_record_reads_back_with_its_position_and_a_fifo_queue_drops_its_copy() {
    let sqs = moto().sqs().await;
    let standard = sqs
        .create_queue()
        .queue_name(unique_name("parking"))
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_owned();
    let parking = SqsParking::new(sqs.clone(), &standard);
    let record = parked("4960");
    parking.park(&record).await.unwrap();
    parking.park(&record).await.unwrap();
    let got = drain(&standard).await;
    assert_eq!(got.len(), 2, "a standard queue keeps the copy");
    for (body, id) in &got {
        assert_eq!(body, &record);
        assert_eq!(id, &record.id);
    }

    let fifo = sqs
        .create_queue()
        .queue_name(format!("{}.fifo", unique_name("parking")))
        .attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true")
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_owned();
    let parking = SqsParking::new(sqs.clone(), &fifo);
    parking.park(&record).await.unwrap();
    parking.park(&record).await.unwrap();
    parking.park(&parked("4961")).await.unwrap();
    let ids: Vec<String> = drain(&fifo).await.into_iter().map(|(_, id)| id).collect();
    assert_eq!(
        ids,
        [record.id.clone(), parked("4961").id],
        "the copy dropped"
    );

    // A queue that does not exist: parking fails (the record then fails).
    let gone = SqsParking::new(sqs, format!("{standard}-gone"));
    assert!(gone.park(&record).await.is_err());
}
