//! The asynchronous invocation (`test_kit::async_invoke`), as SNS
//! invokes a function: the same event again after an error, up to the bound.

use lambda_idempotency::testing::events::{Notification, sns_event};
use std::sync::Mutex;
use test_kit::async_invoke::{Options, invoke};

#[tokio::test]
async fn a_failed_attempt_is_retried_with_the_same_event_up_to_the_bound() {
    let event = sns_event(&Notification {
        message_id: "95df01b4-ee98-5cb9-9903-4c221d41eb5e",
        message: "{\"event_id\":\"evt-1\"}",
        attributes: vec![],
    });
    let seen = Mutex::new(Vec::new());
    let seen_ref = &seen;
    // Fails twice, then succeeds: three attempts, the same event each time.
    let stats = invoke(&event, &Options::default(), |e| async move {
        let n = {
            let mut seen = seen_ref.lock().unwrap();
            seen.push(e);
            seen.len()
        };
        if n < 3 {
            Err(lambda_runtime::Error::from("boom"))
        } else {
            Ok(())
        }
    })
    .await;
    assert_eq!((stats.attempts, stats.errors), (3, 2));
    assert!(stats.dead_letter.is_none());
    assert!(seen.lock().unwrap().iter().all(|e| *e == event));

    let options = Options {
        max_retries: 1,
        ..Options::default()
    };
    let stats = invoke(&event, &options, |_| async {
        Err::<(), _>(lambda_runtime::Error::from("boom"))
    })
    .await;
    assert_eq!((stats.attempts, stats.errors), (2, 2));
    assert_eq!(stats.dead_letter, Some(event));
}
