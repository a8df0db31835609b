//! The `instantstart-server` binary on PostgreSQL (started as the store suite starts it, see
//! `crates/store/tests/common`):
//! - a create pipeline on the simulated cloud, the server killed with SIGKILL while EKS is
//!   being polled, restarted on the same store and data directory (so as the same replica: it
//!   takes its own lease back at once), completes with every resource created exactly once;
//! - two servers on one database: a WebSocket follower on B sees every phase change of an
//!   operation A drives, as a follower on A does; a browser session minted on A works on B;
//! - two servers on one database share one simulated account (each serving the simulated
//!   clusters' Kubernetes API on its own loopback port): A drives a create pipeline and is
//!   killed with SIGKILL mid-pipeline; B takes the operation over after the lease TTL and
//!   completes it; the cluster shows on B's REST, and B's simulator counters (the shared
//!   world's) show exactly one create per resource.
//!
//! Not on `instantstart_testkit::Bed`: these need separate server processes (SIGKILL, a lease
//! taken over by another process, a world shared through the database rather than one per
//! process); the waits are the kit's ([`wait_blocking`]).

#[path = "../../store/tests/common/mod.rs"]
mod common;

use instantstart_testkit::wait_blocking;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const TOKEN: &str = "ist_replicas_test_token_loopback_only";
const WAIT: Duration = Duration::from_secs(120);

/// The server process; killed (SIGKILL) and reaped when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn start(dir: &Path, store_url: &str) -> Server {
    start_with(dir, store_url, "in-process")
}

/// [`start`] with the simulated clusters' Kubernetes reached as `sim_kube` says.
fn start_with(dir: &Path, store_url: &str, sim_kube: &str) -> Server {
    let port = free_port();
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("server.log")).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_instantstart-server"))
        .args(["--listen", &format!("127.0.0.1:{port}"), "--sim-speed", "300", "--sim-kube", sim_kube])
        .args(["--lease-ttl", "2s", "--data-dir"])
        .arg(dir)
        .env("INSTANTSTART_STORE_URL", store_url)
        .env("INSTANTSTART_TOKEN", TOKEN)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start instantstart-server");
    let server = Server { child, port };
    wait_blocking(Duration::from_secs(60), || match call(port, "GET", "/healthz", None) {
        Some((200, _)) => Ok(()),
        _ => Err(format!(
            "the server did not start; log:\n{}",
            std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
        )),
    });
    server
}

/// One HTTP/1.0 request (no chunking, the connection closes after the answer): status and
/// JSON body, or `None` when the server is not answering.
fn call(port: u16, method: &str, path: &str, body: Option<&Value>) -> Option<(u16, Value)> {
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    raw_call(port, method, path, body, &auth).map(|(status, _, body)| (status, body))
}

/// [`call`] with `headers` (each ending in CRLF) instead of the token: status, head, body.
fn raw_call(port: u16, method: &str, path: &str, body: Option<&Value>, headers: &str) -> Option<(u16, String, Value)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n{headers}\
         X-Instantstart-Face: api\r\nContent-Type: application/json\r\nIdempotency-Key: replicas-test\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, head.to_string(), serde_json::from_str(body).unwrap_or(Value::Null)))
}

fn get(server: &Server, path: &str) -> Value {
    let (status, body) = call(server.port, "GET", path, None).expect("server answers");
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

fn phase(op: &Value, step: &str) -> String {
    op["steps"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["key"] == step))
        .map(|s| s["phase"].to_string())
        .unwrap_or_default()
}

fn create_request() -> Value {
    json!({
        "name": "demo",
        "region": "us-east-1",
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 2, "availability_zone": "us-east-1a" },
            { "name": "spot", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1b", "capacity": { "type": "spot" } }
        ]}
    })
}

