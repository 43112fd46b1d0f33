//! The store contract, against the in-memory store, DynamoDB on moto and
//! Valkey on a real redis-server (its record cases). A new store is one
//! entry in `stores` (its `Harness` constructor in `test_kit::contract`).

test_kit::contract_suite!(
    stores: [memory + writes, dynamodb + writes, valkey],
    records: [
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
        get_many_and_kill_switch,
    ],
    writes: [
        oversized_response_commits_nothing,
        transaction_commits_writes_with_the_record,
        transaction_business_condition_is_the_outcome,
        fenced_stale_commit_applies_nothing,
        fenced_crash_before_commit_applies_nothing,
        optimistic_concurrent_duplicates_commit_once,
        messages_commit_with_the_record,
        unpublishable_messages_commit_nothing,
        add_past_i64_max_is_exact,
        number_comparisons_are_exact,
        invalid_staged_writes_are_refused_alike,
        business_table_writes_alike,
        batch_commit_applies_every_commit,
        batch_commit_names_a_duplicate,
        batch_commit_names_a_rejected_write,
        batch_commit_refuses_what_one_transaction_cannot_hold,
        batch_pipeline_commits_each_record_once,
    ],
);
