//! HyperPod platform software updates (`UpdateClusterSoftware`) in the simulated SageMaker.
//!
//! Groups launch on [`LAUNCH_RELEASE`] of the HyperPod AMI; [`RELEASES`] lists the releases
//! the simulated service publishes, the last being the latest (a security patch published
//! since), so a new cluster reads `ImageVersionStatus` `UpdateAvailable`. An update moves the
//! named groups (every group when none is named) to a named release, to the latest, or to an
//! AMI (`ImageId`), group after group, each rolling through its instances in batches
//! (`MaximumBatchSize`; the whole group when no policy is given) of
//! [`timings::HYPERPOD_SOFTWARE_BATCH`], `WaitIntervalInSeconds` apart. While it runs the
//! cluster is `SystemUpdating` (read as Updating), the group being updated `SystemUpdating`
//! with `SoftwareUpdateStatus` `InProgress` (groups still waiting their turn `Pending`), the
//! instances of the batch in progress `SystemUpdating`, and `TargetStateCount` counts the
//! instances already on the new image. Then the group reads `Succeeded` on its new release.
//!
//! What SageMaker refuses (API reference `UpdateClusterSoftware`; developer guide
//! `sagemaker-hyperpod-eks-operate-cli-command-update-cluster-software`):
//! - a cluster not `InService` — creating, updating, another software update running —
//!   `ConflictException`;
//! - an unknown instance group, an `ImageReleaseVersion` that is not a published release:
//!   `ValidationException`;
//! - a group that runs a custom AMI updated without `ImageId` (API reference `ImageId`: "if an
//!   instance group uses a custom AMI, you must provide an ImageId or use the default"):
//!   `ValidationException`.
//!
//! Under the `ResourceFails` fault the first group's update fails after its first batch and
//! rolls back (`RollbackInProgress` → `RollbackComplete`), keeping its software.

use crate::base::{Phase, rkey, stable_hash};
use crate::hyperpod_events as events;
use crate::timings;
use crate::world::{GroupRec, HyperPodRec, SoftwareUpdateRec, World};
use instantstart_core::provider::{
    ClusterEventLevel, GroupSoftware, ProviderError, ProviderErrorKind, Result, UpdateClusterSoftware,
};

/// HyperPod AMI releases the simulated SageMaker publishes, oldest first; the last is the
/// latest.
pub(crate) const RELEASES: &[&str] = &["2025.8.1", "2025.10.1", "2025.11.2"];
/// The release new groups launch on.
pub(crate) const LAUNCH_RELEASE: &str = "2025.10.1";

fn latest() -> &'static str {
    RELEASES[RELEASES.len() - 1]
}

/// The HyperPod AMI of `release` in `region`.
pub(crate) fn release_image(region: &str, release: &str) -> String {
    format!("ami-0{:016x}", stable_hash(&[region, "hyperpod-ami", release]))
}

impl SoftwareUpdateRec {
    /// When batch `b` starts.
    fn batch_start(&self, b: u32) -> f64 {
        self.start + f64::from(b) * (timings::HYPERPOD_SOFTWARE_BATCH + self.wait)
    }

    /// The moment a failing update starts rolling back.
    fn fail_at(&self) -> f64 {
        self.start + timings::HYPERPOD_SOFTWARE_BATCH
    }
}

/// What a group runs when no update is in effect: its release (the launch release when none
/// was set) or its custom AMI.
fn base(g: &GroupRec) -> (Option<String>, Option<String>) {
    match (&g.image_release, &g.image_id) {
        (_, Some(id)) => (None, Some(id.clone())),
        (Some(r), None) => (Some(r.clone()), None),
        (None, None) => (Some(LAUNCH_RELEASE.to_string()), None),
    }
}

/// What group `g` runs at `now`: (release, custom AMI).
fn current(g: &GroupRec, now: f64) -> (Option<String>, Option<String>) {
    match &g.software_update {
        Some(u) if now >= u.end && !u.fails => (u.to_release.clone(), u.to_image.clone()),
        Some(u) => (u.from_release.clone(), u.from_image.clone()),
        None => base(g),
    }
}

