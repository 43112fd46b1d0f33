//! Bad input gives a clear error on that record, never a crash of the batch:
//! malformed records through the real functions, each failing alone with its
//! reason while the good records of the batch are applied once; and the
//! security properties (signed bodies, stored records holding hashes only,
//! keys namespaced per function). The HTTP API's bad input:
//! `exactly_once::payments_api`; the Valkey store's: `stores::valkey`.

mod functions;
