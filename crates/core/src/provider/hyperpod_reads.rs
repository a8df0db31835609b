//! Read models of a HyperPod cluster's history and nodes: cluster events (`ListClusterEvents`)
//! and one node's detail (`DescribeClusterNode`), as [`super::HyperPodApi`] returns them.
//!
//! # Guarantees
//! - An event page is one service page: `cursor` is the service's `NextToken`, passed through
//!   unchanged, and `next_cursor` is absent on the last page. Events come newest first.
//! - [`ClusterEventQuery::check`] refuses what the service model refuses (a `limit` outside
//!   1..=100, a malformed node id or group name, `after` later than `before`) with the field
//!   named, before any provider call.

use crate::validate::ValidationError;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a cluster event is about (`ClusterEventResourceType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClusterEventResource {
    Cluster,
    InstanceGroup,
    Instance,
}

impl ClusterEventResource {
    /// The service's spelling (`Cluster`, `InstanceGroup`, `Instance`).
    pub fn as_aws(self) -> &'static str {
        match self {
            ClusterEventResource::Cluster => "Cluster",
            ClusterEventResource::InstanceGroup => "InstanceGroup",
            ClusterEventResource::Instance => "Instance",
        }
    }

    /// From the service's spelling.
    pub fn from_aws(s: &str) -> Option<Self> {
        [Self::Cluster, Self::InstanceGroup, Self::Instance].into_iter().find(|r| r.as_aws() == s)
    }

    /// Our spelling (`cluster`, `instance_group`, `instance`), as in the REST query.
    pub fn as_snake(self) -> &'static str {
        match self {
            ClusterEventResource::Cluster => "cluster",
            ClusterEventResource::InstanceGroup => "instance_group",
            ClusterEventResource::Instance => "instance",
        }
    }
}

/// How serious a cluster event is (`ClusterEventLevel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClusterEventLevel {
    Info,
    Warn,
    Error,
}

impl ClusterEventLevel {
    /// The service's spelling (`Info`, `Warn`, `Error`).
    pub fn as_aws(self) -> &'static str {
        match self {
            ClusterEventLevel::Info => "Info",
            ClusterEventLevel::Warn => "Warn",
            ClusterEventLevel::Error => "Error",
        }
    }

    /// From the service's spelling.
    pub fn from_aws(s: &str) -> Option<Self> {
        [Self::Info, Self::Warn, Self::Error].into_iter().find(|l| l.as_aws() == s)
    }
}

/// One event of a HyperPod cluster: a status change of the cluster, an instance group or an
/// instance, a node failure or replacement, a health check result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterEvent {
    /// The service's event id (a UUID).
    pub event_id: String,
    pub time: DateTime<Utc>,
    pub resource_type: ClusterEventResource,
    /// The instance group it concerns, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_group: Option<String>,
    /// The instance (node) it concerns, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<ClusterEventLevel>,
    pub description: String,
}

/// Filters and page of a cluster event listing (all optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterEventQuery {
    /// Only events of this instance group.
    #[serde(default)]
    pub instance_group: Option<String>,
    /// Only events of this node (instance id `i-…`).
    #[serde(default)]
    pub node_id: Option<String>,
    /// Only events about this kind of resource.
    #[serde(default)]
    pub resource_type: Option<ClusterEventResource>,
    /// Only events after this time (RFC 3339).
    #[serde(default)]
    pub after: Option<DateTime<Utc>>,
    /// Only events before this time (RFC 3339).
    #[serde(default)]
    pub before: Option<DateTime<Utc>>,
    /// Page size, 1..=100 (the service's maximum); default 50.
    #[serde(default)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
}

impl ClusterEventQuery {
    pub const DEFAULT_LIMIT: u32 = 50;
    pub const MAX_LIMIT: u32 = 100;

    /// The page size to ask for.
    pub fn page_size(&self) -> u32 {
        self.limit.unwrap_or(Self::DEFAULT_LIMIT)
    }

