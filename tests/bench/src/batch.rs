//! `bench batch`: a 10-record standard-queue batch, each record claiming its
//! key and doing one DynamoDB write, processed sequentially (concurrency 1)
//! and concurrently (concurrency 10), interleaved round by round so both see
//! the same machine load; with and without a simulated network round trip.

use lambda_idempotency::sqs::{SqsProcessor, SqsRecord, parse_sqs_event};
use lambda_idempotency::{Config, DynamoDbStore, Idempotency, KeySelector, store::TableConfig};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use test_kit::events::{Msg, sqs_event};
use test_kit::{create_idempotency_table, create_table, moto};

use crate::{percentile, put_key};

pub async fn run(rounds: usize) -> Result<(), Box<dyn std::error::Error>> {
    let rounds = rounds.clamp(1, 500);
    let moto = moto();
    let ddb = moto.dynamodb().await;
    let idempotency = create_idempotency_table(&ddb).await;
    let business = create_table(&ddb, "bench-items", "pk", None).await;
    let engine = Idempotency::new(
        DynamoDbStore::new(ddb.clone(), TableConfig::new(idempotency)),
        Config::with_prefix("bench.batch").disabled(false),
    );
    let modes = [
        ("sequential (concurrency 1)", 1usize, 0u64),
        ("concurrent (concurrency 10)", 10, 0),
        ("sequential, +5 ms RTT", 1, 5),
        ("concurrent, +5 ms RTT", 10, 5),
    ];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); modes.len()];
    let deadline = Instant::now() + Duration::from_secs(300);
    for round in 0..rounds {
        if Instant::now() > deadline {
            eprintln!("bench: stopped after {round} rounds (time bound)");
            break;
        }
        for (m, (_, concurrency, latency)) in modes.iter().enumerate() {
            moto.set_latency_ms(*latency).await;
            let messages: Vec<Msg> = (0..10)
                .map(|i| {
                    Msg::new(
                        format!("r{round}-m{m}-{i}"),
                        json!({"key": format!("r{round}-m{m}-{i}")}).to_string(),
                    )
                })
                .collect();
            let event = parse_sqs_event(sqs_event("orders", &messages))?;
            let processor = SqsProcessor::new(engine.clone(), KeySelector::pointer("/key"))
                .concurrency(*concurrency);
            let ddb = &ddb;
            let business = &business;
            let start = Instant::now();
            let report = processor
                .process(event, None, |r: SqsRecord<Value>| async move {
                    put_key(ddb, business, r.body["key"].as_str().unwrap_or_default()).await
                })
                .await;
            let elapsed = start.elapsed();
            if !report.is_success() {
                return Err(format!("round {round}: a record failed").into());
            }
            samples[m].push(elapsed);
        }
    }
    println!(
        "10-record batch against moto, {} rounds each, interleaved",
        samples[0].len()
    );
    println!("| mode | p50 | p90 |");
    println!("| --- | --- | --- |");
    let mut p50s = Vec::new();
    for ((name, _, _), s) in modes.iter().zip(samples.iter_mut()) {
        s.sort();
        let (p50, p90) = (percentile(s, 0.5), percentile(s, 0.9));
        p50s.push(p50);
        println!(
            "| {name} | {:.1} ms | {:.1} ms |",
            p50.as_secs_f64() * 1e3,
            p90.as_secs_f64() * 1e3
        );
    }
    for (label, seq, conc) in [("no added RTT", 0, 1), ("+5 ms RTT", 2, 3)] {
        println!(
            "sequential / concurrent (p50), {label}: {:.2}x",
            p50s[seq].as_secs_f64() / p50s[conc].as_secs_f64()
        );
    }
    Ok(())
}