/// `POST /api/clusters` on `server`: the new operation's id.
fn create(server: &Server) -> String {
    let (status, created) =
        call(server.port, "POST", "/api/clusters", Some(&create_request())).expect("POST /api/clusters");
    assert!(status == 201 || status == 202 || status == 200, "POST /api/clusters: {status} {created}");
    created["operation"]["id"].as_str().or(created["id"].as_str()).expect("operation id").to_string()
}

#[test]
fn the_server_on_postgres_killed_mid_pipeline_completes_it_once_after_a_restart() {
    let Some(pg) = common::pg_server() else { return };
    let url = pg.create_database();
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &url);
    let id = create(&server);
    wait_blocking(WAIT, || match phase(&get(&server, &format!("/api/operations/{id}")), "eks_cluster") {
        p if p == "\"polling\"" => Ok(()),
        p => Err(format!("eks_cluster never reached polling (it is {p})")),
    });
    drop(server); // kill -9
    let server = start(dir.path(), &url);
    let op = wait_blocking(WAIT, || match get(&server, &format!("/api/operations/{id}")) {
        op if op["status"] != "running" => Ok(op),
        op => Err(format!("the operation did not finish after the restart: {op}")),
    });
    assert_eq!(op["status"], "succeeded", "{op:#}");
    assert_created_once(&get(&server, "/api/sim/stats"));
}

/// The create pipeline's creates each happened exactly once, by the simulator's counters.
fn assert_created_once(stats: &Value) {
    let expected = [
        ("ec2:CreateVpc", 1),
        ("ec2:CreateSubnet", 6),
        ("ec2:CreateVpcEndpoint", 1),
        ("iam:CreateRole", 4),
        ("iam:CreateOpenIDConnectProvider", 1),
        ("s3:CreateBucket", 1),
        ("s3:PutObject", 1),
        ("eks:CreateCluster", 1),
        ("eks:CreateAddon", 4),
        ("eks:CreatePodIdentityAssociation", 1),
        ("sagemaker:CreateCluster", 1),
    ];
    for (api, n) in expected {
        assert_eq!(stats[api].as_u64().unwrap_or(0), n, "{api}; all: {stats}");
    }
}

/// Follows `/api/operations/stream?target=cluster/demo` on `port` until the operation ends:
/// every operation snapshot received.
async fn follow(port: u16) -> Vec<Value> {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req =
        format!("ws://127.0.0.1:{port}/api/operations/stream?target=cluster/demo").into_client_request().unwrap();
    req.headers_mut().insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.expect("WebSocket");
    let mut seen = Vec::new();
    loop {
        let msg = tokio::time::timeout(WAIT, ws.next()).await.expect("a change").expect("open").expect("frame");
        let Message::Text(text) = msg else { continue };
        let v: Value = serde_json::from_str(&text).unwrap();
        if v["type"] != "operation" {
            continue;
        }
        let done = v["operation"]["status"] != "running";
        seen.push(v["operation"].clone());
        if done {
            return seen;
        }
    }
}

/// The phases each step went through, in order (repeats folded).
fn phase_history(snapshots: &[Value]) -> Vec<(String, Vec<String>)> {
    let mut history: Vec<(String, Vec<String>)> = Vec::new();
    for op in snapshots {
        for step in op["steps"].as_array().into_iter().flatten() {
            let (key, phase) = (step["key"].as_str().unwrap().to_string(), step["phase"].as_str().unwrap().to_string());
            let i = match history.iter().position(|(k, _)| *k == key) {
                Some(i) => i,
                None => {
                    history.push((key, Vec::new()));
                    history.len() - 1
                }
            };
            if history[i].1.last() != Some(&phase) {
                history[i].1.push(phase);
            }
        }
    }
    history
}

