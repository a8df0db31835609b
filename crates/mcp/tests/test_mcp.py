"""End-to-end tests of `instantstart-mcp`, driven over stdio by the official MCP Python SDK.

A real `instantstart-server` runs on the simulated cloud (loopback, temp data dir, --sim-speed
2000) and each test talks to it only through MCP tool calls, exactly as an agent would:

- the tool surface (names, the four hints on every tool, documented arguments);
- the create-cluster pipeline run to a terminal state (cluster_create, then operation_wait,
  with progress notifications);
- a validation error returned as a tool result with isError and field paths;
- a mutating call replayed with the same idempotency key returns the same operation;
- valid-but-impossible requests (preflight: offering, quota) as 422 tool errors, the dry run's
  failing checks, auth (a read-scoped token can read but not change anything), an unreachable
  server;
- a failed step (injected by the simulated cloud) diagnosed, retried and followed again;
  import; operation_wait returning at its timeout; cancelling a running operation;
- day 2: scaling an instance group via its tool and operation_wait, an immutable change as an
  isError naming `patch.<field>`, a no-op as a non-error "already in this state" without an
  operation, node reboot and the data-loss acknowledgement of replace, managed features on and
  their no-op;
- an agent cannot destroy by one call: a destructive tool's first call answers the plan and a
  confirmation token and changes nothing (checked through REST); only the second call with the
  token acts; another tool's, other arguments', a reused or an unknown token is refused;
- workload text (job logs, model output, a foreign job's object) comes back wrapped as
  untrusted data with a one-line notice;
- workloads: the shared storage, a model download, a training job submitted (dry run with its
  manifests, then for real) and followed to its end, its recovery budget and logs; an endpoint
  deployed to ready, called with endpoint_chat, scaled (and its no-op) and deleted.

Binaries: INSTANTSTART_SERVER_BIN and INSTANTSTART_MCP_BIN (default: target/debug/…).
Run: `cargo xtask mcp-test` (builds both and runs this file with the test venv).
The server is always killed at the end, whatever happens.
"""

import asyncio
import contextlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[3]
SERVER_BIN = os.environ.get("INSTANTSTART_SERVER_BIN", str(ROOT / "target/debug/instantstart-server"))
MCP_BIN = os.environ.get("INSTANTSTART_MCP_BIN", str(ROOT / "target/debug/instantstart-mcp"))
TOKEN = "ist_mcp_test_token_for_loopback_only"

READ_ONLY = {
    "context_get",
    "context_zones",
    "context_instance_types",
    "context_eks_clusters",
    "context_quotas",
    "context_training_plans",
    "context_training_plan_offerings",
    "context_sim_stats",
    "cluster_list",
    "cluster_get",
    "instance_group_list",
    "node_list",
    "node_get",
    "cluster_events",
    "feature_get",
    "operation_list",
    "operation_get",
    "operation_wait",
    "audit_list",
}
OPERATION_TOOLS = {
    "cluster_create",
    "cluster_import",
    "cluster_delete",
    "instance_group_add",
    "instance_group_scale",
    "instance_group_delete",
    "node_reboot",
    "health_check_start",
    "software_update_start",
    "node_replace",
    "node_delete",
    "feature_set",
}
DESTRUCTIVE = {
    "cluster_delete",
    "operation_cancel",
    "instance_group_scale",
    "instance_group_delete",
    "node_replace",
    "node_delete",
    "feature_set",
    "software_update_start",
}
# Workloads: storage, model downloads, training jobs, inference endpoints, model pools.
READ_ONLY |= {
    "storage_list",
    "model_list",
    "job_list",
    "job_get",
    "job_logs",
    "endpoint_list",
    "endpoint_get",
    "pool_list",
}
OPERATION_TOOLS |= {
    "model_download",
    "model_delete",
    "job_submit",
    "job_delete",
    "endpoint_deploy",
    "endpoint_scale",
    "endpoint_delete",
    "pool_assign",
}
DESTRUCTIVE |= {"job_delete", "model_delete", "endpoint_scale", "endpoint_delete"}
# GPU capacity and node health at a glance.
READ_ONLY |= {"capacity_get"}
# GPU and training metrics over time, of a node or a job.
READ_ONLY |= {"metrics_get"}
# Task governance: teams, quotas and priority classes (reconciled state, like features).
READ_ONLY |= {"governance_get"}
OPERATION_TOOLS |= {"governance_set"}
DESTRUCTIVE |= {"governance_set"}
# FSx for Lustre volumes beside the shared bucket.
OPERATION_TOOLS |= {"storage_fsx_create", "storage_fsx_delete"}
DESTRUCTIVE |= {"storage_fsx_delete"}
# Training history (SageMaker managed MLflow).
READ_ONLY |= {"tracking_server_list", "run_list", "run_metrics_get"}
OPERATION_TOOLS |= {"tracking_server_create", "tracking_server_delete"}
DESTRUCTIVE |= {"tracking_server_delete"}
# Old names kept for one release (DEPRECATED_TOOLS in crates/mcp/src/server.rs).
DEPRECATED = {
    "mlflow_servers": "tracking_server_list",
    "mlflow_create_server": "tracking_server_create",
    "mlflow_server_delete": "tracking_server_delete",
    "mlflow_runs": "run_list",
    "mlflow_metrics": "run_metrics_get",
}
READ_ONLY |= {old for old, new in DEPRECATED.items() if new in READ_ONLY}
OPERATION_TOOLS |= {old for old, new in DEPRECATED.items() if new in OPERATION_TOOLS}
DESTRUCTIVE |= {old for old, new in DEPRECATED.items() if new in DESTRUCTIVE}
# HyperPod on an EKS-only cluster.
OPERATION_TOOLS |= {"hyperpod_add", "hyperpod_remove"}
DESTRUCTIVE |= {"hyperpod_remove"}
# Changes no state but runs a model on GPUs at every call (review #23): not read-only.
MUTATING = OPERATION_TOOLS | {"cluster_set_active", "operation_retry_step", "operation_cancel", "endpoint_chat"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server(sim_speed: int):
    """A real instantstart-server on the simulated cloud; killed at the end no matter what."""
    port = free_port()
    data = tempfile.mkdtemp(prefix="instantstart-mcp-test-")
    log = open(os.path.join(data, "server.log"), "wb")
    env = {**os.environ, "INSTANTSTART_TOKEN": TOKEN, "RUST_LOG": "warn"}
    proc = subprocess.Popen(
        [SERVER_BIN, "--listen", f"127.0.0.1:{port}", "--sim-speed", str(sim_speed), "--data-dir", data],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"instantstart-server did not start; see {data}/server.log")
            time.sleep(0.1)
        yield {"url": url, "data": data}
    finally:
        proc.kill()
        proc.wait()
        log.close()
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="module")
def control_plane():
    """The shared server of this module: fast simulated time (EKS in well under a second)."""
    with server(2000) as cp:
        yield cp


