//! `NetworkApi` on EC2: a VPC with a public and a private subnet per AZ, an internet gateway,
//! one NAT gateway, public and private route tables, the EFA security group, an S3 gateway VPC
//! endpoint on the private route table, and /20 compute subnets routed like the private
//! subnets.
//!
//! # Idempotency
//!
//! Every piece carries a `Name` tag derived from the network name, a role tag
//! ([`TAG_ROLE`]) and the ownership tags, all applied atomically at creation
//! (`TagSpecifications`). [`NetworkApi::create_network`] looks each piece up first and creates
//! only what is missing, so calling it again after an interruption completes the network
//! instead of duplicating it. When everything is in place the VPC gets the completion tag
//! [`TAG_NETWORK`]`=complete`. Until then [`NetworkApi::find_vpc`] does not report our own
//! VPC (so the engine's observe-before-submit calls `create_network` again, which resumes),
//! and [`NetworkApi::describe_network`] reports it as `Creating`.
//!
//! # NAT gateway
//!
//! The private route table's default route points at the NAT gateway right after the gateway
//! was requested; while the gateway is `pending`, `describe_network` reports the network as
//! `Creating`, and a `failed` gateway as `Failed` with EC2's failure message. If EC2 refuses a
//! route to the pending gateway, `create_network` waits for it (bounded) and retries.
//!
//! # Deletion
//!
//! [`NetworkApi::delete_network`] removes, in order: NAT gateways (waiting until deleted),
//! their Elastic IPs, the internet gateway, our VPC endpoints (waiting until deleted: EC2
//! refuses to delete a VPC that still has one, `DependencyViolation`), our subnets, our route
//! tables (and any association left), our security groups, the VPC. Only pieces carrying our ownership tags are touched. Network interfaces
//! left behind by EKS or HyperPod take a while to disappear, so `DependencyViolation` is
//! retried for a bounded time and then reported as `Transient`.
//!
//! # Limits
//!
//! One NAT gateway per VPC (in the first AZ's public subnet): cheaper, but private subnets of
//! other AZs lose egress if that AZ fails.
//!
//! # S3 gateway endpoint
//!
//! A new VPC gets a `Gateway` endpoint for `com.amazonaws.<region>.s3` attached to the private
//! route table (compute subnets join that table too), tagged like every other piece (role
//! `s3-endpoint`): the nodes' and pods' traffic to the shared bucket (Mountpoint, model
//! downloads, checkpoints) stays off the NAT gateway, which would otherwise carry and bill
//! every byte (Amazon VPC user guide, "Gateway endpoints for Amazon S3"). Gateway endpoints
//! cost nothing. An existing VPC is left as it is.

use crate::error::{invalid, malformed, sdk_error};
use crate::tags::{self, NAME, with_name};
use crate::{AwsProvider, Regional};
use async_trait::async_trait;
use aws_sdk_ec2::Client as Ec2;
use aws_sdk_ec2::types::{
    AttributeBooleanValue, DomainType, Filter, IpPermission, NatGatewayState, ResourceType, RouteTable,
    UserIdGroupPair, VpcEndpoint, VpcEndpointType, VpcState,
};
use instantstart_core::names::DerivedNames;
use instantstart_core::provider::{
    CreateNetwork, CreateSubnet, MANAGED_BY, Network, NetworkApi, ProviderError, ProviderErrorKind, ResourceState,
    Result, Subnet, TAG_CLUSTER, TAG_MANAGED_BY, Tags, Vpc, is_owned,
};
use instantstart_core::subnet::SubnetRole;
use ipnet::Ipv4Net;
use std::time::Duration;

/// Tag key naming what a network piece is for (`public`, `private`, `compute`, `igw`, `nat`,
/// `nat-eip`, `public-rt`, `private-rt`, `efa-sg`, `s3-endpoint`).
pub const TAG_ROLE: &str = "instantstart:network-role";
/// Tag key set on the VPC (value `complete`) once every piece of the network exists.
pub const TAG_NETWORK: &str = "instantstart:network";
const COMPLETE: &str = "complete";
const DEFAULT_ROUTE: &str = "0.0.0.0/0";

/// How long to wait for a NAT gateway (to become routable, or to be deleted).
const NAT_WAIT: Duration = Duration::from_secs(600);
/// How long to retry deletions refused with `DependencyViolation`.
const DEPENDENCY_WAIT: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_secs(5);

/// Role tag of the S3 gateway endpoint.
const S3_ENDPOINT_ROLE: &str = "s3-endpoint";

/// Service name of the S3 gateway endpoint in `region`.
pub fn s3_endpoint_service(region: &str) -> String {
    format!("com.amazonaws.{region}.s3")
}

/// The endpoint's state in lower case (EC2 answers `available`, the model spells `Available`).
fn endpoint_state(e: &VpcEndpoint) -> String {
    e.state().map(|s| s.as_str().to_ascii_lowercase()).unwrap_or_default()
}

/// Whether the endpoint still counts (not deleted, deleting, failed, rejected or expired).
fn endpoint_live(e: &VpcEndpoint) -> bool {
    !matches!(endpoint_state(e).as_str(), "deleted" | "deleting" | "failed" | "rejected" | "expired")
}

fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

fn role_tags(base: &Tags, name: &str, role: &str) -> Tags {
    let mut t = with_name(base, name);
    t.insert(TAG_ROLE.into(), role.into());
    t
}

fn role_of(tags: &Tags) -> Option<&str> {
    tags.get(TAG_ROLE).map(String::as_str)
}

/// The InstantStart cluster named by a tag set.
fn cluster_of(tags: &Tags) -> Option<&str> {
    tags.get(TAG_CLUSTER).map(String::as_str)
}

fn is_ours(tags: &Tags) -> bool {
    tags.get(TAG_MANAGED_BY).map(String::as_str) == Some(MANAGED_BY)
}

/// Whether `tags` (of an existing piece) say it belongs to the cluster `wanted` tags name.
fn owned_like(tags: &Tags, wanted: &Tags) -> bool {
    match cluster_of(wanted) {
        Some(c) => is_owned(tags, c),
        None => is_ours(tags),
    }
}

fn foreign(api: &str, what: &str) -> ProviderError {
    ProviderError::new(
        api,
        ProviderErrorKind::AlreadyExists,
        format!("{what} already exists but is not tagged as InstantStart's for this cluster"),
    )
}

