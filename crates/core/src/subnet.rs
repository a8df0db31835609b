//! CIDR planning: the network layout of a new VPC and the /20 compute subnets of large
//! accelerator fleets, never overlapping anything that already exists.
//!
//! [`SubnetPlanner`] is the only place that picks address ranges. [`place_instance_group`] is the
//! one routing function every capacity path (on-demand, training plan, spot) goes through to
//! decide where an instance group lives.

use crate::spec::{CapacitySpec, InstanceGroupSpec};
use ipnet::Ipv4Net;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Prefix length of a compute subnet: 4,091 usable addresses, enough for a large fleet with
/// many ENIs/EFA interfaces per instance.
pub const COMPUTE_SUBNET_PREFIX: u8 = 20;
/// Prefix length of a public subnet of a new VPC (NAT gateways, load balancers).
pub const PUBLIC_SUBNET_PREFIX: u8 = 24;
/// Prefix length of a private subnet of a new VPC (EKS control plane ENIs, system pods).
pub const PRIVATE_SUBNET_PREFIX: u8 = 22;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize, JsonSchema)]
pub enum SubnetPlanError {
    #[error(
        "VPC {vpc_cidrs} has no free /{prefix_len} left for {purpose}; add a secondary CIDR to the VPC or free address space"
    )]
    Exhausted { vpc_cidrs: String, prefix_len: u8, purpose: String },
    #[error("a /{prefix_len} does not fit in the VPC CIDR {vpc_cidr}")]
    TooLarge {
        #[schemars(with = "String")]
        vpc_cidr: Ipv4Net,
        prefix_len: u8,
    },
    #[error("training plan capacity is reserved in {reserved}, but the group asks for {requested}")]
    ReservationZoneMismatch { reserved: String, requested: String },
}

/// Allocates non-overlapping subnets inside a VPC's CIDR blocks.
#[derive(Debug, Clone)]
pub struct SubnetPlanner {
    vpc_cidrs: Vec<Ipv4Net>,
    taken: Vec<Ipv4Net>,
}

fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

impl SubnetPlanner {
    /// A planner for a VPC with these CIDR blocks, in which `existing` subnets are taken.
    pub fn new(vpc_cidrs: Vec<Ipv4Net>, existing: impl IntoIterator<Item = Ipv4Net>) -> Self {
        SubnetPlanner { vpc_cidrs, taken: existing.into_iter().collect() }
    }

    /// Subnets allocated so far, including the existing ones.
    pub fn taken(&self) -> &[Ipv4Net] {
        &self.taken
    }

    /// Allocates the lowest free, aligned block of `prefix_len` in the VPC.
    pub fn allocate(&mut self, prefix_len: u8, purpose: &str) -> Result<Ipv4Net, SubnetPlanError> {
        for vpc in &self.vpc_cidrs {
            let Ok(mut candidates) = vpc.subnets(prefix_len) else {
                continue;
            };
            if let Some(free) = candidates.find(|c| !self.taken.iter().any(|t| overlaps(c, t))) {
                self.taken.push(free);
                return Ok(free);
            }
        }
        if let Some(vpc) = self.vpc_cidrs.iter().find(|v| v.prefix_len() > prefix_len)
            && self.vpc_cidrs.iter().all(|v| v.prefix_len() > prefix_len)
        {
            return Err(SubnetPlanError::TooLarge { vpc_cidr: *vpc, prefix_len });
        }
        Err(SubnetPlanError::Exhausted {
            vpc_cidrs: self.vpc_cidrs.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
            prefix_len,
            purpose: purpose.to_string(),
        })
    }

    /// One /20 compute subnet per AZ, in the order given.
    pub fn plan_compute_subnets(&mut self, azs: &[String]) -> Result<Vec<PlannedSubnet>, SubnetPlanError> {
        azs.iter()
            .map(|az| {
                let cidr = self.allocate(COMPUTE_SUBNET_PREFIX, &format!("a compute subnet in {az}"))?;
                Ok(PlannedSubnet { availability_zone: az.clone(), cidr, role: SubnetRole::Compute })
            })
            .collect()
    }
}

