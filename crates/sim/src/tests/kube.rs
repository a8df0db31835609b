//! The simulated Kubernetes API: objects, volumes, scheduling on HyperPod nodes, services, jobs, logs.

use super::*;

#[tokio::test]
async fn kube_calls_need_an_active_cluster() {
    let s = sim();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}});
    assert_eq!(kind(s.apply(&target(), &KubeObject(ns.clone())).await), ProviderErrorKind::NotFound);
    let n = network(&s, "demo-vpc").await;
    let r = role(&s, "demo-eks-cluster-role", "eks.amazonaws.com").await;
    s.create_eks_cluster(&eks_req("demo", &r.arn, private_subnets(&n), "t")).await.unwrap();
    let e = s.apply(&target(), &KubeObject(ns.clone())).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::Transient);
    assert!(e.message.contains("CREATING"), "{e}");
    adv(&s, timings::EKS_CREATE);
    apply(&s, ns).await;
    assert_eq!(s.calls("k8s:Apply"), 3);
    s.delete_eks_cluster(REGION, "demo").await.unwrap();
    let e = s.get(&target(), &oref("v1", "Namespace", None, "x")).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::NotFound, "a deleting cluster has no objects left to clean up");
}

#[tokio::test]
async fn objects_are_stored_listed_and_deleted() {
    let s = sim();
    gpu_world(&s, 0).await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "team", "labels": {"a": "1"}}, "data": {"k": "v"}});
    assert_eq!(
        kind(s.apply(&target(), &KubeObject(cm.clone())).await),
        ProviderErrorKind::NotFound,
        "namespace must exist"
    );
    apply(&s, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})).await;
    let stored = apply(&s, cm.clone()).await;
    assert_eq!(stored["data"]["k"], "v");
    let uid = stored["metadata"]["uid"].clone();
    assert!(uid.as_str().is_some_and(|u| u.len() == 36));
    // Re-apply: same uid, new data, generation unchanged (no spec).
    let mut cm2 = cm.clone();
    cm2["data"]["k"] = json!("w");
    let again = apply(&s, cm2).await;
    assert_eq!(again["metadata"]["uid"], uid);
    assert_eq!(again["data"]["k"], "w");
    apply(&s, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other", "namespace": "team", "labels": {"a": "2"}}})).await;
    apply(&s, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "team"}, "stringData": {"t": "x"}})).await;
    apply(&s, json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa", "namespace": "team"}}))
        .await;
    let list = |labels: Vec<(String, String)>| {
        let s = s.clone();
        async move {
            let p = ListParams {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("team".into()),
                labels,
            };
            s.list(&target(), &p)
                .await
                .unwrap()
                .iter()
                .map(|o| o.0["metadata"]["name"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(list(vec![]).await, ["cfg", "other"]);
    assert_eq!(list(vec![("a".into(), "2".into())]).await, ["other"]);
    assert!(get(&s, "v1", "ServiceAccount", Some("team"), "sa").await.is_some());
    assert!(get(&s, "v1", "Secret", Some("team"), "s").await.is_some());
    // Namespaced kinds default to `default`; cluster-scoped ones ignore a namespace.
    apply(&s, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}})).await;
    assert!(get(&s, "v1", "ConfigMap", Some("default"), "d").await.is_some());
    assert!(
        get(&s, "v1", "Namespace", Some("whatever"), "team").await.is_some_and(|n| n["status"]["phase"] == "Active")
    );
    s.delete(&target(), &oref("v1", "ConfigMap", Some("team"), "absent")).await.unwrap();
    s.delete(&target(), &oref("v1", "Namespace", None, "team")).await.unwrap();
    assert!(
        get(&s, "v1", "ConfigMap", Some("team"), "cfg").await.is_none(),
        "deleting a namespace deletes its objects"
    );
    assert_eq!(
        kind(s.delete(&target(), &oref("v1", "Namespace", None, "default")).await),
        ProviderErrorKind::InvalidRequest
    );
    assert_eq!(
        kind(s.apply(&target(), &KubeObject(json!({"apiVersion": "v1", "kind": "ConfigMap"}))).await),
        ProviderErrorKind::InvalidRequest
    );
}

#[tokio::test]
async fn pvc_binds_to_its_static_volume() {
    let s = sim();
    gpu_world(&s, 0).await;
    let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "s3-shared", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": "s3-shared-pv", "resources": {"requests": {"storage": "1200Gi"}}}});
    assert_eq!(apply(&s, pvc).await["status"]["phase"], "Pending");
    let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "s3-shared-pv"},
        "spec": {"capacity": {"storage": "1200Gi"}, "accessModes": ["ReadWriteMany"], "claimRef": {"namespace": "default", "name": "s3-shared"},
                 "csi": {"driver": "s3.csi.aws.com", "volumeHandle": "h"}}});
    assert_eq!(apply(&s, pv).await["status"]["phase"], "Bound");
    let claim = get(&s, "v1", "PersistentVolumeClaim", Some("default"), "s3-shared").await.unwrap();
    assert_eq!(claim["status"]["phase"], "Bound");
    assert_eq!(claim["status"]["capacity"]["storage"], "1200Gi");
    // A volume pre-bound to another claim does not bind.
    apply(&s, json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "taken"}, "spec": {"claimRef": {"namespace": "default", "name": "someone"}}})).await;
    let other = apply(&s, json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "mine"}, "spec": {"volumeName": "taken"}})).await;
    assert_eq!(other["status"]["phase"], "Pending");
    s.delete(&target(), &oref("v1", "PersistentVolume", None, "s3-shared-pv")).await.unwrap();
    let claim = get(&s, "v1", "PersistentVolumeClaim", Some("default"), "s3-shared").await.unwrap();
    assert_eq!(claim["status"]["phase"], "Pending");
}

