//! HyperPod cluster events (paged, newest first) and one node in detail.

use super::*;

/// Every event of `cluster` at this moment, newest first, read page by page with `limit`.
async fn all_events(s: &SimCloud, cluster: &str, q: ClusterEventQuery, limit: u32) -> Vec<ClusterEvent> {
    let mut out = Vec::new();
    let mut q = ClusterEventQuery { limit: Some(limit), ..q };
    loop {
        let page = s.list_cluster_events(REGION, cluster, &q).await.unwrap();
        assert!(page.events.len() <= limit as usize);
        out.extend(page.events);
        match page.next_cursor {
            Some(c) => q.cursor = Some(c),
            None => return out,
        }
    }
}

#[tokio::test]
async fn hyperpod_events_follow_the_state_machine_and_page_newest_first() {
    let s = sim();
    let b = base(&s).await;
    let sa = compute_subnet(&s, &b, "us-east-1a", "10.0.16.0/20").await;
    let mut workers = group("workers", "ml.g5.2xlarge", 2, "us-east-1a");
    workers.deep_health_checks = DeepHealthChecks { stress: true, connectivity: false };
    s.create_hyperpod_cluster(&hp_req(&b, "demo-hp", vec![(workers, sa.id.clone())])).await.unwrap();
    // At once: only the creation; nothing in the future is shown.
    let first = all_events(&s, "demo-hp", ClusterEventQuery::default(), 100).await;
    let texts: Vec<&str> = first.iter().map(|e| e.description.as_str()).collect();
    assert_eq!(
        texts,
        [
            "Instance group workers is being created: 2 x ml.g5.2xlarge in us-east-1a",
            "Cluster demo-hp is being created: Creating"
        ]
    );
    adv(&s, timings::HYPERPOD_CREATE + timings::HYPERPOD_DEEP_HEALTH_CHECK);
    let c = s.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().unwrap();
    assert_eq!(c.state, ResourceState::Active);
    let all = all_events(&s, "demo-hp", ClusterEventQuery::default(), 100).await;
    // Newest first; ids are UUIDs, unique.
    assert!(all.windows(2).all(|w| w[0].time >= w[1].time), "{all:#?}");
    assert!(all.iter().all(|e| e.event_id.len() == 36 && e.event_id.chars().filter(|c| *c == '-').count() == 4));
    let ids: std::collections::BTreeSet<&str> = all.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(ids.len(), all.len());
    assert_eq!(all[0].description, "Cluster demo-hp is InService");
    let nodes = s.list_cluster_nodes(REGION, "demo-hp").await.unwrap();
    for n in &nodes {
        let mine: Vec<&str> = all
            .iter()
            .filter(|e| e.instance_id.as_deref() == Some(n.instance_id.as_str()))
            .map(|e| e.description.as_str())
            .rev()
            .collect();
        let id = &n.instance_id;
        assert_eq!(
            mine,
            [
                format!("Instance {id} (ml.g5.2xlarge) launched in us-east-1a: Pending"),
                format!("Deep health checks started on {id}: DeepHealthCheckInProgress"),
                format!("Deep health checks passed on {id}"),
                format!("Instance {id} is Running"),
            ]
        );
    }
    // Pages of 2 give the same events, in the same order, without repeats.
    assert_eq!(all_events(&s, "demo-hp", ClusterEventQuery::default(), 2).await, all);
    // Filters: resource type, group, node, time window.
    let q = |f: ClusterEventQuery| all_events(&s, "demo-hp", f, 100);
    let clusters =
        q(ClusterEventQuery { resource_type: Some(ClusterEventResource::Cluster), ..Default::default() }).await;
    assert!(clusters.iter().all(|e| e.resource_type == ClusterEventResource::Cluster) && clusters.len() == 2);
    let one = q(ClusterEventQuery { node_id: Some(nodes[0].instance_id.clone()), ..Default::default() }).await;
    assert_eq!(one.len(), 4);
    assert_eq!(
        q(ClusterEventQuery { instance_group: Some("workers".into()), ..Default::default() }).await.len(),
        all.len() - 2
    );
    let newest = all[0].time;
    assert_eq!(
        q(ClusterEventQuery { after: Some(newest), ..Default::default() }).await.len(),
        all.iter().filter(|e| e.time >= newest).count()
    );
    assert!(
        q(ClusterEventQuery {
            before: Some(all.last().unwrap().time - chrono::Duration::seconds(1)),
            ..Default::default()
        })
        .await
        .is_empty()
    );
    // A replace: a warning on the old instance, the new one's launch, later Running.
    let old = nodes[0].instance_id.clone();
    s.batch_node_action(REGION, "demo-hp", NodeAction::Replace, std::slice::from_ref(&old)).await.unwrap();
    let page = s
        .list_cluster_events(REGION, "demo-hp", &ClusterEventQuery { limit: Some(2), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(page.events[1].level, Some(ClusterEventLevel::Warn));
    assert_eq!(page.events[1].instance_id.as_deref(), Some(old.as_str()));
    assert!(page.events[1].description.starts_with(&format!("Instance {old} is being replaced by i-0")));
    adv(&s, timings::HYPERPOD_NODE_REPLACE);
    let newest = &s.list_cluster_events(REGION, "demo-hp", &ClusterEventQuery::default()).await.unwrap().events[0];
    assert!(newest.description.ends_with("is Running") && newest.instance_id.as_deref() != Some(old.as_str()));
    // Bad tokens and unknown clusters are refused as the service refuses them.
    let bad = ClusterEventQuery { cursor: Some("nonsense".into()), ..Default::default() };
    assert_eq!(kind(s.list_cluster_events(REGION, "demo-hp", &bad).await), ProviderErrorKind::InvalidRequest);
    assert_eq!(
        kind(s.list_cluster_events(REGION, "nope", &ClusterEventQuery::default()).await),
        ProviderErrorKind::NotFound
    );
    // Deletion is the last thing that happens.
    s.delete_hyperpod_cluster(REGION, "demo-hp").await.unwrap();
    adv(&s, 1.0);
    let last = &s.list_cluster_events(REGION, "demo-hp", &ClusterEventQuery::default()).await.unwrap().events[0];
    assert_eq!(last.description, "Cluster demo-hp is being deleted: Deleting");
}

#[tokio::test]
async fn hyperpod_failures_are_error_events_and_nothing_after_them() {
    let s = sim();
    let b = base(&s).await;
    let sc = compute_subnet(&s, &b, "us-east-1c", "10.0.16.0/20").await;
    s.create_hyperpod_cluster(&hp_req(&b, "hp", vec![(group("g", "ml.p4d.24xlarge", 1, "us-east-1c"), sc.id.clone())]))
        .await
        .unwrap();
    adv(&s, timings::HYPERPOD_CREATE * 2.0);
    let events = all_events(&s, "hp", ClusterEventQuery::default(), 100).await;
    assert_eq!(events[0].level, Some(ClusterEventLevel::Error), "{events:#?}");
    assert!(events[0].description.starts_with("Cluster hp failed: InsufficientInstanceCapacity"), "{events:#?}");
    assert!(!events.iter().any(|e| e.description.contains("InService")));
}

#[tokio::test]
async fn a_node_in_detail_and_unknown_nodes() {
    let s = sim();
    let b = base(&s).await;
    let sa = compute_subnet(&s, &b, "us-east-1a", "10.0.16.0/20").await;
    let mut spot = group("spot", "ml.g5.2xlarge", 1, "us-east-1a");
    spot.capacity = CapacitySpec::Spot;
    s.create_hyperpod_cluster(&hp_req(&b, "demo-hp", vec![(spot, sa.id.clone())])).await.unwrap();
    adv(&s, timings::HYPERPOD_CREATE);
    let n = &s.list_cluster_nodes(REGION, "demo-hp").await.unwrap()[0];
    let d = s.describe_cluster_node(REGION, "demo-hp", &n.instance_id).await.unwrap().expect("node");
    assert_eq!((d.instance_group.as_str(), d.status.as_str()), ("spot", "Running"));
    assert_eq!(d.capacity_type.as_deref(), Some("Spot"));
    assert_eq!(d.availability_zone.as_deref(), Some("us-east-1a"));
    assert!(d.availability_zone_id.is_some());
    let ip: std::net::Ipv4Addr = d.private_ip.as_deref().unwrap().parse().unwrap();
    assert!(net("10.0.16.0/20").contains(&ip), "{ip}");
    assert_eq!(d.private_dns, Some(format!("ip-{}.ec2.internal", ip.to_string().replace('.', "-"))));
    assert_eq!(d.lifecycle_script, Some(script()));
    assert_eq!(d.threads_per_core, Some(1));
    assert!(d.launch_time.is_some() && d.current_image_id.as_deref().is_some_and(|a| a.starts_with("ami-")));
    // The same read twice is the same node.
    assert_eq!(s.describe_cluster_node(REGION, "demo-hp", &n.instance_id).await.unwrap(), Some(d));
    assert_eq!(s.describe_cluster_node(REGION, "demo-hp", "i-00000000000000000").await.unwrap(), None);
    assert_eq!(kind(s.describe_cluster_node(REGION, "nope", &n.instance_id).await), ProviderErrorKind::NotFound);
}
