//! Identity, zones, instance offerings, quotas and training plans of a region.

use super::*;

#[tokio::test]
async fn identity_zones_offerings_and_quotas() {
    let s = SimCloud::new(SimConfig::with_speed(1.0).account("210987654321")).unwrap();
    assert_eq!(s.caller_identity().await.unwrap().account, "210987654321");
    let zones = s.availability_zones("us-west-2").await.unwrap();
    assert_eq!(
        zones.iter().map(|z| z.name.as_str()).collect::<Vec<_>>(),
        ["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"]
    );
    assert_eq!(s.availability_zones("xx-north-9").await.unwrap().len(), 3);
    assert_eq!(kind(s.availability_zones("nowhere").await), ProviderErrorKind::InvalidRequest);
    let offers = s.instance_type_offerings(REGION).await.unwrap();
    let has = |t: &str, az: &str| offers.iter().any(|o| o.instance_type == t && o.availability_zone == az);
    assert!(has("ml.g5.2xlarge", "us-east-1a") && has("ml.p5.48xlarge", "us-east-1b"));
    assert!(!has("ml.p5.48xlarge", "us-east-1a"), "high-end types are missing from some AZs");
    let q = |t: &'static str| {
        let s = s.clone();
        async move { s.hyperpod_instance_quota(REGION, t).await.unwrap().map(|q| q.value) }
    };
    assert_eq!(q("ml.g5.2xlarge").await, Some(10));
    assert_eq!(q("ml.p5.48xlarge").await, Some(0));
    assert_eq!(q("ml.x9.huge").await, None);
    s.set_quota(REGION, "ml.p5.48xlarge", 4).unwrap();
    assert_eq!(q("ml.p5.48xlarge").await, Some(4));
    let quota = s.hyperpod_instance_quota(REGION, "ml.p5.48xlarge").await.unwrap().unwrap();
    assert_eq!(quota.name, "ml.p5.48xlarge for cluster usage");
    assert!(quota.code.starts_with("L-"));
}

