//! The store contract, against the in-memory store and DynamoDB on moto.

integration_tests::contract_suite!(
    first_claim_executes,
    duplicate_replays,
    expired_record_is_reclaimable,
    live_claim_conflicts,
    lapsed_lease_is_taken_over,
    stale_owner_cannot_complete_or_release,
    payload_mismatch,
    concurrent_claims_one_winner,
    oversized_response_is_handled,
    expiration_units_and_lease_cap,
    retryable_failure_releases,
    terminal_errors_follow_policy,
    kill_switch_runs_unprotected,
    responses_can_be_withheld,
    unserializable_response_still_completes,
);