fn parse_cidr(api: &str, s: Option<&str>) -> Result<Ipv4Net> {
    let s = s.ok_or_else(|| malformed(api, "missing CIDR block"))?;
    s.parse().map_err(|_| malformed(api, &format!("CIDR block {s:?}")))
}

/// Everything of one VPC the adapter reasons about.
struct Inventory {
    vpc: aws_sdk_ec2::types::Vpc,
    subnets: Vec<aws_sdk_ec2::types::Subnet>,
    route_tables: Vec<RouteTable>,
    nats: Vec<aws_sdk_ec2::types::NatGateway>,
    security_groups: Vec<aws_sdk_ec2::types::SecurityGroup>,
    endpoints: Vec<VpcEndpoint>,
}

impl Inventory {
    fn vpc_id(&self) -> &str {
        self.vpc.vpc_id().unwrap_or_default()
    }

    fn vpc_tags(&self) -> Tags {
        tags::from_ec2(self.vpc.tags())
    }

    fn subnet_named(&self, name: &str) -> Option<&aws_sdk_ec2::types::Subnet> {
        self.subnets.iter().find(|s| tags::from_ec2(s.tags()).get(NAME).map(String::as_str) == Some(name))
    }

    /// Our live S3 gateway endpoint (of `cluster`'s network, when the VPC names one).
    fn s3_endpoint(&self, cluster: Option<&str>) -> Option<&VpcEndpoint> {
        self.endpoints.iter().find(|e| {
            let t = tags::from_ec2(e.tags());
            endpoint_live(e)
                && role_of(&t) == Some(S3_ENDPOINT_ROLE)
                && is_ours(&t)
                && cluster.is_none_or(|c| is_owned(&t, c))
        })
    }

    fn route_table_named(&self, name: &str) -> Option<&RouteTable> {
        self.route_tables.iter().find(|r| tags::from_ec2(r.tags()).get(NAME).map(String::as_str) == Some(name))
    }

    fn route_table_with_role(&self, role: &str, cluster: Option<&str>) -> Option<&RouteTable> {
        self.route_tables.iter().find(|r| {
            let t = tags::from_ec2(r.tags());
            role_of(&t) == Some(role) && cluster.is_none_or(|c| is_owned(&t, c))
        })
    }

    /// Our live NAT gateway named `name` (pending or available), else the latest failed one.
    fn nat_named(&self, name: &str) -> Option<&aws_sdk_ec2::types::NatGateway> {
        let named =
            || self.nats.iter().filter(|n| tags::from_ec2(n.tags()).get(NAME).map(String::as_str) == Some(name));
        named()
            .find(|n| matches!(n.state(), Some(NatGatewayState::Pending | NatGatewayState::Available)))
            .or_else(|| named().rfind(|n| n.state() == Some(&NatGatewayState::Failed)))
    }

    fn security_group_named(&self, group_name: &str) -> Option<&aws_sdk_ec2::types::SecurityGroup> {
        self.security_groups.iter().find(|g| g.group_name() == Some(group_name))
    }

    /// The route table a subnet uses: its explicit association, else the VPC's main table.
    fn route_table_of(&self, subnet_id: &str) -> Option<&RouteTable> {
        self.route_tables
            .iter()
            .find(|r| r.associations().iter().any(|a| a.subnet_id() == Some(subnet_id)))
            .or_else(|| self.route_tables.iter().find(|r| r.associations().iter().any(|a| a.main() == Some(true))))
    }

    fn is_public(&self, subnet_id: &str) -> bool {
        self.route_table_of(subnet_id).is_some_and(|r| {
            r.routes().iter().any(|x| {
                x.destination_cidr_block() == Some(DEFAULT_ROUTE)
                    && x.gateway_id().is_some_and(|g| g.starts_with("igw-"))
            })
        })
    }
}

async fn describe_vpc(ec2: &Ec2, vpc_id: &str) -> Result<aws_sdk_ec2::types::Vpc> {
    const API: &str = "ec2:DescribeVpcs";
    let out = ec2.describe_vpcs().vpc_ids(vpc_id).send().await.map_err(|e| sdk_error(API, e))?;
    out.vpcs().first().cloned().ok_or_else(|| {
        ProviderError::not_found(API, format!("InvalidVpcID.NotFound: The vpc ID '{vpc_id}' does not exist"))
    })
}

async fn inventory(ec2: &Ec2, vpc_id: &str) -> Result<Inventory> {
    let vpc = describe_vpc(ec2, vpc_id).await?;
    let subnets = ec2
        .describe_subnets()
        .filters(filter("vpc-id", vpc_id))
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| sdk_error("ec2:DescribeSubnets", e))?;
    let route_tables = ec2
        .describe_route_tables()
        .filters(filter("vpc-id", vpc_id))
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| sdk_error("ec2:DescribeRouteTables", e))?;
    let nats = ec2
        .describe_nat_gateways()
        .filter(filter("vpc-id", vpc_id))
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| sdk_error("ec2:DescribeNatGateways", e))?;
    let security_groups = ec2
        .describe_security_groups()
        .filters(filter("vpc-id", vpc_id))
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| sdk_error("ec2:DescribeSecurityGroups", e))?;
    let endpoints = ec2
        .describe_vpc_endpoints()
        .filters(filter("vpc-id", vpc_id))
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| sdk_error("ec2:DescribeVpcEndpoints", e))?;
    Ok(Inventory { vpc, subnets, route_tables, nats, security_groups, endpoints })
}

fn vpc_view(api: &str, v: &aws_sdk_ec2::types::Vpc) -> Result<Vpc> {
    let tags = tags::from_ec2(v.tags());
    let mut cidrs: Vec<Ipv4Net> = v
        .cidr_block_association_set()
        .iter()
        .filter(|a| a.cidr_block_state().and_then(|s| s.state()).is_none_or(|s| s.as_str() == "associated"))
        .filter_map(|a| a.cidr_block().and_then(|c| c.parse().ok()))
        .collect();
    if cidrs.is_empty() {
        cidrs.push(parse_cidr(api, v.cidr_block())?);
    }
    Ok(Vpc {
        id: v.vpc_id().ok_or_else(|| malformed(api, "VPC without id"))?.to_string(),
        name: tags.get(NAME).cloned(),
        cidrs,
        state: match v.state() {
            Some(VpcState::Pending) => ResourceState::Creating,
            _ => ResourceState::Active,
        },
        tags,
    })
}

