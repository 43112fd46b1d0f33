use super::*;

const FIFO: &str = "https://sqs.us-east-1.amazonaws.com/123456789012/notifications.fifo";

#[test]
fn chunks_hold_ten_entries_and_fit_the_size_limit() {
    const MAX: usize = MAX_SQS_MESSAGE_BYTES;
    let ranges = chunks(&[1; 25], MAX);
    assert_eq!(ranges, vec![0..10, 10..20, 20..25]);
    assert_eq!(chunks(&[], MAX), Vec::<std::ops::Range<usize>>::new());
    let big = MAX / 2;
    assert_eq!(
        chunks(&[big, big, 1, MAX * 2, 1], MAX),
        vec![0..2, 2..3, 3..4, 4..5]
    );
}

/// What the relay sends carries the stable id: the `outbox_id`
/// attribute, on a FIFO queue the deduplication id (and the group), an
/// event's `detail.outbox_id`.
#[test]
fn requests_carry_the_stable_id() {
    let entry: Entry = serde_json::from_value(serde_json::json!({
        "id": stable_id("k", 0),
        "destination": {"sqs": {"queue_url": FIFO}},
        "body": "hello",
        "group_id": "acct-1",
        "attributes": {"type": "OrderConfirmed"},
    }))
    .unwrap();
    let send = entry.sqs_send(FIFO, 3);
    assert_eq!(send.id, "3");
    assert_eq!(
        send.message_deduplication_id.as_deref(),
        Some(entry.id.as_str())
    );
    assert_eq!(send.message_group_id.as_deref(), Some("acct-1"));
    assert_eq!(send.message_attributes[OUTBOX_ID], entry.id);
    assert_eq!(send.message_attributes["type"], "OrderConfirmed");
    let printed = serde_json::to_value(&send).unwrap();
    assert_eq!(printed["MessageDeduplicationId"], entry.id.as_str());
    let standard = entry.sqs_send(&FIFO.replace(".fifo", ""), 0);
    assert_eq!(standard.message_deduplication_id, None);
    assert_eq!(standard.message_group_id, None);
    assert_eq!(standard.message_attributes[OUTBOX_ID], entry.id);
    assert!(entry.event_put().is_err(), "not an event");

    let event: Entry = serde_json::from_value(serde_json::json!({
        "id": stable_id("k", 1),
        "destination": {"eventbridge": {"bus": "default", "source": "orders", "detail_type": "OrderConfirmed"}},
        "body": "{\"order_id\":\"o-1\"}",
    }))
    .unwrap();
    let put = event.event_put().unwrap();
    assert_eq!(put.event_bus_name, "default");
    let detail: serde_json::Value = serde_json::from_str(&put.detail).unwrap();
    assert_eq!(
        detail,
        serde_json::json!({"order_id": "o-1", OUTBOX_ID: stable_id("k", 1)})
    );
    assert_eq!(
        put.size(),
        "orders".len() + "OrderConfirmed".len() + put.detail.len()
    );
    let mut not_object = event.clone();
    not_object.message.body = "[1]".to_owned();
    assert!(
        not_object
            .event_put()
            .unwrap_err()
            .contains("not a JSON object")
    );
}

