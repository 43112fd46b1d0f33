//! The Kinesis event source mapping emulator (`test_kit::kinesis_esm`)
//! on moto: records reach the handler per shard, in order, shaped as Lambda
//! sends them; the partial batch response, invocation errors, bad answers and
//! the retry bound are honoured as Lambda honours them; shards run side by
//! side, one batch in flight each.

use aws_lambda_events::kinesis::KinesisEvent;
use aws_lambda_events::streams::KinesisEventResponse;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;
use test_kit::kinesis_esm::{
    self, Options, Outcome, Put, create_stream, put_to_shard, records, sequence_number, shard_of,
};
use test_kit::{moto, now_ms};

fn payment(n: usize) -> Vec<u8> {
    json!({"payment_id": format!("pay-{n}"), "amount_cents": 100 + n})
        .to_string()
        .into_bytes()
}

fn failing(seqs: &[&str]) -> KinesisEventResponse {
    let mut response = KinesisEventResponse::default();
    response.set_failures(seqs.iter().copied());
    response
}

/// Sequence numbers of each invocation, in order.
fn batches(calls: &Mutex<Vec<Value>>) -> Vec<Vec<String>> {
    calls
        .lock()
        .unwrap()
        .iter()
        .map(|e| {
            records(e)
                .iter()
                .map(|r| sequence_number(r).to_owned())
                .collect()
        })
        .collect()
}

/// A handler that keeps every event and succeeds.
fn deliver(
    calls: &Mutex<Vec<Value>>,
) -> impl Fn(Value) -> std::future::Ready<Result<(), lambda_runtime::Error>> + '_ {
    move |event| {
        calls.lock().unwrap().push(event);
        std::future::ready(Ok(()))
    }
}

fn seqs(puts: &[Put]) -> Vec<String> {
    puts.iter().map(|p| p.sequence_number.clone()).collect()
}

#[tokio::test]
async fn records_arrive_per_shard_in_order_shaped_as_lambda_sends_them() {
    let kinesis = moto().kinesis().await;
    let stream = create_stream(&kinesis, "kesm-order", 2).await;
    assert_eq!(stream.shards.len(), 2);
    let before = now_ms();
    // Interleaved puts: 5 records into shard 0, 4 into shard 1.
    let mut puts: BTreeMap<String, Vec<(Put, Vec<u8>)>> = BTreeMap::new();
    for n in 0..9 {
        let shard = n % 2;
        let data = payment(n);
        let put = put_to_shard(&kinesis, &stream, shard, &format!("acct-{n}"), data.clone()).await;
        puts.entry(put.shard_id.clone())
            .or_default()
            .push((put, data));
    }
    let after = now_ms();
    let calls = Mutex::new(Vec::new());
    let calls_ref = &calls;
    let options = Options {
        batch_size: 3,
        ..Options::default()
    };
    let stats = kinesis_esm::run(&kinesis, &stream, &options, |event| async move {
        calls_ref.lock().unwrap().push(event);
        Ok::<_, lambda_runtime::Error>(KinesisEventResponse::default())
    })
    .await;

    let calls = calls.into_inner().unwrap();
    let mut delivered: BTreeMap<String, Vec<(String, Vec<u8>)>> = BTreeMap::new();
    for event in &calls {
        // The event parses as the typed Kinesis event, one shard per batch.
        let typed: KinesisEvent = serde_json::from_value(event.clone()).unwrap();
        assert!(!typed.records.is_empty() && typed.records.len() <= 3);
        let shard = shard_of(&records(event)[0]).to_owned();
        for (raw, r) in records(event).iter().zip(&typed.records) {
            assert_eq!(shard_of(raw), shard, "a batch holds one shard's records");
            assert_eq!(r.event_source.as_deref(), Some("aws:kinesis"));
            assert_eq!(r.event_name.as_deref(), Some("aws:kinesis:record"));
            assert_eq!(r.event_version.as_deref(), Some("1.0"));
            assert_eq!(r.event_source_arn.as_deref(), Some(stream.arn.as_str()));
            assert_eq!(r.aws_region.as_deref(), Some("us-east-1"));
            assert_eq!(
                r.invoke_identity_arn.as_deref(),
                Some(kinesis_esm::INVOKE_IDENTITY_ARN)
            );
            assert_eq!(r.kinesis.kinesis_schema_version.as_deref(), Some("1.0"));
            assert_eq!(
                r.event_id.as_deref(),
                Some(format!("{shard}:{}", r.kinesis.sequence_number).as_str())
            );
            // Read from the JSON: aws_lambda_events 1.2.1 reads a fraction
            // of fewer than 3 digits as milliseconds (.7 s as 7 ms).
            let arrival = (raw["kinesis"]["approximateArrivalTimestamp"]
                .as_f64()
                .unwrap()
                * 1000.0)
                .round() as u64;
            assert!(
                (before.saturating_sub(1)..=after).contains(&arrival),
                "{before} <= {arrival} <= {after}"
            );
            assert_eq!(r.kinesis.data.0, kinesis_esm::data(raw));
            delivered
                .entry(shard.clone())
                .or_default()
                .push((r.kinesis.sequence_number.clone(), r.kinesis.data.0.clone()));
        }
    }
    let expected: BTreeMap<String, Vec<(String, Vec<u8>)>> = puts
        .into_iter()
        .map(|(shard, v)| {
            let v = v.into_iter().map(|(p, d)| (p.sequence_number, d)).collect();
            (shard, v)
        })
        .collect();
    assert_eq!(
        delivered, expected,
        "each shard's records once, in put order"
    );
    assert_eq!(stats.read, 9);
    assert_eq!(stats.records, 9);
    // ceil(5 / 3) + ceil(4 / 3)
    assert_eq!(stats.invocations, 4);
    assert_eq!(stats.shard(stream.shard_id(0)).read, 5);
    assert_eq!(stats.shard(stream.shard_id(1)).read, 4);
    assert!(stats.skipped.is_empty() && !stats.timed_out);
    for (shard, s) in &stats.shards {
        assert_eq!(
            s.checkpoint.as_deref(),
            expected[shard].last().map(|(seq, _)| seq.as_str()),
            "checkpoint of {shard}"
        );
    }
}