fn subnet_view(api: &str, s: &aws_sdk_ec2::types::Subnet, public: bool) -> Result<Subnet> {
    let tags = tags::from_ec2(s.tags());
    Ok(Subnet {
        id: s.subnet_id().ok_or_else(|| malformed(api, "subnet without id"))?.to_string(),
        vpc_id: s.vpc_id().unwrap_or_default().to_string(),
        name: tags.get(NAME).cloned(),
        cidr: parse_cidr(api, s.cidr_block())?,
        availability_zone: s.availability_zone().unwrap_or_default().to_string(),
        public,
        tags,
    })
}

/// The network's overall state: our networks are `Active` only once complete and their NAT
/// gateway is available.
fn network_state(inv: &Inventory) -> ResourceState {
    let vtags = inv.vpc_tags();
    if inv.vpc.state() == Some(&VpcState::Pending) {
        return ResourceState::Creating;
    }
    if !is_ours(&vtags) {
        return ResourceState::Active;
    }
    if vtags.get(TAG_NETWORK).map(String::as_str) != Some(COMPLETE) {
        return ResourceState::Creating;
    }
    let ours = |n: &&aws_sdk_ec2::types::NatGateway| {
        let t = tags::from_ec2(n.tags());
        role_of(&t) == Some("nat") && cluster_of(&vtags).is_none_or(|c| is_owned(&t, c))
    };
    let nats: Vec<_> = inv.nats.iter().filter(ours).collect();
    if nats.iter().any(|n| n.state() == Some(&NatGatewayState::Available)) {
        return ResourceState::Active;
    }
    if nats.iter().any(|n| n.state() == Some(&NatGatewayState::Pending)) {
        return ResourceState::Creating;
    }
    if let Some(n) = nats.iter().rev().find(|n| n.state() == Some(&NatGatewayState::Failed)) {
        return ResourceState::Failed {
            reason: format!(
                "NAT gateway {} failed: {}",
                n.nat_gateway_id().unwrap_or_default(),
                n.failure_message().unwrap_or("no reason given")
            ),
        };
    }
    if nats.iter().any(|n| n.state() == Some(&NatGatewayState::Deleting)) {
        return ResourceState::Deleting;
    }
    ResourceState::Failed { reason: "the network's NAT gateway is missing".into() }
}

fn network_view(inv: &Inventory) -> Result<Network> {
    const API: &str = "ec2:DescribeVpcs";
    let vtags = inv.vpc_tags();
    let subnets = inv
        .subnets
        .iter()
        .map(|s| subnet_view(API, s, inv.is_public(s.subnet_id().unwrap_or_default())))
        .collect::<Result<Vec<_>>>()?;
    let security_group_id = inv
        .security_groups
        .iter()
        .find(|g| {
            let t = tags::from_ec2(g.tags());
            role_of(&t) == Some("efa-sg") && cluster_of(&vtags).is_none_or(|c| is_owned(&t, c))
        })
        .and_then(|g| g.group_id().map(str::to_string));
    let s3_endpoint_id = inv.s3_endpoint(cluster_of(&vtags)).and_then(|e| e.vpc_endpoint_id().map(str::to_string));
    Ok(Network { vpc: vpc_view(API, &inv.vpc)?, subnets, security_group_id, s3_endpoint_id, state: network_state(inv) })
}

