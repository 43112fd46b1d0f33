//! Batch commits: many records' commits (each its record write and staged
//! writes) in one transaction ([`Store::commit_many`](super::Store::commit_many)),
//! within DynamoDB's limits on one `TransactWriteItems`: at most
//! [`MAX_ACTIONS`] actions, at most [`MAX_BYTES`] of items, and no two
//! actions on one item. [`plan`] cuts a batch's commits into transactions
//! that keep them; [`check`] refuses one that does not (every store gives
//! the same answer).

use std::collections::HashSet;

use super::{RecordWrite, TransactError};
use crate::record::Record;
use crate::value::AttrValue;
use crate::write::{Change, Item, Write, WriteOp, key_text};

/// Actions per `TransactWriteItems`: DynamoDB's API reference, "groups up
/// to 100 action requests"
/// (<https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html>).
pub const MAX_ACTIONS: usize = 100;
/// Aggregate size of the items of one `TransactWriteItems`: the same page,
/// "the aggregate size of the items in the transaction cannot exceed 4 MB"
/// (<https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html>).
pub const MAX_BYTES: usize = 4 * 1024 * 1024;

/// One record's commit inside a batch transaction: what
/// [`Store::commit`](super::Store::commit) takes for one record.
#[derive(Debug, Clone, Copy)]
pub struct Commit<'a> {
    /// The record write (optimistic batches: [`RecordWrite::Claim`]).
    pub record: RecordWrite<'a>,
    /// Its staged writes.
    pub writes: &'a [Write],
}

/// Why a batch transaction did not commit. Nothing was applied, except
/// that after [`TransactError::Store`] from a timeout the outcome is
/// unknown.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommitsError {
    /// The transaction was cancelled by the conditions of these commits
    /// (index in the batch, and each one's [`TransactError::Record`] or
    /// [`TransactError::Write`], as [`Store::commit`](super::Store::commit)
    /// would have answered it alone). Nothing was applied: the other
    /// commits can be sent again without them.
    #[error("{} commit(s) of the batch failed their conditions", .0.len())]
    Cancelled(Vec<(usize, TransactError)>),
    /// The transaction as a whole: [`TransactError::Conflict`] (a
    /// conflicting request on one of its items; nothing applied) or
    /// [`TransactError::Store`] (throttling, a network error, a request the
    /// store refuses).
    #[error("the batch transaction failed")]
    Transaction(TransactError),
    /// The store commits one record at a time (the default of
    /// [`Store::commit_many`](super::Store::commit_many)): nothing was sent.
    #[error("this store does not commit batches in one transaction")]
    Unsupported,
}

/// What one item of a transaction is, for the one-action-per-item rule: its
/// table and canonical key. The idempotency record is named by its id under
/// a table name no business table has (`\0`: not a valid table name).
fn item_of(write: &Write) -> (String, String) {
    (write.table.clone(), key_text(&write.key))
}

fn record_of(record: &Record) -> (String, String) {
    ("\0records".to_owned(), record.id.clone())
}

fn record_in(write: RecordWrite<'_>) -> Option<&Record> {
    match write {
        RecordWrite::Fenced(r) | RecordWrite::Claim { record: r, .. } => Some(r),
        RecordWrite::None => None,
    }
}

/// The items one commit touches.
fn items(commit: &Commit<'_>) -> Vec<(String, String)> {
    let mut out: Vec<_> = commit.writes.iter().map(item_of).collect();
    out.extend(record_in(commit.record).map(record_of));
    out
}

/// The actions one commit adds to a transaction.
pub fn actions(commit: &Commit<'_>) -> usize {
    commit.writes.len() + usize::from(record_in(commit.record).is_some())
}

/// The bytes one commit adds to a transaction: the record's item size (as
/// `record_size` counts it) and, for each staged write, its key and the
/// attributes it puts or sets. An update's item may be larger than what it
/// sets (its other attributes are not known here): a transaction DynamoDB
/// still refuses for size fails as a whole, and the engine then commits
/// its records one by one.
pub fn bytes(commit: &Commit<'_>, record_size: &dyn Fn(&Record) -> usize) -> usize {
    let writes: usize = commit.writes.iter().map(write_bytes).sum();
    writes + record_in(commit.record).map_or(0, record_size)
}

