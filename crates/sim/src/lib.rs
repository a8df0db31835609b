//! Simulated AWS + Kubernetes world (being written).