/// Waits until `check` returns `Some`, polling every [`POLL`], for at most `limit`.
async fn wait_until<T, F, Fut>(api: &str, what: &str, limit: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ProviderError::new(
                api,
                ProviderErrorKind::Transient,
                format!("still waiting for {what} after {} s; retry", limit.as_secs()),
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Runs a deletion, retrying `DependencyViolation` (network interfaces that linger after a
/// cluster was deleted) for a bounded time. A missing resource counts as deleted.
async fn delete_retrying<F, Fut>(api: &str, what: &str, mut call: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let deadline = tokio::time::Instant::now() + DEPENDENCY_WAIT;
    loop {
        match call().await {
            Ok(()) => return Ok(()),
            Err(e) if e.kind == ProviderErrorKind::NotFound => return Ok(()),
            Err(e) if e.kind == ProviderErrorKind::Conflict => {
                if tokio::time::Instant::now() >= deadline {
                    return Err(ProviderError::new(
                        api,
                        ProviderErrorKind::Transient,
                        format!("{what} is still in use after {} s: {}", DEPENDENCY_WAIT.as_secs(), e.message),
                    ));
                }
                tracing::debug!(%what, error = %e, "deletion blocked by a dependency; retrying");
                tokio::time::sleep(POLL).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Builds the pieces of a network in order, each looked up before it is created.
struct Builder<'a> {
    ec2: &'a Ec2,
    req: &'a CreateNetwork,
}

impl Builder<'_> {
    fn name(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.req.name)
    }

    fn check_owned(&self, api: &str, what: &str, t: &Tags) -> Result<()> {
        if owned_like(t, &self.req.tags) { Ok(()) } else { Err(foreign(api, what)) }
    }

    async fn vpc(&self) -> Result<String> {
        const API: &str = "ec2:CreateVpc";
        let existing = find_vpcs(self.ec2, &self.req.name).await?;
        if let Some(v) = existing.iter().find(|v| owned_like(&tags::from_ec2(v.tags()), &self.req.tags)) {
            return v.vpc_id().map(str::to_string).ok_or_else(|| malformed(API, "VPC without id"));
        }
        if !existing.is_empty() {
            return Err(foreign(API, &format!("VPC {}", self.req.name)));
        }
        let out = self
            .ec2
            .create_vpc()
            .cidr_block(self.req.cidr.to_string())
            .tag_specifications(tags::ec2_spec(ResourceType::Vpc, &with_name(&self.req.tags, &self.req.name)))
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        let id = out.vpc().and_then(|v| v.vpc_id()).ok_or_else(|| malformed(API, "no VpcId"))?.to_string();
        // EKS needs DNS support and hostnames; one attribute per call.
        for hostnames in [false, true] {
            let t = AttributeBooleanValue::builder().value(true).build();
            let call = self.ec2.modify_vpc_attribute().vpc_id(&id);
            let call = if hostnames { call.enable_dns_hostnames(t) } else { call.enable_dns_support(t) };
            call.send().await.map_err(|e| sdk_error("ec2:ModifyVpcAttribute", e))?;
        }
        Ok(id)
    }

    async fn internet_gateway(&self, vpc_id: &str) -> Result<String> {
        const API: &str = "ec2:CreateInternetGateway";
        let name = self.name("igw");
        let all = self
            .ec2
            .describe_internet_gateways()
            .filters(filter("tag:Name", &name))
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| sdk_error("ec2:DescribeInternetGateways", e))?;
        let attached_here =
            |g: &aws_sdk_ec2::types::InternetGateway| g.attachments().iter().any(|a| a.vpc_id() == Some(vpc_id));
        let found = all
            .iter()
            .filter(|g| owned_like(&tags::from_ec2(g.tags()), &self.req.tags))
            .find(|g| attached_here(g) || g.attachments().is_empty());
        let (id, attached) = match found {
            Some(g) => (
                g.internet_gateway_id().ok_or_else(|| malformed(API, "gateway without id"))?.to_string(),
                attached_here(g),
            ),
            None => {
                let out = self
                    .ec2
                    .create_internet_gateway()
                    .tag_specifications(tags::ec2_spec(
                        ResourceType::InternetGateway,
                        &role_tags(&self.req.tags, &name, "igw"),
                    ))
                    .send()
                    .await
                    .map_err(|e| sdk_error(API, e))?;
                let id = out
                    .internet_gateway()
                    .and_then(|g| g.internet_gateway_id())
                    .ok_or_else(|| malformed(API, "no InternetGatewayId"))?
                    .to_string();
                (id, false)
            }
        };
        if !attached {
            self.ec2
                .attach_internet_gateway()
                .internet_gateway_id(&id)
                .vpc_id(vpc_id)
                .send()
                .await
                .map_err(|e| sdk_error("ec2:AttachInternetGateway", e))?;
        }
        Ok(id)
    }

    async fn subnet(&self, inv: &Inventory, name: &str, cidr: Ipv4Net, az: &str, role: SubnetRole) -> Result<String> {
        const API: &str = "ec2:CreateSubnet";
        if let Some(s) = inv.subnet_named(name) {
            self.check_owned(API, &format!("subnet {name}"), &tags::from_ec2(s.tags()))?;
            return s.subnet_id().map(str::to_string).ok_or_else(|| malformed(API, "subnet without id"));
        }
        let (role_name, elb) = match role {
            SubnetRole::Public => ("public", "kubernetes.io/role/elb"),
            SubnetRole::Private => ("private", "kubernetes.io/role/internal-elb"),
            SubnetRole::Compute => ("compute", "kubernetes.io/role/internal-elb"),
        };
        let mut t = role_tags(&self.req.tags, name, role_name);
        t.insert(elb.into(), "1".into());
        let id = create_subnet_call(self.ec2, inv.vpc_id(), cidr, az, &t).await?;
        if role == SubnetRole::Public {
            self.ec2
                .modify_subnet_attribute()
                .subnet_id(&id)
                .map_public_ip_on_launch(AttributeBooleanValue::builder().value(true).build())
                .send()
                .await
                .map_err(|e| sdk_error("ec2:ModifySubnetAttribute", e))?;
        }
        Ok(id)
    }

    async fn route_table(&self, inv: &Inventory, role: &str) -> Result<String> {
        const API: &str = "ec2:CreateRouteTable";
        let name = self.name(role);
        if let Some(r) = inv.route_table_named(&name) {
            self.check_owned(API, &format!("route table {name}"), &tags::from_ec2(r.tags()))?;
            return r.route_table_id().map(str::to_string).ok_or_else(|| malformed(API, "route table without id"));
        }
        let out = self
            .ec2
            .create_route_table()
            .vpc_id(inv.vpc_id())
            .tag_specifications(tags::ec2_spec(ResourceType::RouteTable, &role_tags(&self.req.tags, &name, role)))
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        Ok(out
            .route_table()
            .and_then(|r| r.route_table_id())
            .ok_or_else(|| malformed(API, "no RouteTableId"))?
            .to_string())
    }

    /// The S3 gateway endpoint on `route_table`: ours if it exists (an endpoint of another
    /// owner for the same service in this VPC is refused, EC2 allows one per service and
    /// route table), else created.
    async fn s3_endpoint(&self, inv: &Inventory, route_table: &str) -> Result<String> {
        const API: &str = "ec2:CreateVpcEndpoint";
        let service = s3_endpoint_service(&self.req.region);
        if let Some(e) = inv.s3_endpoint(cluster_of(&self.req.tags)) {
            return e.vpc_endpoint_id().map(str::to_string).ok_or_else(|| malformed(API, "endpoint without id"));
        }
        if let Some(e) = inv.endpoints.iter().find(|e| {
            endpoint_live(e)
                && e.service_name() == Some(service.as_str())
                && e.route_table_ids().iter().any(|r| r == route_table)
        }) {
            return Err(foreign(API, &format!("VPC endpoint {}", e.vpc_endpoint_id().unwrap_or_default())));
        }
        let name = self.name(S3_ENDPOINT_ROLE);
        create_s3_endpoint_call(
            self.ec2,
            inv.vpc_id(),
            &self.req.region,
            route_table,
            &role_tags(&self.req.tags, &name, S3_ENDPOINT_ROLE),
        )
        .await
    }

    async fn nat_gateway(&self, inv: &Inventory, public_subnet: &str) -> Result<String> {
        const API: &str = "ec2:CreateNatGateway";
        let name = self.name("nat");
        if let Some(n) = inv.nat_named(&name).filter(|n| n.state() != Some(&NatGatewayState::Failed)) {
            self.check_owned(API, &format!("NAT gateway {name}"), &tags::from_ec2(n.tags()))?;
            return n.nat_gateway_id().map(str::to_string).ok_or_else(|| malformed(API, "NAT gateway without id"));
        }
        let allocation = self.elastic_ip().await?;
        let out = self
            .ec2
            .create_nat_gateway()
            .subnet_id(public_subnet)
            .allocation_id(allocation)
            .tag_specifications(tags::ec2_spec(ResourceType::Natgateway, &role_tags(&self.req.tags, &name, "nat")))
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        Ok(out
            .nat_gateway()
            .and_then(|n| n.nat_gateway_id())
            .ok_or_else(|| malformed(API, "no NatGatewayId"))?
            .to_string())
    }

    /// Our unassociated Elastic IP for the NAT gateway, allocated if there is none.
    async fn elastic_ip(&self) -> Result<String> {
        const API: &str = "ec2:AllocateAddress";
        let name = self.name("nat-eip");
        let out = self
            .ec2
            .describe_addresses()
            .filters(filter("tag:Name", &name))
            .send()
            .await
            .map_err(|e| sdk_error("ec2:DescribeAddresses", e))?;
        let free = out.addresses().iter().find(|a| {
            a.association_id().is_none()
                && owned_like(&tags::from_ec2(a.tags()), &self.req.tags)
                && tags::from_ec2(a.tags()).get(NAME) == Some(&name)
        });
        if let Some(id) = free.and_then(|a| a.allocation_id()) {
            return Ok(id.to_string());
        }
        let out = self
            .ec2
            .allocate_address()
            .domain(DomainType::Vpc)
            .tag_specifications(tags::ec2_spec(ResourceType::ElasticIp, &role_tags(&self.req.tags, &name, "nat-eip")))
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        Ok(out.allocation_id().ok_or_else(|| malformed(API, "no AllocationId"))?.to_string())
    }

    async fn security_group(&self, inv: &Inventory) -> Result<String> {
        const API: &str = "ec2:CreateSecurityGroup";
        let group_name = match cluster_of(&self.req.tags) {
            Some(c) => DerivedNames::for_cluster(c).security_group,
            None => self.name("efa-sg"),
        };
        let id = match inv.security_group_named(&group_name) {
            Some(g) => {
                self.check_owned(API, &format!("security group {group_name}"), &tags::from_ec2(g.tags()))?;
                g.group_id().ok_or_else(|| malformed(API, "group without id"))?.to_string()
            }
            None => {
                let out = self
                    .ec2
                    .create_security_group()
                    .group_name(&group_name)
                    .description("InstantStart EFA: all traffic to and from members of this group")
                    .vpc_id(inv.vpc_id())
                    .tag_specifications(tags::ec2_spec(
                        ResourceType::SecurityGroup,
                        &role_tags(&self.req.tags, &group_name, "efa-sg"),
                    ))
                    .send()
                    .await
                    .map_err(|e| sdk_error(API, e))?;
                out.group_id().ok_or_else(|| malformed(API, "no GroupId"))?.to_string()
            }
        };
        let existing = inv.security_group_named(&group_name);
        let has_self = |perms: &[IpPermission]| {
            perms.iter().any(|p| {
                p.ip_protocol() == Some("-1")
                    && p.user_id_group_pairs().iter().any(|u| u.group_id() == Some(id.as_str()))
            })
        };
        let self_rule = IpPermission::builder()
            .ip_protocol("-1")
            .user_id_group_pairs(UserIdGroupPair::builder().group_id(&id).build())
            .build();
        if !existing.is_some_and(|g| has_self(g.ip_permissions())) {
            match self
                .ec2
                .authorize_security_group_ingress()
                .group_id(&id)
                .ip_permissions(self_rule.clone())
                .send()
                .await
                .map_err(|e| sdk_error("ec2:AuthorizeSecurityGroupIngress", e))
            {
                Err(e) if e.kind != ProviderErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
        }
        if !existing.is_some_and(|g| has_self(g.ip_permissions_egress())) {
            match self
                .ec2
                .authorize_security_group_egress()
                .group_id(&id)
                .ip_permissions(self_rule)
                .send()
                .await
                .map_err(|e| sdk_error("ec2:AuthorizeSecurityGroupEgress", e))
            {
                Err(e) if e.kind != ProviderErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
        }
        Ok(id)
    }
}

async fn create_subnet_call(ec2: &Ec2, vpc_id: &str, cidr: Ipv4Net, az: &str, t: &Tags) -> Result<String> {
    const API: &str = "ec2:CreateSubnet";
    let out = ec2
        .create_subnet()
        .vpc_id(vpc_id)
        .cidr_block(cidr.to_string())
        .availability_zone(az)
        .tag_specifications(tags::ec2_spec(ResourceType::Subnet, t))
        .send()
        .await
        .map_err(|e| sdk_error(API, e))?;
    Ok(out.subnet().and_then(|s| s.subnet_id()).ok_or_else(|| malformed(API, "no SubnetId"))?.to_string())
}

/// Makes `route_table` the explicit route table of `subnet` (associate, or move it).
async fn associate(ec2: &Ec2, inv: &Inventory, route_table: &str, subnet: &str) -> Result<()> {
    let current = inv.route_tables.iter().find_map(|r| {
        r.associations()
            .iter()
            .find(|a| a.subnet_id() == Some(subnet))
            .map(|a| (r.route_table_id().unwrap_or_default(), a.route_table_association_id().unwrap_or_default()))
    });
    match current {
        Some((rt, _)) if rt == route_table => Ok(()),
        Some((_, association)) => ec2
            .replace_route_table_association()
            .association_id(association)
            .route_table_id(route_table)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| sdk_error("ec2:ReplaceRouteTableAssociation", e)),
        None => ec2
            .associate_route_table()
            .route_table_id(route_table)
            .subnet_id(subnet)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| sdk_error("ec2:AssociateRouteTable", e)),
    }
}

/// Target of a default route.
#[derive(Clone, Copy)]
enum Target<'a> {
    Gateway(&'a str),
    Nat(&'a str),
}

/// Points `route_table`'s default route at `target` (create, or replace a stale one).
async fn default_route(ec2: &Ec2, inv: &Inventory, route_table: &str, target: Target<'_>) -> Result<()> {
    let existing = inv
        .route_tables
        .iter()
        .find(|r| r.route_table_id() == Some(route_table))
        .and_then(|r| r.routes().iter().find(|x| x.destination_cidr_block() == Some(DEFAULT_ROUTE)));
    let matches = |r: &aws_sdk_ec2::types::Route| match target {
        Target::Gateway(g) => r.gateway_id() == Some(g),
        Target::Nat(n) => r.nat_gateway_id() == Some(n),
    };
    match existing {
        Some(r) if matches(r) => Ok(()),
        Some(_) => {
            let call = ec2.replace_route().route_table_id(route_table).destination_cidr_block(DEFAULT_ROUTE);
            let call = match target {
                Target::Gateway(g) => call.gateway_id(g),
                Target::Nat(n) => call.nat_gateway_id(n),
            };
            call.send().await.map(|_| ()).map_err(|e| sdk_error("ec2:ReplaceRoute", e))
        }
        None => {
            let call = ec2.create_route().route_table_id(route_table).destination_cidr_block(DEFAULT_ROUTE);
            let call = match target {
                Target::Gateway(g) => call.gateway_id(g),
                Target::Nat(n) => call.nat_gateway_id(n),
            };
            match call.send().await.map_err(|e| sdk_error("ec2:CreateRoute", e)) {
                Err(e) if e.kind == ProviderErrorKind::AlreadyExists => Ok(()),
                other => other.map(|_| ()),
            }
        }
    }
}

async fn nat_state(ec2: &Ec2, nat_id: &str) -> Result<Option<aws_sdk_ec2::types::NatGateway>> {
    let out = ec2
        .describe_nat_gateways()
        .nat_gateway_ids(nat_id)
        .send()
        .await
        .map_err(|e| sdk_error("ec2:DescribeNatGateways", e))?;
    Ok(out.nat_gateways().first().cloned())
}

/// Routes the private route table through the NAT gateway. If EC2 refuses a route to a
/// gateway that is still pending, waits until it is available and tries again.
async fn route_through_nat(ec2: &Ec2, vpc_id: &str, route_table: &str, nat_id: &str) -> Result<()> {
    let inv = inventory(ec2, vpc_id).await?;
    match default_route(ec2, &inv, route_table, Target::Nat(nat_id)).await {
        Ok(()) => Ok(()),
        Err(first) if !matches!(first.kind, ProviderErrorKind::AccessDenied | ProviderErrorKind::Throttled) => {
            tracing::info!(nat_id, error = %first, "route to the NAT gateway refused; waiting for it to become available");
            wait_until("ec2:DescribeNatGateways", &format!("NAT gateway {nat_id}"), NAT_WAIT, || async {
                match nat_state(ec2, nat_id).await? {
                    Some(n) if n.state() == Some(&NatGatewayState::Available) => Ok(Some(())),
                    Some(n) if matches!(n.state(), Some(NatGatewayState::Failed | NatGatewayState::Deleted)) => {
                        Err(ProviderError::new(
                            "ec2:CreateNatGateway",
                            ProviderErrorKind::Failed,
                            format!(
                                "NAT gateway {nat_id} failed: {}",
                                n.failure_message().unwrap_or("no reason given")
                            ),
                        ))
                    }
                    _ => Ok(None),
                }
            })
            .await?;
            let inv = inventory(ec2, vpc_id).await?;
            default_route(ec2, &inv, route_table, Target::Nat(nat_id)).await
        }
        Err(e) => Err(e),
    }
}

async fn find_vpcs(ec2: &Ec2, name: &str) -> Result<Vec<aws_sdk_ec2::types::Vpc>> {
    ec2.describe_vpcs()
        .filters(filter("tag:Name", name))
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| sdk_error("ec2:DescribeVpcs", e))
}

async fn create_network(c: &Regional, req: &CreateNetwork) -> Result<Network> {
    let ec2 = &c.ec2;
    let b = Builder { ec2, req };
    if req.subnets.iter().all(|s| s.role != SubnetRole::Public) {
        return Err(invalid("ec2:CreateVpc", "a new network needs at least one public subnet (for the NAT gateway)"));
    }
    let vpc_id = b.vpc().await?;
    let igw = b.internet_gateway(&vpc_id).await?;
    let inv = inventory(ec2, &vpc_id).await?;
    let public_rt = b.route_table(&inv, "public-rt").await?;
    let private_rt = b.route_table(&inv, "private-rt").await?;
    let mut public_subnets = Vec::new();
    let mut private_subnets = Vec::new();
    for s in &req.subnets {
        let role = match s.role {
            SubnetRole::Public => "public",
            SubnetRole::Private => "private",
            SubnetRole::Compute => "compute",
        };
        let name = format!("{}-{role}-{}", req.name, s.availability_zone);
        let id = b.subnet(&inv, &name, s.cidr, &s.availability_zone, s.role).await?;
        if s.role == SubnetRole::Public { public_subnets.push(id) } else { private_subnets.push(id) }
    }
    let inv = inventory(ec2, &vpc_id).await?;
    default_route(ec2, &inv, &public_rt, Target::Gateway(&igw)).await?;
    for s in &public_subnets {
        associate(ec2, &inv, &public_rt, s).await?;
    }
    for s in &private_subnets {
        associate(ec2, &inv, &private_rt, s).await?;
    }
    let first_public = public_subnets.first().ok_or_else(|| invalid("ec2:CreateNatGateway", "no public subnet"))?;
    let nat = b.nat_gateway(&inv, first_public).await?;
    b.security_group(&inv).await?;
    b.s3_endpoint(&inv, &private_rt).await?;
    route_through_nat(ec2, &vpc_id, &private_rt, &nat).await?;
    ec2.create_tags()
        .resources(&vpc_id)
        .tags(aws_sdk_ec2::types::Tag::builder().key(TAG_NETWORK).value(COMPLETE).build())
        .send()
        .await
        .map_err(|e| sdk_error("ec2:CreateTags", e))?;
    network_view(&inventory(ec2, &vpc_id).await?)
}

/// The route table a new compute subnet joins: our private route table, else (existing VPC)
/// a route table whose default route goes through a NAT gateway, preferring one in `az`.
fn compute_route_table(inv: &Inventory, cluster: Option<&str>, az: &str) -> Option<String> {
    if let Some(r) = inv.route_table_with_role("private-rt", cluster) {
        return r.route_table_id().map(str::to_string);
    }
    let nat_az = |nat_id: &str| {
        let subnet = inv.nats.iter().find(|n| n.nat_gateway_id() == Some(nat_id))?.subnet_id()?;
        inv.subnets.iter().find(|s| s.subnet_id() == Some(subnet))?.availability_zone()
    };
    let nat_routed: Vec<(&RouteTable, Option<&str>)> = inv
        .route_tables
        .iter()
        .filter_map(|r| {
            let nat = r
                .routes()
                .iter()
                .find(|x| x.destination_cidr_block() == Some(DEFAULT_ROUTE))
                .and_then(|x| x.nat_gateway_id())?;
            Some((r, nat_az(nat)))
        })
        .collect();
    nat_routed
        .iter()
        .find(|(_, a)| *a == Some(az))
        .or_else(|| nat_routed.first())
        .and_then(|(r, _)| r.route_table_id().map(str::to_string))
}

async fn delete_network(c: &Regional, vpc_id: &str) -> Result<()> {
    const API: &str = "ec2:DeleteVpc";
    let ec2 = &c.ec2;
    let inv = inventory(ec2, vpc_id).await?;
    let vtags = inv.vpc_tags();
    let Some(cluster) = cluster_of(&vtags).filter(|_| is_ours(&vtags)).map(str::to_string) else {
        return Err(invalid(API, format!("VPC {vpc_id} is not tagged as InstantStart's; it is not deleted")));
    };
    let ours = |t: &[aws_sdk_ec2::types::Tag]| is_owned(&tags::from_ec2(t), &cluster);
    // 1. NAT gateways, and wait until they are gone (they hold ENIs in the public subnets).
    for n in inv.nats.iter().filter(|n| ours(n.tags())) {
        let Some(id) = n.nat_gateway_id() else { continue };
        if matches!(n.state(), Some(NatGatewayState::Pending | NatGatewayState::Available | NatGatewayState::Failed)) {
            match ec2
                .delete_nat_gateway()
                .nat_gateway_id(id)
                .send()
                .await
                .map_err(|e| sdk_error("ec2:DeleteNatGateway", e))
            {
                Err(e) if e.kind != ProviderErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        wait_until("ec2:DescribeNatGateways", &format!("NAT gateway {id} to be deleted"), NAT_WAIT, || async {
            Ok(match nat_state(ec2, id).await {
                Ok(Some(n)) if n.state() != Some(&NatGatewayState::Deleted) => None,
                Ok(_) => Some(()),
                Err(e) if e.kind == ProviderErrorKind::NotFound => Some(()),
                Err(e) => return Err(e),
            })
        })
        .await?;
    }
    // 2. Their Elastic IPs.
    let addresses = ec2
        .describe_addresses()
        .filters(filter(&format!("tag:{TAG_CLUSTER}"), &cluster))
        .send()
        .await
        .map_err(|e| sdk_error("ec2:DescribeAddresses", e))?;
    for a in
        addresses.addresses().iter().filter(|a| ours(a.tags()) && role_of(&tags::from_ec2(a.tags())) == Some("nat-eip"))
    {
        let Some(id) = a.allocation_id() else { continue };
        delete_retrying("ec2:ReleaseAddress", &format!("Elastic IP {id}"), || async {
            ec2.release_address()
                .allocation_id(id)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| sdk_error("ec2:ReleaseAddress", e))
        })
        .await?;
    }
    // 3. The internet gateway.
    let igws = ec2
        .describe_internet_gateways()
        .filters(filter("attachment.vpc-id", vpc_id))
        .send()
        .await
        .map_err(|e| sdk_error("ec2:DescribeInternetGateways", e))?;
    for g in igws.internet_gateways().iter().filter(|g| ours(g.tags())) {
        let Some(id) = g.internet_gateway_id() else { continue };
        delete_retrying("ec2:DetachInternetGateway", &format!("internet gateway {id}"), || async {
            ec2.detach_internet_gateway()
                .internet_gateway_id(id)
                .vpc_id(vpc_id)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| sdk_error("ec2:DetachInternetGateway", e))
        })
        .await?;
        delete_retrying("ec2:DeleteInternetGateway", &format!("internet gateway {id}"), || async {
            ec2.delete_internet_gateway()
                .internet_gateway_id(id)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| sdk_error("ec2:DeleteInternetGateway", e))
        })
        .await?;
    }
    // 4. Our VPC endpoints, and wait until they are gone (EC2 refuses DeleteVpc while one
    //    exists, and removes their routes from the route tables).
    let endpoints: Vec<String> = inv
        .endpoints
        .iter()
        .filter(|e| ours(e.tags()) && endpoint_state(e) != "deleted")
        .filter_map(|e| e.vpc_endpoint_id().map(str::to_string))
        .collect();
    if !endpoints.is_empty() {
        delete_endpoints(ec2, &endpoints).await?;
        wait_until(
            "ec2:DescribeVpcEndpoints",
            &format!("VPC endpoints {endpoints:?} to be deleted"),
            DEPENDENCY_WAIT,
            || async {
                let left = match inventory_endpoints(ec2, vpc_id).await {
                    Ok(left) => left,
                    Err(e) => return Err(e),
                };
                Ok(left
                    .iter()
                    .all(|e| {
                        !endpoints.iter().any(|id| e.vpc_endpoint_id() == Some(id.as_str()))
                            || endpoint_state(e) == "deleted"
                    })
                    .then_some(()))
            },
        )
        .await?;
    }
    // 5. Subnets, 6. route tables, 7. security groups: ours only.
    for s in inv.subnets.iter().filter(|s| ours(s.tags())) {
        let Some(id) = s.subnet_id() else { continue };
        delete_subnet_call(ec2, id).await?;
    }
    for r in inv.route_tables.iter().filter(|r| ours(r.tags())) {
        let Some(id) = r.route_table_id() else { continue };
        // Associations of subnets that are gone usually vanish with them; remove any left.
        for a in r.associations().iter().filter(|a| a.main() != Some(true)) {
            let Some(association) = a.route_table_association_id() else { continue };
            match ec2
                .disassociate_route_table()
                .association_id(association)
                .send()
                .await
                .map_err(|e| sdk_error("ec2:DisassociateRouteTable", e))
            {
                Err(e) if e.kind != ProviderErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        delete_retrying("ec2:DeleteRouteTable", &format!("route table {id}"), || async {
            ec2.delete_route_table()
                .route_table_id(id)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| sdk_error("ec2:DeleteRouteTable", e))
        })
        .await?;
    }
    for g in inv.security_groups.iter().filter(|g| ours(g.tags())) {
        let Some(id) = g.group_id() else { continue };
        delete_retrying("ec2:DeleteSecurityGroup", &format!("security group {id}"), || async {
            ec2.delete_security_group()
                .group_id(id)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| sdk_error("ec2:DeleteSecurityGroup", e))
        })
        .await?;
    }
    // 8. The VPC itself.
    delete_retrying(API, &format!("VPC {vpc_id}"), || async {
        ec2.delete_vpc().vpc_id(vpc_id).send().await.map(|_| ()).map_err(|e| sdk_error(API, e))
    })
    .await
}

/// CreateVpcEndpoint of the S3 gateway endpoint on `route_table`, tagged at creation.
pub(crate) async fn create_s3_endpoint_call(
    ec2: &Ec2,
    vpc_id: &str,
    region: &str,
    route_table: &str,
    t: &Tags,
) -> Result<String> {
    const API: &str = "ec2:CreateVpcEndpoint";
    let out = ec2
        .create_vpc_endpoint()
        .vpc_id(vpc_id)
        .vpc_endpoint_type(VpcEndpointType::Gateway)
        .service_name(s3_endpoint_service(region))
        .route_table_ids(route_table)
        .tag_specifications(tags::ec2_spec(ResourceType::VpcEndpoint, t))
        .send()
        .await
        .map_err(|e| sdk_error(API, e))?;
    Ok(out
        .vpc_endpoint()
        .and_then(|e| e.vpc_endpoint_id())
        .ok_or_else(|| malformed(API, "no VpcEndpointId"))?
        .to_string())
}

async fn inventory_endpoints(ec2: &Ec2, vpc_id: &str) -> Result<Vec<VpcEndpoint>> {
    ec2.describe_vpc_endpoints()
        .filters(filter("vpc-id", vpc_id))
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| sdk_error("ec2:DescribeVpcEndpoints", e))
}

/// DeleteVpcEndpoints answers 200 with the endpoints it could not delete; an endpoint already
/// gone (`InvalidVpcEndpoint.NotFound`, `InvalidVpcEndpointId.NotFound`) is not a failure.
pub(crate) async fn delete_endpoints(ec2: &Ec2, ids: &[String]) -> Result<()> {
    const API: &str = "ec2:DeleteVpcEndpoints";
    let out = ec2
        .delete_vpc_endpoints()
        .set_vpc_endpoint_ids(Some(ids.to_vec()))
        .send()
        .await
        .map_err(|e| sdk_error(API, e))?;
    let failed: Vec<String> = out
        .unsuccessful()
        .iter()
        .filter(|u| !u.error().and_then(|e| e.code()).is_some_and(|c| c.ends_with(".NotFound")))
        .map(|u| {
            format!(
                "{}: {}",
                u.resource_id().unwrap_or_default(),
                u.error().and_then(|e| e.message()).unwrap_or("no reason given")
            )
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(ProviderError::new(
            API,
            ProviderErrorKind::Transient,
            format!("VPC endpoints not deleted: {}", failed.join("; ")),
        ))
    }
}

async fn delete_subnet_call(ec2: &Ec2, subnet_id: &str) -> Result<()> {
    const API: &str = "ec2:DeleteSubnet";
    delete_retrying(API, &format!("subnet {subnet_id}"), || async {
        ec2.delete_subnet().subnet_id(subnet_id).send().await.map(|_| ()).map_err(|e| sdk_error(API, e))
    })
    .await
}

#[async_trait]
impl NetworkApi for AwsProvider {
    /// Our VPC is reported only once complete (see the module docs); a VPC that is not ours
    /// is reported as found so the caller can refuse it.
    async fn find_vpc(&self, region: &str, name: &str) -> Result<Option<Vpc>> {
        const API: &str = "ec2:DescribeVpcs";
        let c = self.region(region).await?;
        let vpcs = find_vpcs(&c.ec2, name).await?;
        let views = vpcs.iter().map(|v| vpc_view(API, v)).collect::<Result<Vec<_>>>()?;
        let complete = |v: &Vpc| v.tags.get(TAG_NETWORK).map(String::as_str) == Some(COMPLETE);
        if let Some(v) = views.iter().find(|v| is_ours(&v.tags) && complete(v)) {
            return Ok(Some(v.clone()));
        }
        Ok(views.into_iter().find(|v| !is_ours(&v.tags)))
    }

    async fn describe_network(&self, region: &str, vpc_id: &str) -> Result<Network> {
        let c = self.region(region).await?;
        network_view(&inventory(&c.ec2, vpc_id).await?)
    }

    async fn create_network(&self, req: &CreateNetwork) -> Result<Network> {
        let c = self.region(&req.region).await?;
        create_network(&c, req).await
    }

    async fn create_subnet(&self, req: &CreateSubnet) -> Result<Subnet> {
        const API: &str = "ec2:CreateSubnet";
        let c = self.region(&req.region).await?;
        let ec2 = &c.ec2;
        let inv = inventory(ec2, &req.vpc_id).await?;
        let id = match inv.subnet_named(&req.name) {
            Some(s) => {
                if !owned_like(&tags::from_ec2(s.tags()), &req.tags) {
                    return Err(foreign(API, &format!("subnet {}", req.name)));
                }
                s.subnet_id().ok_or_else(|| malformed(API, "subnet without id"))?.to_string()
            }
            None => {
                let mut t = role_tags(&req.tags, &req.name, "compute");
                t.insert("kubernetes.io/role/internal-elb".into(), "1".into());
                create_subnet_call(ec2, &req.vpc_id, req.cidr, &req.availability_zone, &t).await?
            }
        };
        let inv = inventory(ec2, &req.vpc_id).await?;
        match compute_route_table(&inv, cluster_of(&req.tags), &req.availability_zone) {
            Some(rt) => associate(ec2, &inv, &rt, &id).await?,
            None => tracing::warn!(
                subnet = %id,
                vpc = %req.vpc_id,
                "no private route table with a NAT gateway in the VPC; the compute subnet keeps the main route table"
            ),
        }
        let s = inv.subnets.iter().find(|s| s.subnet_id() == Some(id.as_str())).ok_or_else(|| {
            ProviderError::new(API, ProviderErrorKind::Transient, format!("subnet {id} is not visible yet"))
        })?;
        subnet_view(API, s, false)
    }

    async fn delete_subnet(&self, region: &str, subnet_id: &str) -> Result<()> {
        const API: &str = "ec2:DeleteSubnet";
        let c = self.region(region).await?;
        let out = c.ec2.describe_subnets().subnet_ids(subnet_id).send().await.map_err(|e| sdk_error(API, e))?;
        if out.subnets().is_empty() {
            return Err(ProviderError::not_found(
                API,
                format!("InvalidSubnetID.NotFound: The subnet ID '{subnet_id}' does not exist"),
            ));
        }
        delete_subnet_call(&c.ec2, subnet_id).await
    }

    async fn delete_network(&self, region: &str, vpc_id: &str) -> Result<()> {
        let c = self.region(region).await?;
        delete_network(&c, vpc_id).await
    }
}
