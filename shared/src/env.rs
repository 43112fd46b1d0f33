//! The environment variables the library reads, by name: what a
//! function's template sets. The engine's ([`config::ENGINE_ENV`], read
//! by [`Config::from_env`](crate::Config::from_env)), the store's, the
//! signature secret's and the parking queue's.
//!
//! [`config::ENGINE_ENV`]: crate::config::ENGINE_ENV

pub use crate::config::{BATCH_COMMITS_ENV, DISABLED_ENV, EXPIRES_AFTER_ENV, PREFIX_ENV};
pub use crate::parking::PARKING_QUEUE_ENV;
pub use crate::signature::{SECRET_ENV, SECRET_PARAMETER_ENV};
pub use crate::store::{CLAIMS_ROUTED_ENV, STORE_ENV, TABLE_ENV};
pub use crate::tenant::TENANT_SCOPE_ENV;
