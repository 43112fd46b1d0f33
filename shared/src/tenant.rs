//! Tenant-isolated functions: Lambda's tenant isolation mode hands each
//! invocation its tenant's id (`Context::tenant_id`, from the Runtime API's
//! `Lambda-Runtime-Aws-Tenant-Id` header), while one idempotency table
//! serves every tenant. Whenever an invocation carries a tenant id, its keys
//! are scoped by it ([`IdempotencyKey::scoped`](crate::IdempotencyKey::scoped)):
//! two tenants sending the same key keep two records, each replays only its
//! own answer. [`TenantScope::Shared`] (or [`TENANT_SCOPE_ENV`]`=shared`)
//! shares keys across tenants, for a function whose keys are already global.

/// Environment variable choosing how keys are scoped when an invocation
/// carries a tenant id: `tenant` (the default) or `shared`. Read by
/// [`Config::with_prefix`](crate::Config::with_prefix).
pub const TENANT_SCOPE_ENV: &str = "IDEMPOTENCY_TENANT_SCOPE";

/// How keys are scoped when an invocation carries a tenant id
/// ([`Config::tenant_scope`](crate::Config::tenant_scope)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TenantScope {
    /// Each tenant's keys are its own: the tenant id is part of every
    /// record id. The default (secure: one tenant never replays another's
    /// answer).
    #[default]
    PerTenant,
    /// Keys are shared across tenants: for a function whose keys are
    /// already global (an id no two tenants can send).
    Shared,
}

impl TenantScope {
    /// The scope named `name` (`tenant`, `per-tenant`; `shared`), any case.
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "tenant" | "per-tenant" | "per_tenant" => Some(Self::PerTenant),
            "shared" => Some(Self::Shared),
            _ => None,
        }
    }

    /// The scope [`TENANT_SCOPE_ENV`] names; unset, or a value that names
    /// none (logged as a warning), per tenant: a typo never shares keys.
    pub fn from_env() -> Self {
        match std::env::var(TENANT_SCOPE_ENV) {
            Err(_) => Self::PerTenant,
            Ok(v) => Self::parse(&v).unwrap_or_else(|| {
                tracing::warn!(
                    "{TENANT_SCOPE_ENV}={v:?} names no scope (tenant, shared): keys stay per tenant"
                );
                Self::PerTenant
            }),
        }
    }
}

/// `this` for an invocation of `tenant`: borrowed when there is none,
/// otherwise a copy that `scope` gives the tenant.
#[cfg(feature = "lambda")]
pub(crate) fn scoped<'a, T: Clone>(
    this: &'a T,
    tenant: Option<&str>,
    scope: impl FnOnce(&T, &str) -> T,
) -> std::borrow::Cow<'a, T> {
    match tenant.filter(|t| !t.is_empty()) {
        None => std::borrow::Cow::Borrowed(this),
        Some(tenant) => std::borrow::Cow::Owned(scope(this, tenant)),
    }
}

#[cfg(all(test, feature = "lambda"))]
mod tests;
