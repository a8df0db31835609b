//! `NetworkApi`: VPCs with public and private subnets, NAT gateway provisioning time, an S3
//! gateway VPC endpoint on the private route table of every new VPC, compute subnets with
//! EC2's CIDR rules, and deletion guarded by what still uses the subnets and by VPC endpoints
//! that are not ours.
//!
//! # VPC endpoints
//!
//! EC2 refuses to delete a VPC that still has a VPC endpoint (`DependencyViolation`; Amazon
//! VPC user guide, "Delete your VPC": delete the endpoints first). `delete_network` deletes
//! the endpoints carrying the network's ownership tags (as the adapter does, counted as
//! `ec2:DeleteVpcEndpoints`) and refuses while any other endpoint remains
//! ([`SimCloud::seed_vpc_endpoint`] adds one).
//!
//! # Orphaned load balancers
//!
//! A load balancer whose Kubernetes `LoadBalancer` Service outlived the controller that made it
//! (the AWS Load Balancer Controller uninstalled, or the EKS cluster deleted, with the Service
//! still there) stays in the VPC ([`crate::kube::orphan_load_balancers`]); its network
//! interfaces make `DeleteSubnet` of its subnets and `DeleteVpc` fail with
//! `DependencyViolation`, as EKS's "Delete a cluster" page warns.

mod api;

use crate::base::Cx;
use crate::base::{Lifecycle, Phase};
use crate::catalog::{check_region, zone_index};
use crate::timings;
use crate::world::{SubnetRec, VpcEndpointRec, VpcRec, World};
use instantstart_core::provider::{
    CreateNetwork, CreateSubnet, Network, NetworkApi, ProviderError, ProviderErrorKind, ResourceState, Result, Subnet,
    TAG_CLUSTER, Tags, Vpc, is_owned,
};
use instantstart_core::subnet::SubnetRole;
use ipnet::Ipv4Net;

fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

fn invalid(api: &str, message: impl Into<String>) -> ProviderError {
    ProviderError::new(api, ProviderErrorKind::InvalidRequest, message)
}

/// EC2's rules for a subnet or VPC block: host bits zero, prefix /16–/28.
fn check_block(api: &str, cidr: &Ipv4Net, what: &str) -> Result<()> {
    if cidr.trunc() != *cidr {
        return Err(invalid(
            api,
            format!("InvalidParameterValue: {what} {cidr} has host bits set (did you mean {}?)", cidr.trunc()),
        ));
    }
    if !(16..=28).contains(&cidr.prefix_len()) {
        return Err(invalid(api, format!("InvalidParameterValue: {what} {cidr} must be between /16 and /28")));
    }
    Ok(())
}

fn check_az(api: &str, region: &str, az: &str) -> Result<()> {
    if zone_index(region, az).is_none() {
        return Err(invalid(
            api,
            format!(
                "InvalidParameterValue: Value ({az}) for parameter availabilityZone is invalid. Subnets can currently only be created in the Availability Zones of {region}"
            ),
        ));
    }
    Ok(())
}

fn with_name(tags: &Tags, name: &str) -> Tags {
    let mut t = tags.clone();
    t.insert("Name".into(), name.into());
    t
}

pub(crate) fn subnet_view(s: &SubnetRec) -> Subnet {
    Subnet {
        id: s.id.clone(),
        vpc_id: s.vpc_id.clone(),
        name: s.name.clone(),
        cidr: s.cidr,
        availability_zone: s.availability_zone.clone(),
        public: s.public,
        tags: s.tags.clone(),
    }
}

/// Role tag value of the S3 gateway endpoint (as the adapter tags it).
const S3_ENDPOINT_ROLE: &str = "s3-endpoint";

/// Whether an endpoint belongs to the network `v` (the VPC's cluster ownership tags).
fn endpoint_ours(v: &VpcRec, e: &VpcEndpointRec) -> bool {
    v.tags.get(TAG_CLUSTER).is_some_and(|c| is_owned(&e.tags, c))
}

fn network_view(w: &World, v: &VpcRec, now: f64) -> Network {
    let vpc_state = if v.life.is_deleting() { ResourceState::Deleting } else { ResourceState::Active };
    let state = match v.life.phase(now) {
        Phase::Failed(reason) => ResourceState::Failed { reason },
        _ => v.life.state(now),
    };
    Network {
        vpc: Vpc {
            id: v.id.clone(),
            name: v.name.clone(),
            cidrs: v.cidrs.clone(),
            state: vpc_state,
            tags: v.tags.clone(),
        },
        subnets: w.subnets.values().filter(|s| s.vpc_id == v.id).map(subnet_view).collect(),
        security_group_id: v.security_group_id.clone(),
        s3_endpoint_id: v
            .endpoints
            .iter()
            .find(|e| {
                endpoint_ours(v, e)
                    && e.tags.get("instantstart:network-role").map(String::as_str) == Some(S3_ENDPOINT_ROLE)
            })
            .map(|e| e.id.clone()),
        state,
    }
}