/// Each entry read on its own: the good ones kept, each bad one named
/// with its reason; an outbox that is not an array is refused whole.
#[test]
fn decode_each_keeps_the_good_entries_and_names_the_bad() {
    let good = |i: usize| {
        serde_json::json!({
            "id": stable_id("k", i),
            "destination": {"sqs": {"queue_url": FIFO}},
            "body": "b",
            "group_id": "g",
        })
    };
    let mut no_group = good(1);
    no_group["group_id"] = serde_json::Value::Null;
    let mut not_hex = good(3);
    not_hex["id"] = "not-hex".into();
    let outbox = serde_json::json!([
        good(0),
        no_group,
        {"id": stable_id("k", 2), "destination": {"sns": {"topic": "x"}}, "body": "b"},
        not_hex,
        good(0),
        good(5),
    ]);
    let entries = decode_each(&outbox.to_string()).unwrap();
    let kept: Vec<&str> = entries.iter().flatten().map(|e| e.id.as_str()).collect();
    assert_eq!(kept, [stable_id("k", 0), stable_id("k", 5)]);
    let bad: Vec<&Unpublishable> = entries.iter().filter_map(|e| e.as_ref().err()).collect();
    assert_eq!(bad.len(), 4, "{bad:?}");
    assert!(bad[0].1.contains("no group id"), "{bad:?}");
    assert_eq!(bad[1].0.as_deref(), Some(stable_id("k", 2).as_str()));
    assert!(bad[1].1.contains("not an outbox entry"), "{bad:?}");
    assert!(bad[2].1.contains("64 lowercase hex"), "{bad:?}");
    assert!(bad[3].1.contains("second entry"), "{bad:?}");
    assert!(
        decode_each("{not json")
            .unwrap_err()
            .contains("not valid JSON")
    );
    assert!(
        decode_each("{\"a\":1}")
            .unwrap_err()
            .contains("not a JSON array")
    );
}

#[test]
fn entries_round_trip_in_the_relay_format() {
    let messages = [
        Message::sqs("https://sqs.local/1/n.fifo", "hello")
            .group("acct-1")
            .attribute("k", "v"),
        Message::event(
            "default",
            "orders",
            "OrderConfirmed",
            &serde_json::json!({"order_id": "o-1"}),
        )
        .unwrap(),
    ];
    let text = encode("orders.notify#abc", &messages).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        json[0],
        serde_json::json!({
            "id": stable_id("orders.notify#abc", 0),
            "destination": {"sqs": {"queue_url": "https://sqs.local/1/n.fifo"}},
            "body": "hello",
            "group_id": "acct-1",
            "attributes": {"k": "v"},
        })
    );
    assert_eq!(
        json[1]["destination"],
        serde_json::json!({"eventbridge": {"bus": "default", "source": "orders", "detail_type": "OrderConfirmed"}})
    );
    let back = decode(&text).unwrap();
    assert_eq!(back[1].message, messages[1]);
    assert_eq!(back[0].id.len(), 64);
    assert_ne!(back[0].id, back[1].id, "positions differ");
    assert_ne!(stable_id("a#h", 0), stable_id("b#h", 0), "prefixes differ");
    assert_eq!(encode("x", &[]), None);
}

