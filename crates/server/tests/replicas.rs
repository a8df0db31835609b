//! The `instantstart-server` binary on PostgreSQL (started as the store suite starts it, see
//! `crates/store/tests/common`): a create pipeline on the simulated cloud, the server killed
//! with SIGKILL while EKS is being polled, restarted on the same store and data directory
//! (so as the same replica: it takes its own lease back at once), completes with every
//! resource created exactly once.

#[path = "../../store/tests/common/mod.rs"]
mod common;

use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
    let port = free_port();
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("server.log")).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_instantstart-server"))
        .args(["--listen", &format!("127.0.0.1:{port}"), "--sim-speed", "300", "--sim-kube", "in-process"])
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
    let deadline = Instant::now() + Duration::from_secs(60);
    while call(port, "GET", "/healthz", None).map(|(s, _)| s) != Some(200) {
        assert!(
            Instant::now() < deadline,
            "the server did not start; log:\n{}",
            std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    server
}

/// One HTTP/1.0 request (no chunking, the connection closes after the answer): status and
/// JSON body, or `None` when the server is not answering.
fn call(port: u16, method: &str, path: &str, body: Option<&Value>) -> Option<(u16, Value)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n\
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
    Some((status, serde_json::from_str(body).unwrap_or(Value::Null)))
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

#[test]
fn the_server_on_postgres_killed_mid_pipeline_completes_it_once_after_a_restart() {
    let Some(pg) = common::pg_server() else { return };
    let url = pg.create_database();
    let dir = tempfile::tempdir().unwrap();
    let request = json!({
        "name": "demo",
        "region": "us-east-1",
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 2, "availability_zone": "us-east-1a" },
            { "name": "spot", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1b", "capacity": { "type": "spot" } }
        ]}
    });
    let server = start(dir.path(), &url);
    let (status, created) = call(server.port, "POST", "/api/clusters", Some(&request)).expect("POST /api/clusters");
    assert!(status == 201 || status == 202 || status == 200, "POST /api/clusters: {status} {created}");
    let id = created["operation"]["id"].as_str().or(created["id"].as_str()).expect("operation id").to_string();
    let deadline = Instant::now() + WAIT;
    while phase(&get(&server, &format!("/api/operations/{id}")), "eks_cluster") != "\"polling\"" {
        assert!(Instant::now() < deadline, "eks_cluster never reached polling");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(server); // kill -9
    let server = start(dir.path(), &url);
    let deadline = Instant::now() + WAIT;
    let op = loop {
        let op = get(&server, &format!("/api/operations/{id}"));
        if op["status"] != "running" {
            break op;
        }
        assert!(Instant::now() < deadline, "the operation did not finish after the restart: {op}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(op["status"], "succeeded", "{op:#}");
    let stats = get(&server, "/api/sim/stats");
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
