//! `NetworkApi` for [`SimCloud`] (and its network seeding helpers): each call goes through the
//! cloud's pipeline, then the rules of [`crate::network`].

use super::*;
use crate::cloud::{SimCloud, SimError};
use async_trait::async_trait;

#[async_trait]
impl NetworkApi for SimCloud {
    async fn find_vpc(&self, region: &str, name: &str) -> Result<Option<Vpc>> {
        self.read("ec2:DescribeVpcs", |w, cx| {
            Ok(w.vpcs
                .values()
                .find(|v| v.region == region && v.name.as_deref() == Some(name))
                .map(|v| network_view(w, v, cx.now).vpc))
        })
    }

    async fn describe_network(&self, region: &str, vpc_id: &str) -> Result<Network> {
        const API: &str = "ec2:DescribeVpcs";
        self.read(API, |w, cx| Ok(network_view(w, find_vpc(w, API, region, vpc_id)?, cx.now)))
    }

    async fn create_network(&self, req: &CreateNetwork) -> Result<Network> {
        self.write("ec2:CreateVpc", |w, cx| create_network(w, req, cx, false))
    }

    async fn create_subnet(&self, req: &CreateSubnet) -> Result<Subnet> {
        const API: &str = "ec2:CreateSubnet";
        self.write(API, |w, _| {
            let vpc = find_vpc(w, API, &req.region, &req.vpc_id)?;
            if vpc.life.is_deleting() {
                return Err(ProviderError::new(
                    API,
                    ProviderErrorKind::Conflict,
                    format!("IncorrectState: VPC {} is being deleted", vpc.id),
                ));
            }
            check_block(API, &req.cidr, "subnet CIDR block")?;
            check_az(API, &req.region, &req.availability_zone)?;
            if !vpc.cidrs.iter().any(|c| c.contains(&req.cidr)) {
                let blocks: Vec<String> = vpc.cidrs.iter().map(ToString::to_string).collect();
                return Err(invalid(
                    API,
                    format!(
                        "InvalidSubnet.Range: The CIDR '{}' is invalid: it is outside the VPC's CIDR blocks ({})",
                        req.cidr,
                        blocks.join(", ")
                    ),
                ));
            }
            let siblings = || w.subnets.values().filter(|s| s.vpc_id == req.vpc_id);
            if let Some(o) = siblings().find(|s| overlaps(&s.cidr, &req.cidr)) {
                return Err(invalid(
                    API,
                    format!(
                        "InvalidSubnet.Conflict: The CIDR '{}' conflicts with another subnet ({} {})",
                        req.cidr, o.id, o.cidr
                    ),
                ));
            }
            if let Some(o) = siblings().find(|s| s.name.as_deref() == Some(req.name.as_str())) {
                return Err(ProviderError::new(
                    API,
                    ProviderErrorKind::AlreadyExists,
                    format!("a subnet named {} already exists in {} ({})", req.name, req.vpc_id, o.id),
                ));
            }
            let id = w.id("subnet");
            let rec = SubnetRec {
                id: id.clone(),
                vpc_id: req.vpc_id.clone(),
                region: req.region.clone(),
                name: Some(req.name.clone()),
                cidr: req.cidr,
                availability_zone: req.availability_zone.clone(),
                public: false,
                tags: with_name(&req.tags, &req.name),
            };
            let view = subnet_view(&rec);
            w.subnets.insert(id, rec);
            w.count("ec2:AssociateRouteTable");
            Ok(view)
        })
    }

    async fn delete_subnet(&self, region: &str, subnet_id: &str) -> Result<()> {
        const API: &str = "ec2:DeleteSubnet";
        self.write(API, |w, cx| {
            if w.subnets.get(subnet_id).is_none_or(|s| s.region != region) {
                return Err(ProviderError::not_found(API, format!("InvalidSubnetID.NotFound: The subnet ID '{subnet_id}' does not exist")));
            }
            let users = subnet_users(w, subnet_id, cx.now);
            if !users.is_empty() {
                return Err(ProviderError::new(
                    API,
                    ProviderErrorKind::Conflict,
                    format!("DependencyViolation: The subnet '{subnet_id}' has dependencies and cannot be deleted (used by {})", users.join(", ")),
                ));
            }
            w.subnets.remove(subnet_id);
            Ok(())
        })
    }