#[tokio::test]
async fn deployments_schedule_on_hyperpod_nodes_and_become_ready() {
    let s = sim();
    gpu_world(&s, 2).await;
    let nodes = s
        .list(&target(), &ListParams { api_version: "v1".into(), kind: "Node".into(), namespace: None, labels: vec![] })
        .await
        .unwrap();
    assert_eq!(nodes.len(), 2);
    let node = &nodes[0].0;
    assert!(node["metadata"]["name"].as_str().unwrap().starts_with("hyperpod-i-0"));
    assert_eq!(node["metadata"]["labels"]["node.kubernetes.io/instance-type"], "ml.g5.2xlarge");
    assert_eq!(node["metadata"]["labels"]["sagemaker.amazonaws.com/instance-group-name"], "gpu");
    assert_eq!(node["status"]["capacity"]["nvidia.com/gpu"], "1");
    assert_eq!(node["status"]["conditions"][0]["status"], "True");

    let d = apply(&s, deployment("llm", 2, 1)).await;
    assert_eq!(d["status"].get("readyReplicas"), None);
    assert_eq!(d["status"]["replicas"], 2);
    let p = pods(&s, &[("app", "llm")]).await;
    assert_eq!(p.len(), 2);
    assert!(p.iter().all(|x| x["status"]["phase"] == "Pending" && x["spec"]["nodeName"].is_string()));
    assert_eq!(p[0]["status"]["containerStatuses"][0]["state"]["waiting"]["reason"], "ContainerCreating");
    assert_eq!(p[0]["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
    adv(&s, timings::POD_START + timings::POD_READY);
    let d = get(&s, "apps/v1", "Deployment", Some("default"), "llm").await.unwrap();
    assert_eq!(d["status"]["readyReplicas"], 2);
    assert_eq!(d["status"]["conditions"][0]["status"], "True");
    let p = pods(&s, &[("app", "llm")]).await;
    assert!(p.iter().all(|x| x["status"]["phase"] == "Running"
        && x["status"]["podIP"].as_str().is_some_and(|ip| ip.starts_with("10.0."))));

    // Deleting a pod: the ReplicaSet starts a replacement under a new name.
    let victim = p[0]["metadata"]["name"].as_str().unwrap().to_string();
    s.delete(&target(), &oref("v1", "Pod", Some("default"), &victim)).await.unwrap();
    let p = pods(&s, &[("app", "llm")]).await;
    assert_eq!(p.len(), 2);
    assert!(p.iter().all(|x| x["metadata"]["name"] != victim.as_str()));
    let d = get(&s, "apps/v1", "Deployment", Some("default"), "llm").await.unwrap();
    assert_eq!(d["status"]["readyReplicas"], 1);

    // More GPUs than any node has: Pending with the scheduler's reason.
    apply(&s, deployment("big", 1, 4)).await;
    adv(&s, 60.0);
    let big = pods(&s, &[("app", "big")]).await;
    assert_eq!(big[0]["status"]["phase"], "Pending");
    let msg = big[0]["status"]["conditions"][0]["message"].as_str().unwrap();
    assert!(msg.contains("Insufficient nvidia.com/gpu"), "{msg}");
    assert_eq!(
        get(&s, "apps/v1", "Deployment", Some("default"), "big").await.unwrap()["status"].get("readyReplicas"),
        None
    );
    // Scaling down removes pods.
    apply(&s, deployment("llm", 1, 1)).await;
    assert_eq!(pods(&s, &[("app", "llm")]).await.len(), 1);
    s.delete(&target(), &oref("apps/v1", "Deployment", Some("default"), "llm")).await.unwrap();
    assert!(pods(&s, &[("app", "llm")]).await.is_empty());
}

/// The scheduler counts what placed pods hold: a GPU pod waits (`Insufficient nvidia.com/gpu`)
/// while every GPU is taken, and runs when a batch pod holding one ends.
#[tokio::test]
async fn a_gpu_pod_waits_for_a_free_gpu_and_runs_when_a_batch_pod_gives_its_gpu_back() {
    let s = sim();
    gpu_world(&s, 2).await;
    let gpu_job = |name: &str, secs: u32| {
        let mut j = job(name, secs);
        j["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({"limits": {"nvidia.com/gpu": 1}});
        j
    };
    apply(&s, gpu_job("short", 100)).await;
    apply(&s, gpu_job("long", 10_000)).await;
    adv(&s, 10.0);
    apply(&s, deployment("serve", 1, 1)).await;
    adv(&s, 30.0);
    let node_of = |p: &Value| p["spec"]["nodeName"].as_str().map(str::to_string);
    let (short, long) = (pods(&s, &[("app", "short")]).await, pods(&s, &[("app", "long")]).await);
    assert!(node_of(&short[0]).is_some() && node_of(&long[0]).is_some());
    assert_ne!(node_of(&short[0]), node_of(&long[0]), "one GPU each: the jobs take both nodes");
    let serve = pods(&s, &[("app", "serve")]).await;
    assert_eq!((serve[0]["status"]["phase"].as_str(), node_of(&serve[0])), (Some("Pending"), None), "{:#}", serve[0]);
    let msg = serve[0]["status"]["conditions"][0]["message"].as_str().unwrap();
    assert!(msg.starts_with("0/2 nodes are available: 2 Insufficient nvidia.com/gpu."), "{msg}");
    // The short job ends; the waiting pod takes its node, scheduled when the GPU came back.
    adv(&s, 100.0 + timings::POD_START + timings::POD_READY);
    let short = pods(&s, &[("app", "short")]).await;
    assert_eq!(short[0]["status"]["phase"], "Succeeded");
    let serve = pods(&s, &[("app", "serve")]).await;
    assert_eq!(node_of(&serve[0]), node_of(&short[0]), "{:#}", serve[0]);
    assert_ne!(serve[0]["status"]["phase"], "Pending", "{:#}", serve[0]);
    // Every node holds at most its one GPU, in each pod's lifetime.
    let all = s
        .list(
            &target(),
            &ListParams {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: Some("default".into()),
                labels: vec![],
            },
        )
        .await
        .unwrap();
    let holding: Vec<String> = all
        .iter()
        .map(|o| &o.0)
        .filter(|p| p["status"]["phase"] == "Running" || p["status"]["phase"] == "Pending")
        .filter_map(node_of)
        .collect();
    let distinct: std::collections::BTreeSet<&String> = holding.iter().collect();
    assert_eq!(holding.len(), distinct.len(), "two running GPU pods on one node: {holding:?}");
}

#[tokio::test]
async fn a_node_under_a_deep_health_check_keeps_its_node_labelled_and_tainted_and_takes_no_pods() {
    let s = sim();
    gpu_world(&s, 2).await;
    let list = |kind: &str| ListParams { api_version: "v1".into(), kind: kind.into(), namespace: None, labels: vec![] };
    let nodes = s.list(&target(), &list("Node")).await.unwrap();
    assert_eq!(nodes.len(), 2);
    for n in &nodes {
        assert_eq!(n.0["metadata"]["labels"]["sagemaker.amazonaws.com/node-health-status"], "Schedulable");
        assert!(n.0["spec"].get("taints").is_none(), "{}", n.0);
    }
    let checked = nodes[0].0["spec"]["providerID"].as_str().unwrap().rsplit('/').next().unwrap().to_string();
    let target_group = HealthCheckTarget {
        instance_group: "gpu".into(),
        node_ids: vec![checked.clone()],
        checks: vec![DeepHealthCheck::InstanceStress],
    };
    s.start_cluster_health_check(REGION, "demo-hp", &[target_group]).await.unwrap();
    // The Node stays, labelled as HyperPod labels it while checking, with its NoSchedule taint.
    let nodes = s.list(&target(), &list("Node")).await.unwrap();
    assert_eq!(nodes.len(), 2, "the checked node keeps its Node");
    let under = nodes.iter().find(|n| n.0["spec"]["providerID"].as_str().unwrap().ends_with(&checked)).unwrap();
    let labels = &under.0["metadata"]["labels"];
    assert_eq!(
        (
            &labels["sagemaker.amazonaws.com/node-health-status"],
            &labels["sagemaker.amazonaws.com/deep-health-check-status"]
        ),
        (&json!("Unschedulable"), &json!("InProgress"))
    );
    assert_eq!(
        under.0["spec"]["taints"],
        json!([{ "key": "sagemaker.amazonaws.com/node-health-status", "value": "Unschedulable", "effect": "NoSchedule" }])
    );
    // New pods go to the other node only: one takes its GPU, the other waits, saying why.
    apply(&s, deployment("llm", 2, 1)).await;
    let p = pods(&s, &[("app", "llm")]).await;
    let placed: Vec<&str> = p.iter().filter_map(|x| x["spec"]["nodeName"].as_str()).collect();
    assert_eq!(placed.len(), 1, "{p:?}");
    assert!(placed.iter().all(|n| !n.ends_with(&checked)), "{placed:?}");
    let waiting = p.iter().find(|x| x["spec"].get("nodeName").is_none()).unwrap();
    assert_eq!(
        waiting["status"]["conditions"][0]["message"],
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint \
         {sagemaker.amazonaws.com/node-health-status: Unschedulable}. preemption: 0/2 nodes are available: 2 No \
         preemption victims found for incoming pod."
    );
    // The check passes: Schedulable again, no taint.
    adv(&s, timings::HYPERPOD_DEEP_HEALTH_CHECK + 1.0);
    let nodes = s.list(&target(), &list("Node")).await.unwrap();
    assert!(
        nodes.iter().all(|n| n.0["metadata"]["labels"]["sagemaker.amazonaws.com/node-health-status"] == "Schedulable"
            && n.0["spec"].get("taints").is_none())
    );
    // Trainium-free world: no Neuron cores advertised on GPU nodes.
    assert!(nodes[0].0["status"]["allocatable"].get("aws.amazon.com/neuroncore").is_none());
}

#[tokio::test]
async fn without_nodes_pods_stay_pending() {
    let s = sim();
    gpu_world(&s, 0).await;
    apply(&s, deployment("web", 1, 0)).await;
    adv(&s, 600.0);
    let p = pods(&s, &[("app", "web")]).await;
    assert_eq!(p[0]["status"]["phase"], "Pending");
    assert_eq!(p[0]["status"]["conditions"][0]["message"], "no nodes available to schedule pods");
    let e = s.logs(&target(), "default", p[0]["metadata"]["name"].as_str().unwrap(), false, None).await.err().unwrap();
    assert_eq!(e.kind, ProviderErrorKind::InvalidRequest);
    assert!(e.message.contains("waiting to start"), "{e}");
}

#[tokio::test]
async fn load_balancer_services_get_a_hostname() {
    let s = sim();
    gpu_world(&s, 0).await;
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "llm", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "selector": {"app": "llm"}, "ports": [{"port": 80, "targetPort": 8000}]}});
    let created = apply(&s, svc.clone()).await;
    let ip = created["spec"]["clusterIP"].clone();
    assert!(ip.as_str().is_some_and(|x| x.starts_with("10.100.")));
    assert_eq!(created["status"]["loadBalancer"], json!({}));
    adv(&s, timings::LOAD_BALANCER);
    let svc_now = get(&s, "v1", "Service", Some("default"), "llm").await.unwrap();
    let host = svc_now["status"]["loadBalancer"]["ingress"][0]["hostname"].as_str().unwrap().to_string();
    assert!(host.starts_with("k8s-default-llm-") && host.ends_with(".elb.us-east-1.amazonaws.com"), "{host}");
    assert_eq!(apply(&s, svc).await["spec"]["clusterIP"], ip, "re-apply keeps the cluster IP");
    let internal = apply(
        &s,
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "in"}, "spec": {"ports": [{"port": 80}]}}),
    )
    .await;
    adv(&s, 1000.0);
    assert_eq!(internal["status"]["loadBalancer"], json!({}));
}

