//! What [`SimCloud`] answers for the serving controller's objects (pod proxies).

use super::*;
use crate::cloud::{SimCloud, SimError};

impl SimCloud {
    /// Sets the value of the metric behind the KEDA ScaledObject `namespace/scaled_object` of
    /// `target` from now on (the simulated Prometheus query's answer).
    pub fn set_scaling_metric(
        &self,
        target: &KubeTarget,
        namespace: &str,
        scaled_object: &str,
        value: f64,
    ) -> Result<(), SimError> {
        if !value.is_finite() || value < 0.0 {
            return Err(knob_error(format!("metric value must be a finite number ≥ 0, got {value}")));
        }
        self.admin(|w, now| {
            let kw = w
                .kube
                .get_mut(&rkey(&target.region, &target.eks_cluster))
                .ok_or_else(|| knob_error(format!("no Kubernetes API for EKS cluster {}", target.eks_cluster)))?;
            let so_key = obj_key("keda.sh/v1alpha1", "ScaledObject", Some(namespace), scaled_object);
            let so = kw
                .objects
                .get(&so_key)
                .map(|r| r.object.clone())
                .ok_or_else(|| knob_error(format!("ScaledObject {namespace}/{scaled_object} not found")))?;
            let target_name = so.pointer("/spec/scaleTargetRef/name").and_then(Value::as_str).unwrap_or_default();
            let dkey = obj_key("apps/v1", "Deployment", Some(namespace), target_name);
            attach_keda(kw, &so, now);
            if prometheus_error(kw, &so, now).is_some() {
                // KEDA cannot read the metric (no Prometheus answers at the trigger's address):
                // the value exists only in a Prometheus nobody reaches, so nothing scales.
                return Ok(());
            }
            let d = kw
                .objects
                .get_mut(&dkey)
                .ok_or_else(|| knob_error(format!("the target Deployment {namespace}/{target_name} does not exist")))?;
            if let Some(k) = d.serving.keda.as_mut() {
                k.samples.push((now, value));
            }
            Ok(())
        })
    }
}

fn knob_error(message: String) -> SimError {
    SimError::Rejected(instantstart_core::provider::ProviderError::new(
        "sim:SetScalingMetric",
        instantstart_core::provider::ProviderErrorKind::InvalidRequest,
        message,
    ))
}