/// What uses a subnet: the EKS and HyperPod clusters that still exist (deleting ones included),
/// and the network interfaces of load balancers left behind by a Kubernetes `LoadBalancer`
/// Service that outlived its controller. EKS: "If you have active services in your cluster that
/// are associated with a load balancer, you must delete those services before deleting the
/// cluster so that the load balancers are deleted properly. Otherwise, you can have orphaned
/// resources in your VPC that prevent you from being able to delete the VPC"
/// (https://docs.aws.amazon.com/eks/latest/userguide/delete-cluster.html); an FSx file system
/// keeps network interfaces in its subnet until it is deleted; EC2 refuses
/// `DeleteSubnet` and `DeleteVpc` with `DependencyViolation` while network interfaces remain
/// (https://docs.aws.amazon.com/vpc/latest/userguide/delete-vpc.html).
fn subnet_users(w: &World, subnet_id: &str, now: f64) -> Vec<String> {
    let mut users: Vec<String> = w
        .eks
        .values()
        .filter(|c| c.life.exists(now) && c.subnet_ids.iter().any(|s| s == subnet_id))
        .map(|c| format!("EKS cluster {}", c.name))
        .collect();
    users.extend(
        w.hyperpod
            .values()
            .filter(|h| h.life.exists(now) && h.groups.iter().any(|g| g.subnet_id == subnet_id))
            .map(|h| format!("HyperPod cluster {}", h.name)),
    );
    users.extend(
        w.file_systems
            .values()
            .filter(|f| f.subnet_id == subnet_id && f.lifecycle(now).is_some())
            .map(|f| format!("the network interfaces of FSx file system {}", f.id)),
    );
    if let Some(v) = w.subnets.get(subnet_id).and_then(|s| w.vpcs.get(&s.vpc_id)) {
        users.extend(v.load_balancers.iter().filter(|lb| lb.subnet_ids.iter().any(|s| s == subnet_id)).map(|lb| {
            format!(
                "the network interfaces of load balancer {} (left by Service {} of EKS cluster {}, deleted after its controller)",
                lb.dns_name, lb.service, lb.eks_cluster
            )
        }));
    }
    users
}

/// Why instances in the private subnet `subnet_id` have no route to the internet yet: the
/// subnet is in a VPC InstantStart created (the ones with a NAT gateway, and with it the EFA
/// security group) whose NAT gateway is not `available` — pending (EC2 `NatGateway.State`:
/// "not ready to process traffic"), failed or being deleted. Public subnets, unknown subnets
/// and VPCs made outside InstantStart (seeded: routed as their owner set them up) give `None`.
pub(crate) fn egress_unavailable(w: &World, subnet_id: &str, now: f64) -> Option<String> {
    let s = w.subnets.get(subnet_id).filter(|s| !s.public)?;
    let v = w.vpcs.get(&s.vpc_id)?;
    v.security_group_id.as_ref()?;
    match v.life.phase(now) {
        Phase::Active => None,
        Phase::Creating => Some(format!("the NAT gateway of {} is still pending", v.id)),
        Phase::Failed(reason) => Some(reason),
        Phase::Deleting | Phase::Gone => Some(format!("the NAT gateway of {} is being deleted", v.id)),
    }
}

