//! `HyperPodApi` for [`SimCloud`]: each call goes through the cloud's pipeline, then the rules of
//! [`crate::hyperpod`].

use super::*;
use crate::cloud::SimCloud;
use async_trait::async_trait;

#[async_trait]
impl HyperPodApi for SimCloud {
    async fn describe_training_plan(&self, region: &str, arn: &str) -> Result<Option<TrainingPlan>> {
        self.read("sagemaker:DescribeTrainingPlan", |w, _| {
            Ok(w.training_plans.get(arn).filter(|p| p.arn.split(':').nth(3) == Some(region)).cloned())
        })
    }

    async fn list_training_plans(&self, region: &str) -> Result<Vec<TrainingPlanSummary>> {
        const API: &str = "sagemaker:ListTrainingPlans";
        self.read(API, |w, cx| {
            check_region(API, region)?;
            let (_, by_plan) = usage(w, region, cx.now);
            Ok(crate::capacity::list_plans(w, region, &by_plan))
        })
    }

    async fn search_training_plan_offerings(
        &self,
        region: &str,
        query: &OfferingQuery,
    ) -> Result<Vec<TrainingPlanOffering>> {
        const API: &str = "sagemaker:SearchTrainingPlanOfferings";
        self.read(API, |w, cx| {
            check_region(API, region)?;
            // The service model's rules (ReservedCapacityInstanceType, counts, durations).
            query.check().map_err(|e| invalid(API, format!("ValidationException: {e}")))?;
            Ok(crate::capacity::offerings(w, region, query, cx.now))
        })
    }

    async fn describe_hyperpod_cluster(&self, region: &str, name: &str) -> Result<Option<HyperPodCluster>> {
        self.read("sagemaker:DescribeCluster", |w, cx| {
            Ok(w.hyperpod.get(&rkey(region, name)).map(|h| cluster_view(h, cx.now)))
        })
    }

    async fn list_hyperpod_clusters(&self, region: &str) -> Result<Vec<String>> {
        self.read("sagemaker:ListClusters", |w, _| {
            Ok(w.hyperpod.values().filter(|h| h.region == region).map(|h| h.name.clone()).collect())
        })
    }

    async fn create_hyperpod_cluster(&self, req: &CreateHyperPodCluster) -> Result<HyperPodCluster> {
        self.write("sagemaker:CreateCluster", |w, cx| create_cluster(w, req, cx.now, cx.resource_fails.as_deref()))
    }

    async fn delete_hyperpod_cluster(&self, region: &str, name: &str) -> Result<()> {
        const API: &str = "sagemaker:DeleteCluster";
        self.write(API, |w, cx| match w.hyperpod.get_mut(&rkey(region, name)) {
            Some(h) => {
                if h.life.deleting.is_none() {
                    let text = format!("Cluster {name} is being deleted: Deleting");
                    events::cluster(h, cx.now, ClusterEventLevel::Info, text);
                }
                h.life.start_deleting(cx.now, timings::HYPERPOD_DELETE);
                Ok(())
            }
            None => Err(cluster_not_found(API, region, name)),
        })
    }

    async fn list_cluster_nodes(&self, region: &str, cluster: &str) -> Result<Vec<ClusterNode>> {
        const API: &str = "sagemaker:ListClusterNodes";
        self.read(API, |w, cx| {
            let h = w.hyperpod.get(&rkey(region, cluster)).ok_or_else(|| cluster_not_found(API, region, cluster))?;
            Ok(nodes(h, cx.now)
                .into_iter()
                .map(|n| ClusterNode {
                    instance_id: n.instance_id,
                    instance_group: n.group,
                    instance_type: n.instance_type,
                    status: n.status.to_string(),
                    availability_zone: n.availability_zone,
                })
                .collect())
        })
    }

    async fn update_hyperpod_cluster(&self, req: &UpdateHyperPodCluster) -> Result<HyperPodCluster> {
        self.write("sagemaker:UpdateCluster", |w, cx| update_cluster(w, req, cx.now))
    }

    async fn start_cluster_health_check(
        &self,
        region: &str,
        cluster: &str,
        targets: &[HealthCheckTarget],
    ) -> Result<()> {
        self.write("sagemaker:StartClusterHealthCheck", |w, cx| {
            start_health_check(w, region, cluster, targets, cx.now, cx.resource_fails.is_some())
        })
    }

    async fn update_cluster_software(&self, req: &UpdateClusterSoftware) -> Result<()> {
        self.write("sagemaker:UpdateClusterSoftware", |w, cx| {
            software_update::update_software(w, req, cx.now, cx.resource_fails.is_some())
        })
    }

    async fn batch_node_action(
        &self,
        region: &str,
        cluster: &str,
        action: NodeAction,
        node_ids: &[String],
    ) -> Result<BatchNodeResult> {
        let api = match action {
            NodeAction::Reboot => "sagemaker:BatchRebootClusterNodes",
            NodeAction::Replace => "sagemaker:BatchReplaceClusterNodes",
            NodeAction::Delete => "sagemaker:BatchDeleteClusterNodes",
        };
        self.write(api, |w, cx| batch_nodes(w, region, cluster, action, node_ids, cx.now))
    }

    async fn list_cluster_events(
        &self,
        region: &str,
        cluster: &str,
        query: &ClusterEventQuery,
    ) -> Result<ClusterEventPage> {
        const API: &str = "sagemaker:ListClusterEvents";
        self.read(API, |w, cx| {
            let h = w.hyperpod.get(&rkey(region, cluster)).ok_or_else(|| cluster_not_found(API, region, cluster))?;
            events::page(w, h, query, cx.now)
        })
    }

    async fn describe_cluster_node(
        &self,
        region: &str,
        cluster: &str,
        node_id: &str,
    ) -> Result<Option<ClusterNodeDetail>> {
        const API: &str = "sagemaker:DescribeClusterNode";
        self.read(API, |w, cx| {
            let h = w.hyperpod.get(&rkey(region, cluster)).ok_or_else(|| cluster_not_found(API, region, cluster))?;
            Ok(nodes::node_detail(w, h, node_id, cx.now))
        })
    }
}
