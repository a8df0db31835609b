//! `QuotaApi`: Availability Zones (EC2), HyperPod instance type offerings, and the HyperPod
//! "cluster usage" quotas (Service Quotas).
//!
//! HyperPod has no per-AZ offering API; an `ml.<type>` is reported in the AZs where EC2 offers
//! `<type>` (`DescribeInstanceTypeOfferings`), for SageMaker's `ClusterInstanceType` values
//! ([`CLUSTER_INSTANCE_TYPES`]). That is a necessary condition, not a capacity guarantee.
//!
//! The specs of those types are EC2's (`DescribeInstanceTypes`, the names without `ml.`,
//! filtered by name in chunks of [`NAMES_PER_REQUEST`] so a name EC2 does not know in the
//! region is simply absent instead of failing the call), cached per region for the life of the
//! process.
//!
//! [`QuotaApi::hyperpod_instance_quotas`] lists every `<HyperPod type> for cluster usage`
//! quota of the same table (no further request); other SageMaker quotas are left out.
//!
//! Quotas are looked up by name (`ml.p5.48xlarge for cluster usage`) among the applied quotas
//! of service `sagemaker`, then among the AWS defaults; both listings are cached per region
//! for the life of the process. A region without Service Quotas for SageMaker reports no
//! quota (`None`), and so does any failure to read them (with a warning, not cached): the
//! preflight then warns instead of blocking.

use crate::AwsProvider;
use crate::error::sdk_error;
use async_trait::async_trait;
use aws_sdk_ec2::types::{Filter, LocationType, NetworkCardInterfaceType};
use instantstart_core::instance_types::{CLUSTER_INSTANCE_TYPES, InstanceTypeInfo, ec2_name, is_cluster_instance_type};
use instantstart_core::provider::{
    AvailabilityZone, InstanceTypeOffering, ProviderErrorKind, QUOTA_SUFFIX, Quota, QuotaApi, Result,
};
use std::collections::HashMap;
use std::sync::Arc;

/// Most instance type names one EC2 filter carries here.
pub const NAMES_PER_REQUEST: usize = 100;

/// EC2 `instance-type` filters over SageMaker's `ClusterInstanceType` values (EC2 names), at
/// most [`NAMES_PER_REQUEST`] names each: one request per filter.
fn cluster_type_filters() -> Vec<Filter> {
    let names: Vec<String> = CLUSTER_INSTANCE_TYPES.iter().map(|t| ec2_name(t).to_string()).collect();
    names
        .chunks(NAMES_PER_REQUEST)
        .map(|chunk| Filter::builder().name("instance-type").set_values(Some(chunk.to_vec())).build())
        .collect()
}

/// Our specs of one type EC2 described: accelerators are its GPUs (kind `<maker>-<name>`) or
/// its Neuron devices (`aws-<name>`); EFA-only support is a network card that lists the
/// `efa-only` interface type.
pub fn specs_of(t: &aws_sdk_ec2::types::InstanceTypeInfo) -> Option<InstanceTypeInfo> {
    let name = format!("ml.{}", t.instance_type()?.as_str());
    let n = |v: Option<i32>| v.and_then(|v| u32::try_from(v).ok()).unwrap_or(0);
    let gpus = t.gpu_info().map(|g| g.gpus()).unwrap_or_default();
    let neuron = t.neuron_info().map(|g| g.neuron_devices()).unwrap_or_default();
    let (accelerators, accelerator) = if let Some(g) = gpus.first() {
        (
            gpus.iter().map(|g| n(g.count())).sum(),
            InstanceTypeInfo::accelerator_kind(g.manufacturer().unwrap_or("gpu"), g.name().unwrap_or_default()),
        )
    } else if let Some(d) = neuron.first() {
        (
            neuron.iter().map(|d| n(d.count())).sum(),
            InstanceTypeInfo::accelerator_kind("aws", d.name().unwrap_or_default()),
        )
    } else {
        (0, "none".to_string())
    };
    let network = t.network_info();
    let efa = network.and_then(|n| n.efa_supported()).unwrap_or(false);
    let efa_only = efa
        && network.is_some_and(|n| {
            n.network_cards().iter().any(|c| c.interface_types().contains(&NetworkCardInterfaceType::EfaOnly))
        });
    Some(InstanceTypeInfo {
        name,
        vcpus: n(t.v_cpu_info().and_then(|v| v.default_v_cpus())),
        memory_gib: t
            .memory_info()
            .and_then(|m| m.size_in_mib())
            .and_then(|m| u32::try_from(m / 1024).ok())
            .unwrap_or(0),
        accelerators,
        accelerator,
        efa_interfaces: if efa {
            n(network.and_then(|n| n.efa_info()).and_then(|e| e.maximum_efa_interfaces()))
        } else {
            0
        },
        efa_only_supported: efa_only,
    })
}

/// A quota's value as a count of instances (negative or not a number: 0).
fn quota_count(value: f64) -> u32 {
    if value.is_finite() && value >= 0.0 { value.min(f64::from(u32::MAX)) as u32 } else { 0 }
}

/// Name of the HyperPod cluster-usage quota of an instance type.
pub fn quota_name(instance_type: &str) -> String {
    format!("{instance_type}{QUOTA_SUFFIX}")
}