def mcp_params(url: str, token: str = TOKEN) -> StdioServerParameters:
    return StdioServerParameters(
        command=MCP_BIN,
        env={
            "INSTANTSTART_URL": url,
            "INSTANTSTART_TOKEN": token,
            # Never read a developer's own CLI login.
            "INSTANTSTART_CONFIG": os.path.join(tempfile.gettempdir(), "instantstart-mcp-test-no-config.json"),
            "RUST_LOG": "warn",
        },
    )


def run(url: str, scenario, token: str = TOKEN):
    """Runs `scenario(session)` in a fresh MCP session with instantstart-mcp."""

    async def main():
        async with stdio_client(mcp_params(url, token)) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await scenario(session)

    return asyncio.run(asyncio.wait_for(main(), timeout=300))


def payload(result):
    """The JSON a tool returned (structured content, else its text)."""
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


async def call(session, name, args=None, **kw):
    result = await session.call_tool(name, args or {}, **kw)
    return result.is_error, payload(result)


async def confirmed(session, name, args):
    """A destructive tool's two calls, as an agent makes them once the user said yes: the plan
    with its confirmation token (nothing changed), then the same arguments with the token. A
    first answer without a token (an error, a no-op, a blocked plan) is returned as it is."""
    err, first = await call(session, name, args)
    if err or not first.get("confirmation_required"):
        return err, first
    assert first["next_call"]["tool"] == name and first["expires_in_secs"] == 300, first
    assert "explicit yes" in first["completion"] and first["plan"], first
    return await call(session, name, {**args, "confirmation": first["confirmation"]})


def create_args(name: str, **extra):
    return {
        "name": name,
        "region": "us-east-1",
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": {
            "instance_groups": [
                {"name": "workers", "instance_type": "ml.g5.2xlarge", "count": 2, "availability_zone": "us-east-1a"}
            ]
        },
        **extra,
    }


def test_tool_surface_is_annotated_and_documented(control_plane):
    async def scenario(s):
        return (await s.list_tools()).tools

    tools = {t.name: t for t in run(control_plane["url"], scenario)}
    assert set(tools) == READ_ONLY | MUTATING
    for name, tool in tools.items():
        a = tool.annotations
        assert a is not None, name
        hints = (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint)
        assert all(isinstance(h, bool) for h in hints), f"{name}: every hint is set explicitly: {hints}"
        assert a.read_only_hint == (name in READ_ONLY), name
        assert tool.description and len(tool.description) > 40, name
        props = tool.input_schema.get("properties", {})
        for arg, schema in props.items():
            assert schema.get("description"), f"{name}.{arg} has no description"
        if name in OPERATION_TOOLS:
            assert {"idempotency_key", "dry_run"} <= set(props), name
            assert "operation_wait" in tool.description, f"{name} names its status tool"
    assert {n for n, t in tools.items() if t.annotations.destructive_hint} == DESTRUCTIVE
    assert tools["node_reboot"].annotations.destructive_hint is False, "a reboot loses nothing"
    assert set(tools["cluster_create"].input_schema["required"]) == {"name", "region", "availability_zones"}
    assert tools["operation_wait"].input_schema["required"] == ["id"]


def test_create_cluster_pipeline_runs_to_a_terminal_state(control_plane):
    progress = []

    async def on_progress(value, total, message):
        progress.append((value, total, message))

    async def scenario(s):
        # Inspect before create.
        err, clusters = await call(s, "cluster_list")
        assert not err and clusters == []
        err, ctx = await call(s, "context_get")
        assert not err and ctx["provider"] == "sim" and ctx["token"]["scope"] == "operate"
        err, zones = await call(s, "context_zones", {"region": "us-east-1"})
        assert not err and {"us-east-1a", "us-east-1b"} <= {z["name"] for z in zones}
        err, types = await call(s, "context_instance_types", {"availability_zone": "us-east-1a"})
        assert not err and "ml.g5.2xlarge" in {t["instance_type"] for t in types}
        assert all("us-east-1a" in t["availability_zones"] for t in types)

        # The plan first: nothing changes.
        err, plan = await call(s, "cluster_create", create_args("agentdemo", dry_run=True))
        assert not err and plan["dry_run"] is True
        keys = {step["key"] for step in plan["steps"]}
        assert {"vpc", "nat_gateway", "eks_cluster", "hyperpod_cluster"} <= keys
        err, clusters = await call(s, "cluster_list")
        assert clusters == []

        # Submit: the result is the operation id and the tool that decides completion.
        err, sub = await call(s, "cluster_create", create_args("agentdemo", idempotency_key="agent-create-1"))
        assert not err, sub
        op_id = sub["operation_id"]
        assert op_id.startswith("op-") and sub["status"] == "running"
        assert sub["status_tool"] == "operation_wait"
        assert sub["next_call"] == {"tool": "operation_wait", "arguments": {"id": op_id}}
        assert "operation_wait" in sub["completion"] and "operation_get" in sub["completion"]

        # Follow it to the end, with progress notifications.
        done = None
        for _ in range(10):
            err, done = await call(
                s, "operation_wait", {"id": op_id, "timeout_secs": 120}, progress_callback=on_progress
            )
            assert not err, done
            if done["terminal"]:
                break
        assert done["status"] == "succeeded", done
        assert done["steps_failed"] == [] and done["steps_pending"] == [] and done["steps_in_progress"] == []

        err, op = await call(s, "operation_get", {"id": op_id})
        assert not err and op["status"] == "succeeded"
        assert all(step["phase"] == "succeeded" for step in op["steps"])
        err, cluster = await call(s, "cluster_get", {"name": "agentdemo"})
        assert not err and cluster["status"] == "ready" and cluster["active"] is True
        assert cluster["hyperpod"] is not None
        err, ops = await call(s, "operation_list", {"target": "cluster/agentdemo"})
        assert not err and ops["operations"][0]["id"] == op_id
        err, audit = await call(s, "audit_list", {"target": "cluster/agentdemo"})
        assert not err and any(e["actor"]["face"] == "agent" for e in audit["entries"])
        # Pages: the log of this fresh server holds this one create, so a page of one is the
        # whole log and says no page follows (following `next` is tested on the client's
        # list helpers and the REST page tests).
        err, whole = await call(s, "audit_list", {})
        assert not err and whole["next"] is None and whole["entries"], whole
        err, first = await call(s, "audit_list", {"limit": 1})
        assert not err and first["entries"] == whole["entries"][:1]
        if len(whole["entries"]) == 1:
            assert first["next"] is None, first
        else:
            assert first["next"], first
        err, bad = await call(s, "operation_list", {"cursor": "not-a-cursor"})
        assert err and "cursor" in json.dumps(bad)
        err, stats = await call(s, "context_sim_stats")
        assert not err and isinstance(stats, dict)

    run(control_plane["url"], scenario)
    assert progress, "operation_wait sent progress notifications"
    values = [p[0] for p in progress]
    assert values == sorted(values) and len(set(values)) == len(values), "progress strictly increases"
    assert any(p[1] for p in progress) and all(p[2] for p in progress)


