//! The MCP server end to end in process: `InstantStartMcp` over an in-memory MCP session
//! (newline-delimited JSON-RPC, as on stdio) calls the kit's served bed (the real server on the
//! simulated cloud, on loopback) through its typed client. The agent-facing contract itself is
//! in `surface.rs`; the stdio binary, its flags and every tool's flow are driven by `test_mcp.py`.

use instantstart_mcp::InstantStartMcp;
use instantstart_testkit::{Bed, REGION};
use rmcp::ServiceExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// One MCP session with the server: requests written, answers read, one JSON-RPC line each.
struct Session {
    to_server: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    from_server: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    next_id: u64,
}

impl Session {
    /// Starts `InstantStartMcp` on the bed's client and initializes the session.
    async fn start(bed: &Bed) -> Session {
        let (ours, theirs) = tokio::io::duplex(1 << 20);
        let server = InstantStartMcp::new(bed.client().clone());
        tokio::spawn(async move {
            let running = server.serve(tokio::io::split(theirs)).await.expect("the MCP session starts");
            let _ = running.waiting().await;
        });
        let (read, write) = tokio::io::split(ours);
        let mut s = Session { to_server: write, from_server: BufReader::new(read).lines(), next_id: 0 };
        let init = s
            .request(
                "initialize",
                json!({ "protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": { "name": "on_bed", "version": "0" } }),
            )
            .await;
        assert!(init["serverInfo"]["name"].is_string(), "{init:#}");
        s.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })).await;
        s
    }

    async fn send(&mut self, message: Value) {
        let line = format!("{message}\n");
        self.to_server.write_all(line.as_bytes()).await.expect("the session is open");
    }

    /// Sends `method` with `params`; its result (a JSON-RPC error fails the test).
    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })).await;
        loop {
            let line = self.from_server.next_line().await.expect("readable").expect("an answer");
            let v: Value = serde_json::from_str(&line).expect("JSON-RPC");
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v:#}");
                return v["result"].clone();
            }
        }
    }

    /// Calls tool `name`; the text of its answer and whether it is an error.
    async fn tool(&mut self, name: &str, arguments: Value) -> (String, bool) {
        let r = self.request("tools/call", json!({ "name": name, "arguments": arguments })).await;
        let text = r["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect::<String>();
        (text, r["isError"] == true)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_read_the_served_control_plane() {
    let bed = Bed::temp().serve();
    let mut mcp = Session::start(&bed).await;
    let tools = mcp.request("tools/list", json!({})).await;
    assert!(tools["tools"].as_array().is_some_and(|t| t.iter().any(|t| t["name"] == "cluster_list")), "{tools:#}");

    let (context, failed) = mcp.tool("context_get", json!({})).await;
    assert!(!failed && context.contains(REGION), "{context}");
    let (clusters, failed) = mcp.tool("cluster_list", json!({})).await;
    assert!(!failed && !clusters.contains("\"demo\""), "{clusters}");

    // A cluster the REST API created shows in the agent's list; an unknown one is a tool error.
    let request = json!({
        "name": "demo", "region": REGION, "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 2, "availability_zone": "us-east-1a" }
        ]}
    });
    let submitted = bed.client().create_cluster_json(&request, &Default::default()).await.unwrap();
    let instantstart_client::Submitted::Accepted(accepted) = submitted else { panic!("{submitted:?}") };
    bed.wait_done(&accepted.operation.id).await;
    let (clusters, failed) = mcp.tool("cluster_list", json!({})).await;
    assert!(!failed && clusters.contains("demo"), "{clusters}");
    let (missing, failed) = mcp.tool("cluster_get", json!({ "name": "nope" })).await;
    assert!(failed && missing.contains("nope"), "{missing}");
}
