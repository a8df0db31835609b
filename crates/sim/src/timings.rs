//! Simulated durations, in seconds of simulated time (= real seconds at speed 1).
//!
//! They follow what AWS documents or typically shows: a NAT gateway takes a couple of minutes,
//! an EKS control plane 8–12 minutes, a HyperPod cluster around a quarter of an hour.

/// `create_network`: Creating (NAT gateway provisioning) → Active.
pub const NETWORK_CREATE: f64 = 150.0;
/// `delete_network`: Deleting (NAT gateway, gateways, subnets) → gone.
pub const NETWORK_DELETE: f64 = 60.0;
/// EKS control plane: Creating → Active.
pub const EKS_CREATE: f64 = 600.0;
/// EKS control plane: Deleting → gone.
pub const EKS_DELETE: f64 = 300.0;
/// EKS add-on: Creating → Active.
pub const ADDON_CREATE: f64 = 60.0;
/// EKS add-on: Deleting → gone.
pub const ADDON_DELETE: f64 = 30.0;
/// HyperPod cluster: Creating → InService (without deep health checks).
pub const HYPERPOD_CREATE: f64 = 900.0;
/// Extra time deep health checks add to a node (and so to the cluster).
pub const HYPERPOD_DEEP_HEALTH_CHECK: f64 = 300.0;
/// HyperPod cluster: Deleting → gone.
pub const HYPERPOD_DELETE: f64 = 300.0;
/// A HyperPod node's first instance appears (Pending) this long after the cluster was created.
pub const HYPERPOD_FIRST_NODE: f64 = 120.0;
/// Instances of a group appear spread over this window after [`HYPERPOD_FIRST_NODE`].
pub const HYPERPOD_NODE_SPREAD: f64 = 420.0;
/// A node stays Pending (booting, lifecycle scripts) this long before it runs.
pub const HYPERPOD_NODE_BOOT: f64 = 240.0;
/// A HyperPod cluster whose capacity is not available fails this long after creation.
pub const HYPERPOD_CAPACITY_FAILURE: f64 = 300.0;
/// A Kubernetes pod goes from scheduled to Running (image pull) in this long.
pub const POD_START: f64 = 15.0;
/// A running service pod passes its readiness probe this long after it started.
pub const POD_READY: f64 = 5.0;
/// A `LoadBalancer` Service gets its hostname this long after it was created.
pub const LOAD_BALANCER: f64 = 90.0;
/// Default run time of a batch/v1 Job's pod (override with [`crate::DURATION_ANNOTATION`]).
pub const JOB_DEFAULT_RUN: f64 = 60.0;
/// Default run time of a kubeflow.org/v1 PyTorchJob's pods, and of the training of a
/// HyperPodPyTorchJob or RayJob.
pub const PYTORCHJOB_DEFAULT_RUN: f64 = 300.0;
/// An in-place restart of a HyperPod job's training processes (after a process fault) takes
/// this long.
pub const PROCESS_RESTART: f64 = 20.0;
/// A RayJob's entrypoint is submitted this long after its Ray head started.
pub const RAY_JOB_SUBMIT: f64 = 5.0;
/// A model download spends this long installing its client and listing the repository.
pub const DOWNLOAD_SETUP: f64 = 20.0;
/// Download speed of a model download (bytes per simulated second).
pub const DOWNLOAD_BYTES_PER_SECOND: f64 = 250e6;
/// A resource given the "resource fails" fault fails after this share of its creation time.
pub const FAILURE_SHARE: f64 = 0.5;
/// An UpdateCluster keeps the cluster `Updating` this long.
pub const HYPERPOD_UPDATE: f64 = 60.0;
/// One batch of a HyperPod software update (UpdateClusterSoftware): its instances get the new
/// AMI's root volume and rejoin (`SystemUpdating` this long).
pub const HYPERPOD_SOFTWARE_BATCH: f64 = 600.0;
/// A node being rebooted is `Pending` this long.
pub const HYPERPOD_NODE_REBOOT: f64 = 120.0;
/// A replaced node (new instance) is `Pending` this long.
pub const HYPERPOD_NODE_REPLACE: f64 = 360.0;
/// New instances of a scaled-up or added group start appearing this long after the update.
pub const HYPERPOD_SCALE_FIRST_NODE: f64 = 60.0;
/// FSx for Lustre file system: CREATING → AVAILABLE (AWS: 5 to 10 minutes).
pub const FSX_CREATE: f64 = 480.0;
/// FSx for Lustre file system: DELETING → gone (AWS: a few minutes).
pub const FSX_DELETE: f64 = 180.0;
/// FSx data repository association: CREATING → AVAILABLE (AWS: minutes, longer with a batch
/// metadata import of a large prefix).
pub const FSX_DRA_CREATE: f64 = 120.0;
/// FSx data repository association: DELETING → gone.
pub const FSX_DRA_DELETE: f64 = 60.0;
/// Amazon Managed Service for Prometheus workspace: CREATING → ACTIVE (AWS: under a minute).
pub const AMP_WORKSPACE_CREATE: f64 = 30.0;
/// Amazon Managed Service for Prometheus workspace: DELETING → gone.
pub const AMP_WORKSPACE_DELETE: f64 = 30.0;
/// SageMaker managed MLflow tracking server: Creating → Created (AWS: about 20 minutes).
pub const MLFLOW_TRACKING_SERVER_CREATE: f64 = 1200.0;
/// SageMaker managed MLflow tracking server: Deleting → gone (AWS: several minutes).
pub const MLFLOW_TRACKING_SERVER_DELETE: f64 = 300.0;
/// A Helm release revision from `pending-install`/`pending-upgrade` to `deployed` (no `--wait`).
pub const HELM_RELEASE: f64 = 10.0;
/// HyperPod's managed Karpenter: an empty managed group is consolidated (scaled back to zero)
/// this long after it was first seen idle, unless the NodePool's
/// `spec.disruption.consolidateAfter` says otherwise. Scaling up from zero takes the usual
/// [`HYPERPOD_SCALE_FIRST_NODE`] + [`HYPERPOD_NODE_BOOT`] before the pod can schedule.
pub const KARPENTER_CONSOLIDATE_AFTER: f64 = 300.0;
/// A task governance scheduler config or compute quota: Creating → Created, Updating → Updated.
pub const SCHEDULER_RESOURCE_CHANGE: f64 = 20.0;
/// A task governance scheduler config or compute quota: Deleting → gone.
pub const SCHEDULER_RESOURCE_DELETE: f64 = 10.0;