#[test]
fn a_follower_on_another_server_sees_every_phase_change_and_sessions_work_on_both() {
    let Some(pg) = common::pg_server() else { return };
    let url = pg.create_database();
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = start(dir_a.path(), &url);
    let b = start(dir_b.path(), &url);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (on_a, on_b) = runtime.block_on(async {
        let (fa, fb) = (tokio::spawn(follow(a.port)), tokio::spawn(follow(b.port)));
        // Both followers are subscribed before the operation exists (their snapshot is empty).
        tokio::time::sleep(Duration::from_millis(500)).await;
        let port = a.port;
        tokio::task::spawn_blocking(move || {
            let (status, body) = call(port, "POST", "/api/clusters", Some(&create_request())).expect("POST");
            assert!(status < 300, "{status} {body}");
        })
        .await
        .unwrap();
        (fa.await.unwrap(), fb.await.unwrap())
    });
    let (last_a, last_b) = (on_a.last().unwrap(), on_b.last().unwrap());
    assert_eq!(last_b["status"], "succeeded", "{last_b:#}");
    assert_eq!(last_a, last_b, "both followers end on the same state");
    let history = phase_history(&on_b);
    assert_eq!(history, phase_history(&on_a), "B's follower saw every phase change A's follower saw");
    assert!(history.len() > 10 && history.iter().all(|(_, p)| p.len() >= 2), "{history:?}");

    // A browser session minted on A works on B (and the other way round after logout: gone).
    let login = json!({ "token": TOKEN });
    let (status, head, info) = raw_call(a.port, "POST", "/api/login", Some(&login), "").expect("login");
    assert_eq!(status, 200, "{info}");
    let cookie = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().starts_with("set-cookie:").then(|| l[11..].trim().to_string()))
        .and_then(|c| c.split(';').next().map(str::to_string))
        .expect("a session cookie");
    let with_cookie = format!("Cookie: {cookie}\r\n");
    let (status, _, who) = raw_call(b.port, "GET", "/api/session", None, &with_cookie).expect("session on B");
    assert_eq!(status, 200, "the session minted on A works on B: {who}");
    let csrf = format!("{with_cookie}X-CSRF-Token: {}\r\n", info["csrf_token"].as_str().unwrap());
    let (status, _, _) = raw_call(b.port, "POST", "/api/logout", None, &csrf).expect("logout on B");
    assert_eq!(status, 204);
    let (status, _, _) = raw_call(a.port, "GET", "/api/session", None, &with_cookie).expect("session on A");
    assert_eq!(status, 401, "logging out on B ends the session on A");
}

#[test]
fn replicas_share_one_simulated_account_and_a_survivor_completes_a_killed_replicas_pipeline_once() {
    let Some(pg) = common::pg_server() else { return };
    let url = pg.create_database();
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = start_with(dir_a.path(), &url, "api-server");
    let b = start_with(dir_b.path(), &url, "api-server");
    let id = create(&a);
    wait_blocking(WAIT, || match phase(&get(&b, &format!("/api/operations/{id}")), "eks_cluster") {
        p if p == "\"polling\"" => Ok(()),
        p => Err(format!("eks_cluster never reached polling (it is {p})")),
    });
    // B's simulator is the same account: it counts the EKS cluster A created.
    assert_eq!(get(&b, "/api/sim/stats")["eks:CreateCluster"], 1);
    drop(a); // kill -9 of the driving replica
    let op = wait_blocking(WAIT, || match get(&b, &format!("/api/operations/{id}")) {
        op if op["status"] != "running" => Ok(op),
        op => Err(format!("B did not finish the operation: {op}")),
    });
    assert_eq!(op["status"], "succeeded", "{op:#}");
    let cluster = get(&b, "/api/clusters/demo");
    assert_eq!(cluster["name"], "demo", "the cluster A created shows on B: {cluster}");
    assert_created_once(&get(&b, "/api/sim/stats"));
    // A replica started later on the same database finds the same account.
    let dir_c = tempfile::tempdir().unwrap();
    let c = start_with(dir_c.path(), &url, "in-process");
    assert_created_once(&get(&c, "/api/sim/stats"));
}
