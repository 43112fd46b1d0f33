//! Optional HMAC-SHA256 verification of SQS message bodies.
//!
//! A producer that shares a secret with the function signs each message body
//! and sends the signature as a message attribute; the function checks it
//! before it parses the body ([`SqsProcessor::verify_signatures`]). A
//! record whose signature is missing, malformed or wrong fails with
//! [`FailureReason::BadSignature`]: a permanent failure (every delivery fails
//! the same way until the queue's redrive policy moves the message to its
//! DLQ), logged with the message id and the reason only, never the body.
//!
//! # What is signed, and where the signature is
//!
//! * **Signed**: the raw SQS message body, byte for byte as received (not a
//!   re-serialization of the parsed JSON: a producer signs exactly the string
//!   it sends).
//! * **Signature**: the message attribute named by
//!   [`Verifier::attribute`] (default [`DEFAULT_SIGNATURE_ATTRIBUTE`],
//!   `signature`), as a `String` attribute holding the 32-byte
//!   HMAC-SHA256 in **hex** (64 characters, either case), or as a `Binary`
//!   attribute holding the 32 raw bytes. Hex because it is what
//!   `openssl dgst -sha256 -hmac` and most HMAC examples print, and it needs
//!   no padding rules.
//! * **Compared** in constant time (`hmac`'s `verify_slice`).
//! * **Secret**: the bytes of an environment variable's value
//!   ([`Verifier::from_env`]) or of an SSM parameter's value, decrypted
//!   ([`Verifier::from_ssm`]), used as is (not hex- or base64-decoded).
//!
//! # EventBridge envelopes
//!
//! The check applies to the raw body whatever it holds. An EventBridge rule
//! whose target is the queue writes the envelope itself (with an `id` and a
//! `time` the producer does not know) and cannot set message attributes, so
//! such messages cannot be signed this way: with verification on they fail
//! as unsigned. Queues fed by EventBridge rules rely on IAM instead (the
//! queue policy allows `sqs:SendMessage` only from the rule's ARN); use
//! verification for queues that producers write to directly. Events invoking
//! a function directly ([`EventBridgeProcessor`]) have no message attributes
//! and are not verified.
//!
//! ```
//! use lambda_idempotency::Verifier;
//!
//! let verifier = Verifier::new(b"shared secret".to_vec()).expect("a non-empty secret");
//! let body = r#"{"payment_id":"pay-1"}"#;
//! let signature = verifier.sign(body.as_bytes()); // what the producer sends
//! assert_eq!(signature.len(), 64);
//! assert!(verifier.verify(body.as_bytes(), signature.as_bytes()).is_ok());
//! assert!(verifier.verify(b"{}", signature.as_bytes()).is_err());
//! ```
//!
//! [`SqsProcessor::verify_signatures`]: crate::sqs::SqsProcessor::verify_signatures
//! [`FailureReason::BadSignature`]: crate::batch::FailureReason::BadSignature
//! [`EventBridgeProcessor`]: crate::eventbridge::EventBridgeProcessor

use std::fmt;
use std::sync::Arc;

use aws_lambda_events::sqs::SqsMessage;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::error::BoxError;

/// The message attribute holding the signature unless configured otherwise.
pub const DEFAULT_SIGNATURE_ATTRIBUTE: &str = "signature";

/// Environment variable naming the SSM parameter that holds the signing
/// secret (see [`Verifier::from_lambda_env`]).
pub const SECRET_PARAMETER_ENV: &str = "MESSAGE_SIGNING_SECRET_PARAMETER";

/// Environment variable holding the signing secret itself (local runs,
/// tests; prefer the SSM parameter in AWS).
pub const SECRET_ENV: &str = "MESSAGE_SIGNING_SECRET";

/// The length of an HMAC-SHA256 in bytes.
const MAC_LEN: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// Why a record's signature was refused. The messages name the attribute,
/// never the body or the signature received.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// The message has no signature attribute.
    #[error("message attribute {attribute} (the body's HMAC-SHA256) is missing")]
    Missing {
        /// The attribute expected.
        attribute: String,
    },
    /// The attribute is not a signature: not hex, or not 32 bytes.
    #[error("message attribute {attribute} is not an HMAC-SHA256: {reason}")]
    Malformed {
        /// The attribute read.
        attribute: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A well-formed signature that does not match the body.
    #[error(
        "the HMAC-SHA256 in message attribute {attribute} does not match the body (another \
         secret, or an altered body)"
    )]
    Mismatch {
        /// The attribute read.
        attribute: String,
    },
}

