//! `QuotaApi`: the Availability Zones, instance type offerings, instance type specs and HyperPod
//! quotas of the simulated account, from the static facts of [`crate::catalog`] and the quotas
//! raised in the world ([`crate::SimCloud::set_quota`]).

use crate::base::stable_hash;
use crate::catalog::{availability_zones, check_region, offered, quota_name};
use crate::cloud::SimCloud;
use async_trait::async_trait;
use instantstart_core::instance_types::{CLUSTER_INSTANCE_TYPES, InstanceTypeInfo, is_cluster_instance_type};
use instantstart_core::provider::{AvailabilityZone, InstanceTypeOffering, Quota, QuotaApi, Result};

fn quota_code(instance_type: &str) -> String {
    format!("L-{:08X}", stable_hash(&["quota", instance_type]) as u32)
}

#[async_trait]
impl QuotaApi for SimCloud {
    async fn availability_zones(&self, region: &str) -> Result<Vec<AvailabilityZone>> {
        const API: &str = "ec2:DescribeAvailabilityZones";
        self.read(API, |_, _| {
            check_region(API, region)?;
            Ok(availability_zones(region))
        })
    }

    async fn instance_type_offerings(&self, region: &str) -> Result<Vec<InstanceTypeOffering>> {
        const API: &str = "ec2:DescribeInstanceTypeOfferings";
        self.read(API, |_, _| {
            check_region(API, region)?;
            let mut out = Vec::new();
            for az in availability_zones(region) {
                for t in CLUSTER_INSTANCE_TYPES.iter().filter(|t| offered(region, &az.name, t)) {
                    out.push(InstanceTypeOffering { instance_type: t.to_string(), availability_zone: az.name.clone() });
                }
            }
            Ok(out)
        })
    }

    async fn hyperpod_instance_quota(&self, region: &str, instance_type: &str) -> Result<Option<Quota>> {
        const API: &str = "servicequotas:GetServiceQuota";
        self.read(API, |w, _| {
            check_region(API, region)?;
            Ok(is_cluster_instance_type(instance_type).then(|| Quota {
                name: quota_name(instance_type),
                code: quota_code(instance_type),
                value: w.quota(region, instance_type),
            }))
        })
    }

    async fn hyperpod_instance_quotas(&self, region: &str) -> Result<Vec<Quota>> {
        const API: &str = "servicequotas:ListServiceQuotas";
        self.read(API, |w, _| {
            check_region(API, region)?;
            let mut out: Vec<Quota> = CLUSTER_INSTANCE_TYPES
                .iter()
                .map(|t| Quota { name: quota_name(t), code: quota_code(t), value: w.quota(region, t) })
                .collect();
            out.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(out)
        })
    }

    async fn instance_type_specs(&self, region: &str) -> Result<Vec<InstanceTypeInfo>> {
        const API: &str = "ec2:DescribeInstanceTypes";
        self.read(API, |_, _| {
            check_region(API, region)?;
            Ok(crate::ec2_specs::all().cloned().collect())
        })
    }
}
