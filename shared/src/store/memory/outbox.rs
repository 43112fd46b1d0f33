//! No relay reads a memory store: a local run shows in its log what the
//! relay would publish from each committed outbox.

/// Logs what the relay would publish from a committed `outbox`.
pub(super) fn show(outbox: &str) {
    match crate::outbox::decode(outbox) {
        Ok(entries) => {
            for entry in entries {
                tracing::info!(
                    outbox_id = entry.id.as_str(),
                    destination = ?entry.message.destination,
                    group_id = entry.message.group_id.as_deref(),
                    body = entry.message.body.as_str(),
                    "would publish (memory store: no relay)"
                );
            }
        }
        Err(err) => tracing::error!(error = %err, "unreadable outbox"),
    }
}
