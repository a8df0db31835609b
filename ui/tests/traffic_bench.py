"""What one UI tab costs the network while something runs (issue #23): a measurement, not a
test of the suite (pytest collects only test_*.py files; `cargo xtask bench ui-traffic` runs
this file explicitly and prints its table).

Two tabs, each watched for a fixed window in a real headless Chromium:

- the operation page of a create-cluster pipeline while it runs (`#/operations/<id>`);
- the page of a running training job (`#/clusters/<c>/jobs/<job>`: summary, pods, events,
  logs over a WebSocket, GPU metrics).

Each is measured twice with the same build: "before", a server started with
`INSTANTSTART_CONDITIONAL=off` (no ETag, no 304: every re-read carries its whole body), and
"after", the default server. HTTP reads are counted with the Resource Timing API (status,
bytes on the wire, body bytes); WebSocket frames with Chromium's network log (DevTools
protocol `Network.webSocketFrame*`). The numbers are written, per minute, to the JSON file
named by INSTANTSTART_TRAFFIC_OUT (default target/ui-artifacts/ui-traffic.json).
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import shutil
import tempfile
import time
import urllib.parse

import pytest

from conftest import ARTIFACTS, UI, _server, chromium, chromium_options

# 20x: the create pipeline (about 30 simulated minutes) runs about 90 s, longer than a window.
SPEED = os.environ.get("INSTANTSTART_TRAFFIC_SIM_SPEED", "20")
WINDOW = float(os.environ.get("INSTANTSTART_TRAFFIC_WINDOW", "30"))
OUT = pathlib.Path(os.environ.get("INSTANTSTART_TRAFFIC_OUT", ARTIFACTS / "ui-traffic.json"))
CLUSTER = "traffic"
JOB = "traffic-job"

MODES = {
    "before": {"env": {"INSTANTSTART_CONDITIONAL": "off"}, "label": "conditional reads off (INSTANTSTART_CONDITIONAL=off)"},
    "after": {"env": {}, "label": "default (ETag + 304)"},
}

HTTP_JS = """
return performance.getEntriesByType('resource')
  .filter(e => new URL(e.name).pathname.startsWith('/api/'))
  .map(e => ({ path: new URL(e.name).pathname, status: e.responseStatus || 0,
               transfer: e.transferSize, body: e.encodedBodySize }));
"""


@pytest.fixture(scope="module")
def perf_driver():
    """Chromium with its network log on (WebSocket frames are not in Resource Timing)."""
    profile = tempfile.mkdtemp(prefix="instantstart-chromium-traffic-")
    opts = chromium_options(profile)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    drv = chromium(opts)
    try:
        yield drv
    finally:
        drv.quit()
        shutil.rmtree(profile, ignore_errors=True)


class Sockets:
    """WebSocket frames from Chromium's network log: URLs by request id, frames after `mark()`."""

    def __init__(self, driver):
        self.d = driver
        self.urls: dict[str, str] = {}
        self.frames: list[tuple[str, str, int]] = []

    def drain(self) -> None:
        for entry in self.d.get_log("performance"):
            msg = json.loads(entry["message"])["message"]
            method, params = msg.get("method", ""), msg.get("params", {})
            if method == "Network.webSocketCreated":
                self.urls[params["requestId"]] = params["url"]
            elif method in ("Network.webSocketFrameReceived", "Network.webSocketFrameSent"):
                payload = params.get("response", {}).get("payloadData", "")
                direction = "received" if method.endswith("Received") else "sent"
                self.frames.append((params["requestId"], direction, len(payload.encode())))

    def mark(self) -> None:
        self.drain()
        self.frames.clear()

    def since_mark(self) -> list[dict]:
        self.drain()
        return [{"path": urllib.parse.urlparse(self.urls.get(rid, "?")).path, "direction": d, "bytes": n}
                for rid, d, n in self.frames]