/// Creates a network: counted sub-calls and the NAT gateway wait unless `instant` (seeding).
fn create_network(w: &mut World, req: &CreateNetwork, cx: &Cx, instant: bool) -> Result<Network> {
    const API: &str = "ec2:CreateVpc";
    check_region(API, &req.region)?;
    if req.name.is_empty() {
        return Err(invalid(API, "the network needs a name"));
    }
    check_block(API, &req.cidr, "VPC CIDR block")?;
    for (i, s) in req.subnets.iter().enumerate() {
        check_block(API, &s.cidr, "subnet CIDR block")?;
        check_az(API, &req.region, &s.availability_zone)?;
        if !req.cidr.contains(&s.cidr) {
            return Err(invalid(
                API,
                format!("InvalidSubnet.Range: The CIDR '{}' is invalid for VPC {}", s.cidr, req.cidr),
            ));
        }
        if let Some(o) = req.subnets[..i].iter().find(|o| overlaps(&o.cidr, &s.cidr)) {
            return Err(invalid(
                API,
                format!("InvalidSubnet.Conflict: The CIDR '{}' conflicts with '{}'", s.cidr, o.cidr),
            ));
        }
    }
    if let Some(v) = w
        .vpcs
        .values()
        .find(|v| v.region == req.region && v.name.as_deref() == Some(req.name.as_str()) && v.life.exists(cx.now))
    {
        return Err(ProviderError::new(
            API,
            ProviderErrorKind::AlreadyExists,
            format!("a VPC named {} already exists in {} ({})", req.name, req.region, v.id),
        ));
    }
    let id = w.id("vpc");
    let mut life = Lifecycle::new(cx.now, if instant { 0.0 } else { timings::NETWORK_CREATE });
    if let Some(reason) = &cx.resource_fails {
        let nat = w.id("nat");
        life.fail_after(
            timings::NETWORK_CREATE * timings::FAILURE_SHARE,
            format!("NAT gateway {nat} failed: {reason}"),
        );
    }
    let sg = if instant { None } else { Some(w.id("sg")) };
    // A new network's S3 gateway endpoint on its private route table (seeded, "existing"
    // networks have none: InstantStart creates none in a VPC it did not make).
    let endpoints = if instant {
        vec![]
    } else {
        let mut tags = with_name(&req.tags, &format!("{}-{S3_ENDPOINT_ROLE}", req.name));
        tags.insert("instantstart:network-role".into(), S3_ENDPOINT_ROLE.into());
        vec![VpcEndpointRec {
            id: w.id("vpce"),
            service_name: format!("com.amazonaws.{}.s3", req.region),
            endpoint_type: "Gateway".into(),
            route_table_ids: vec![w.id("rtb")],
            tags,
        }]
    };
    for s in &req.subnets {
        let (role, public) = match s.role {
            SubnetRole::Public => ("public", true),
            SubnetRole::Private => ("private", false),
            SubnetRole::Compute => ("compute", false),
        };
        let name = format!("{}-{role}-{}", req.name, s.availability_zone);
        let mut tags = with_name(&req.tags, &name);
        let elb = if public { "kubernetes.io/role/elb" } else { "kubernetes.io/role/internal-elb" };
        tags.insert(elb.into(), "1".into());
        let sid = w.id("subnet");
        w.subnets.insert(
            sid.clone(),
            SubnetRec {
                id: sid,
                vpc_id: id.clone(),
                region: req.region.clone(),
                name: Some(name),
                cidr: s.cidr,
                availability_zone: s.availability_zone.clone(),
                public,
                tags,
            },
        );
    }
    w.vpcs.insert(
        id.clone(),
        VpcRec {
            id: id.clone(),
            region: req.region.clone(),
            name: Some(req.name.clone()),
            cidrs: vec![req.cidr],
            tags: with_name(&req.tags, &req.name),
            security_group_id: sg,
            life,
            endpoints,
            load_balancers: Vec::new(),
        },
    );
    if !instant {
        let public = req.subnets.iter().filter(|s| s.role == SubnetRole::Public).count() as u64;
        w.count_n("ec2:CreateSubnet", req.subnets.len() as u64);
        w.count("ec2:CreateInternetGateway");
        w.count("ec2:AttachInternetGateway");
        w.count("ec2:AllocateAddress");
        w.count("ec2:CreateNatGateway");
        w.count_n("ec2:CreateRouteTable", 2);
        w.count_n("ec2:AssociateRouteTable", req.subnets.len() as u64);
        w.count_n("ec2:ModifySubnetAttribute", public);
        w.count("ec2:CreateSecurityGroup");
        w.count("ec2:AuthorizeSecurityGroupIngress");
        w.count("ec2:CreateVpcEndpoint");
    }
    let v = w.vpcs.get(&id).ok_or_else(|| invalid(API, "internal: VPC vanished"))?;
    Ok(network_view(w, v, cx.now))
}

fn find_vpc<'a>(w: &'a World, api: &str, region: &str, vpc_id: &str) -> Result<&'a VpcRec> {
    w.vpcs.get(vpc_id).filter(|v| v.region == region).ok_or_else(|| {
        ProviderError::not_found(api, format!("InvalidVpcID.NotFound: The vpc ID '{vpc_id}' does not exist"))
    })
}
