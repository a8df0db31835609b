//! How many WebSockets one principal may hold open at once (operation streams and job-log
//! follows together).
//!
//! # Guarantees
//! - A principal (a token name; a browser session counts as its token) holds at most the cap
//!   ([`MAX_WS_PER_PRINCIPAL`] by default) open WebSockets; one more upgrade is answered `429`
//!   before the upgrade, so a leaked read token cannot pin the server's file descriptors and log
//!   upstreams by itself. Other principals are not affected.
//! - A slot is taken before the upgrade and given back when the socket's task ends, however it
//!   ends (the [`WsSlot`] guard's `Drop`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Default cap of open WebSockets per principal.
pub const MAX_WS_PER_PRINCIPAL: usize = 32;

/// The open WebSockets per principal.
#[derive(Debug)]
pub struct WsSlots {
    cap: usize,
    open: Mutex<HashMap<String, usize>>,
}

/// One open WebSocket of a principal; dropping it gives the slot back.
#[derive(Debug)]
pub struct WsSlot {
    slots: Arc<WsSlots>,
    principal: String,
}

impl WsSlots {
    /// Slots for at most `cap` open WebSockets per principal.
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(WsSlots { cap, open: Mutex::new(HashMap::new()) })
    }

    /// The cap.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// A slot for `principal`, or `None` when it holds the cap already.
    pub fn take(self: &Arc<Self>, principal: &str) -> Option<WsSlot> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(principal.to_string()).or_default();
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(WsSlot { slots: self.clone(), principal: principal.to_string() })
    }

    /// How many WebSockets `principal` holds open.
    pub fn open(&self, principal: &str) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).get(principal).copied().unwrap_or(0)
    }
}

impl Drop for WsSlot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.principal) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.principal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principal_holds_at_most_the_cap_and_drops_give_slots_back() {
        let slots = WsSlots::new(2);
        let a1 = slots.take("alice").expect("first");
        let a2 = slots.take("alice").expect("second");
        assert!(slots.take("alice").is_none(), "the third is refused");
        let b = slots.take("bob").expect("another principal is not affected");
        assert_eq!((slots.open("alice"), slots.open("bob")), (2, 1));
        drop(a1);
        let a3 = slots.take("alice").expect("a closed socket gives its slot back");
        drop((a2, a3, b));
        assert_eq!((slots.open("alice"), slots.open("bob")), (0, 0));
        assert!(slots.open.lock().unwrap().is_empty(), "no entry is kept for idle principals");
    }

    #[test]
    fn slots_given_back_from_other_threads_are_counted_once() {
        let slots = WsSlots::new(64);
        let taken: Vec<WsSlot> = (0..64).map(|_| slots.take("t").unwrap()).collect();
        assert!(slots.take("t").is_none());
        let handles: Vec<_> = taken.into_iter().map(|s| std::thread::spawn(move || drop(s))).collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(slots.open("t"), 0);
        assert!(slots.take("t").is_some());
    }
}