#[tokio::test]
async fn a_partial_batch_response_makes_the_next_invocation_start_at_the_lowest_listed_record() {
    let kinesis = moto().kinesis().await;
    let stream = create_stream(&kinesis, "kesm-partial", 1).await;
    let mut puts = Vec::new();
    for n in 0..5 {
        puts.push(put_to_shard(&kinesis, &stream, 0, "acct-1", payment(n)).await);
    }
    let all = seqs(&puts);
    let calls = Mutex::new(Vec::new());
    let calls_ref = &calls;
    let listed = [all[4].clone(), all[2].clone()];
    let listed = &listed;
    let stats = kinesis_esm::run(&kinesis, &stream, &Options::default(), |event| async move {
        let first = {
            let mut calls = calls_ref.lock().unwrap();
            calls.push(event);
            calls.len() == 1
        };
        // The first answer lists records 4 and 2 (out of order): Lambda
        // checkpoints before the lowest, record 2.
        let answer = if first {
            failing(&[listed[0].as_str(), listed[1].as_str()])
        } else {
            KinesisEventResponse::default()
        };
        Ok::<_, lambda_runtime::Error>(answer)
    })
    .await;
    assert_eq!(batches(&calls), vec![all.clone(), all[2..].to_vec()]);
    assert_eq!(stats.partial_failures, 1);
    assert_eq!(stats.invocations, 2);
    assert_eq!(stats.records, 5 + 3);
    let shard = stats.shard(stream.shard_id(0));
    assert_eq!(shard.log[0].outcome, Outcome::Partial(all[2].clone()));
    assert_eq!(shard.log[1].outcome, Outcome::Success);
    assert_eq!(shard.checkpoint.as_deref(), Some(all[4].as_str()));
    assert!(stats.skipped.is_empty());
}

#[tokio::test]
async fn an_invocation_error_retries_the_whole_batch() {
    let kinesis = moto().kinesis().await;
    let stream = create_stream(&kinesis, "kesm-error", 1).await;
    let mut puts = Vec::new();
    for n in 0..4 {
        puts.push(put_to_shard(&kinesis, &stream, 0, "acct-1", payment(n)).await);
    }
    let all = seqs(&puts);
    let calls = Mutex::new(Vec::new());
    let calls_ref = &calls;
    let stats = kinesis_esm::run(&kinesis, &stream, &Options::default(), |event| async move {
        let n = {
            let mut calls = calls_ref.lock().unwrap();
            calls.push(event);
            calls.len()
        };
        if n == 1 {
            return Err(lambda_runtime::Error::from("function crashed"));
        }
        Ok(KinesisEventResponse::default())
    })
    .await;
    assert_eq!(batches(&calls), vec![all.clone(), all.clone()]);
    assert_eq!(stats.invocation_errors, 1);
    assert_eq!(stats.invocations, 2);
    assert_eq!(
        stats.shard(stream.shard_id(0)).log[0].outcome,
        Outcome::Error
    );
    assert!(stats.skipped.is_empty());
}