/// What a subnet is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SubnetRole {
    Public,
    Private,
    Compute,
}

/// A subnet the planner decided to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlannedSubnet {
    pub availability_zone: String,
    #[schemars(with = "String")]
    pub cidr: Ipv4Net,
    pub role: SubnetRole,
}

/// Layout of a new VPC: a public and a private subnet per AZ. Compute subnets come later, from
/// the remaining space, through [`SubnetPlanner::plan_compute_subnets`].
pub fn plan_new_vpc(cidr: Ipv4Net, azs: &[String]) -> Result<Vec<PlannedSubnet>, SubnetPlanError> {
    let mut planner = SubnetPlanner::new(vec![cidr], []);
    let mut out = Vec::new();
    for az in azs {
        let c = planner.allocate(PUBLIC_SUBNET_PREFIX, &format!("a public subnet in {az}"))?;
        out.push(PlannedSubnet { availability_zone: az.clone(), cidr: c, role: SubnetRole::Public });
    }
    for az in azs {
        let c = planner.allocate(PRIVATE_SUBNET_PREFIX, &format!("a private subnet in {az}"))?;
        out.push(PlannedSubnet { availability_zone: az.clone(), cidr: c, role: SubnetRole::Private });
    }
    Ok(out)
}

/// Where an instance group is placed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Placement {
    /// The user named a subnet.
    ExistingSubnet { availability_zone: String, subnet_id: String },
    /// A compute subnet we already created in this AZ is reused.
    ComputeSubnet { availability_zone: String, subnet_id: String },
    /// A new /20 compute subnet is to be created.
    NewComputeSubnet {
        availability_zone: String,
        #[schemars(with = "String")]
        cidr: Ipv4Net,
    },
}

impl Placement {
    pub fn availability_zone(&self) -> &str {
        match self {
            Placement::ExistingSubnet { availability_zone, .. }
            | Placement::ComputeSubnet { availability_zone, .. }
            | Placement::NewComputeSubnet { availability_zone, .. } => availability_zone,
        }
    }
}

/// A compute subnet that already exists, as the placement function sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExistingComputeSubnet {
    pub availability_zone: String,
    pub subnet_id: String,
}

