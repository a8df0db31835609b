//! One pagination rule for every list: a page size (`limit`) and an opaque keyset `cursor`.
//!
//! A list is read in a fixed order over a unique sort key (operations: newest first by creation
//! time and insertion order; clusters: by name; ...). A page holds at most `limit` items; when
//! more follow, [`Page::next`] is the position after its last item, and the next page starts
//! strictly after that position. The store does this in SQL (keyset pagination over an index);
//! lists read from elsewhere (Kubernetes, AWS) use [`page_in_memory`] with the same rule.
//!
//! # Guarantees
//! - A cursor is opaque: base64url text that only this module reads or writes. It names the
//!   list it belongs to, so a cursor of one list given to another is refused.
//! - Stable under inserts: a page starts after a *key*, not an offset, so items added while a
//!   client pages never make it see an item twice or skip one that existed when it started
//!   (new items appear only if they sort after the position reached).
//! - The last page has no `next`; an empty list is one empty page without `next`.
//! - A malformed or foreign cursor is a `400` naming `cursor`; a `limit` outside
//!   `1..=`[`MAX_LIMIT`] is a `400` naming `limit` (both reported together).

use crate::validate::{Findings, ValidationError};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// Page size when the request names none.
pub const DEFAULT_LIMIT: u32 = 100;
/// The largest page a request may ask for.
pub const MAX_LIMIT: u32 = 500;

/// A position in one list: the sort key of the last item a page returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// The list this position belongs to, e.g. `operations`.
    #[serde(rename = "l")]
    list: String,
    /// The sort key, one string per column.
    #[serde(rename = "k")]
    key: Vec<String>,
}

impl Cursor {
    pub fn new(list: &str, key: Vec<String>) -> Self {
        Cursor { list: list.to_string(), key }
    }

    /// The sort key of the last item returned.
    pub fn key(&self) -> &[String] {
        &self.key
    }

    /// The opaque text form given to clients.
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).expect("a cursor serializes"))
    }

    /// Reads a cursor of `list` whose key has `columns` parts; anything else is a finding on
    /// `cursor`.
    pub fn decode(list: &str, columns: usize, text: &str) -> Result<Self, ValidationError> {
        let bad =
            || ValidationError::invalid("cursor", "not a cursor of this list: use the `next` link of a previous page");
        let bytes = URL_SAFE_NO_PAD.decode(text.trim()).map_err(|_| bad())?;
        let cursor: Cursor = serde_json::from_slice(&bytes).map_err(|_| bad())?;
        if cursor.list != list || cursor.key.len() != columns {
            return Err(bad());
        }
        Ok(cursor)
    }
}

/// What a client asked for: how many items, after which position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    pub limit: u32,
    pub after: Option<Cursor>,
}

impl PageRequest {
    /// The first page of `limit` items.
    pub fn first(limit: u32) -> Self {
        PageRequest { limit, after: None }
    }

    /// Checks `limit` and `cursor` (of `list`, with a key of `columns` parts), reporting every
    /// finding at once.
    pub fn parse(
        list: &str,
        columns: usize,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> Result<Self, ValidationError> {
        let mut findings = Findings::new();
        let limit = limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            findings.push("limit", format!("must be between 1 and {MAX_LIMIT}"));
        }
        let after = match cursor.filter(|c| !c.is_empty()) {
            None => None,
            Some(text) => match Cursor::decode(list, columns, text) {
                Ok(c) => Some(c),
                Err(e) => {
                    findings.extend(e);
                    None
                }
            },
        };
        findings.finish()?;
        Ok(PageRequest { limit, after })
    }
}

/// One page of a list, in the list's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<Cursor>,
}

impl<T> Page<T> {
    /// A page of `items` read with one item more than `limit` asked for: the extra item (if
    /// any) is dropped and its presence sets `next` from the key of the last item kept.
    pub fn from_probe(mut items: Vec<T>, limit: u32, list: &str, key: impl Fn(&T) -> Vec<String>) -> Self {
        let limit = limit as usize;
        let next = if items.len() > limit {
            items.truncate(limit);
            items.last().map(|last| Cursor::new(list, key(last)))
        } else {
            None
        };
        Page { items, next }
    }

    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page { items: self.items.into_iter().map(f).collect(), next: self.next }
    }
}

/// The direction a list is read in, over its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Ascending,
    Descending,
}