#[tokio::test]
async fn a_bad_item_identifier_retries_the_whole_batch() {
    let kinesis = moto().kinesis().await;
    let stream = create_stream(&kinesis, "kesm-bad", 1).await;
    let mut puts = Vec::new();
    for n in 0..3 {
        puts.push(put_to_shard(&kinesis, &stream, 0, "acct-1", payment(n)).await);
    }
    let all = seqs(&puts);
    let calls = Mutex::new(Vec::new());
    let calls_ref = &calls;
    let third = all[2].clone();
    let third = &third;
    // Raw answers, as a function could write them.
    let answers = [
        json!({"batchItemFailures": [{"itemIdentifier": null}]}),
        json!({"batchItemFailures": [{"itemIdentifier": ""}]}),
        json!({"batchItemFailures": [{"itemIdentifer": third}]}),
        json!({"batchItemFailures": [{"itemIdentifier": "no-such-record"}]}),
        json!({"batchItemFailures": []}),
    ];
    let answers = &answers;
    let stats = kinesis_esm::run(&kinesis, &stream, &Options::default(), |event| async move {
        let n = {
            let mut calls = calls_ref.lock().unwrap();
            calls.push(event);
            calls.len()
        };
        Ok::<_, lambda_runtime::Error>(answers[n - 1].clone())
    })
    .await;
    assert_eq!(batches(&calls), vec![all.clone(); 5]);
    assert_eq!(stats.bad_responses, 4);
    assert_eq!(stats.partial_failures, 0);
    let shard = stats.shard(stream.shard_id(0));
    assert_eq!(shard.checkpoint.as_deref(), Some(all[2].as_str()));
    assert!(stats.skipped.is_empty());
}

#[tokio::test]
async fn a_record_that_always_fails_stops_at_the_retry_bound_and_is_reported() {
    let kinesis = moto().kinesis().await;
    let stream = create_stream(&kinesis, "kesm-poison", 1).await;
    let mut puts = Vec::new();
    for n in 0..5 {
        puts.push(put_to_shard(&kinesis, &stream, 0, "acct-1", payment(n)).await);
    }
    let all = seqs(&puts);
    let poison = all[2].clone();
    let poison = &poison;
    let calls = Mutex::new(Vec::new());
    let calls_ref = &calls;
    let options = Options {
        batch_size: 2,
        max_retries: 2,
        ..Options::default()
    };
    let stats = kinesis_esm::run(&kinesis, &stream, &options, |event| async move {
        let holds_poison = records(&event)
            .iter()
            .any(|r| sequence_number(r) == poison.as_str());
        calls_ref.lock().unwrap().push(event);
        let answer = if holds_poison {
            failing(&[poison.as_str()])
        } else {
            KinesisEventResponse::default()
        };
        Ok::<_, lambda_runtime::Error>(answer)
    })
    .await;
    let retried = all[2..4].to_vec();
    assert_eq!(
        batches(&calls),
        vec![
            all[..2].to_vec(),
            retried.clone(),
            retried.clone(),
            retried.clone(),
            all[4..].to_vec(),
        ],
        "the first try and 2 retries of the poison's batch, then the shard moves on"
    );
    // On failure: the retried batch from the poison record on is given up.
    assert_eq!(stats.skipped, retried);
    assert_eq!(stats.partial_failures, 3);
    assert_eq!(stats.invocations, 5);
    assert!(!stats.timed_out);
    assert_eq!(
        stats.shard(stream.shard_id(0)).checkpoint.as_deref(),
        Some(all[4].as_str())
    );
}

