//! Conversions between domain values and database columns (SQLite and PostgreSQL store the same
//! text encodings), and error mapping.
//!
//! Timestamps are stored as RFC 3339 text in UTC with a fixed nanosecond fraction
//! (`2025-01-02T03:04:05.123456789Z`): the text round-trips a `DateTime<Utc>` exactly, and its
//! lexicographic order is chronological order, so `ORDER BY` on the column is correct.
//! Structured values (requests, resources, outputs, cluster records) are stored as JSON text.
//! Every failure becomes a [`StoreError::Backend`] that says what was being done.

use chrono::{DateTime, SecondsFormat, Utc};
use instantstart_core::store::StoreError;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Display;

/// Adds context to a database error, turning it into a [`StoreError::Backend`].
pub(crate) trait Context<T> {
    fn ctx(self, what: &str) -> Result<T, StoreError>;
}

impl<T> Context<T> for rusqlite::Result<T> {
    fn ctx(self, what: &str) -> Result<T, StoreError> {
        self.map_err(|e| StoreError::Backend(format!("{what}: {e}")))
    }
}

impl<T> Context<T> for Result<T, ::postgres::Error> {
    fn ctx(self, what: &str) -> Result<T, StoreError> {
        self.map_err(|e| StoreError::Backend(format!("{what}: {}", pg_message(&e))))
    }
}

/// A PostgreSQL error as text: the server's SQLSTATE, message and detail when it sent one.
pub(crate) fn pg_message(e: &::postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{} ({}): {detail}", db.message(), db.code().code()),
            None => format!("{} ({})", db.message(), db.code().code()),
        },
        None => e.to_string(),
    }
}

/// A stored value that cannot be decoded.
pub(crate) fn corrupt(column: &str, e: impl Display) -> StoreError {
    StoreError::Backend(format!("corrupt value in {column}: {e}"))
}

/// Encodes a timestamp (see the module docs for the format).
pub(crate) fn ts(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

pub(crate) fn opt_ts(t: Option<&DateTime<Utc>>) -> Option<String> {
    t.map(ts)
}

/// Decodes a timestamp written by [`ts`] (any RFC 3339 text is accepted).
pub(crate) fn parse_ts(column: &str, s: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(s).map(|t| t.with_timezone(&Utc)).map_err(|e| corrupt(column, format!("{s:?}: {e}")))
}

pub(crate) fn parse_opt_ts(column: &str, s: Option<&str>) -> Result<Option<DateTime<Utc>>, StoreError> {
    s.map(|s| parse_ts(column, s)).transpose()
}

pub(crate) fn to_json<T: Serialize + ?Sized>(column: &str, v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Backend(format!("cannot encode {column} as JSON: {e}")))
}

pub(crate) fn from_json<T: DeserializeOwned>(column: &str, s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| corrupt(column, e))
}

/// The snake_case name a unit enum serializes to (e.g. `ClusterSource::Created` → `created`).
pub(crate) fn enum_str<T: Serialize>(column: &str, v: &T) -> Result<String, StoreError> {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => Ok(s),
        Ok(other) => Err(StoreError::Backend(format!("cannot encode {column}: {other} is not a string"))),
        Err(e) => Err(StoreError::Backend(format!("cannot encode {column}: {e}"))),
    }
}

/// Database integers (SQLite `INTEGER`, PostgreSQL `BIGINT`) are signed 64-bit.
pub(crate) fn u64_to_sql(column: &str, v: u64) -> Result<i64, StoreError> {
    i64::try_from(v)
        .map_err(|_| StoreError::Backend(format!("{column} value {v} does not fit in a signed 64-bit integer")))
}

pub(crate) fn u32_from_sql(column: &str, v: i64) -> Result<u32, StoreError> {
    u32::try_from(v).map_err(|e| corrupt(column, format!("{v}: {e}")))
}

pub(crate) fn u64_from_sql(column: &str, v: i64) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|e| corrupt(column, format!("{v}: {e}")))
}

/// A (timestamp, sequence number) cursor key; the page rule decoded its shape, the store
/// checks its content (a forged cursor is a validation error on `cursor`, not a crash).
pub(crate) fn cursor_position(cursor: &instantstart_core::page::Cursor) -> Result<(String, i64), StoreError> {
    match cursor.key() {
        [at, seq] => match (parse_ts("cursor", at), seq.parse::<i64>()) {
            (Ok(_), Ok(seq)) => Ok((at.clone(), seq)),
            _ => Err(StoreError::BadCursor),
        },
        _ => Err(StoreError::BadCursor),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn timestamps_round_trip_exactly_and_sort_chronologically() {
        let times = [
            Utc.timestamp_opt(0, 0).unwrap(),
            Utc.timestamp_opt(1_700_000_000, 1).unwrap(),
            Utc.timestamp_opt(1_700_000_000, 999_999_999).unwrap(),
            Utc.timestamp_opt(1_700_000_001, 0).unwrap(),
            Utc::now(),
        ];
        for t in &times {
            assert_eq!(parse_ts("t", &ts(t)).unwrap(), *t);
        }
        for pair in times.windows(2) {
            assert!(ts(&pair[0]) < ts(&pair[1]), "{} < {}", ts(&pair[0]), ts(&pair[1]));
        }
    }

    #[test]
    fn bad_values_are_backend_errors_naming_the_column() {
        let e = parse_ts("steps.started_at", "yesterday").unwrap_err();
        assert!(matches!(&e, StoreError::Backend(m) if m.contains("steps.started_at")), "{e}");
        assert!(from_json::<serde_json::Value>("operations.request", "{").is_err());
        assert!(u32_from_sql("steps.attempts", -1).is_err());
        assert!(u64_to_sql("steps.expected_secs", u64::MAX).is_err());
        assert_eq!(u64_from_sql("x", 7).unwrap(), 7);
    }

    #[test]
    fn enums_encode_as_their_serde_names() {
        use instantstart_core::store::ClusterSource;
        assert_eq!(enum_str("clusters.source", &ClusterSource::Imported).unwrap(), "imported");
        assert!(enum_str("x", &1).is_err());
    }
}