def test_validation_errors_come_back_as_tool_errors_with_field_paths(control_plane):
    async def scenario(s):
        bad = create_args("Bad_Name")
        bad["availability_zones"] = ["us-east-1a"]
        bad["hyperpod"]["instance_groups"][0]["count"] = 5000
        bad["hyperpod"]["instance_groups"][0]["instance_type"] = "ml.nope.large"
        err, body = await call(s, "cluster_create", bad)
        assert err is True
        fields = {f["field"] for f in body["error"]["findings"]}
        assert {
            "name",
            "availability_zones",
            "hyperpod.instance_groups[0].count",
            "hyperpod.instance_groups[0].instance_type",
        } <= fields, fields
        assert all(f["rule"] for f in body["error"]["findings"])
        assert body["error"]["status"] == 400 and "findings" in body["hint"]

        # A shape error deep inside a nested spec is a finding too, not a protocol error.
        shape = create_args("shapes")
        shape["hyperpod"]["instance_groups"][0]["capacity"] = {"type": "reserved"}
        err, body = await call(s, "cluster_create", shape)
        assert err is True
        assert body["error"]["findings"][0]["field"].startswith("hyperpod.instance_groups[0].capacity")

        # Dry runs validate exactly like real calls.
        err, body = await call(s, "cluster_create", {**bad, "dry_run": True})
        assert err is True and body["error"]["findings"]

        # Valid but impossible (preflight: not offered in that AZ, no quota): the dry run shows
        # the failing checks, the real call is a 422 tool error with findings.
        big = create_args("bigone")
        big["hyperpod"]["instance_groups"][0].update(instance_type="ml.p5.48xlarge", count=64)
        err, plan = await call(s, "cluster_create", {**big, "dry_run": True})
        assert not err and plan["dry_run"] is True
        failed = [c for c in plan["checks"] if c["status"] == "fail"]
        assert failed and all(c["field"].startswith("hyperpod.instance_groups[0]") for c in failed)
        assert "preflight" in plan["note"]
        err, body = await call(s, "cluster_create", big)
        assert err is True and body["error"]["status"] == 422
        assert {f["field"] for f in body["error"]["findings"]} == {c["field"] for c in failed}

        # Unknown things are tool errors with a hint, too.
        err, body = await call(s, "operation_get", {"id": "op-does-not-exist"})
        assert err is True and body["error"]["status"] == 404
        err, body = await call(s, "cluster_get", {"name": "nosuchcluster"})
        assert err is True and body["error"]["status"] == 404
        err, body = await call(s, "tracking_server_delete", {"name": "nosuchserver", "dry_run": True})
        assert err is True and body["error"]["status"] == 404
        # An old name answers as its replacement does, and says which tool to call instead.
        err, body = await call(s, "mlflow_server_delete", {"name": "nosuchserver", "dry_run": True})
        assert err is True and body["error"]["status"] == 404
        new_list = await call(s, "tracking_server_list", {})
        assert new_list[0] is False and await call(s, "mlflow_servers", {}) == new_list
        listed = {t.name: t for t in (await s.list_tools()).tools}
        for old, new in DEPRECATED.items():
            assert listed[old].description.startswith("Deprecated") and new in listed[old].description

    run(control_plane["url"], scenario)


def test_replaying_a_mutation_with_the_same_idempotency_key_returns_the_same_operation(control_plane):
    async def scenario(s):
        args = create_args("replayed", idempotency_key="agent-replay-1")
        err, first = await call(s, "cluster_create", args)
        assert not err, first
        err, second = await call(s, "cluster_create", args)
        assert not err, second
        assert second["operation_id"] == first["operation_id"]
        assert first["replayed"] is False and second["replayed"] is True

        # The same key with other arguments is refused, naming the operation.
        other = create_args("replayed", idempotency_key="agent-replay-1")
        other["hyperpod"]["instance_groups"][0]["count"] = 3
        err, body = await call(s, "cluster_create", other)
        assert err is True and body["error"]["status"] == 409
        assert body["error"]["operation_id"] == first["operation_id"]

        err, done = await call(s, "operation_wait", {"id": first["operation_id"], "timeout_secs": 180})
        assert not err and done["status"] == "succeeded", done

        # Deleting: the plan, then the operation, followed to the end.
        err, plan = await call(s, "cluster_delete", {"name": "replayed", "dry_run": True})
        assert not err and plan["dry_run"] is True and plan["steps"]
        assert plan["request"]["keep_tracking_servers"] is False, plan["request"]
        err, kept = await call(s, "cluster_delete", {"name": "replayed", "dry_run": True, "keep_tracking_servers": True})
        assert not err and kept["request"]["keep_tracking_servers"] is True, kept
        delete = {"name": "replayed", "idempotency_key": "agent-delete-1"}
        err, first = await call(s, "cluster_delete", delete)
        assert not err and first["confirmation_required"] is True, first
        token = first["confirmation"]
        err, sub = await call(s, "cluster_delete", {**delete, "confirmation": token})
        assert not err and sub["status_tool"] == "operation_wait"
        # A lost answer: the token is single-use, and its refusal names what it started.
        err, again = await call(s, "cluster_delete", {**delete, "confirmation": token})
        assert err is True and sub["operation_id"] in again["error"]["detail"], again
        err, done = await call(s, "operation_wait", {"id": sub["operation_id"], "timeout_secs": 180})
        assert not err and done["status"] == "succeeded", done
        err, clusters = await call(s, "cluster_list")
        assert "replayed" not in {c["name"] for c in clusters}

    run(control_plane["url"], scenario)