fn write_bytes(write: &Write) -> usize {
    let mut size = item_bytes(&write.key);
    match &write.op {
        WriteOp::Put(item) => size += item_bytes(item),
        WriteOp::Update(changes) => {
            for change in changes {
                size += match change {
                    Change::Set(a, v) => a.len() + value_bytes(v),
                    Change::Add(a, n) => a.len() + n.to_string().len(),
                    Change::Remove(a) => a.len(),
                };
            }
        }
        WriteOp::Delete | WriteOp::ConditionCheck => {}
    }
    size
}

fn item_bytes(item: &Item) -> usize {
    item.iter().map(|(k, v)| k.len() + value_bytes(v)).sum()
}

/// DynamoDB's item size rules, closely enough for a 4 MB budget: strings
/// and binaries by length, numbers by digits, 1 byte for booleans and
/// nulls, 3 bytes of overhead per list or map.
fn value_bytes(v: &AttrValue) -> usize {
    match v {
        AttrValue::S(s) | AttrValue::N(s) => s.len(),
        AttrValue::B(b) => b.len(),
        AttrValue::Bool(_) | AttrValue::Null => 1,
        AttrValue::L(l) => 3 + l.iter().map(|v| 1 + value_bytes(v)).sum::<usize>(),
        AttrValue::M(m) => {
            3 + m
                .iter()
                .map(|(k, v)| 1 + k.len() + value_bytes(v))
                .sum::<usize>()
        }
        AttrValue::Ss(ss) | AttrValue::Ns(ss) => ss.iter().map(String::len).sum(),
        AttrValue::Bs(bs) => bs.iter().map(Vec::len).sum(),
    }
}

