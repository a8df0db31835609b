//! The lease rules both backends share: when a replica may acquire an operation's lease, and
//! when a fenced write (or a renewal) is refused. Each backend reads the lease row and the
//! operation's status inside its write transaction and asks these functions, so SQLite and
//! PostgreSQL decide alike (`docs/store.md`, "Leases and fencing").
//!
//! # Guarantees
//! - A lease is acquired only when nobody holds it, its holder's lease expired, or the asking
//!   replica holds it already (a restarted replica); every acquisition grows the token by one.
//! - A fenced call passes only with the current token and holder, before the expiry, on a
//!   running operation; anything else is [`StoreError::Fenced`] naming what moved on.
//! - A fenced publication (the change feed) passes while the token and holder are the newest
//!   grant, even expired or after the operation ended: refused only once another replica took
//!   the lease.
//! - Times are microseconds since the Unix epoch on the store's clock (the PostgreSQL store
//!   passes the database server's clock, so replicas' clocks need not agree).

use chrono::{DateTime, Utc};
use instantstart_core::operation::OperationId;
use instantstart_core::store::{Lease, StoreError};
use std::time::Duration;

/// A `leases` row as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaseRow {
    pub replica: String,
    pub token: i64,
    /// Microseconds since the epoch; 0 once released.
    pub expires_us: i64,
}

/// `ttl` in microseconds (saturating).
pub(crate) fn ttl_us(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX / 2)
}

/// Microseconds since the epoch of `t`.
pub(crate) fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// The lease `row` describes.
pub(crate) fn lease_of(id: &OperationId, row: &LeaseRow) -> Result<Lease, StoreError> {
    Ok(Lease {
        operation_id: id.clone(),
        replica: row.replica.clone(),
        token: u64::try_from(row.token)
            .map_err(|_| StoreError::Backend(format!("leases.token: invalid value {}", row.token)))?,
        expires_at: DateTime::from_timestamp_micros(row.expires_us)
            .ok_or_else(|| StoreError::Backend(format!("leases.expires_at: invalid value {}", row.expires_us)))?,
    })
}

/// The token a new acquisition by `replica` at `now_us` takes, or `None` when another replica
/// holds a live lease or the operation (`status`, `None` when unknown) is not running.
pub(crate) fn acquire(
    id: &OperationId,
    status: Option<&str>,
    row: Option<&LeaseRow>,
    replica: &str,
    now_us: i64,
) -> Result<Option<i64>, StoreError> {
    let Some(status) = status else {
        return Err(StoreError::NotFound { what: format!("operation {id}") });
    };
    if status != "running" {
        return Ok(None);
    }
    match row {
        None => Ok(Some(1)),
        Some(r) if r.replica != replica && r.expires_us > now_us => Ok(None),
        Some(r) => Ok(Some(r.token + 1)),
    }
}

/// Whether `lease` may still write, given the stored row and the operation's status.
pub(crate) fn check(
    lease: &Lease,
    status: Option<&str>,
    row: Option<&LeaseRow>,
    now_us: i64,
) -> Result<(), StoreError> {
    let fenced = |reason: String| Err(StoreError::Fenced { operation: lease.operation_id.clone(), reason });
    let Some(status) = status else {
        return Err(StoreError::NotFound { what: format!("operation {}", lease.operation_id) });
    };
    let token = i64::try_from(lease.token).unwrap_or(-1);
    match row {
        None => return fenced(format!("lease token {} was never granted", lease.token)),
        Some(r) if r.token != token || r.replica != lease.replica => {
            return fenced(format!(
                "its lease moved on to replica {} (token {} replaces {})",
                r.replica, r.token, lease.token
            ));
        }
        Some(r) if r.expires_us <= now_us => {
            return fenced(format!("its lease (token {}) expired or was released", lease.token));
        }
        Some(_) => {}
    }
    if status != "running" {
        return fenced(format!("it is {status}, no longer running"));
    }
    Ok(())
}

