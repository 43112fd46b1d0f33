//! The Valkey store's connect step: the records in Valkey
//! ([`ValkeyStore::from_env`]); the business tables elsewhere, since Valkey
//! cannot join their transaction: their writes commit on their own.

use std::future::Future;
use std::sync::Arc;

use super::ValkeyStore;
use crate::store::connect::{ConnectError, Connected, Tables};

/// The records in the Valkey server the environment names, then the
/// `tables` (connected elsewhere) whose writes commit on their own.
pub(crate) async fn connect<const N: usize>(
    tables: impl Future<Output = Result<Tables<N>, ConnectError>>,
) -> Result<Connected<N>, ConnectError> {
    let valkey = ValkeyStore::from_env()
        .await
        .map_err(ConnectError::store("the Valkey store could not be set up"))?;
    let tables = tables.await?;
    Ok(Connected {
        records: Arc::new(valkey.with_tables(tables.writes.clone())),
        tables,
    })
}
