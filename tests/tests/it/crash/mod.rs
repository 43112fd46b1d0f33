//! A crash at any request boundary applies nothing or everything: each
//! function as a real process under the local Lambda Runtime API, killed
//! (SIGKILL) right after each of its requests is answered — every boundary
//! in turn — restarted, and its input delivered again as its source would.
//! Each effect is applied exactly once in every trial (and the classic
//! claim / effect / complete sequence is shown to apply twice).

mod ledger;
mod orders;
mod payments;
mod payments_api;
mod relay;