/// Whether `lease` is still the operation's newest grant (same token and holder), whatever
/// its expiry and the operation's status: the check before a fenced publication, which may
/// follow the driver's last write (the final status, after which the operation is no longer
/// running) and is refused only once another replica took the lease.
pub(crate) fn check_holder(lease: &Lease, row: Option<&LeaseRow>) -> Result<(), StoreError> {
    let token = i64::try_from(lease.token).unwrap_or(-1);
    match row {
        Some(r) if r.token == token && r.replica == lease.replica => Ok(()),
        Some(r) => Err(StoreError::Fenced {
            operation: lease.operation_id.clone(),
            reason: format!("its lease moved on to replica {} (token {} replaces {})", r.replica, r.token, lease.token),
        }),
        None => Err(StoreError::Fenced {
            operation: lease.operation_id.clone(),
            reason: format!("lease token {} was never granted", lease.token),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(replica: &str, token: i64, expires_us: i64) -> LeaseRow {
        LeaseRow { replica: replica.into(), token, expires_us }
    }

    #[test]
    fn acquisition_rules() {
        let id = OperationId("op-1".into());
        /// (status, row, asking replica, now, expected token)
        type Case = (&'static str, Option<LeaseRow>, &'static str, i64, Option<i64>);
        let cases: &[Case] = &[
            ("running", None, "a", 10, Some(1)),
            ("running", Some(row("a", 3, 20)), "b", 10, None),
            ("running", Some(row("a", 3, 20)), "a", 10, Some(4)),
            ("running", Some(row("a", 3, 10)), "b", 10, Some(4)),
            ("running", Some(row("a", 3, 0)), "b", 10, Some(4)),
            ("succeeded", None, "a", 10, None),
        ];
        for (status, r, replica, now, want) in cases {
            assert_eq!(
                acquire(&id, Some(status), r.as_ref(), replica, *now).unwrap(),
                *want,
                "{status} {r:?} {replica}"
            );
        }
        assert!(matches!(acquire(&id, None, None, "a", 0), Err(StoreError::NotFound { .. })));
    }

    #[test]
    fn publication_rules() {
        let lease = Lease {
            operation_id: OperationId("op-1".into()),
            replica: "a".into(),
            token: 3,
            expires_at: DateTime::from_timestamp_micros(20).unwrap(),
        };
        // (row, allowed): expiry (0 = released) does not matter, the newest grant does.
        let cases = [
            (Some(row("a", 3, 20)), true),
            (Some(row("a", 3, 0)), true),
            (Some(row("a", 3, 5)), true),
            (Some(row("b", 4, 20)), false),
            (Some(row("a", 4, 20)), false),
            (None, false),
        ];
        for (r, allowed) in cases {
            let got = check_holder(&lease, r.as_ref());
            assert_eq!(got.is_ok(), allowed, "{r:?}: {got:?}");
            if let Err(e) = got {
                assert!(matches!(e, StoreError::Fenced { .. }), "{e}");
            }
        }
    }

    #[test]
    fn fencing_rules() {
        let lease = Lease {
            operation_id: OperationId("op-1".into()),
            replica: "a".into(),
            token: 3,
            expires_at: DateTime::from_timestamp_micros(20).unwrap(),
        };
        // (status, row, now, allowed, part of the reason)
        let cases: &[(&str, Option<LeaseRow>, i64, &str)] = &[
            ("running", Some(row("a", 3, 20)), 10, ""),
            ("running", Some(row("b", 4, 20)), 10, "moved on to replica b (token 4 replaces 3)"),
            ("running", Some(row("a", 4, 20)), 10, "token 4 replaces 3"),
            ("running", Some(row("a", 3, 20)), 20, "expired"),
            ("running", None, 10, "never granted"),
            ("cancelled", Some(row("a", 3, 20)), 10, "cancelled, no longer running"),
        ];
        for (status, r, now, reason) in cases {
            match check(&lease, Some(status), r.as_ref(), *now) {
                Ok(()) => assert!(reason.is_empty(), "{status} {r:?}: allowed, expected {reason}"),
                Err(StoreError::Fenced { reason: got, .. }) => {
                    assert!(!reason.is_empty() && got.contains(reason), "{status} {r:?}: {got} (expected {reason:?})")
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
}