/// The one routing function for every capacity path: decides the AZ and subnet of a group.
///
/// - A training plan's AZ comes from its reservation (`reservation_az`), never guessed; a group
///   asking for another AZ is rejected.
/// - A named subnet is used as is.
/// - Otherwise the compute subnet of the AZ is reused, or a new /20 is planned.
pub fn place_instance_group(
    group: &InstanceGroupSpec,
    reservation_az: Option<&str>,
    compute_subnets: &[ExistingComputeSubnet],
    planner: &mut SubnetPlanner,
) -> Result<Placement, SubnetPlanError> {
    let az = match (&group.capacity, reservation_az) {
        (CapacitySpec::TrainingPlan { .. }, Some(reserved)) => {
            if reserved != group.availability_zone {
                return Err(SubnetPlanError::ReservationZoneMismatch {
                    reserved: reserved.to_string(),
                    requested: group.availability_zone.clone(),
                });
            }
            reserved.to_string()
        }
        _ => group.availability_zone.clone(),
    };
    if let Some(subnet_id) = &group.subnet_id {
        return Ok(Placement::ExistingSubnet { availability_zone: az, subnet_id: subnet_id.clone() });
    }
    if let Some(existing) = compute_subnets.iter().find(|s| s.availability_zone == az) {
        return Ok(Placement::ComputeSubnet { availability_zone: az, subnet_id: existing.subnet_id.clone() });
    }
    let cidr = planner.allocate(COMPUTE_SUBNET_PREFIX, &format!("a compute subnet in {az}"))?;
    Ok(Placement::NewComputeSubnet { availability_zone: az, cidr })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::*;
    use proptest::prelude::*;

    fn net(s: &str) -> Ipv4Net {
        s.parse().unwrap()
    }

    #[test]
    fn new_vpc_layout_then_compute_subnets() {
        let azs = vec!["us-east-1a".to_string(), "us-east-1b".to_string()];
        let layout = plan_new_vpc(net("10.0.0.0/16"), &azs).unwrap();
        let cidrs: Vec<String> = layout.iter().map(|s| s.cidr.to_string()).collect();
        assert_eq!(cidrs, ["10.0.0.0/24", "10.0.1.0/24", "10.0.4.0/22", "10.0.8.0/22"]);
        let mut planner = SubnetPlanner::new(vec![net("10.0.0.0/16")], layout.iter().map(|s| s.cidr));
        let compute = planner.plan_compute_subnets(&azs).unwrap();
        let cidrs: Vec<String> = compute.iter().map(|s| s.cidr.to_string()).collect();
        assert_eq!(cidrs, ["10.0.16.0/20", "10.0.32.0/20"]);
    }

    #[test]
    fn exhausted_vpc_is_a_clear_error() {
        let mut planner = SubnetPlanner::new(vec![net("10.0.0.0/20")], [net("10.0.0.0/24")]);
        let err = planner.allocate(20, "a compute subnet in us-east-1a").unwrap_err();
        assert_eq!(
            err.to_string(),
            "VPC 10.0.0.0/20 has no free /20 left for a compute subnet in us-east-1a; add a secondary CIDR to the VPC or free address space"
        );
        let mut small = SubnetPlanner::new(vec![net("10.0.0.0/24")], []);
        assert!(matches!(small.allocate(20, "x"), Err(SubnetPlanError::TooLarge { .. })));
    }

    #[test]
    fn secondary_cidr_is_used_when_primary_is_full() {
        let mut planner = SubnetPlanner::new(vec![net("10.0.0.0/20"), net("100.64.0.0/16")], [net("10.0.0.0/20")]);
        assert_eq!(planner.allocate(20, "x").unwrap(), net("100.64.0.0/20"));
    }

    fn group(capacity: CapacitySpec, az: &str, subnet: Option<&str>) -> InstanceGroupSpec {
        InstanceGroupSpec {
            name: "g".into(),
            instance_type: "ml.p5.48xlarge".into(),
            count: 1,
            availability_zone: az.into(),
            subnet_id: subnet.map(Into::into),
            capacity,
            interface_mode: InterfaceMode::Standard,
            ebs_volume_gb: 100,
            deep_health_checks: DeepHealthChecks::default(),
            lifecycle_script: None,
        }
    }

    #[test]
    fn every_capacity_path_routes_through_one_function() {
        let plan =
            CapacitySpec::TrainingPlan { arn: "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p".into() };
        let existing =
            vec![ExistingComputeSubnet { availability_zone: "us-east-1b".into(), subnet_id: "subnet-b".into() }];
        let mut planner = SubnetPlanner::new(vec![net("10.0.0.0/16")], [net("10.0.0.0/20")]);
        let cases: Vec<(InstanceGroupSpec, Option<&str>, Result<Placement, SubnetPlanError>)> = vec![
            (
                group(CapacitySpec::OnDemand, "us-east-1a", None),
                None,
                Ok(Placement::NewComputeSubnet { availability_zone: "us-east-1a".into(), cidr: net("10.0.16.0/20") }),
            ),
            (
                group(CapacitySpec::Spot, "us-east-1b", None),
                None,
                Ok(Placement::ComputeSubnet { availability_zone: "us-east-1b".into(), subnet_id: "subnet-b".into() }),
            ),
            (
                group(plan.clone(), "us-east-1b", None),
                Some("us-east-1b"),
                Ok(Placement::ComputeSubnet { availability_zone: "us-east-1b".into(), subnet_id: "subnet-b".into() }),
            ),
            (
                group(plan.clone(), "us-east-1a", None),
                Some("us-east-1c"),
                Err(SubnetPlanError::ReservationZoneMismatch {
                    reserved: "us-east-1c".into(),
                    requested: "us-east-1a".into(),
                }),
            ),
            (
                group(CapacitySpec::OnDemand, "us-east-1c", Some("subnet-mine")),
                None,
                Ok(Placement::ExistingSubnet {
                    availability_zone: "us-east-1c".into(),
                    subnet_id: "subnet-mine".into(),
                }),
            ),
        ];
        for (g, reserved, expected) in cases {
            assert_eq!(place_instance_group(&g, reserved, &existing, &mut planner), expected, "{g:?}");
        }
    }

    fn arb_subnet_in(vpc: Ipv4Net) -> impl Strategy<Value = Ipv4Net> {
        (vpc.prefix_len()..=28u8, any::<u32>()).prop_map(move |(len, seed)| {
            let span = 1u64 << (32 - vpc.prefix_len());
            let offset = (seed as u64 % span) as u32;
            let addr = u32::from(vpc.network()) + offset;
            Ipv4Net::new(addr.into(), len).unwrap().trunc()
        })
    }

    proptest! {
        /// Allocated /20s never overlap each other or any existing subnet, stay inside the VPC,
        /// and the planner only reports exhaustion when no free aligned /20 is left.
        #[test]
        fn compute_subnets_never_overlap(
            vpc_len in 16u8..=20,
            base in 0u8..=255,
            existing_seed in proptest::collection::vec(any::<(u8, u32)>(), 0..12),
            n in 1usize..20,
        ) {
            let vpc = Ipv4Net::new(std::net::Ipv4Addr::new(10, base, 0, 0), vpc_len).unwrap().trunc();
            let existing: Vec<Ipv4Net> = existing_seed.iter().map(|(l, seed)| {
                let len = vpc_len + l % (29 - vpc_len);
                let span = 1u64 << (32 - vpc_len);
                let addr = u32::from(vpc.network()) + (*seed as u64 % span) as u32;
                Ipv4Net::new(addr.into(), len).unwrap().trunc()
            }).collect();
            let mut planner = SubnetPlanner::new(vec![vpc], existing.clone());
            let mut allocated: Vec<Ipv4Net> = Vec::new();
            for _ in 0..n {
                match planner.allocate(COMPUTE_SUBNET_PREFIX, "test") {
                    Ok(c) => {
                        prop_assert!(vpc.contains(&c));
                        prop_assert_eq!(c.prefix_len(), COMPUTE_SUBNET_PREFIX);
                        for e in existing.iter().chain(allocated.iter()) {
                            prop_assert!(!overlaps(&c, e), "{} overlaps {}", c, e);
                        }
                        allocated.push(c);
                    }
                    Err(_) => {
                        let free = vpc.subnets(COMPUTE_SUBNET_PREFIX).unwrap()
                            .any(|c| !existing.iter().chain(allocated.iter()).any(|e| overlaps(&c, e)));
                        prop_assert!(!free, "planner gave up while a /20 was free");
                    }
                }
            }
        }

        #[test]
        fn arbitrary_prefixes_never_overlap(lens in proptest::collection::vec(20u8..=28, 1..30), existing in proptest::collection::vec(arb_subnet_in("10.0.0.0/16".parse().unwrap()), 0..8)) {
            let vpc: Ipv4Net = "10.0.0.0/16".parse().unwrap();
            let mut planner = SubnetPlanner::new(vec![vpc], existing.clone());
            let mut allocated: Vec<Ipv4Net> = Vec::new();
            for len in lens {
                if let Ok(c) = planner.allocate(len, "t") {
                    for e in existing.iter().chain(allocated.iter()) {
                        prop_assert!(!overlaps(&c, e));
                    }
                    allocated.push(c);
                }
            }
        }
    }
}