    /// Every rule the service model (`ListClusterEventsRequest`) sets on the filters, as findings.
    pub fn check(&self) -> Result<(), ValidationError> {
        if let Some(l) = self.limit
            && !(1..=Self::MAX_LIMIT).contains(&l)
        {
            return Err(ValidationError::invalid("limit", format!("must be between 1 and {}", Self::MAX_LIMIT)));
        }
        if let Some(n) = &self.node_id {
            check_node_id("node_id", n)?;
        }
        if let Some(g) = &self.instance_group
            && let Err(rule) = crate::names::hyperpod_name(g)
        {
            return Err(ValidationError::invalid("instance_group", rule));
        }
        if let (Some(a), Some(b)) = (self.after, self.before)
            && a > b
        {
            return Err(ValidationError::invalid("after", "must not be later than `before`"));
        }
        if let Some(c) = &self.cursor
            && c.len() > 8192
        {
            return Err(ValidationError::invalid("cursor", "must be at most 8192 characters"));
        }
        Ok(())
    }
}

/// Whether `id` is a HyperPod node id as the service model writes it
/// (`i-[a-f0-9]{8}(?:[a-f0-9]{9})?`), as a finding on `field`.
pub fn check_node_id(field: &str, id: &str) -> Result<(), ValidationError> {
    let hex = id.strip_prefix("i-").unwrap_or("");
    if (hex.len() == 8 || hex.len() == 17) && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(())
    } else {
        Err(ValidationError::invalid(field, "must be an instance id: `i-` and 8 or 17 lowercase hex digits"))
    }
}

/// One page of cluster events, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterEventPage {
    pub events: Vec<ClusterEvent>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// One node of a HyperPod cluster in detail (`DescribeClusterNode`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterNodeDetail {
    pub instance_id: String,
    pub instance_group: String,
    pub instance_type: String,
    /// Running, Pending, Failure, ShuttingDown, SystemUpdating, DeepHealthCheckInProgress, …
    pub status: String,
    /// What the service says about the status (a failure's cause, a health check's result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_time: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_software_update_time: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_zone_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_ip: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_dns: Option<String>,
    /// `OnDemand` or `Spot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_type: Option<String>,
    /// `efa` or `efa-only`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads_per_core: Option<u32>,
    /// The lifecycle script the node ran (`s3://…` prefix and `OnCreate` file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle_script: Option<crate::spec::LifecycleScript>,
    /// The AMI the node runs, and the one it will run after a software update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_image_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_image_id: Option<String>,
    /// UpToDate, UpdateAvailable, SecurityUpdateRequired, EndOfLife.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_version_status: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_query_rules_name_their_field() {
        let t = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        let cases: Vec<(ClusterEventQuery, Option<&str>)> = vec![
            (ClusterEventQuery::default(), None),
            (ClusterEventQuery { limit: Some(100), ..Default::default() }, None),
            (ClusterEventQuery { limit: Some(0), ..Default::default() }, Some("limit")),
            (ClusterEventQuery { limit: Some(101), ..Default::default() }, Some("limit")),
            (ClusterEventQuery { node_id: Some("i-0123456789abcdef0".into()), ..Default::default() }, None),
            (ClusterEventQuery { node_id: Some("i-01234567".into()), ..Default::default() }, None),
            (ClusterEventQuery { node_id: Some("i-0123456789ABCDEF0".into()), ..Default::default() }, Some("node_id")),
            (ClusterEventQuery { node_id: Some("node-1".into()), ..Default::default() }, Some("node_id")),
            (ClusterEventQuery { instance_group: Some("workers".into()), ..Default::default() }, None),
            (
                ClusterEventQuery { instance_group: Some("bad_name".into()), ..Default::default() },
                Some("instance_group"),
            ),
            (
                ClusterEventQuery {
                    after: Some(t("2026-01-02T00:00:00Z")),
                    before: Some(t("2026-01-01T00:00:00Z")),
                    ..Default::default()
                },
                Some("after"),
            ),
            (ClusterEventQuery { cursor: Some("x".repeat(8193)), ..Default::default() }, Some("cursor")),
        ];
        for (q, field) in cases {
            let got = q.check().err().map(|e| e.findings[0].field.clone());
            assert_eq!(got.as_deref(), field, "{q:?}");
        }
    }

    #[test]
    fn service_spellings_round_trip() {
        for r in [ClusterEventResource::Cluster, ClusterEventResource::InstanceGroup, ClusterEventResource::Instance] {
            assert_eq!(ClusterEventResource::from_aws(r.as_aws()), Some(r));
        }
        for l in [ClusterEventLevel::Info, ClusterEventLevel::Warn, ClusterEventLevel::Error] {
            assert_eq!(ClusterEventLevel::from_aws(l.as_aws()), Some(l));
        }
        assert_eq!(ClusterEventLevel::from_aws("Debug"), None);
    }
}
