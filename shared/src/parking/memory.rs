//! [`MemoryParking`]: parked records kept in memory.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::{ParkedRecord, Parking, ParkingError, SQS_MAX_MESSAGE_BYTES};

/// Parking in memory: local runs and tests. Cheap to clone (clones share
/// the records); [`MemoryParking::fail`] makes it refuse records.
#[derive(Debug, Clone)]
pub struct MemoryParking {
    parked: Arc<Mutex<Vec<ParkedRecord>>>,
    failing: Arc<AtomicBool>,
    max_message_bytes: usize,
}

impl Default for MemoryParking {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryParking {
    /// An empty parking taking messages up to [`SQS_MAX_MESSAGE_BYTES`].
    pub fn new() -> Self {
        Self {
            parked: Arc::default(),
            failing: Arc::default(),
            max_message_bytes: SQS_MAX_MESSAGE_BYTES,
        }
    }

    /// This parking taking messages up to `bytes` only.
    pub fn with_max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// From now on refuses (`true`) or takes (`false`) records.
    pub fn fail(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// The records parked so far, in the order they were parked.
    pub fn parked(&self) -> Vec<ParkedRecord> {
        self.parked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[async_trait::async_trait]
impl Parking for MemoryParking {
    async fn park(&self, record: &ParkedRecord) -> Result<(), ParkingError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(ParkingError::Send {
                place: "memory".to_owned(),
                source: "the memory parking is set to fail".into(),
            });
        }
        self.parked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(record.clone());
        Ok(())
    }

    fn max_message_bytes(&self) -> usize {
        self.max_message_bytes
    }
}