    async fn delete_network(&self, region: &str, vpc_id: &str) -> Result<()> {
        const API: &str = "ec2:DeleteVpc";
        self.write(API, |w, cx| {
            let vpc = find_vpc(w, API, region, vpc_id)?;
            if vpc.life.is_deleting() {
                return Ok(());
            }
            let mut users: Vec<String> = Vec::new();
            for s in w.subnets.values().filter(|s| s.vpc_id == vpc_id) {
                for u in subnet_users(w, &s.id, cx.now) {
                    if !users.contains(&u) {
                        users.push(u);
                    }
                }
            }
            if !users.is_empty() {
                return Err(ProviderError::new(
                    API,
                    ProviderErrorKind::Conflict,
                    format!("DependencyViolation: The vpc '{vpc_id}' has dependencies and cannot be deleted (subnets used by {})", users.join(", ")),
                ));
            }
            // Endpoints that are not ours stay, and with them the VPC.
            let foreign: Vec<String> =
                vpc.endpoints.iter().filter(|e| !endpoint_ours(vpc, e)).map(|e| e.id.clone()).collect();
            if !foreign.is_empty() {
                return Err(ProviderError::new(
                    API,
                    ProviderErrorKind::Conflict,
                    format!(
                        "DependencyViolation: The vpc '{vpc_id}' has dependencies and cannot be deleted (VPC endpoints {} are not InstantStart's; delete them first)",
                        foreign.join(", ")
                    ),
                ));
            }
            let ours = vpc.endpoints.len() as u64;
            let subnets = w.subnets.values().filter(|s| s.vpc_id == vpc_id).count() as u64;
            let had_nat = vpc.security_group_id.is_some();
            if let Some(v) = w.vpcs.get_mut(vpc_id) {
                v.endpoints.clear();
                v.life.start_deleting(cx.now, timings::NETWORK_DELETE);
            }
            if ours > 0 {
                w.count("ec2:DeleteVpcEndpoints");
            }
            w.count_n("ec2:DeleteSubnet", subnets);
            if had_nat {
                w.count("ec2:DeleteNatGateway");
                w.count("ec2:DeleteInternetGateway");
                w.count("ec2:DeleteSecurityGroup");
            }
            Ok(())
        })
    }
}

impl SimCloud {
    /// Adds an existing, Active network (as if created earlier, outside InstantStart) without
    /// counting calls: a VPC named `req.name` with the planned subnets (named
    /// `<name>-<role>-<az>`) and no EFA security group. For the "existing VPC" path.
    pub fn seed_network(&self, req: &CreateNetwork) -> Result<Network, SimError> {
        self.admin(|w, now| Ok(create_network(w, req, &Cx { now, resource_fails: None }, true)?))
    }

    /// DNS names of the load balancers left behind in VPC `vpc_id` by `LoadBalancer` Services
    /// that outlived their controller (empty for an unknown VPC). Not an API call: for tests.
    pub fn orphaned_load_balancers(&self, vpc_id: &str) -> Vec<String> {
        self.lock()
            .world
            .vpcs
            .get(vpc_id)
            .map(|v| v.load_balancers.iter().map(|lb| lb.dns_name.clone()).collect())
            .unwrap_or_default()
    }

    /// Adds a `Gateway` VPC endpoint for `service_name` to a VPC, as if someone created it
    /// outside InstantStart (with `tags`); returns its id.
    pub fn seed_vpc_endpoint(
        &self,
        region: &str,
        vpc_id: &str,
        service_name: &str,
        tags: Tags,
    ) -> Result<String, SimError> {
        self.admin(|w, _| {
            let id = w.id("vpce");
            let rtb = w.id("rtb");
            let v =
                w.vpcs.get_mut(vpc_id).filter(|v| v.region == region).ok_or_else(|| {
                    ProviderError::not_found("ec2:CreateVpcEndpoint", format!("VPC {vpc_id} not found"))
                })?;
            v.endpoints.push(VpcEndpointRec {
                id: id.clone(),
                service_name: service_name.into(),
                endpoint_type: "Gateway".into(),
                route_table_ids: vec![rtb],
                tags,
            });
            Ok(id)
        })
    }
}