/// The AMI id of (release, custom AMI).
fn image_of(region: &str, release: &Option<String>, image: &Option<String>) -> String {
    match (release, image) {
        (_, Some(id)) => id.clone(),
        (Some(r), None) => release_image(region, r),
        (None, None) => release_image(region, LAUNCH_RELEASE),
    }
}

/// A software update of group `g` is running at `now`.
pub(crate) fn group_running(g: &GroupRec, now: f64) -> bool {
    g.software_update.as_ref().is_some_and(|u| now < u.end)
}

/// A software update of any group of `h` is running at `now`.
pub(crate) fn running(h: &HyperPodRec, now: f64) -> bool {
    h.groups.iter().any(|g| group_running(g, now))
}

/// Slot `i` of `g` is being updated at `now` (its batch is in progress).
pub(crate) fn slot_updating(g: &GroupRec, i: usize, now: f64) -> bool {
    let Some(u) = &g.software_update else { return false };
    if now < u.start || now >= u.end {
        return false;
    }
    let b = u32::try_from(i).unwrap_or(u32::MAX) / u.batch.max(1);
    let from = u.batch_start(b);
    let rolling_back = u.fails && now >= u.fail_at();
    (rolling_back && b == 0) || (!rolling_back && now >= from && now < from + timings::HYPERPOD_SOFTWARE_BATCH)
}

/// DescribeCluster's software fields of group `g` at `now`.
pub(crate) fn group_software(region: &str, g: &GroupRec, now: f64) -> GroupSoftware {
    let (release, image) = current(g, now);
    let current_image = image_of(region, &release, &image);
    let (desired_release, desired_image, status, on_target) = match &g.software_update {
        Some(u) if now < u.end => {
            let (status, done) = if now < u.start {
                ("Pending", 0)
            } else if u.fails && now >= u.fail_at() {
                ("RollbackInProgress", u.count)
            } else {
                let batches_done = ((now - u.start) / (timings::HYPERPOD_SOFTWARE_BATCH + u.wait)).floor();
                ("InProgress", (batches_done as u32).saturating_mul(u.batch).min(u.count))
            };
            // A rollback swaps current and desired (DescribeCluster `TargetStateCount`).
            let (dr, di) = if status == "RollbackInProgress" {
                (u.from_release.clone(), u.from_image.clone())
            } else {
                (u.to_release.clone(), u.to_image.clone())
            };
            (dr, di, Some(status), done)
        }
        Some(u) => {
            (release.clone(), image.clone(), Some(if u.fails { "RollbackComplete" } else { "Succeeded" }), g.count)
        }
        None => (release.clone(), image.clone(), None, g.count),
    };
    // A custom AMI has no HyperPod release to compare with.
    let version_status = match (&release, &image) {
        (Some(r), None) if r == latest() => Some("UpToDate"),
        (Some(_), None) => Some("UpdateAvailable"),
        _ => None,
    };
    GroupSoftware {
        current_image_id: Some(current_image),
        desired_image_id: Some(image_of(region, &desired_release, &desired_image)),
        current_release: release,
        desired_release,
        image_version_status: version_status.map(str::to_string),
        update_status: status.map(str::to_string),
        target_state_count: Some(on_target),
    }
}

/// Writes a finished update into the group's software (before a new update reads it).
fn settle(g: &mut GroupRec, now: f64) {
    if g.software_update.as_ref().is_some_and(|u| now >= u.end) {
        let (release, image) = current(g, now);
        g.image_release = release;
        g.image_id = image;
    }
}

fn invalid(api: &str, message: impl Into<String>) -> ProviderError {
    ProviderError::new(api, ProviderErrorKind::InvalidRequest, message)
}