#[tokio::test]
async fn two_shards_run_side_by_side_and_a_failing_shard_does_not_hold_the_other() {
    let kinesis = moto().kinesis().await;
    let stream = create_stream(&kinesis, "kesm-shards", 2).await;
    // Shard 0 starts with a poison record; shard 1 has three good ones.
    let poison = put_to_shard(&kinesis, &stream, 0, "acct-0", b"not json {".to_vec()).await;
    let mut good = Vec::new();
    for n in 0..3 {
        good.push(put_to_shard(&kinesis, &stream, 1, "acct-1", payment(n)).await);
    }
    let in_flight: Mutex<BTreeMap<String, usize>> = Mutex::new(BTreeMap::new());
    let most: Mutex<(usize, BTreeMap<String, usize>)> = Mutex::new((0, BTreeMap::new()));
    let (in_flight_ref, most_ref) = (&in_flight, &most);
    let options = Options {
        batch_size: 1,
        max_retries: 4,
        retry_pause: Duration::from_millis(150),
        ..Options::default()
    };
    let stats = kinesis_esm::run(&kinesis, &stream, &options, |event| async move {
        let shard = shard_of(&records(&event)[0]).to_owned();
        {
            let mut flying = in_flight_ref.lock().unwrap();
            *flying.entry(shard.clone()).or_default() += 1;
            let total: usize = flying.values().sum();
            let mut most = most_ref.lock().unwrap();
            most.0 = most.0.max(total);
            let per_shard = most.1.entry(shard.clone()).or_default();
            *per_shard = (*per_shard).max(flying[&shard]);
        }
        // Long enough that the good shard, in flight almost all along, overlaps
        // one of the failing shard's tries.
        tokio::time::sleep(Duration::from_millis(100)).await;
        *in_flight_ref.lock().unwrap().get_mut(&shard).unwrap() -= 1;
        let record = &records(&event)[0];
        let answer = if serde_json::from_slice::<Value>(&kinesis_esm::data(record)).is_err() {
            failing(&[sequence_number(record)])
        } else {
            KinesisEventResponse::default()
        };
        Ok::<_, lambda_runtime::Error>(answer)
    })
    .await;

    let failing_shard = stats.shard(stream.shard_id(0));
    let good_shard = stats.shard(stream.shard_id(1));
    assert_eq!(failing_shard.invocations, 5, "the first try and 4 retries");
    assert_eq!(failing_shard.skipped, vec![poison.sequence_number.clone()]);
    assert_eq!(good_shard.invocations, 3);
    assert!(good_shard.skipped.is_empty());
    assert_eq!(
        good_shard.checkpoint.as_deref(),
        Some(good[2].sequence_number.as_str())
    );
    // The good shard was done while the failing one was still retrying.
    let good_done = good_shard.log.last().unwrap().ended;
    let last_retry = failing_shard.log.last().unwrap().started;
    assert!(
        good_done < last_retry,
        "good shard done at {good_done:?}, the poison's last retry at {last_retry:?}"
    );
    let (most_total, most_per_shard) = most.into_inner().unwrap();
    assert_eq!(most_total, 2, "both shards had a batch in flight at once");
    assert!(
        most_per_shard.values().all(|n| *n == 1),
        "one batch in flight per shard: {most_per_shard:?}"
    );
}

#[tokio::test]
async fn a_restarted_mapping_resumes_after_its_checkpoints() {
    let kinesis = moto().kinesis().await;
    let stream = create_stream(&kinesis, "kesm-resume", 2).await;
    let mut first = Vec::new();
    for n in 0..3 {
        first.push(put_to_shard(&kinesis, &stream, 0, "acct-1", payment(n)).await);
    }
    let calls = Mutex::new(Vec::new());
    let stats = kinesis_esm::run(&kinesis, &stream, &Options::default(), deliver(&calls)).await;
    assert_eq!(batches(&calls), vec![seqs(&first)]);
    let checkpoints = stats.checkpoints();
    assert_eq!(
        checkpoints,
        BTreeMap::from([(
            stream.shard_id(0).to_owned(),
            first[2].sequence_number.clone()
        )])
    );
    // More records in both shards, then the mapping starts again from its
    // checkpoints: shard 0 after its last record, shard 1 from the horizon.
    let mut later = Vec::new();
    for n in 3..5 {
        later.push(put_to_shard(&kinesis, &stream, 0, "acct-1", payment(n)).await);
    }
    let other = put_to_shard(&kinesis, &stream, 1, "acct-2", payment(9)).await;
    let calls = Mutex::new(Vec::new());
    let options = Options {
        start_after: checkpoints,
        ..Options::default()
    };
    let stats = kinesis_esm::run(&kinesis, &stream, &options, deliver(&calls)).await;
    let mut got = batches(&calls);
    got.sort();
    let mut want = vec![seqs(&later), vec![other.sequence_number.clone()]];
    want.sort();
    assert_eq!(got, want);
    assert_eq!(stats.read, 3);
    assert_eq!(
        stats.checkpoints()[stream.shard_id(0)],
        later[1].sequence_number
    );
}

#[tokio::test]
async fn a_batch_ends_before_the_record_that_would_pass_the_payload_limit() {
    let kinesis = moto().kinesis().await;
    let stream = create_stream(&kinesis, "kesm-payload", 1).await;
    let mut puts = Vec::new();
    for n in 0..5 {
        puts.push(put_to_shard(&kinesis, &stream, 0, "acct-1", vec![b'a' + n as u8; 3000]).await);
    }
    let all = seqs(&puts);
    let calls = Mutex::new(Vec::new());
    // Room for two records of ~4.4 kB (3000 bytes in base64) per event.
    let options = Options {
        max_payload: 10_000,
        ..Options::default()
    };
    kinesis_esm::run(&kinesis, &stream, &options, deliver(&calls)).await;
    for event in calls.lock().unwrap().iter() {
        assert!(
            event.to_string().len() <= 10_000,
            "{}",
            event.to_string().len()
        );
    }
    assert_eq!(
        batches(&calls),
        vec![all[..2].to_vec(), all[2..4].to_vec(), all[4..].to_vec()]
    );
}
