//! Layer 0 of the simulator: the helpers every other module uses and that use nothing of the
//! simulator: where a resource is in its life ([`Lifecycle`], [`Phase`]), the key of a
//! regional resource ([`rkey`]), stable hashing ([`stable_hash`], [`mix`], [`uuid_from`]) and
//! what an API call's action knows about the call ([`Cx`]).

use instantstart_core::provider::ResourceState;
use serde::{Deserialize, Serialize};

/// Key of a regional resource.
pub(crate) fn rkey(region: &str, name: &str) -> String {
    format!("{region}/{name}")
}

/// SplitMix64 finaliser: a good 64-bit mixing function.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A stable 64-bit hash of some strings (FNV-1a, then mixed); the same on every run.
pub(crate) fn stable_hash(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0xff)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    mix(h)
}

/// Where a resource is in its life.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Phase {
    Creating,
    Active,
    Failed(String),
    Deleting,
    /// Deletion finished; the resource no longer exists.
    Gone,
}

/// When a resource was created, how long it takes to become ready, and whether it is failing or
/// being deleted. All times are simulated seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Lifecycle {
    pub created_at: f64,
    pub ready_after: f64,
    #[serde(default)]
    pub failure: Option<Failure>,
    #[serde(default)]
    pub deleting: Option<Deleting>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Failure {
    /// Seconds after creation.
    pub after: f64,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Deleting {
    pub since: f64,
    pub takes: f64,
}

impl Lifecycle {
    pub fn new(now: f64, ready_after: f64) -> Self {
        Lifecycle { created_at: now, ready_after, failure: None, deleting: None }
    }

    /// Fails after `after` seconds unless an earlier failure is already planned.
    pub fn fail_after(&mut self, after: f64, reason: impl Into<String>) {
        if self.failure.as_ref().is_none_or(|f| f.after > after) {
            self.failure = Some(Failure { after, reason: reason.into() });
        }
    }

    pub fn age(&self, now: f64) -> f64 {
        now - self.created_at
    }

    pub fn phase(&self, now: f64) -> Phase {
        if let Some(d) = &self.deleting {
            return if now >= d.since + d.takes { Phase::Gone } else { Phase::Deleting };
        }
        let age = self.age(now);
        if let Some(f) = &self.failure
            && age >= f.after
        {
            return Phase::Failed(f.reason.clone());
        }
        if age >= self.ready_after { Phase::Active } else { Phase::Creating }
    }

    pub fn state(&self, now: f64) -> ResourceState {
        match self.phase(now) {
            Phase::Creating => ResourceState::Creating,
            Phase::Active => ResourceState::Active,
            Phase::Failed(reason) => ResourceState::Failed { reason },
            Phase::Deleting | Phase::Gone => ResourceState::Deleting,
        }
    }

    /// Whether the resource still exists (not gone).
    pub fn exists(&self, now: f64) -> bool {
        self.phase(now) != Phase::Gone
    }

    pub fn is_deleting(&self) -> bool {
        self.deleting.is_some()
    }

    pub fn start_deleting(&mut self, now: f64, takes: f64) {
        if self.deleting.is_none() {
            self.deleting = Some(Deleting { since: now, takes });
        }
    }
}

/// A UUID-shaped string from two 64-bit numbers.
pub(crate) fn uuid_from(a: u64, b: u64) -> String {
    let h = format!("{a:016x}{b:016x}");
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// What a call's action may know about the call.
pub(crate) struct Cx {
    /// Simulated time of the call.
    pub now: f64,
    /// The `ResourceFails` fault applies to this call.
    pub resource_fails: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_phases() {
        let mut l = Lifecycle::new(100.0, 50.0);
        let cases = [(100.0, Phase::Creating), (149.9, Phase::Creating), (150.0, Phase::Active), (1e9, Phase::Active)];
        for (t, p) in cases {
            assert_eq!(l.phase(t), p, "t={t}");
        }
        l.fail_after(20.0, "boom");
        l.fail_after(30.0, "later");
        assert_eq!(l.phase(119.0), Phase::Creating);
        assert_eq!(l.phase(120.0), Phase::Failed("boom".into()));
        l.start_deleting(200.0, 10.0);
        l.start_deleting(205.0, 99.0);
        assert_eq!(l.phase(209.0), Phase::Deleting);
        assert_eq!(l.state(209.0), ResourceState::Deleting);
        assert_eq!(l.phase(210.0), Phase::Gone);
        assert!(!l.exists(210.0));
    }
}