#[tokio::test]
async fn quotas_training_plans_and_offerings_of_a_region() {
    let s = sim();
    let b = base(&s).await;
    // Every HyperPod type has a quota, the same one the preflight reads.
    let quotas = s.hyperpod_instance_quotas(REGION).await.unwrap();
    assert_eq!(quotas.len(), instantstart_core::instance_types::CLUSTER_INSTANCE_TYPES.len());
    for t in ["ml.g5.2xlarge", "ml.p5.48xlarge", "ml.m5.xlarge"] {
        let listed = quotas.iter().find(|q| q.name == format!("{t} for cluster usage")).cloned();
        assert_eq!(listed, s.hyperpod_instance_quota(REGION, t).await.unwrap(), "{t}");
    }
    s.set_quota(REGION, "ml.p5.48xlarge", 8).unwrap();
    let p5 = s.hyperpod_instance_quotas(REGION).await.unwrap();
    assert_eq!(p5.iter().find(|q| q.name.starts_with("ml.p5.48xlarge ")).map(|q| q.value), Some(8));
    assert_eq!(kind(s.hyperpod_instance_quotas("Not_A_Region").await), ProviderErrorKind::InvalidRequest);

    // A plan, used by a cluster: listed with its use.
    let plan = s.add_training_plan(REGION, "p5-plan", "ml.p5.48xlarge", 4, "us-east-1b").unwrap();
    let sb = compute_subnet(&s, &b, "us-east-1b", "10.0.16.0/20").await;
    let mut g = group("reserved", "ml.p5.48xlarge", 3, "us-east-1b");
    g.capacity = CapacitySpec::TrainingPlan { arn: plan.arn.clone() };
    s.create_hyperpod_cluster(&hp_req(&b, "hp", vec![(g, sb.id.clone())])).await.unwrap();
    let plans = s.list_training_plans(REGION).await.unwrap();
    assert_eq!(plans.len(), 1);
    let p = &plans[0];
    assert_eq!(
        (p.name.as_str(), p.status.as_str(), p.availability_zone.as_deref(), p.instance_type.as_deref()),
        ("p5-plan", "Active", Some("us-east-1b"), Some("ml.p5.48xlarge"))
    );
    assert_eq!((p.total_instance_count, p.in_use_instance_count, p.available_instance_count), (4, Some(3), Some(1)));
    assert!(p.start_time < p.end_time && p.target_resources == ["hyperpod-cluster"]);
    assert!(s.list_training_plans("eu-west-1").await.unwrap().is_empty());

    // Offerings: only AZs that offer the type, from the next midnight, as long as asked.
    let offered = s.instance_type_offerings(REGION).await.unwrap();
    let q = OfferingQuery {
        instance_type: "ml.p5.48xlarge".into(),
        instance_count: 8,
        duration_hours: 48,
        start_after: None,
        end_before: None,
    };
    let offers = s.search_training_plan_offerings(REGION, &q).await.unwrap();
    assert!(offers.len() >= 2, "{offers:?}");
    for o in &offers {
        let az = o.availability_zone.as_deref().unwrap();
        assert!(offered.iter().any(|x| x.availability_zone == az && x.instance_type == "ml.p5.48xlarge"), "{az}");
        assert_eq!((o.instance_count, o.duration_hours), (8, Some(48)));
        let (start, end) = (o.start_time.unwrap(), o.end_time.unwrap());
        assert_eq!(end - start, chrono::Duration::hours(48));
        assert_eq!(start.format("%H:%M:%S").to_string(), "00:00:00");
        assert!(
            o.offering_id.starts_with("tpo-") && o.upfront_fee.is_some() && o.currency_code.as_deref() == Some("USD")
        );
        assert_eq!(o.target_resources, ["hyperpod-cluster"]);
    }
    // The window bounds them: ending by the first offering's end leaves only it; a window
    // shorter than the duration leaves none; a later start moves them.
    let tight = OfferingQuery { end_before: offers[0].end_time, ..q.clone() };
    assert_eq!(s.search_training_plan_offerings(REGION, &tight).await.unwrap(), offers[..1]);
    let start = offers[0].start_time.unwrap();
    let short =
        OfferingQuery { start_after: Some(start), end_before: Some(start + chrono::Duration::hours(47)), ..q.clone() };
    assert!(s.search_training_plan_offerings(REGION, &short).await.unwrap().is_empty());
    let later = OfferingQuery { start_after: Some(start + chrono::Duration::days(10)), ..q.clone() };
    let moved = s.search_training_plan_offerings(REGION, &later).await.unwrap();
    assert!(moved.iter().all(|o| o.start_time.unwrap() >= start + chrono::Duration::days(10)), "{moved:?}");
    // Only what SageMaker sells: 1, 2, 4, … 64 instances, whole days up to 182.
    for (count, hours) in [(3, 48), (128, 48), (8, 36), (8, 183 * 24)] {
        let unsold = OfferingQuery { instance_count: count, duration_hours: hours, ..q.clone() };
        assert!(s.search_training_plan_offerings(REGION, &unsold).await.unwrap().is_empty(), "{count} x {hours}h");
    }
    // Capacity: 64 per AZ, minus what plans already reserve there (4 in us-east-1b).
    let sixty_four = OfferingQuery { instance_count: 64, ..q.clone() };
    let zones: Vec<_> = s
        .search_training_plan_offerings(REGION, &sixty_four)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|o| o.availability_zone)
        .collect();
    assert!(!zones.is_empty() && !zones.iter().any(|z| z == "us-east-1b"), "{zones:?}");
    // What SageMaker refuses: a type no plan reserves.
    let bad = OfferingQuery { instance_type: "ml.g5.2xlarge".into(), ..q };
    assert_eq!(kind(s.search_training_plan_offerings(REGION, &bad).await), ProviderErrorKind::InvalidRequest);
}
