//! The processors' settings a deployment gives in the environment, one
//! builder each: the SQS processor's signature verifier
//! ([`Processor::verifier_from_env`]) and the ordered streams' parking
//! queue ([`Processor::parking_from_env`]). Call them once, at cold start.

use crate::batch::{Parks, Processor};
use crate::parking::{PARKING_QUEUE_ENV, QueueEnvError, queue_url_from};
use crate::signature::{SecretError, Verifier};
use crate::sqs::Sqs;

impl Processor<Sqs> {
    /// Checks signatures with the verifier the environment configures
    /// ([`Verifier::from_lambda_env`]: the secret from the SSM parameter
    /// `MESSAGE_SIGNING_SECRET_PARAMETER` names, or else from
    /// `MESSAGE_SIGNING_SECRET`); neither set, signatures are not checked.
    /// A parameter that cannot be read is an error: the function does not
    /// start rather than run unchecked.
    pub async fn verifier_from_env(self) -> Result<Self, SecretError> {
        self.verifier_from_vars(|var| std::env::var(var).ok()).await
    }

    /// [`Processor::verifier_from_env`] over the variables `var` gives.
    pub(crate) async fn verifier_from_vars(
        self,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, SecretError> {
        Ok(match Verifier::from_lambda_vars(var).await? {
            Some(verifier) => self.verify_signatures(verifier),
            None => self,
        })
    }
}

impl<S: Parks> Processor<S> {
    /// Parks the records that can never succeed in the SQS queue
    /// [`PARKING_QUEUE_ENV`] names (`SqsParking`, feature `parking-sqs`; the
    /// crate's SDK configuration), so their lane goes on past them; unset
    /// or blank, parking stays off (such a record fails and holds back its
    /// lane), logged as a warning. A value that is not a queue URL, or a
    /// queue named in a build without `parking-sqs`, is an error naming
    /// the variable.
    pub async fn parking_from_env(self) -> Result<Self, QueueEnvError> {
        self.parking_from(std::env::var(PARKING_QUEUE_ENV).ok().as_deref())
            .await
    }

