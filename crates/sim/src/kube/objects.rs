//! Helpers over the stored objects of a simulated cluster: reading a field ([`str_at`]), the
//! volume a claim is bound to ([`bound_volume`]) and the cluster a call targets
//! ([`check_target`]: its API is reachable only while the EKS cluster is Active).

use crate::base::{Phase, rkey};
use crate::world::{KubeWorld, World};
use instantstart_core::provider::{KubeTarget, ProviderError, ProviderErrorKind};
use serde_json::Value;

type Result<T> = std::result::Result<T, ProviderError>;

/// The Kubernetes world of `target`, if its EKS cluster can serve API calls.
pub(crate) fn check_target(w: &World, api: &str, target: &KubeTarget, now: f64) -> Result<String> {
    let key = rkey(&target.region, &target.eks_cluster);
    let Some(c) = w.eks.get(&key) else {
        return Err(ProviderError::not_found(
            api,
            format!(
                "EKS cluster {} not found in {}; there is no Kubernetes API to call",
                target.eks_cluster, target.region
            ),
        ));
    };
    // The API server authenticates the caller's IAM principal through the cluster's access
    // entries (EKS user guide `grant-k8s-access`): an unmapped principal gets 401.
    let principal = crate::eks::control_plane_principal(&w.account);
    if c.life.phase(now) == Phase::Active && !c.admits(&principal) {
        return Err(ProviderError::new(
            api,
            ProviderErrorKind::AccessDenied,
            format!(
                "Unauthorized: the Kubernetes API of EKS cluster {} does not map {principal} (no access entry; \
                 authentication mode {})",
                c.name, c.authentication_mode
            ),
        ));
    }
    match c.life.phase(now) {
        Phase::Active => {}
        Phase::Creating => {
            return Err(ProviderError::new(
                api,
                ProviderErrorKind::Transient,
                format!("EKS cluster {} is still CREATING; its Kubernetes API endpoint is not reachable yet", c.name),
            ));
        }
        // No API and no objects: NotFound, so a cleanup treats the objects as gone.
        Phase::Failed(reason) => {
            return Err(ProviderError::not_found(
                api,
                format!("EKS cluster {} FAILED ({reason}); it has no Kubernetes API", c.name),
            ));
        }
        Phase::Deleting | Phase::Gone => {
            return Err(ProviderError::not_found(
                api,
                format!("EKS cluster {} is being deleted; its Kubernetes API is gone", c.name),
            ));
        }
    }
    if !w.kube.contains_key(&key) {
        return Err(ProviderError::not_found(api, format!("no Kubernetes API for EKS cluster {}", c.name)));
    }
    Ok(key)
}

pub(crate) fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// The PV a claim binds to, if any: named by the claim's `spec.volumeName` (and not pre-bound
/// to another claim), or pre-bound to the claim through `spec.claimRef`.
pub(crate) fn bound_volume<'a>(
    kw: &'a KubeWorld,
    ns: &str,
    claim: &str,
    volume_name: Option<&str>,
) -> Option<&'a Value> {
    let claim_ref_matches = |pv: &Value, allow_missing: bool| match pv.pointer("/spec/claimRef") {
        Some(cr) => str_at(cr, "/name") == Some(claim) && str_at(cr, "/namespace").unwrap_or("default") == ns,
        None => allow_missing,
    };
    let pvs = kw
        .objects
        .values()
        .map(|r| &r.object)
        .filter(|o| str_at(o, "/kind") == Some("PersistentVolume") && str_at(o, "/apiVersion") == Some("v1"));
    let mut pvs: Vec<&Value> = pvs.collect();
    if let Some(v) = volume_name {
        return pvs.into_iter().find(|pv| str_at(pv, "/metadata/name") == Some(v) && claim_ref_matches(pv, true));
    }
    pvs.retain(|pv| claim_ref_matches(pv, false));
    pvs.into_iter().next()
}