/// Pages a list held in memory with the same rule as the store: sorts `items` by `key` in
/// `order` (the key must be unique within the list), starts strictly after the request's
/// cursor and keeps `limit` items.
pub fn page_in_memory<T>(
    mut items: Vec<T>,
    list: &str,
    order: Order,
    key: impl Fn(&T) -> Vec<String>,
    request: &PageRequest,
) -> Page<T> {
    let directed = |a: &Vec<String>, b: &Vec<String>| match order {
        Order::Ascending => a.cmp(b),
        Order::Descending => b.cmp(a),
    };
    items.sort_by(|a, b| directed(&key(a), &key(b)));
    let rest: Vec<T> = match &request.after {
        None => items,
        Some(after) => {
            let after = after.key().to_vec();
            items.into_iter().filter(|item| directed(&key(item), &after) == Ordering::Greater).collect()
        }
    };
    let mut rest = rest;
    rest.truncate(request.limit as usize + 1);
    Page::from_probe(rest, request.limit, list, key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i:03}")).collect()
    }

    fn all_pages(items: &[String], limit: u32, order: Order) -> Vec<Vec<String>> {
        let mut pages = Vec::new();
        let mut request = PageRequest::first(limit);
        loop {
            let page = page_in_memory(items.to_vec(), "clusters", order, |s| vec![s.clone()], &request);
            pages.push(page.items);
            match page.next {
                Some(next) => {
                    let text = next.encode();
                    request = PageRequest::parse("clusters", 1, Some(limit), Some(&text)).unwrap();
                }
                None => return pages,
            }
        }
    }

    #[test]
    fn pages_cover_the_list_once_in_order_and_the_last_has_no_next() {
        // (items, limit, expected page sizes)
        let cases: &[(usize, u32, &[usize])] =
            &[(0, 10, &[0]), (1, 10, &[1]), (10, 10, &[10]), (11, 10, &[10, 1]), (25, 10, &[10, 10, 5])];
        for (n, limit, sizes) in cases {
            for order in [Order::Ascending, Order::Descending] {
                let items = names(*n);
                let pages = all_pages(&items, *limit, order);
                assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), *sizes, "{n} items, limit {limit}");
                let mut seen: Vec<String> = pages.concat();
                if order == Order::Descending {
                    seen.reverse();
                }
                assert_eq!(seen, items, "{n} items, limit {limit}, {order:?}");
            }
        }
    }

    #[test]
    fn inserts_while_paging_neither_repeat_nor_skip_what_existed() {
        let mut items = names(30);
        let first =
            page_in_memory(items.clone(), "clusters", Order::Ascending, |s| vec![s.clone()], &PageRequest::first(10));
        // Items inserted before and after the position reached.
        items.push("a-before".into());
        items.push("c005x".into());
        items.push("z-after".into());
        let second = page_in_memory(
            items,
            "clusters",
            Order::Ascending,
            |s| vec![s.clone()],
            &PageRequest { limit: 100, after: first.next.clone() },
        );
        let mut seen = first.items.clone();
        seen.extend(second.items.clone());
        for original in names(30) {
            assert_eq!(seen.iter().filter(|s| **s == original).count(), 1, "{original} seen once");
        }
        assert!(!second.items.contains(&"a-before".to_string()), "an item before the position is not seen");
        assert!(second.items.contains(&"z-after".to_string()), "an item after the position is");
    }

    #[test]
    fn bad_limits_and_cursors_name_their_field() {
        let other = Cursor::new("operations", vec!["x".into()]).encode();
        let two = Cursor::new("clusters", vec!["x".into(), "y".into()]).encode();
        // (limit, cursor, fields named)
        let cases: &[(Option<u32>, Option<&str>, &[&str])] = &[
            (Some(0), None, &["limit"]),
            (Some(MAX_LIMIT + 1), None, &["limit"]),
            (None, Some("not base64!"), &["cursor"]),
            (None, Some("bm90IGpzb24"), &["cursor"]),
            (None, Some(&other), &["cursor"]),
            (None, Some(&two), &["cursor"]),
            (Some(0), Some("%%%"), &["limit", "cursor"]),
        ];
        for (limit, cursor, fields) in cases {
            let err = PageRequest::parse("clusters", 1, *limit, *cursor).unwrap_err();
            let named: Vec<&str> = err.findings.iter().map(|f| f.field.as_str()).collect();
            assert_eq!(named, *fields, "limit {limit:?} cursor {cursor:?}");
        }
        let ok = PageRequest::parse("clusters", 1, None, Some("")).unwrap();
        assert_eq!(ok, PageRequest::first(DEFAULT_LIMIT), "an empty cursor is the first page");
        assert_eq!(PageRequest::parse("clusters", 1, Some(MAX_LIMIT), None).unwrap().limit, MAX_LIMIT);
    }

    #[test]
    fn a_cursor_round_trips_and_is_url_safe() {
        let c = Cursor::new("operations", vec!["2026-01-01T00:00:00.000000Z".into(), "42".into()]);
        let text = c.encode();
        assert!(text.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_'), "{text}");
        assert_eq!(Cursor::decode("operations", 2, &text).unwrap(), c);
    }
}