#[tokio::test]
async fn jobs_run_to_completion_with_logs() {
    let s = sim();
    gpu_world(&s, 1).await;
    apply(&s, job("download", 40)).await;
    let p = pods(&s, &[("job-name", "download")]).await;
    assert_eq!(p.len(), 1);
    let pod = p[0]["metadata"]["name"].as_str().unwrap().to_string();
    assert!(pod.starts_with("download-"));
    adv(&s, timings::POD_START + 20.0);
    let running = get(&s, "batch/v1", "Job", Some("default"), "download").await.unwrap();
    assert_eq!(running["status"]["active"], 1);
    let lines: Vec<String> =
        s.logs(&target(), "default", &pod, false, None).await.unwrap().map(|l| l.unwrap()).collect().await;
    assert_eq!(lines[0], "Starting amazon/aws-cli:2");
    assert!(lines.iter().any(|l| l.starts_with("step 2 |")));
    assert!(!lines.iter().any(|l| l.starts_with("Training complete")));
    adv(&s, 20.0);
    let done = get(&s, "batch/v1", "Job", Some("default"), "download").await.unwrap();
    assert_eq!(done["status"]["succeeded"], 1);
    assert_eq!(done["status"]["conditions"][0]["type"], "Complete");
    assert!(done["status"]["completionTime"].is_string());
    let pod_obj = get(&s, "v1", "Pod", Some("default"), &pod).await.unwrap();
    assert_eq!(pod_obj["status"]["phase"], "Succeeded");
    assert_eq!(pod_obj["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 0);
    let tail: Vec<String> =
        s.logs(&target(), "default", &pod, false, Some(1)).await.unwrap().map(|l| l.unwrap()).collect().await;
    assert_eq!(tail, ["Training complete: 4 steps in 40s; checkpoint saved"]);
    assert_eq!(kind(s.logs(&target(), "default", "nope", false, None).await.map(|_| ())), ProviderErrorKind::NotFound);
}

#[tokio::test]
async fn resource_fails_on_apply_makes_workloads_fail() {
    let s = sim();
    gpu_world(&s, 1).await;
    s.set_faults(SimFaults::none().with("k8s:Apply", FaultMode::resource_fails("CUDA error: out of memory")));
    apply(&s, job("train", 30)).await;
    apply(&s, deployment("web", 1, 0)).await;
    adv(&s, 120.0);
    let j = get(&s, "batch/v1", "Job", Some("default"), "train").await.unwrap();
    assert_eq!(j["status"]["failed"], 1);
    assert_eq!(j["status"]["conditions"][0]["type"], "Failed");
    let web = pods(&s, &[("app", "web")]).await;
    let state = &web[0]["status"]["containerStatuses"][0];
    assert_eq!(state["state"]["waiting"]["reason"], "CrashLoopBackOff");
    assert!(state["restartCount"].as_u64().unwrap() >= 1);
    assert_eq!(
        get(&s, "apps/v1", "Deployment", Some("default"), "web").await.unwrap()["status"].get("readyReplicas"),
        None
    );
}

#[tokio::test]
async fn pytorchjobs_run_master_and_workers() {
    let s = sim();
    gpu_world(&s, 2).await;
    let template = json!({"spec": {"containers": [{"name": "pytorch", "image": "pt:2", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}});
    apply(&s, json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "ft", "annotations": {crate::DURATION_ANNOTATION: "100"}},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 1, "template": template}, "Master": {"replicas": 1, "template": template}}}})).await;
    let p = pods(&s, &[("training.kubeflow.org/job-name", "ft")]).await;
    let names: Vec<&str> = p.iter().map(|x| x["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["ft-master-0", "ft-worker-0"]);
    adv(&s, timings::POD_START + 1.0);
    let running = get(&s, "kubeflow.org/v1", "PyTorchJob", Some("default"), "ft").await.unwrap();
    assert_eq!(running["status"]["conditions"][1]["type"], "Running");
    assert_eq!(running["status"]["replicaStatuses"]["Master"]["active"], 1);
    let lines: Vec<String> =
        s.logs(&target(), "default", "ft-worker-0", false, None).await.unwrap().map(|l| l.unwrap()).collect().await;
    assert_eq!(lines[1], "Initializing distributed environment: world_size=2 rank=1");
    adv(&s, 100.0);
    let done = get(&s, "kubeflow.org/v1", "PyTorchJob", Some("default"), "ft").await.unwrap();
    assert_eq!(done["status"]["conditions"][1]["type"], "Succeeded");
    assert_eq!(done["status"]["replicaStatuses"]["Worker"]["succeeded"], 1);
}

#[tokio::test]
async fn follow_streams_lines_as_simulated_time_passes() {
    let s = SimCloud::new(SimConfig::with_speed(2000.0).seed(1)).unwrap();
    gpu_world(&s, 1).await;
    apply(&s, job("train", 120)).await;
    adv(&s, timings::POD_START + 1.0);
    let pod = pods(&s, &[("job-name", "train")]).await[0]["metadata"]["name"].as_str().unwrap().to_string();
    let stream = s.logs(&target(), "default", &pod, true, None).await.unwrap();
    let lines: Vec<String> =
        tokio::time::timeout(Duration::from_secs(20), stream.map(|l| l.unwrap()).collect::<Vec<_>>())
            .await
            .expect("the stream ends when the container ends");
    assert_eq!(lines.first().map(String::as_str), Some("Starting amazon/aws-cli:2"));
    let steps: Vec<&String> = lines.iter().filter(|l| l.starts_with("step ")).collect();
    assert_eq!(steps.len(), 12, "{lines:?}");
    assert_eq!(lines.last().map(String::as_str), Some("Training complete: 12 steps in 120s; checkpoint saved"));
    let unique: std::collections::BTreeSet<&String> = lines.iter().collect();
    assert_eq!(unique.len(), lines.len(), "no line twice");
}