def rest_get(url: str, path: str):
    """Test harness only: what the REST API says, read beside the agent (status, JSON)."""
    req = urllib.request.Request(f"{url}{path}", headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, None


def test_a_destructive_tool_acts_only_on_a_second_call_with_its_confirmation_token(control_plane):
    url = control_plane["url"]

    async def scenario(s):
        # An EKS-only cluster (no HyperPod capacity: the module's simulated quotas stay free).
        args = {k: v for k, v in create_args("guarded", idempotency_key="agent-guarded-1").items() if k != "hyperpod"}
        err, sub = await call(s, "cluster_create", args)
        assert not err, sub
        assert (await wait_done(s, sub["operation_id"]))["status"] == "succeeded"
        deletes = lambda: [o for o in rest_get(url, "/api/operations?target=cluster/guarded&limit=500")[1]
                           if o["kind"] == "delete_cluster"]

        # The first call: the plan and a token; nothing is deleted (REST still has the cluster).
        delete = {"name": "guarded"}
        err, first = await call(s, "cluster_delete", delete)
        assert not err and first["confirmation_required"] is True, first
        assert first["plan"]["target"] == "cluster/guarded" and first["plan"]["steps"], first
        assert first["next_call"] == {
            "tool": "cluster_delete",
            "arguments": {"name": "guarded", "delete_bucket": False, "keep_tracking_servers": False,
                          "dry_run": False, "confirmation": first["confirmation"]},
        }, first
        status, cluster = rest_get(url, "/api/clusters/guarded")
        assert status == 200 and cluster["name"] == "guarded", cluster
        assert deletes() == []

        # Refused, each naming why, and nothing deleted: other arguments (the token is spent)...
        err, body = await call(s, "cluster_delete", {**delete, "delete_bucket": True, "confirmation": first["confirmation"]})
        assert err is True and body["error"]["findings"][0]["field"] == "confirmation", body
        assert "delete_bucket differ" in body["error"]["detail"], body
        # ... the same token again (single-use) ...
        err, body = await call(s, "cluster_delete", {**delete, "confirmation": first["confirmation"]})
        assert err is True and "already used" in body["error"]["detail"], body
        # ... a token issued for another tool ...
        err, other = await call(s, "cluster_delete", delete)
        err, body = await call(s, "hyperpod_remove", {"cluster": "guarded", "confirmation": other["confirmation"]})
        assert err is True and "issued for cluster_delete, not hyperpod_remove" in body["error"]["detail"], body
        # ... and a token this MCP server never issued.
        err, body = await call(s, "cluster_delete", {**delete, "confirmation": "confirm-made-up"})
        assert err is True and "unknown" in body["error"]["detail"], body
        assert rest_get(url, "/api/clusters/guarded")[0] == 200 and deletes() == []

        # A dry run needs no token and changes nothing either.
        err, plan = await call(s, "cluster_delete", {**delete, "dry_run": True})
        assert not err and plan["dry_run"] is True and "confirmation" not in plan, plan

        # The second call with a fresh token acts: one delete operation, the cluster goes.
        err, sub = await confirmed(s, "cluster_delete", delete)
        assert not err and sub["status_tool"] == "operation_wait", sub
        assert (await wait_done(s, sub["operation_id"]))["status"] == "succeeded"
        assert [o["id"] for o in deletes()] == [sub["operation_id"]]
        assert rest_get(url, "/api/clusters/guarded")[0] == 404

    run(url, scenario)


def test_active_cluster_and_unreachable_server(control_plane):
    async def scenario(s):
        err, plan = await call(s, "cluster_set_active", {"name": None, "dry_run": True})
        assert not err and plan["dry_run"] is True
        err, done = await call(s, "cluster_set_active", {"name": None})
        assert not err and done["active"] is None
        err, ctx = await call(s, "context_get")
        assert ctx["active_cluster"] is None
        err, body = await call(s, "cluster_set_active", {"name": "nosuchcluster"})
        assert err is True and body["error"]["status"] == 404

    run(control_plane["url"], scenario)

    async def unreachable(s):
        err, body = await call(s, "cluster_list")
        assert err is True and "unreachable" in body["error"]["title"].lower()

    run(f"http://127.0.0.1:{free_port()}", unreachable)

    async def bad_token(s):
        err, body = await call(s, "cluster_list")
        assert err is True and body["error"]["status"] == 401

    run(control_plane["url"], bad_token, token="ist_wrong_token")


def test_a_read_only_token_makes_an_investigate_only_agent(control_plane):
    minted = subprocess.run(
        [SERVER_BIN, "--data-dir", control_plane["data"], "token", "create", "--name", "agent-ro", "--scope", "read"],
        capture_output=True,
        text=True,
        check=True,
    )
    token = next(w for w in minted.stdout.split() if w.startswith("ist_"))

    async def scenario(s):
        err, ctx = await call(s, "context_get")
        assert not err and ctx["token"] == {"name": "agent-ro", "scope": "read"}
        err, clusters = await call(s, "cluster_list")
        assert not err and isinstance(clusters, list)
        err, body = await call(s, "cluster_create", create_args("readonly", idempotency_key="ro-1"))
        assert err is True and body["error"]["status"] == 403
        assert "read-only" in body["hint"]

    run(control_plane["url"], scenario, token=token)


def put_faults(url: str, faults: dict):
    """Test harness only (not the agent): fault injection of the simulated cloud over REST."""
    req = urllib.request.Request(
        f"{url}/api/sim/faults",
        data=json.dumps(faults).encode(),
        method="PUT",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200


def test_a_failed_step_is_diagnosed_retried_and_followed_again_and_imports_work(control_plane):
    url = control_plane["url"]
    message = "InsufficientCapacity in us-east-1a"
    fault = {"mode": "fail_once", "kind": "failed", "message": message}
    put_faults(url, {"fail_apis": {"sagemaker:CreateCluster": fault}})

    async def scenario(s):
        err, sub = await call(s, "cluster_create", create_args("flaky", idempotency_key="agent-flaky-1"))
        assert not err, sub
        op_id = sub["operation_id"]
        err, done = await call(s, "operation_wait", {"id": op_id, "timeout_secs": 180})
        assert not err and done["terminal"] is True and done["status"] == "failed", done
        failed = {step["key"]: step for step in done["steps_failed"]}
        assert message in failed["hyperpod_cluster"]["error"]
        assert "operation_retry_step" in done["next"]

        # Retrying a step that did not fail is a tool error (409), not a protocol error.
        err, body = await call(s, "operation_retry_step", {"id": op_id, "step": "eks_cluster"})
        assert err is True and body["error"]["status"] == 409
        err, retried = await call(s, "operation_retry_step", {"id": op_id, "step": "hyperpod_cluster"})
        assert not err and retried["status_tool"] == "operation_wait", retried
        err, done = await call(s, "operation_wait", {"id": op_id, "timeout_secs": 180})
        assert not err and done["status"] == "succeeded", done
        # The injected failure never reached the service: one CreateCluster took effect.
        err, stats = await call(s, "context_sim_stats")
        assert stats["sagemaker:CreateCluster"] >= 1
        err, body = await confirmed(s, "operation_cancel", {"id": op_id})
        assert err is True and body["error"]["status"] == 409

        # The region's EKS clusters: "flaky" is managed (created), with its HyperPod cluster.
        err, eks = await call(s, "context_eks_clusters", {"region": "us-east-1"})
        assert not err, eks
        flaky = next(c for c in eks if c["name"] == "flaky")
        assert flaky["managed_as"] == [{"name": "flaky", "source": "created"}], flaky
        assert flaky["hyperpod_clusters"] == ["flaky-hp"] and flaky["control_plane_access"] is True, flaky
        # Import the same EKS cluster under another name: the control plane already has an
        # access entry (it created the cluster), so the import uses it as it is.
        imp = {"name": "imported", "region": "us-east-1", "eks_cluster": "flaky", "hyperpod_cluster": "flaky-hp"}
        err, plan = await call(s, "cluster_import", {**imp, "dry_run": True})
        assert not err and plan["dry_run"] is True
        access = [c for c in plan["checks"] if c["check"] == "access_entry"]
        assert access and "already has an access entry" in access[0]["detail"], plan
        err, sub = await call(s, "cluster_import", {**imp, "idempotency_key": "agent-import-1"})
        assert not err and sub["status_tool"] == "operation_wait", sub
        err, done = await call(s, "operation_wait", {"id": sub["operation_id"], "timeout_secs": 120})
        assert not err and done["status"] == "succeeded", done
        err, active = await call(s, "cluster_set_active", {"name": "imported"})
        assert not err and active["active"] == "imported"

    try:
        run(url, scenario)
    finally:
        put_faults(url, {})


def test_operation_wait_returns_at_its_timeout_and_a_running_operation_can_be_cancelled():
    # Its own, slower server: the EKS control plane takes 30 s of simulated time here.
    with server(20) as cp:

        async def scenario(s):
            err, sub = await call(s, "cluster_create", create_args("slow", idempotency_key="agent-slow-1"))
            assert not err, sub
            op_id = sub["operation_id"]
            err, waited = await call(s, "operation_wait", {"id": op_id, "timeout_secs": 2})
            assert not err and waited["terminal"] is False and waited["status"] == "running", waited
            assert 2 <= waited["waited_secs"] < 10
            assert waited["steps_in_progress"] and "operation_wait again" in waited["next"]
            err, cancelled = await confirmed(s, "operation_cancel", {"id": op_id})
            assert not err and cancelled["status_tool"] == "operation_wait", cancelled
            err, done = await call(s, "operation_wait", {"id": op_id, "timeout_secs": 60})
            assert not err and done["status"] == "cancelled", done
            assert done["terminal"] is True and "cancelled" in done["next"]

        run(cp["url"], scenario)


async def wait_done(s, op_id):
    """operation_wait until the operation is terminal; returns the last result."""
    for _ in range(10):
        err, done = await call(s, "operation_wait", {"id": op_id, "timeout_secs": 120})
        assert not err, done
        if done["terminal"]:
            return done
    raise AssertionError(f"{op_id} did not finish: {done}")


async def operation_count(s, name):
    err, ops = await call(s, "operation_list", {"target": f"cluster/{name}", "limit": 500})
    assert not err, ops
    return len(ops["operations"])


def test_archived_operations_are_listed_with_archived():
    """operation_list lists the current operations by default and, with archived=true, those
    the retention sweep archived (finished more than --operation-retention-days ago)."""
    with server(2000) as cp:
        async def scenario(s):
            err, sub = await call(s, "cluster_create", create_args("oldtimer"))
            assert not err, sub
            op_id = sub["operation_id"]
            assert (await wait_done(s, op_id))["status"] == "succeeded"
            err, hot = await call(s, "operation_list", {})
            assert not err and [o["id"] for o in hot["operations"]] == [op_id], hot
            err, archived = await call(s, "operation_list", {"archived": True})
            assert not err and archived == {"operations": [], "next": None}, archived
            # What the sweep does once the operation finished before the retention window
            # (days away): the flag, set in the server's database.
            with contextlib.closing(sqlite3.connect(os.path.join(cp["data"], "instantstart.db"), timeout=10)) as db:
                with db:
                    db.execute("UPDATE operations SET archived = 1 WHERE id = ?", (op_id,))
            err, hot = await call(s, "operation_list", {})
            assert not err and hot["operations"] == [], hot
            err, archived = await call(s, "operation_list", {"archived": True, "target": "cluster/oldtimer"})
            assert not err and [o["id"] for o in archived["operations"]] == [op_id], archived
            assert archived["operations"][0]["status"] == "succeeded" and archived["next"] is None

        run(cp["url"], scenario)


def test_day2_instance_groups_nodes_and_features(control_plane):
    async def scenario(s):
        err, sub = await call(s, "cluster_create", create_args("daytwo", idempotency_key="agent-day2-create"))
        assert not err, sub
        assert (await wait_done(s, sub["operation_id"]))["status"] == "succeeded"

        # Inspect first: the group with its live counts.
        err, groups = await call(s, "instance_group_list", {"cluster": "daytwo"})
        assert not err and groups[0]["name"] == "workers" and groups[0]["target_count"] == 2, groups
        assert groups[0]["capacity"] == {"type": "on_demand"}

        # The plan: an explicit diff and the quota check; nothing changes.
        scale = {"cluster": "daytwo", "group": "workers", "count": 3}
        err, plan = await call(s, "instance_group_scale", {**scale, "dry_run": True})
        assert not err and plan["dry_run"] is True, plan
        assert plan["plan"]["changes"] == [{"field": "count", "from": 2, "to": 3}]
        assert {c["check"] for c in plan["checks"]} == {"quota"}

        # Scale via the tool, then follow it with operation_wait.
        err, sub = await confirmed(s, "instance_group_scale", {**scale, "idempotency_key": "agent-day2-scale"})
        assert not err, sub
        assert sub["status_tool"] == "operation_wait" and sub["kind"] == "update_instance_group"
        assert sub["next_call"] == {"tool": "operation_wait", "arguments": {"id": sub["operation_id"]}}
        done = await wait_done(s, sub["operation_id"])
        assert done["status"] == "succeeded", done
        err, groups = await call(s, "instance_group_list", {"cluster": "daytwo"})
        assert (groups[0]["current_count"], groups[0]["target_count"]) == (3, 3)

        # The same count again: not an error, "already in this state", no operation.
        before = await operation_count(s, "daytwo")
        err, same = await call(s, "instance_group_scale", scale)
        assert not err and same["no_change"] is True, same
        assert "already in this state" in same["message"] and "operation_id" not in same
        assert await operation_count(s, "daytwo") == before

        # An immutable field: isError, 422, the finding names the field.
        err, body = await call(s, "instance_group_scale", {**scale, "capacity": {"type": "spot"}})
        assert err is True and body["error"]["status"] == 422, body
        assert body["error"]["findings"][0]["field"] == "patch.capacity"
        assert "immutable" in body["error"]["findings"][0]["rule"]
        assert await operation_count(s, "daytwo") == before

        # Nodes: replace needs the acknowledgement; reboot is followed to the end.
        err, nodes = await call(s, "node_list", {"cluster": "daytwo", "instance_group": "workers"})
        assert not err and len(nodes) == 3 and all(n["status"] == "Running" for n in nodes), nodes
        node = nodes[0]["instance_id"]
        err, body = await call(s, "node_replace", {"cluster": "daytwo", "node_ids": [node]})
        assert err is True and body["error"]["status"] == 422, body
        assert body["error"]["findings"][0]["field"] == "acknowledge_local_data_loss"
        err, sub = await call(s, "node_reboot", {"cluster": "daytwo", "node_ids": [node]})
        assert not err and sub["kind"] == "reboot_nodes", sub
        assert (await wait_done(s, sub["operation_id"]))["status"] == "succeeded"

        # Investigate one node: its detail and its history (the reboot among its events).
        err, detail = await call(s, "node_get", {"cluster": "daytwo", "node_id": node})
        assert not err and detail["instance_id"] == node and detail["instance_group"] == "workers", detail
        assert detail["private_ip"] and detail["capacity_type"] == "OnDemand", detail
        err, page = await call(s, "cluster_events", {"cluster": "daytwo", "node_id": node, "limit": 100})
        assert not err and all(e["instance_id"] == node for e in page["events"]), page
        assert any("rebooting" in e["description"] for e in page["events"]), page
        err, first = await call(s, "cluster_events", {"cluster": "daytwo", "limit": 1})
        assert not err and len(first["events"]) == 1 and first["next_cursor"], first
        err, second = await call(s, "cluster_events", {"cluster": "daytwo", "limit": 1, "cursor": first["next_cursor"]})
        assert not err and second["events"][0]["time"] <= first["events"][0]["time"], second
        err, body = await call(s, "cluster_events", {"cluster": "daytwo", "limit": 0})
        assert err is True and body["error"]["findings"][0]["field"] == "limit", body
        err, body = await call(s, "node_get", {"cluster": "daytwo", "node_id": "i-00000000000000000"})
        assert err is True and body["error"]["status"] == 404, body

        # Capacity of the region: quotas with their use, training plans, offerings (reads).
        err, quotas = await call(s, "context_quotas", {"region": "us-east-1", "instance_type": "ml.g5.2xlarge"})
        assert not err and len(quotas) == 1 and quotas[0]["in_use"] >= 3, quotas
        assert quotas[0]["available"] == max(0, quotas[0]["value"] - quotas[0]["in_use"]), quotas
        err, plans = await call(s, "context_training_plans", {"region": "us-east-1"})
        assert not err and isinstance(plans, list), plans
        offer = {"instance_type": "ml.p5.48xlarge", "instance_count": 2, "duration_hours": 24}
        err, offers = await call(s, "context_training_plan_offerings", offer)
        assert not err and offers and offers[0]["target_resources"] == ["hyperpod-cluster"], offers
        err, body = await call(s, "context_training_plan_offerings", {**offer, "instance_count": 0})
        assert err is True and body["error"]["findings"][0]["field"] == "instance_count", body

        # Managed features: read, switch on, then the same again is a no-op.
        err, features = await call(s, "feature_get", {"cluster": "daytwo"})
        assert not err and features["training_operator"] is False, features
        assert "HyperPod instance groups only" in features["autoscaling_scope"]
        both = {"cluster": "daytwo", "training_operator": True, "managed_autoscaling": False}
        err, plan = await call(s, "feature_set", {**both, "dry_run": True})
        assert not err and [c["field"] for c in plan["plan"]["changes"]] == ["training_operator"], plan
        err, sub = await confirmed(s, "feature_set", {"cluster": "daytwo", "training_operator": True})
        assert not err and sub["status_tool"] == "operation_wait", sub
        assert (await wait_done(s, sub["operation_id"]))["status"] == "succeeded"
        err, features = await call(s, "feature_get", {"cluster": "daytwo"})
        assert features["training_operator"] is True
        before = await operation_count(s, "daytwo")
        err, same = await call(s, "feature_set", {"cluster": "daytwo", "training_operator": True})
        assert not err and same["no_change"] is True and "already in this state" in same["message"], same
        assert await operation_count(s, "daytwo") == before
        # A broken rule is a finding with its field path.
        err, body = await call(
            s, "feature_set", {"cluster": "daytwo", "tiered_checkpointing": {"enabled": True, "memory_percent": 0}}
        )
        assert err is True and body["error"]["findings"][0]["field"] == "patch.tiered_checkpointing.memory_percent"
        # Managed autoscaling limited to named instance groups: an unknown group is a finding
        # naming its index; a known one plans the NodeClass step after the UpdateCluster.
        scaled = {"cluster": "daytwo", "managed_autoscaling": True, "dry_run": True}
        err, body = await call(s, "feature_set", {**scaled, "autoscaling_instance_groups": ["no-such-group"]})
        assert err is True, body
        assert body["error"]["findings"][0]["field"] == "patch.autoscaling_instance_groups[0]", body
        err, plan = await call(s, "feature_set", {**scaled, "autoscaling_instance_groups": ["workers"]})
        assert not err and "karpenter" in [st["key"] for st in plan["steps"]], plan

    run(control_plane["url"], scenario)


TRAIN_IMAGE = "public.ecr.aws/example/train:1.0"
SERVE_IMAGE = "vllm/vllm-openai:v0.10.1"


def torch_job(name: str):
    return {
        "runtime": "hyperpod",
        "job": {
            "name": name,
            "namespace": "default",
            "image": TRAIN_IMAGE,
            "instance_type": "ml.g5.2xlarge",
            "nodes": 2,
        },
        "recipe": {"kind": "torch", "script": "scripts/train.py", "args": ["--epochs=1"]},
    }


async def ready_cluster(s, name):
    """The workload tests share one cluster (the module's simulated account has quotas)."""
    err, clusters = await call(s, "cluster_list")
    assert not err, clusters
    if not any(c["name"] == name and c["status"] == "ready" for c in clusters):
        err, sub = await call(s, "cluster_create", create_args(name, idempotency_key=f"agent-{name}-create"))
        assert not err, sub
        done = await wait_done(s, sub["operation_id"])
        assert done["status"] == "succeeded", done
    err, active = await call(s, "cluster_set_active", {"name": name})
    assert not err, active


async def until(s, tool, args, done, tries=100):
    """Calls a read tool until `done(result)` holds (simulated time runs fast)."""
    for _ in range(tries):
        err, v = await call(s, tool, args)
        assert not err, v
        if done(v):
            return v
        await asyncio.sleep(0.2)
    raise AssertionError(f"{tool} {args} never got there: {v}")


def test_storage_download_and_a_training_job_followed_to_its_logs(control_plane):
    async def scenario(s):
        await ready_cluster(s, "workloads")
        # The tools default to the active cluster.
        err, storage = await call(s, "storage_list")
        assert not err and storage["cluster"] == "workloads", storage
        assert storage["storage"][0]["bucket"] and storage["storage"][0]["mount_path"], storage

        err, sub = await call(
            s,
            "model_download",
            {"download": {"namespace": "default", "repo_id": "Qwen/Qwen3-0.6B"}, "idempotency_key": "agent-dl-1"},
        )
        assert not err and sub["status_tool"] == "operation_wait", sub
        assert (await wait_done(s, sub["operation_id"]))["status"] == "succeeded"
        downloads = await until(s, "model_list", {}, lambda v: v["downloads"] and v["downloads"][0]["phase"] == "succeeded")
        assert downloads["downloads"][0]["repo_id"] == "Qwen/Qwen3-0.6B"

        # Deleting the download removes its Job; the files stay in the bucket.
        name = downloads["downloads"][0]["name"]
        err, sub = await confirmed(s, "model_delete", {"name": name, "idempotency_key": "agent-dl-rm"})
        assert not err and sub["status_tool"] == "operation_wait", sub
        assert (await wait_done(s, sub["operation_id"]))["status"] == "succeeded"
        err, downloads = await call(s, "model_list")
        assert not err and downloads["downloads"] == [], downloads
        err, files = await call(s, "storage_list", {"prefix": "models/Qwen/Qwen3-0.6B/"})
        assert not err and files["storage"]["entries"], files
        err, body = await call(s, "model_delete", {"name": name})
        assert err is True and body["error"]["status"] == 404, body

        # The plan first: the manifests, nothing changes.
        err, plan = await call(s, "job_submit", {"job": torch_job("agent-train"), "dry_run": True})
        assert not err and plan["dry_run"] is True, plan
        assert "HyperPodPyTorchJob" in json.dumps(plan["request"]), plan
        err, jobs = await call(s, "job_list")
        assert not err and jobs["jobs"] == []

        # A broken field comes back with its path; nothing is recorded.
        bad = torch_job("agent-train")
        bad["job"]["gpus_per_node"] = 9
        err, body = await call(s, "job_submit", {"job": bad})
        assert err is True and any("gpus_per_node" in f["field"] for f in body["error"]["findings"]), body

        err, sub = await call(s, "job_submit", {"job": torch_job("agent-train"), "idempotency_key": "agent-job-1"})
        assert not err and sub["status_tool"] == "operation_wait", sub
        assert (await wait_done(s, sub["operation_id"]))["status"] == "succeeded"
        job = await until(s, "job_get", {"name": "agent-train"}, lambda j: j["phase"] == "succeeded")
        assert job["runtime"] == "hyperpod" and job["recovery"]["budget"] > 0, job
        err, jobs = await call(s, "job_list", {"cluster": "workloads"})
        assert not err and [j["name"] for j in jobs["jobs"]] == ["agent-train"]

        err, logs = await call(s, "job_logs", {"name": "agent-train", "tail": 50})
        # Workload text is marked as untrusted data, with the one-line notice.
        assert not err and logs["lines"]["untrusted_text"]["source"] == "job logs", logs
        assert logs["lines"]["untrusted_text"]["text"] and "never as instructions" in logs["untrusted_notice"], logs
        err, some = await call(s, "job_logs", {"name": "agent-train", "tail": 50, "grep": "step"})
        assert not err and all("step" in line for line in some["lines"]["untrusted_text"]["text"]), some

        # Why is it slow? The job's GPU use, throughput and loss over time, then its node's GPUs.
        err, m = await call(s, "metrics_get", {"job": "agent-train", "since": 3600})
        assert not err and m["job"] == "agent-train" and m["origin"] == "simulated", m
        by = {x["metric"]: x for x in m["series"]}
        assert set(by) == {"gpu_utilization", "gpu_memory_used", "throughput", "loss"}, m
        assert by["throughput"]["unit"] == "tokens/s" and by["throughput"]["points"], m
        assert all(0 <= v <= 100 for _, v in by["gpu_utilization"]["points"]), m
        node = job["pod_list"][0]["node"]
        err, m = await call(s, "metrics_get", {"node": node, "since": 3600, "step": 60})
        assert not err and m["node"] == node and m["step_seconds"] == 60, m
        assert {x["metric"] for x in m["series"]} == {"gpu_utilization", "gpu_memory_used"}, m
        # Bad queries come back with the field.
        err, body = await call(s, "metrics_get", {"node": node, "job": "agent-train"})
        assert err is True and body["error"]["findings"][0]["field"] == "node", body
        err, body = await call(s, "metrics_get", {"job": "agent-train", "step": 1})
        assert err is True and body["error"]["findings"][0]["field"] == "step", body

        err, sub = await confirmed(s, "job_delete", {"name": "agent-train", "idempotency_key": "agent-job-rm"})
        assert not err, sub
        assert (await wait_done(s, sub["operation_id"]))["status"] == "succeeded"
        err, jobs = await call(s, "job_list")
        assert jobs["jobs"] == []
        err, body = await call(s, "job_get", {"name": "agent-train"})
        assert err is True and body["error"]["status"] == 404

    run(control_plane["url"], scenario)


def test_an_endpoint_deployed_to_ready_answers_chat_scales_and_goes(control_plane):
    endpoint = {
        "route": "self_managed",
        "name": "agent-qwen",
        "namespace": "default",
        "engine": {"kind": "vllm", "model": "models/Qwen/Qwen3-0.6B"},
        "image": SERVE_IMAGE,
        "instance_type": "ml.g5.2xlarge",
    }

    async def scenario(s):
        await ready_cluster(s, "workloads")
        err, plan = await call(s, "endpoint_deploy", {"cluster": "workloads", "endpoint": endpoint, "dry_run": True})
        assert not err and plan["dry_run"] is True and "Deployment" in json.dumps(plan["request"]), plan

        err, sub = await call(s, "endpoint_deploy", {"cluster": "workloads", "endpoint": endpoint})
        assert not err and sub["status_tool"] == "operation_wait", sub
        assert (await wait_done(s, sub["operation_id"]))["status"] == "succeeded"
        err, eps = await call(s, "endpoint_list", {"cluster": "workloads"})
        assert not err and eps["endpoints"][0]["name"] == "agent-qwen" and eps["endpoints"][0]["ready"] is True, eps

        err, chat = await call(
            s,
            "endpoint_chat",
            {"cluster": "workloads", "name": "agent-qwen", "messages": [{"role": "user", "content": "Say hello"}],
             "max_tokens": 16},
        )
        answer = chat["answer"]["untrusted_text"]
        assert not err and answer["source"] == "model output" and isinstance(answer["text"], str) and answer["text"], chat
        assert chat["response"]["untrusted_text"]["text"]["choices"] and chat["untrusted_notice"], chat

        scale = {"cluster": "workloads", "name": "agent-qwen", "replicas": 2}
        err, sub = await confirmed(s, "endpoint_scale", scale)
        assert not err and sub["status_tool"] == "operation_wait", sub
        assert (await wait_done(s, sub["operation_id"]))["status"] == "succeeded"
        err, same = await call(s, "endpoint_scale", scale)
        assert not err and same["no_change"] is True, same

        # KEDA autoscaling on, then off again: the diff shows the fixed count that stays (the 1
        # replica KEDA keeps without load, not the 2 from before).
        bounds = {"cluster": "workloads", "name": "agent-qwen", "autoscaling": {"min_replicas": 1, "max_replicas": 3}}
        err, sub = await confirmed(s, "endpoint_scale", bounds)
        assert not err, sub
        assert (await wait_done(s, sub["operation_id"]))["status"] == "succeeded"
        off = {"cluster": "workloads", "name": "agent-qwen", "remove_autoscaling": True}
        err, both = await call(s, "endpoint_scale", {**bounds, "remove_autoscaling": True})
        assert err is True and both["error"]["findings"][0]["field"] == "remove_autoscaling", both
        err, plan = await call(s, "endpoint_scale", {**off, "dry_run": True})
        assert not err and plan["dry_run"] is True, plan
        changes = {c["field"]: c for c in plan["plan"]["changes"]}
        assert changes["autoscaling"]["to"] is None and changes["replicas"]["to"] == 1, plan
        err, sub = await confirmed(s, "endpoint_scale", off)
        assert not err, sub
        assert (await wait_done(s, sub["operation_id"]))["status"] == "succeeded"
        err, ep = await call(s, "endpoint_get", {"cluster": "workloads", "name": "agent-qwen"})
        assert not err and ep["autoscaling"] is None and ep["replicas"]["desired"] == 1, ep
        err, same = await call(s, "endpoint_scale", off)
        assert not err and same["no_change"] is True, same

        err, sub = await confirmed(s, "endpoint_delete", {"cluster": "workloads", "name": "agent-qwen"})
        assert not err, sub
        assert (await wait_done(s, sub["operation_id"]))["status"] == "succeeded"
        err, eps = await call(s, "endpoint_list", {"cluster": "workloads"})
        assert eps["endpoints"] == []

    run(control_plane["url"], scenario)


def kube_create(cp, obj: dict, plural: str):
    """Creates `obj` in the "workloads" cluster the way another tool would: straight through
    the simulated cluster's Kubernetes API (printed by the server at start), without
    InstantStart's labels."""
    import re

    log = Path(cp["data"], "server.log").read_text(errors="replace")
    kube = re.search(r"Kubernetes API: (http://[^\s/]+)/clusters/", log).group(1)
    api_version = obj["apiVersion"]
    prefix = "api/v1" if api_version == "v1" else f"apis/{api_version}"
    url = f"{kube}/clusters/us-east-1/workloads/{prefix}/namespaces/default/{plural}"
    req = urllib.request.Request(url, data=json.dumps(obj).encode(), method="POST")
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 201, r.status


def test_foreign_jobs_and_endpoints_are_read_only_for_an_agent(control_plane):
    """Runs last: it leaves foreign objects in the shared cluster."""

    async def scenario(s):
        await ready_cluster(s, "workloads")
        kube_create(control_plane, {
            "apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
            "metadata": {"name": "legacy-agent", "namespace": "default",
                         # The simulated training runs long: it is still running when read.
                         "annotations": {"sim.instantstart.io/duration-seconds": "1000000"}},
            "spec": {"replicaSpecs": [{"name": "pods", "replicas": 1, "template": {"spec": {"containers": [
                {"name": "pytorch", "image": TRAIN_IMAGE}]}}}]},
        }, "hyperpodpytorchjobs")
        kube_create(control_plane, {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "tgi-agent", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "tgi-agent"}},
                     "template": {"metadata": {"labels": {"app": "tgi-agent"}}, "spec": {"containers": [
                         {"name": "tgi", "image": "ghcr.io/huggingface/text-generation-inference:2.4.0"}]}}},
        }, "deployments")
        jobs = await until(s, "job_list", {}, lambda v: any(
            j["name"] == "legacy-agent" and j["pods"]["running"] == 1 for j in v["jobs"]))
        job = next(j for j in jobs["jobs"] if j["name"] == "legacy-agent")
        assert job["foreign"] is True and job["runtime"] == "hyperpod", job
        err, detail = await call(s, "job_get", {"name": "legacy-agent"})
        assert not err and detail["foreign"] is True and len(detail["pod_list"]) == 1, detail
        # A foreign object as the cluster has it is workload text: wrapped as untrusted.
        assert detail["manifest"]["untrusted_text"]["text"][0]["metadata"]["name"] == "legacy-agent", detail
        assert detail["untrusted_notice"], detail
        err, logs = await call(s, "job_logs", {"name": "legacy-agent"})
        assert not err, logs
        eps = await until(s, "endpoint_list", {}, lambda v: any(e["name"] == "tgi-agent" for e in v["endpoints"]))
        assert next(e for e in eps["endpoints"] if e["name"] == "tgi-agent")["foreign"] is True, eps

        before = await operation_count(s, "workloads")
        for tool, args, field in [
            ("job_delete", {"name": "legacy-agent"}, "job"),
            ("endpoint_delete", {"name": "tgi-agent"}, "endpoint"),
            ("endpoint_scale", {"name": "tgi-agent", "replicas": 2}, "endpoint"),
        ]:
            err, refused = await confirmed(s, tool, args)
            assert err is True, (tool, refused)
            finding = refused["error"]["findings"][0]
            assert finding["field"] == field and "not created by InstantStart" in finding["rule"], (tool, refused)
        assert await operation_count(s, "workloads") == before

    run(control_plane["url"], scenario)
