//! The core's tests, on a small source of its own ([`test_source`]):
//! the pipeline, lanes, batch commits, in-batch duplicates, envelopes and
//! parking, whatever the source.

mod batch_commits;
mod envelopes;
mod isolation;
mod lanes;
mod parking;
mod pipeline;
mod test_source;