/// Refuses a transaction DynamoDB refuses as a whole: more than
/// [`MAX_ACTIONS`] actions, more than [`MAX_BYTES`] (as [`bytes`] counts
/// them), or two actions on one item (across commits or inside one).
pub fn check(commits: &[Commit<'_>], record_size: &dyn Fn(&Record) -> usize) -> Result<(), String> {
    let actions: usize = commits.iter().map(actions).sum();
    if actions > MAX_ACTIONS {
        return Err(format!(
            "{actions} actions in one transaction, over the limit of {MAX_ACTIONS}"
        ));
    }
    let size: usize = commits.iter().map(|c| bytes(c, record_size)).sum();
    if size > MAX_BYTES {
        return Err(format!(
            "{size} bytes of items in one transaction, over the limit of {MAX_BYTES}"
        ));
    }
    let mut seen = HashSet::new();
    let twice = commits
        .iter()
        .flat_map(items)
        .find(|item| !seen.insert(item.clone()));
    if let Some((table, _)) = twice {
        return Err(format!(
            "two actions of one transaction touch one item of table {}",
            table.trim_start_matches('\0')
        ));
    }
    Ok(())
}

/// Cuts `commits` (in submission order) into transactions that [`check`]
/// accepts, sent one after another in the order returned: each commit goes
/// into the first transaction after the last one holding an item it
/// touches (so of two commits on one item, the later one commits after the
/// earlier, never with it) that still has room. A commit that alone breaks
/// a limit is a transaction of its own (the store refuses it as it would
/// alone). Returns indices into `commits`.
pub fn plan(commits: &[Commit<'_>], record_size: &dyn Fn(&Record) -> usize) -> Vec<Vec<usize>> {
    struct Tx {
        members: Vec<usize>,
        actions: usize,
        bytes: usize,
        items: HashSet<(String, String)>,
    }
    let mut txs: Vec<Tx> = Vec::new();
    for (i, commit) in commits.iter().enumerate() {
        let touched = items(commit);
        let (actions, bytes) = (actions(commit), bytes(commit, record_size));
        let after = txs
            .iter()
            .rposition(|tx| touched.iter().any(|item| tx.items.contains(item)))
            .map_or(0, |last| last + 1);
        let fits = |tx: &Tx| tx.actions + actions <= MAX_ACTIONS && tx.bytes + bytes <= MAX_BYTES;
        let at = match (after..txs.len()).find(|&t| fits(&txs[t])) {
            Some(at) => at,
            None => {
                txs.push(Tx {
                    members: Vec::new(),
                    actions: 0,
                    bytes: 0,
                    items: HashSet::new(),
                });
                txs.len() - 1
            }
        };
        let tx = &mut txs[at];
        tx.members.push(i);
        tx.actions += actions;
        tx.bytes += bytes;
        tx.items.extend(touched);
    }
    txs.into_iter().map(|tx| tx.members).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Status;

    fn record(id: &str) -> Record {
        Record {
            id: id.into(),
            status: Status::Completed,
            expiration: 1,
            in_progress_expiration: None,
            data: None,
            error: None,
            validation: None,
            owner: Some("o".into()),
            outbox: None,
        }
    }

    fn credit(account: &str) -> Write {
        Write::update(
            "accounts",
            Item::from([("pk".to_owned(), AttrValue::s(account))]),
        )
        .add("balance", 1)
    }

    /// Each record's claim with its writes, as the engine submits them.
    fn claims<'a, const N: usize>(
        records: &'a [Record],
        writes: &'a [[Write; N]],
    ) -> Vec<Commit<'a>> {
        records
            .iter()
            .zip(writes)
            .map(|(r, w)| Commit {
                record: RecordWrite::Claim {
                    record: r,
                    now_ms: 0,
                },
                writes: w,
            })
            .collect()
    }

    fn size(r: &Record) -> usize {
        r.item_size(&crate::store::Attributes::default())
    }

    #[test]
    fn commits_on_distinct_items_share_one_transaction() {
        let records: Vec<Record> = (0..10).map(|i| record(&format!("r{i}"))).collect();
        let writes: Vec<[Write; 1]> = (0..10).map(|i| [credit(&format!("a{i}"))]).collect();
        let commits = claims(&records, &writes);
        assert_eq!(plan(&commits, &size), vec![(0..10).collect::<Vec<_>>()]);
        assert_eq!(check(&commits, &size), Ok(()));
    }

    #[test]
    fn two_commits_on_one_item_never_share_and_keep_their_order() {
        let records: Vec<Record> = (0..4).map(|i| record(&format!("r{i}"))).collect();
        let writes = [[credit("a")], [credit("b")], [credit("a")], [credit("a")]];
        let commits = claims(&records, &writes);
        assert_eq!(plan(&commits, &size), vec![vec![0, 1], vec![2], vec![3]]);
        let err = check(&commits[..3], &size).unwrap_err();
        assert!(err.contains("one item of table accounts"), "{err}");
    }

    /// `N "1"` and `N "1.0"` are one item to DynamoDB, which refuses a
    /// transaction with two actions on it: the plan keeps them apart.
    #[test]
    fn two_commits_on_one_numeric_key_written_differently_never_share() {
        let number = |text: &str| {
            Write::update(
                "accounts",
                Item::from([("pk".to_owned(), AttrValue::N(text.to_owned()))]),
            )
            .add("balance", 1)
        };
        let records: Vec<Record> = (0..3).map(|i| record(&format!("r{i}"))).collect();
        let writes = [[number("1")], [number("1.0")], [number("10E-1")]];
        let commits = claims(&records, &writes);
        assert_eq!(plan(&commits, &size), vec![vec![0], vec![1], vec![2]]);
        let err = check(&commits[..2], &size).unwrap_err();
        assert!(err.contains("one item of table accounts"), "{err}");
    }

    #[test]
    fn more_than_a_hundred_actions_or_four_megabytes_are_split() {
        // 60 commits of 2 actions: 50 fit in the first transaction.
        let records: Vec<Record> = (0..60).map(|i| record(&format!("r{i}"))).collect();
        let writes: Vec<[Write; 1]> = (0..60).map(|i| [credit(&format!("a{i}"))]).collect();
        let commits = claims(&records, &writes);
        let txs = plan(&commits, &size);
        assert_eq!(txs.iter().map(Vec::len).collect::<Vec<_>>(), [50, 10]);
        assert!(check(&commits, &size).unwrap_err().contains("120 actions"));
        // 30 records of 300 KB: 13 fit under 4 MB.
        let big: Vec<Record> = (0..30)
            .map(|i| Record {
                data: Some("x".repeat(300_000)),
                ..record(&format!("big{i}"))
            })
            .collect();
        let commits: Vec<Commit<'_>> = big
            .iter()
            .map(|r| Commit {
                record: RecordWrite::Claim {
                    record: r,
                    now_ms: 0,
                },
                writes: &[],
            })
            .collect();
        let txs = plan(&commits, &size);
        assert_eq!(txs.iter().map(Vec::len).collect::<Vec<_>>(), [13, 13, 4]);
        for tx in &txs {
            let part: Vec<Commit<'_>> = tx.iter().map(|&i| commits[i]).collect();
            assert_eq!(check(&part, &size), Ok(()));
        }
        assert!(
            check(&commits, &size)
                .unwrap_err()
                .contains("bytes of items")
        );
    }
}