#[test]
fn undeliverable_messages_are_refused() {
    assert!(Message::sqs("https://q/n.fifo", "b").check().is_err());
    assert!(
        Message::sqs("https://q/n.fifo", "b")
            .group("g")
            .check()
            .is_ok()
    );
    assert!(Message::sqs("https://q/n", "b").check().is_ok());
    assert!(Message::sqs("", "b").check().is_err());
    assert!(
        Message::sqs("https://q/n", "b")
            .attribute(OUTBOX_ID, "x")
            .check()
            .is_err()
    );
    let event = Message::event("bus", "s", "d", &serde_json::json!([1])).unwrap();
    assert!(event.check().is_err(), "detail must be an object");
}
#[test]
fn the_services_boundaries_are_accepted() {
    let q = "https://sqs.us-east-1.amazonaws.com/1/n";
    let fifo = "https://sqs.us-east-1.amazonaws.com/1/n.fifo";
    let nine = (0..9).fold(Message::sqs(q, "b"), |m, i| {
        m.attribute(format!("a{i}"), "v")
    });
    assert_eq!(nine.check(), Ok(()), "9 of ours + outbox_id = 10");
    assert_eq!(
        nine.attribute("a9", "v").check(),
        Err(Refusal::TooManyAttributes(10))
    );
    let punctuation: String = (0x21u8..=0x7e).map(char::from).collect();
    for group in ["g".repeat(128), punctuation[..94].to_owned(), "a".into()] {
        assert_eq!(
            Message::sqs(fifo, "b").group(&group).check(),
            Ok(()),
            "{group}"
        );
    }
    assert!(Message::sqs(fifo, "b").group("tab\there").check().is_err());
    // Every character SQS lists, at its edges, in a body and a value.
    let allowed = "\t\n\r \u{D7FF}\u{E000}\u{FFFD}\u{10000}\u{10FFFF}";
    assert_eq!(
        Message::sqs(q, allowed).attribute("x", allowed).check(),
        Ok(())
    );
    for bad in [
        '\u{0}', '\u{8}', '\u{B}', '\u{C}', '\u{1F}', '\u{FFFE}', '\u{FFFF}',
    ] {
        assert!(!sqs_char(bad), "{bad:?}");
        assert!(
            Message::sqs(q, "b")
                .attribute("x", bad.to_string())
                .check()
                .is_err()
        );
    }
    for name in ["a.b", "A-Z_0.9", "awsx", "Amazonia", &"n".repeat(256)] {
        assert_eq!(
            Message::sqs(q, "b").attribute(name, "v").check(),
            Ok(()),
            "{name}"
        );
    }
    for name in [
        ".a",
        "a.",
        "AWS.x",
        "aws.x",
        "AMAZON.x",
        &"n".repeat(257),
        "é",
    ] {
        assert!(
            Message::sqs(q, "b").attribute(name, "v").check().is_err(),
            "{name}"
        );
    }
    // Size as sent: body + attributes + outbox_id's name, type, 64 digits.
    let fixed = sqs_message_size("", &BTreeMap::new());
    assert_eq!(fixed, "outbox_id".len() + "String".len() + 64);
    let fits = "x".repeat(MAX_SQS_MESSAGE_BYTES - fixed);
    assert_eq!(Message::sqs(q, fits.clone()).check(), Ok(()));
    assert!(matches!(
        Message::sqs(q, fits + "x").check(),
        Err(Refusal::TooLarge { size, limit: MAX_SQS_MESSAGE_BYTES, .. }) if size == MAX_SQS_MESSAGE_BYTES + 1
    ));
    // EventBridge.
    let detail = serde_json::json!({"k": 1});
    let arn = "arn:aws:events:us-east-1:123456789012:event-bus/orders";
    for bus in ["default", arn, "aws.partner/x.com/1"] {
        let m = Message::event(bus, "shop.orders", "d".repeat(128), &detail).unwrap();
        assert_eq!(m.check(), Ok(()), "{bus}");
    }
    for bus in [
        "",
        "has space",
        "arn:aws:events:us-east-1:1:event-bus/",
        "a:b",
    ] {
        let m = Message::event(bus, "s", "d", &detail).unwrap();
        assert!(matches!(m.check(), Err(Refusal::Bus(_))), "{bus:?}");
    }
    let m = Message::event("b", "s".repeat(257), "d", &detail).unwrap();
    assert!(matches!(m.check(), Err(Refusal::Source(_))));
    let m = Message::event("b", "AWS.orders", "d", &detail).unwrap();
    assert!(matches!(m.check(), Err(Refusal::Source(_))));
    let m = Message::event("b", "s", "d", &serde_json::json!({"outbox_id": "x"})).unwrap();
    assert!(matches!(m.check(), Err(Refusal::Detail(_))));
    let big = serde_json::json!({"k": "x".repeat(MAX_EVENT_ENTRY_BYTES)});
    let m = Message::event("b", "s", "d", &big).unwrap();
    assert!(matches!(
        m.check(),
        Err(Refusal::TooLarge {
            service: "EventBridge",
            ..
        })
    ));
}