def measure(ui: UI, sockets: Sockets, page: str, mode: str, still_running) -> dict:
    """Watches the open page for WINDOW seconds; its traffic per minute."""
    ui.js("performance.setResourceTimingBufferSize(100000); performance.clearResourceTimings();")
    sockets.mark()
    time.sleep(WINDOW)
    reads = ui.js(HTTP_JS)
    frames = sockets.since_mark()
    per_minute = 60.0 / WINDOW
    revalidated = [r for r in reads if r["status"] == 304 or (r["body"] > 0 and r["transfer"] < r["body"])]
    received = [f for f in frames if f["direction"] == "received"]
    by_path = collections.Counter(r["path"] for r in reads)
    return {
        "page": page,
        "mode": mode,
        "server": MODES[mode]["label"],
        "window_seconds": WINDOW,
        "still_running_at_the_end": still_running(),
        "requests_per_minute": round(len(reads) * per_minute, 1),
        "answered_304_per_minute": round(len(revalidated) * per_minute, 1),
        "http_bytes_per_minute": round(sum(r["transfer"] for r in reads) * per_minute),
        "http_body_bytes_per_minute": round(sum(r["body"] for r in reads) * per_minute),
        "ws_frames_per_minute": round(len(received) * per_minute, 1),
        "ws_bytes_per_minute": round(sum(f["bytes"] for f in received) * per_minute),
        "requests_by_path_per_minute": {p: round(n * per_minute, 1) for p, n in sorted(by_path.items())},
        "ws_frames_by_path_per_minute": {
            p: round(n * per_minute, 1) for p, n in sorted(collections.Counter(f["path"] for f in received).items())
        },
    }


def run_mode(driver, mode: str) -> list[dict]:
    gen = _server(speed=SPEED, host=f"{mode}.localhost", label=f"traffic-{mode}", env=MODES[mode]["env"])
    server = next(gen)
    try:
        ui = UI(driver, server, f"traffic-{mode}")
        sockets = Sockets(driver)
        ui.login()
        op_id = server.submit_gpu_cluster(CLUSTER)
        ui.go(f"#/operations/{op_id}")
        ui.wait(lambda: ui.all("ol.steps li.step"), 15, "the pipeline's steps")
        ui.wait(lambda: ui.js("return document.querySelector('.conn')?.dataset.state") == "live", 15, "the stream")
        running = lambda: server.api("GET", f"/api/operations/{op_id}")[1]["status"] == "running"  # noqa: E731
        results = [measure(ui, sockets, "operation page, create-cluster pipeline running", mode, running)]
        op = server.wait_operation(op_id, 600)
        assert op["status"] == "succeeded", op

        status, body = server.api("POST", f"/api/clusters/{CLUSTER}/jobs", {
            "runtime": "hyperpod",
            "job": {"name": JOB, "namespace": "default", "image": "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime",
                    "instance_type": "ml.g5.xlarge", "nodes": 1,
                    # Trains far longer than the window (a simulated job ends after 300 s otherwise).
                    "env": [{"name": "SIM_DURATION_SECONDS", "value": "10000000"}]},
            "recipe": {"kind": "torch", "script": "code/train.py"},
        })
        assert status == 202, body
        assert server.wait_operation(body["operation"]["id"], 120)["status"] == "succeeded"
        ui.go(f"#/clusters/{CLUSTER}/jobs/{JOB}")
        ui.wait(lambda: len(ui.all("#job-log .log-line")) > 0, 60, "log lines")
        job_running = lambda: server.api("GET", f"/api/clusters/{CLUSTER}/jobs/{JOB}")[1].get("phase") == "running"  # noqa: E731
        ui.wait(job_running, 60, "the job running")
        results.append(measure(ui, sockets, "training job page, job running (logs, metrics)", mode, job_running))
        ui.screenshot("job")
        return results
    finally:
        next(gen, None)


def test_ui_traffic_before_and_after(perf_driver):
    results = []
    for mode in MODES:
        results += run_mode(perf_driver, mode)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"sim_speed": float(SPEED), "window_seconds": WINDOW, "pages": results}, indent=2))
    print("ui-traffic:", json.dumps(results))
    for r in results:
        assert r["still_running_at_the_end"], f"the page was measured after its work ended: {r}"