    /// [`Processor::parking_from_env`] with the variable's value given.
    pub(crate) async fn parking_from(self, value: Option<&str>) -> Result<Self, QueueEnvError> {
        let Some(url) = queue_url_from(value)? else {
            tracing::warn!(
                "parking is off ({PARKING_QUEUE_ENV} unset): a record that can never succeed \
                 fails and holds back its lane"
            );
            return Ok(self);
        };
        #[cfg(feature = "parking-sqs")]
        {
            let client = aws_sdk_sqs::Client::new(&crate::aws::aws_sdk_config().await);
            tracing::info!(
                queue = url,
                "parking is on: records that can never succeed are parked, their lane goes on"
            );
            Ok(self.parking(crate::parking::SqsParking::new(client, url)))
        }
        #[cfg(not(feature = "parking-sqs"))]
        {
            let _ = url;
            Err(QueueEnvError::NoSqs)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::{Value, json};

    use crate::kinesis::KinesisProcessor;
    use crate::parking::{QueueEnvError, queue_url_from};
    use crate::signature::SECRET_ENV;
    use crate::sqs::{Sqs, SqsProcessor, SqsRecord};
    use crate::{Config, Idempotency, KeySelector, MemoryStore, Verifier};

    fn engine() -> Idempotency {
        Idempotency::new(MemoryStore::new(), Config::with_prefix("t").disabled(false))
    }

    fn vars(set: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let set: HashMap<String, String> = set
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| set.get(name).cloned()
    }

    /// The ids of the records of a batch of `bodies` (the first signed with
    /// `signer`) that failed.
    async fn failed(processor: &SqsProcessor, signer: &Verifier) -> Vec<String> {
        let bodies = [r#"{"id":"signed"}"#, r#"{"id":"unsigned"}"#];
        let records: Vec<Value> = bodies
            .iter()
            .enumerate()
            .map(|(i, body)| {
                let mut record = json!({"messageId": format!("m-{i}"), "body": body,
                    "eventSource": "aws:sqs",
                    "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q"});
                if i == 0 {
                    record["messageAttributes"] = json!({"signature": {
                        "stringValue": signer.sign(body.as_bytes()), "dataType": "String"}});
                }
                record
            })
            .collect();
        let event = <Sqs as crate::batch::Source>::parse(json!({ "Records": records })).unwrap();
        let report = processor
            .process(event, None, |_r: SqsRecord<Value>| async {
                Ok(json!("done"))
            })
            .await;
        report
            .records
            .iter()
            .filter(|r| r.outcome.is_err())
            .map(|r| r.message_id.clone().unwrap())
            .collect()
    }

    #[tokio::test]
    async fn the_environments_secret_checks_signatures() {
        let signer = Verifier::new("s3cret").unwrap();
        let base = || SqsProcessor::new(engine(), KeySelector::pointer("/id"));
        let checked = base()
            .verifier_from_vars(vars(&[(SECRET_ENV, "s3cret")]))
            .await
            .unwrap();
        assert_eq!(failed(&checked, &signer).await, ["m-1"], "unsigned fails");
        let other = base()
            .verifier_from_vars(vars(&[(SECRET_ENV, "another")]))
            .await
            .unwrap();
        assert_eq!(failed(&other, &signer).await, ["m-0", "m-1"]);
        // Neither variable set (or blank): no verifier.
        for set in [&[][..], &[(SECRET_ENV, " ")][..]] {
            let unchecked = base().verifier_from_vars(vars(set)).await.unwrap();
            assert!(failed(&unchecked, &signer).await.is_empty(), "{set:?}");
        }
    }

    /// Without the `ssm` feature a parameter cannot be read: an error
    /// naming it, not a function running unchecked.
    #[cfg(not(feature = "ssm"))]
    #[tokio::test]
    async fn a_parameter_this_build_cannot_read_is_an_error() {
        let err = SqsProcessor::new(engine(), KeySelector::pointer("/id"))
            .verifier_from_vars(vars(&[(
                crate::signature::SECRET_PARAMETER_ENV,
                "/signing/secret",
            )]))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("/signing/secret"), "{err}");
    }

    #[test]
    fn the_parking_queue_is_a_queue_url_or_nothing() {
        assert_eq!(queue_url_from(None), Ok(None));
        assert_eq!(queue_url_from(Some("  ")), Ok(None));
        let url = "https://sqs.us-east-1.amazonaws.com/123456789012/ledger-parking";
        assert_eq!(queue_url_from(Some(url)), Ok(Some(url.to_owned())));
        for bad in ["ledger-parking", "https://sqs.local/1/a queue"] {
            let err = queue_url_from(Some(bad)).unwrap_err();
            assert_eq!(err, QueueEnvError::Url(bad.to_owned()));
            assert!(err.to_string().contains("PARKING_QUEUE_URL"), "{err}");
        }
    }

    #[tokio::test]
    async fn parking_from_the_environment() {
        let processor = || KinesisProcessor::new(engine(), KeySelector::pointer("/id"));
        let off = processor().parking_from(None).await.unwrap();
        assert!(off.settings.parking.is_none(), "unset: no parking");
        let err = processor()
            .parking_from(Some("not a url"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("PARKING_QUEUE_URL"), "{err}");
        let url = Some("http://127.0.0.1:9/1/parking");
        #[cfg(not(feature = "parking-sqs"))]
        assert_eq!(
            processor().parking_from(url).await.unwrap_err(),
            QueueEnvError::NoSqs
        );
        #[cfg(feature = "parking-sqs")]
        assert!(
            processor()
                .parking_from(url)
                .await
                .unwrap()
                .settings
                .parking
                .is_some()
        );
    }
}