#[test]
fn json_bodies_escape_what_sqs_refuses() {
    let q = "https://sqs.us-east-1.amazonaws.com/1/n";
    let value = serde_json::json!({"customer_id": "c\u{FFFF}\u{FFFE}d", "n": 1});
    let m = Message::sqs_json(q, &value).unwrap();
    assert_eq!(m.check(), Ok(()));
    assert!(m.body.contains("\\uffff\\ufffe"), "{}", m.body);
    let back: serde_json::Value = serde_json::from_str(&m.body).unwrap();
    assert_eq!(back, value, "the consumer reads the same value");
    let plain = Message::sqs_json(q, &serde_json::json!({"a": "b"})).unwrap();
    assert_eq!(plain.body, r#"{"a":"b"}"#);
}

/// Any value gets a group SQS accepts, the same every time; a value SQS
/// accepts is its own group.
#[test]
fn fifo_groups_are_valid_for_any_value() {
    let long = "o".repeat(MAX_GROUP_ID_CHARS + 1);
    let longest = "o".repeat(MAX_GROUP_ID_CHARS);
    for (value, kept) in [
        ("ord-1", true),
        ("a!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~z", true),
        (longest.as_str(), true),
        ("order 1", false),
        ("ordér-1", false),
        ("", false),
        (long.as_str(), false),
    ] {
        let group = fifo_group(value);
        assert_eq!(check_group_id(&group), Ok(()), "{value:?} -> {group:?}");
        assert_eq!(group == value, kept, "{value:?} -> {group:?}");
        assert_eq!(group, fifo_group(value), "stable");
        if !kept {
            let hash = crate::key::sha256_hex(value.as_bytes());
            assert_eq!(group, format!("sha256-{hash}"));
        }
        let message = Message::sqs(FIFO, "hello").group_by(value);
        assert_eq!(message.group_id.as_deref(), Some(group.as_str()));
        assert_eq!(message.check(), Ok(()), "{value:?}");
    }
}

#[test]
fn queue_urls_are_http_urls_without_spaces() {
    assert_eq!(check_queue_url(FIFO), Ok(()));
    assert_eq!(check_queue_url("http://127.0.0.1:5000/1/q"), Ok(()));
    for bad in [
        "",
        "https://",
        "sqs.us-east-1.amazonaws.com/1/q",
        "https://a/b c",
    ] {
        assert_eq!(
            check_queue_url(bad),
            Err(Refusal::QueueUrl(bad.to_owned())),
            "{bad:?}"
        );
    }
}

/// The id a handler announces from its record's key
/// ([`IdempotencyKey::outbox_id`](crate::IdempotencyKey::outbox_id)) is the
/// id its message is stored (and published) under, for an invocation of a
/// tenant too: the record's key is scoped by the tenant.
#[tokio::test]
async fn the_records_key_names_its_messages_ids() {
    use crate::sqs::{SqsProcessor, SqsRecord};
    use crate::{Idempotency, KeySelector, MemoryStore, Store};

    let store = MemoryStore::new();
    let engine = Idempotency::new(
        store.clone(),
        crate::Config::with_prefix("orders.record").disabled(false),
    );
    let processor = SqsProcessor::new(engine, KeySelector::pointer("/event_id"));
    for tenant in [None, Some("tenant-a")] {
        let event = serde_json::json!({"Records": [{
            "messageId": "m-1", "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:orders",
            "body": r#"{"event_id": "evt-1"}"#,
        }]});
        let event = <crate::sqs::Sqs as crate::batch::Source>::parse(event).unwrap();
        let report = processor
            .for_tenant(tenant)
            .process(event, None, |r: SqsRecord<serde_json::Value>| async move {
                let key = r.key.expect("a protected record has its key");
                let message = Message::sqs(FIFO, "confirmed").group_by("ord-1");
                let announced = vec![key.outbox_id(0), key.as_str().to_owned()];
                Ok(crate::write::Staged::new(announced).publish(message))
            })
            .await;
        let outcome = report.records[0].outcome.as_ref().expect("done");
        let [announced, record_id] =
            <[String; 2]>::try_from(outcome.response().unwrap().clone()).expect("the two ids");
        let record = Store::get(&store, &record_id).await.unwrap().unwrap();
        let entries = decode(record.outbox.as_deref().unwrap()).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].id, announced, "tenant {tenant:?}");
        assert_eq!(
            record_id.matches('#').count(),
            1 + usize::from(tenant.is_some())
        );
    }
}