/// Why a [`Verifier`] could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// The environment variable is not set (or not UTF-8).
    #[error("environment variable {0} (the message signing secret) is not set")]
    EnvMissing(String),
    /// The secret is empty: every signature would be forgeable.
    #[error("the message signing secret from {0} is empty")]
    Empty(String),
    /// Reading the SSM parameter failed.
    #[error("reading SSM parameter {name} (the message signing secret) failed")]
    Ssm {
        /// The parameter name.
        name: String,
        /// The SDK's error.
        #[source]
        source: BoxError,
    },
    /// The SSM parameter has no value.
    #[error("SSM parameter {0} (the message signing secret) has no value")]
    SsmNoValue(String),
}

/// Checks HMAC-SHA256 signatures of message bodies. Cheap to clone; its
/// `Debug` output does not show the secret.
#[derive(Clone)]
pub struct Verifier {
    /// The MAC keyed with the secret, cloned for each check.
    keyed: Arc<HmacSha256>,
    attribute: String,
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verifier")
            .field("secret", &"<redacted>")
            .field("attribute", &self.attribute)
            .finish()
    }
}

impl Verifier {
    /// A verifier with `secret`, reading signatures from the attribute
    /// [`DEFAULT_SIGNATURE_ATTRIBUTE`]. An empty secret is refused.
    pub fn new(secret: impl AsRef<[u8]>) -> Result<Self, SecretError> {
        Self::with_secret(secret.as_ref(), "the secret given")
    }

    fn with_secret(secret: &[u8], origin: &str) -> Result<Self, SecretError> {
        if secret.is_empty() {
            return Err(SecretError::Empty(origin.to_owned()));
        }
        // HMAC takes keys of any length: this cannot fail.
        let keyed = HmacSha256::new_from_slice(secret)
            .map_err(|_| SecretError::Empty(origin.to_owned()))?;
        Ok(Self {
            keyed: Arc::new(keyed),
            attribute: DEFAULT_SIGNATURE_ATTRIBUTE.to_owned(),
        })
    }

    /// The secret is the value of the environment variable `var` (its UTF-8
    /// bytes, as is).
    pub fn from_env(var: &str) -> Result<Self, SecretError> {
        let secret = std::env::var(var).map_err(|_| SecretError::EnvMissing(var.to_owned()))?;
        Self::with_secret(secret.as_bytes(), &format!("environment variable {var}"))
    }

    /// The secret is the value of the SSM parameter `name` (a `SecureString`
    /// is decrypted: `WithDecryption=true`), read once with the crate's SDK
    /// configuration ([`crate::aws::aws_sdk_config`]). Call it once per execution
    /// environment (at cold start), not per invocation.
    #[cfg(feature = "ssm")]
    pub async fn from_ssm(name: &str) -> Result<Self, SecretError> {
        Self::from_ssm_with(&crate::aws::aws_sdk_config().await, name).await
    }

    /// [`Verifier::from_ssm`] with an explicit SDK configuration.
    #[cfg(feature = "ssm")]
    pub async fn from_ssm_with(
        config: &aws_config::SdkConfig,
        name: &str,
    ) -> Result<Self, SecretError> {
        let value = crate::aws::ssm_parameter(config, name)
            .await
            .map_err(|source| SecretError::Ssm {
                name: name.to_owned(),
                source: source.into(),
            })?
            .ok_or_else(|| SecretError::SsmNoValue(name.to_owned()))?;
        Self::with_secret(value.as_bytes(), &format!("SSM parameter {name}"))
    }

    /// The verifier a function is configured with, if any: the secret from
    /// the SSM parameter named by [`SECRET_PARAMETER_ENV`], or else from the
    /// environment variable [`SECRET_ENV`]; `None` when neither is set
    /// (signatures are not checked). Call it once, at cold start.
    pub async fn from_lambda_env() -> Result<Option<Self>, SecretError> {
        Self::from_lambda_vars(|var| std::env::var(var).ok()).await
    }