/// UpdateClusterSoftware (module docs). Returns nothing; the cluster reads `SystemUpdating`
/// until the last group is done.
pub(crate) fn update_software(w: &mut World, req: &UpdateClusterSoftware, now: f64, fails: bool) -> Result<()> {
    const API: &str = "sagemaker:UpdateClusterSoftware";
    let h = w.hyperpod.get_mut(&rkey(&req.region, &req.cluster)).ok_or_else(|| {
        ProviderError::not_found(API, format!("ResourceNotFound: Cluster {} not found in {}", req.cluster, req.region))
    })?;
    if h.life.phase(now) != Phase::Active || h.updating_until.is_some_and(|u| now < u) || running(h, now) {
        return Err(ProviderError::new(
            API,
            ProviderErrorKind::Conflict,
            format!(
                "ConflictException: Cluster {} is not InService; retry when the current operation completes",
                req.cluster
            ),
        ));
    }
    let mut order: Vec<(usize, Option<String>)> = Vec::new();
    if req.instance_groups.is_empty() {
        order.extend((0..h.groups.len()).map(|i| (i, None)));
    }
    for g in &req.instance_groups {
        let Some(i) = h.groups.iter().position(|x| x.name == g.name) else {
            return Err(invalid(
                API,
                format!("ValidationException: Instance group {} does not exist in cluster {}", g.name, req.cluster),
            ));
        };
        if let Some(v) = &g.image_release_version
            && !RELEASES.contains(&v.as_str())
        {
            return Err(invalid(
                API,
                format!(
                    "ValidationException: ImageReleaseVersion {v} is not a HyperPod AMI release (available: {})",
                    RELEASES.join(", ")
                ),
            ));
        }
        order.push((i, g.image_release_version.clone()));
    }
    let custom = req.image_id.as_deref().filter(|id| *id != "default").map(str::to_string);
    for (i, _) in &order {
        let g = &mut h.groups[*i];
        settle(g, now);
        if g.image_id.is_some() && req.image_id.is_none() {
            return Err(invalid(
                API,
                format!(
                    "ValidationException: Instance group {} uses a custom AMI; provide an ImageId (or default) to update it",
                    g.name
                ),
            ));
        }
    }
    let wait = req.deployment.as_ref().and_then(|d| d.wait_interval_secs).map_or(0.0, f64::from);
    let mut start = now;
    let cluster = h.name.clone();
    events::cluster(
        h,
        now,
        ClusterEventLevel::Info,
        format!("Cluster {cluster} software update started: SystemUpdating"),
    );
    for (k, (i, release)) in order.into_iter().enumerate() {
        let g = &h.groups[i];
        let count = g.count.max(1);
        let batch = req.deployment.as_ref().map_or(count, |d| d.max_batch.instances(count));
        let batches = count.div_ceil(batch);
        let fails_here = fails && k == 0;
        let end = if fails_here {
            start + 2.0 * timings::HYPERPOD_SOFTWARE_BATCH
        } else {
            start + f64::from(batches) * timings::HYPERPOD_SOFTWARE_BATCH + f64::from(batches - 1) * wait
        };
        let (from_release, from_image) = base(g);
        let (to_release, to_image) = match &custom {
            Some(id) => (None, Some(id.clone())),
            None => (Some(release.unwrap_or_else(|| latest().to_string())), None),
        };
        let name = g.name.clone();
        let to = to_release.clone().map(|r| format!("release {r}")).or(to_image.clone()).unwrap_or_default();
        h.groups[i].software_update = Some(SoftwareUpdateRec {
            from_release,
            from_image,
            to_release,
            to_image,
            start,
            end,
            batch,
            count,
            wait,
            fails: fails_here,
        });
        events::group(h, start, &name, ClusterEventLevel::Info, format!("Instance group {name} is updating to {to}"));
        if fails_here {
            let text = format!("Instance group {name} software update failed; rolled back");
            events::group(h, end, &name, ClusterEventLevel::Error, text);
        } else {
            events::group(h, end, &name, ClusterEventLevel::Info, format!("Instance group {name} runs {to}"));
        }
        start = end;
    }
    events::cluster(
        h,
        start,
        ClusterEventLevel::Info,
        format!("Cluster {cluster} software update completed: InService"),
    );
    Ok(())
}