async fn quotas(p: &AwsProvider, region: &str) -> Result<crate::QuotaTable> {
    let mut cache = p.quota_cache().lock().await;
    if let Some(q) = cache.get(region) {
        return Ok(q.clone());
    }
    let c = p.region(region).await?;
    let mut map = HashMap::new();
    let defaults = c
        .quotas
        .list_aws_default_service_quotas()
        .service_code("sagemaker")
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| sdk_error("servicequotas:ListAWSDefaultServiceQuotas", e));
    let applied = c
        .quotas
        .list_service_quotas()
        .service_code("sagemaker")
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| sdk_error("servicequotas:ListServiceQuotas", e));
    let (defaults, applied) = match (unreported(defaults)?, unreported(applied)?) {
        (Some(d), Some(a)) => (d, a),
        // Unreadable: report "unknown" and ask again next time instead of caching the gap.
        _ => return Ok(Arc::new(HashMap::new())),
    };
    // Applied values override the defaults.
    for q in defaults.iter().chain(applied.iter()) {
        if let (Some(name), Some(code), Some(value)) = (q.quota_name(), q.quota_code(), q.value()) {
            map.insert(name.to_string(), (code.to_string(), value));
        }
    }
    let map = Arc::new(map);
    cache.insert(region.to_string(), map.clone());
    Ok(map)
}

/// A listing, with "not available" (no such service in the region) as empty, and any other
/// failure to read (access denied, an endpoint without Service Quotas, throttling) as `None`
/// with a warning: quotas then count as "unknown" (the preflight warns, creation proceeds,
/// and SageMaker's own `ResourceLimitExceeded` still maps to `QuotaExceeded`).
fn unreported<T>(r: Result<Vec<T>>) -> Result<Option<Vec<T>>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind == ProviderErrorKind::NotFound => Ok(Some(Vec::new())),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read Service Quotas; quota checks are reported as unknown");
            Ok(None)
        }
    }
}

#[async_trait]
impl QuotaApi for AwsProvider {
    async fn availability_zones(&self, region: &str) -> Result<Vec<AvailabilityZone>> {
        const API: &str = "ec2:DescribeAvailabilityZones";
        let c = self.region(region).await?;
        let out = c
            .ec2
            .describe_availability_zones()
            .filters(Filter::builder().name("zone-type").values("availability-zone").build())
            .filters(Filter::builder().name("state").values("available").build())
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        let mut zones: Vec<AvailabilityZone> = out
            .availability_zones()
            .iter()
            .filter_map(|z| {
                Some(AvailabilityZone {
                    name: z.zone_name()?.to_string(),
                    zone_id: z.zone_id().unwrap_or_default().to_string(),
                })
            })
            .collect();
        zones.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(zones)
    }

    async fn instance_type_offerings(&self, region: &str) -> Result<Vec<InstanceTypeOffering>> {
        const API: &str = "ec2:DescribeInstanceTypeOfferings";
        let c = self.region(region).await?;
        let mut offerings = Vec::new();
        for filter in cluster_type_filters() {
            let page: Vec<_> = c
                .ec2
                .describe_instance_type_offerings()
                .location_type(LocationType::AvailabilityZone)
                .filters(filter)
                .into_paginator()
                .items()
                .send()
                .try_collect()
                .await
                .map_err(|e| sdk_error(API, e))?;
            offerings.extend(page);
        }
        let mut out: Vec<InstanceTypeOffering> = offerings
            .iter()
            .filter_map(|o| {
                Some(InstanceTypeOffering {
                    instance_type: format!("ml.{}", o.instance_type()?.as_str()),
                    availability_zone: o.location()?.to_string(),
                })
            })
            .collect();
        out.sort_by(|a, b| (&a.availability_zone, &a.instance_type).cmp(&(&b.availability_zone, &b.instance_type)));
        Ok(out)
    }

    async fn instance_type_specs(&self, region: &str) -> Result<Vec<InstanceTypeInfo>> {
        const API: &str = "ec2:DescribeInstanceTypes";
        let mut cache = self.specs_cache().lock().await;
        if let Some(specs) = cache.get(region) {
            return Ok(specs.as_ref().clone());
        }
        let c = self.region(region).await?;
        let mut out = Vec::new();
        for filter in cluster_type_filters() {
            let described: Vec<_> = c
                .ec2
                .describe_instance_types()
                .filters(filter)
                .into_paginator()
                .items()
                .send()
                .try_collect()
                .await
                .map_err(|e| sdk_error(API, e))?;
            out.extend(described.iter().filter_map(specs_of));
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        cache.insert(region.to_string(), Arc::new(out.clone()));
        Ok(out)
    }

    async fn hyperpod_instance_quotas(&self, region: &str) -> Result<Vec<Quota>> {
        let all = quotas(self, region).await?;
        let mut out: Vec<Quota> = all
            .iter()
            .filter(|(name, _)| name.strip_suffix(QUOTA_SUFFIX).is_some_and(is_cluster_instance_type))
            .map(|(name, (code, value))| Quota { name: name.clone(), code: code.clone(), value: quota_count(*value) })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn hyperpod_instance_quota(&self, region: &str, instance_type: &str) -> Result<Option<Quota>> {
        let name = quota_name(instance_type);
        let all = quotas(self, region).await?;
        Ok(all.get(&name).map(|(code, value)| Quota {
            name: name.clone(),
            code: code.clone(),
            value: quota_count(*value),
        }))
    }
}