    /// [`Verifier::from_lambda_env`] over the variables `var` gives.
    pub(crate) async fn from_lambda_vars(
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, SecretError> {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        if let Some(name) = set(SECRET_PARAMETER_ENV) {
            #[cfg(feature = "ssm")]
            return Self::from_ssm(&name).await.map(Some);
            #[cfg(not(feature = "ssm"))]
            return Err(SecretError::Ssm {
                name,
                source: "built without the `ssm` feature".into(),
            });
        }
        if let Some(secret) = set(SECRET_ENV) {
            let origin = format!("environment variable {SECRET_ENV}");
            return Self::with_secret(secret.as_bytes(), &origin).map(Some);
        }
        Ok(None)
    }

    /// Reads signatures from the message attribute `name` instead of
    /// [`DEFAULT_SIGNATURE_ATTRIBUTE`].
    pub fn attribute(mut self, name: impl Into<String>) -> Self {
        self.attribute = name.into();
        self
    }

    /// The message attribute signatures are read from.
    pub fn attribute_name(&self) -> &str {
        &self.attribute
    }

    /// The signature of `body`, lowercase hex: what a producer puts in the
    /// signature attribute.
    pub fn sign(&self, body: &[u8]) -> String {
        let mut mac = (*self.keyed).clone();
        mac.update(body);
        hex::encode(mac.finalize().into_bytes())
    }

    /// Checks a hex signature (either case) of `body`, in constant time.
    pub fn verify(&self, body: &[u8], signature_hex: &[u8]) -> Result<(), SignatureError> {
        let malformed = |reason| SignatureError::Malformed {
            attribute: self.attribute.clone(),
            reason,
        };
        if signature_hex.len() != 2 * MAC_LEN {
            return Err(malformed("expected 64 hex characters (32 bytes)"));
        }
        let raw = hex::decode(signature_hex).map_err(|_| malformed("not hex"))?;
        self.verify_raw(body, &raw)
    }

    /// Checks a raw 32-byte signature of `body`, in constant time.
    pub fn verify_raw(&self, body: &[u8], signature: &[u8]) -> Result<(), SignatureError> {
        if signature.len() != MAC_LEN {
            return Err(SignatureError::Malformed {
                attribute: self.attribute.clone(),
                reason: "expected 32 bytes",
            });
        }
        let mut mac = (*self.keyed).clone();
        mac.update(body);
        mac.verify_slice(signature)
            .map_err(|_| SignatureError::Mismatch {
                attribute: self.attribute.clone(),
            })
    }

    /// Checks an SQS message: its body (empty when absent) against the
    /// signature attribute, hex in a `String` attribute or raw bytes in a
    /// `Binary` one.
    pub fn verify_message(&self, message: &SqsMessage) -> Result<(), SignatureError> {
        let body = message.body.as_deref().unwrap_or_default().as_bytes();
        let Some(attr) = message.message_attributes.get(&self.attribute) else {
            return Err(SignatureError::Missing {
                attribute: self.attribute.clone(),
            });
        };
        match (&attr.string_value, &attr.binary_value) {
            (Some(hex), _) => self.verify(body, hex.trim().as_bytes()),
            (None, Some(raw)) => self.verify_raw(body, raw.as_slice()),
            (None, None) => Err(SignatureError::Missing {
                attribute: self.attribute.clone(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lambda_events::encodings::Base64Data;
    use aws_lambda_events::sqs::SqsMessageAttribute;

    fn message(body: &str, attribute: Option<SqsMessageAttribute>) -> SqsMessage {
        let mut m = SqsMessage::default();
        m.message_id = Some("m-1".into());
        m.body = Some(body.into());
        if let Some(a) = attribute {
            m.message_attributes.insert("signature".into(), a);
        }
        m
    }

    fn string_attr(value: &str) -> SqsMessageAttribute {
        let mut a = SqsMessageAttribute::default();
        a.string_value = Some(value.into());
        a.data_type = Some("String".into());
        a
    }

    #[test]
    fn rfc_4231_test_case_2() {
        let v = Verifier::new("Jefe").unwrap();
        let expected = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
        assert_eq!(v.sign(b"what do ya want for nothing?"), expected);
        assert!(
            v.verify(b"what do ya want for nothing?", expected.as_bytes())
                .is_ok()
        );
        assert!(
            v.verify(
                b"what do ya want for nothing?",
                expected.to_uppercase().as_bytes()
            )
            .is_ok(),
            "hex in either case"
        );
    }

    #[test]
    fn wrong_signatures_are_refused_with_a_reason() {
        let v = Verifier::new(b"k").unwrap();
        let body = br#"{"id":"a"}"#;
        let good = v.sign(body);
        let mismatch = |attribute: &str| SignatureError::Mismatch {
            attribute: attribute.into(),
        };
        assert_eq!(
            v.verify(b"{\"id\":\"b\"}", good.as_bytes()),
            Err(mismatch("signature"))
        );
        let other = Verifier::new(b"k2").unwrap().sign(body);
        assert_eq!(v.verify(body, other.as_bytes()), Err(mismatch("signature")));
        // One flipped bit.
        let mut raw = hex::decode(&good).unwrap();
        raw[31] ^= 1;
        assert_eq!(v.verify_raw(body, &raw), Err(mismatch("signature")));
        for (sig, reason) in [
            (&good[..63], "expected 64 hex characters (32 bytes)"),
            ("", "expected 64 hex characters (32 bytes)"),
            (&"zz".repeat(32)[..], "not hex"),
        ] {
            assert_eq!(
                v.verify(body, sig.as_bytes()),
                Err(SignatureError::Malformed {
                    attribute: "signature".into(),
                    reason
                }),
                "{sig:?}"
            );
        }
        assert!(matches!(
            v.verify_raw(body, &[0; 31]),
            Err(SignatureError::Malformed { .. })
        ));
    }

    #[test]
    fn messages_carry_the_signature_in_an_attribute() {
        let v = Verifier::new(b"secret").unwrap();
        let body = r#"{"payment_id":"pay-1","amount_cents":5}"#;
        let sig = v.sign(body.as_bytes());
        assert_eq!(
            v.verify_message(&message(body, Some(string_attr(&sig)))),
            Ok(())
        );
        // A Binary attribute holds the raw bytes.
        let mut binary = SqsMessageAttribute::default();
        let mut raw = Base64Data::default();
        *raw = hex::decode(&sig).unwrap();
        binary.binary_value = Some(raw);
        binary.data_type = Some("Binary".into());
        assert_eq!(v.verify_message(&message(body, Some(binary))), Ok(()));
        // Missing; the body altered; another attribute name.
        assert_eq!(
            v.verify_message(&message(body, None)),
            Err(SignatureError::Missing {
                attribute: "signature".into()
            })
        );
        let altered = body.replace('5', "500");
        assert!(matches!(
            v.verify_message(&message(&altered, Some(string_attr(&sig)))),
            Err(SignatureError::Mismatch { .. })
        ));
        let renamed = v.clone().attribute("x-sig");
        assert_eq!(renamed.attribute_name(), "x-sig");
        assert_eq!(
            renamed.verify_message(&message(body, Some(string_attr(&sig)))),
            Err(SignatureError::Missing {
                attribute: "x-sig".into()
            })
        );
        // The reasons never carry the body or the signature.
        for err in [
            v.verify_message(&message(&altered, Some(string_attr(&sig)))),
            v.verify_message(&message(body, Some(string_attr("not-a-signature")))),
        ] {
            let text = err.unwrap_err().to_string();
            assert!(!text.contains("pay-1") && !text.contains(&sig), "{text}");
            assert!(!text.contains("not-a-signature"), "{text}");
        }
    }

    #[test]
    fn secrets_from_the_environment() {
        assert!(matches!(Verifier::new(b""), Err(SecretError::Empty(_))));
        let missing = "SHARED_SIGNATURE_TEST_SURELY_UNSET_VARIABLE";
        let err = Verifier::from_env(missing).unwrap_err();
        assert!(matches!(&err, SecretError::EnvMissing(v) if v == missing));
        assert!(err.to_string().contains(missing));
        // Any variable that is set (the tests cannot set one: no unsafe code).
        let (name, value) = std::env::vars()
            .find(|(_, v)| !v.is_empty())
            .expect("some environment variable is set");
        let from_env = Verifier::from_env(&name).unwrap();
        assert_eq!(
            from_env.sign(b"body"),
            Verifier::new(value.as_bytes()).unwrap().sign(b"body")
        );
    }

    #[test]
    fn debug_output_hides_the_secret() {
        let v = Verifier::new(b"hunter2-secret").unwrap();
        let shown = format!("{v:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("redacted"), "{shown}");
    }
}
