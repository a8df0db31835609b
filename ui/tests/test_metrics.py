"""GPU and training metrics plotted over time, in a real headless Chromium against a real server
on the simulated cloud: a training job's page plots its GPU utilization, GPU memory, throughput
and loss next to its logs, and a node's "GPU metrics" (from the capacity grid) plots one line per
GPU. Each plot is checked against the series the server serves: the same number of points, the
same values at the same moments (the simulated telemetry is deterministic), the axis labels and
the latest value.

One cluster ("mx": one ml.g5.12xlarge node, four A10G GPUs) on the module's own server; one
HyperPod job holds two of the GPUs for long enough to be watched.
"""

from __future__ import annotations

import time
from decimal import ROUND_HALF_UP, Decimal

import pytest
from selenium.common.exceptions import StaleElementReferenceException

CLUSTER = "mx"
JOB = "metrics-demo"


@pytest.fixture(scope="module")
def mx(workloads_server):
    server = workloads_server
    status, body = server.api("POST", "/api/clusters", {
        "name": CLUSTER,
        "region": "us-east-1",
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": {"instance_groups": [
            {"name": "workers", "instance_type": "ml.g5.12xlarge", "count": 1, "availability_zone": "us-east-1a"}]},
    })
    assert status == 202, body
    assert server.wait_operation(body["operation"]["id"], 90)["status"] == "succeeded"
    status, body = server.api("POST", f"/api/clusters/{CLUSTER}/jobs", {
        "runtime": "hyperpod",
        "job": {"name": JOB, "namespace": "default", "image": "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime",
                "instance_type": "ml.g5.12xlarge", "nodes": 1, "gpus_per_node": 2,
                "env": [{"name": "SIM_DURATION_SECONDS", "value": "100000"}]},
        "recipe": {"kind": "torch", "script": "code/train.py"},
    })
    assert status == 202, body
    assert server.wait_operation(body["operation"]["id"], 60)["status"] == "succeeded"
    return CLUSTER


def served(server, query: str) -> dict:
    status, body = server.api("GET", f"/api/clusters/{CLUSTER}/metrics?{query}")
    assert status == 200, body
    return body


def clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(t))


def fixed(v: float, digits: int) -> str:
    """JavaScript's `toFixed`: the exact binary value rounded half away from zero (Python's
    format rounds half to even)."""
    return str(Decimal(v).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def shown(metric: str, v: float) -> str:
    """The value as the plot's table writes it (components/metric-plot.js `shown`)."""
    if metric == "gpu_memory_used":
        return fixed(v / 1024, 1)
    if metric == "gpu_utilization":
        return fixed(v, 0)
    if metric == "loss":
        return fixed(v, 4)
    return fixed(v, 0) if v >= 100 else fixed(v, 2)


SNAPSHOT_JS = """
const f = document.querySelector(arguments[0]);
if (!f) return null;
const svg = f.querySelector('svg.metric-plot');
const text = (el) => el ? el.textContent : null;
return {
  metric: svg.dataset.metric,
  lines: svg.dataset.lines,
  paths: [...svg.querySelectorAll('path.plot-line')].map((p) => ({ points: Number(p.dataset.points), segments: (p.getAttribute('d').match(/L/g) || []).length })),
  head: [...f.querySelectorAll('.plot-table thead th')].map(text),
  rows: [...f.querySelectorAll('.plot-table tbody tr')].map((tr) => [Number(tr.dataset.t), ...[...tr.querySelectorAll('td')].map(text)]),
  labels: [...svg.querySelectorAll('.plot-label')].map(text),
  y_label: text(svg.querySelector('.plot-y-label')),
  times: [...svg.querySelectorAll('.plot-time')].map(text),
  latest: f.querySelector('.plot-latest').dataset.value || null,
  latest_text: text(f.querySelector('.plot-latest')),
  legend: [...f.querySelectorAll('.plot-legend li')].map((li) => li.textContent),
};
"""


def snapshot(ui, selector: str) -> dict:
    """Everything the checks read of one plot, in one script run (the plot redraws every few
    seconds, so element-by-element reads could straddle two drawings)."""
    snap = ui.js(SNAPSHOT_JS, selector)
    assert snap, f"no plot at {selector}"
    return snap


def check_against_server(snap: dict, served_series: list[dict], metric: str) -> None:
    """The plot draws the served series: one path per series with its number of points, the
    axis labels, and at every moment both know the same value."""
    assert snap["metric"] == metric
    assert len(snap["paths"]) == len(served_series), (len(snap["paths"]), len(served_series))
    head, rows = snap["head"], snap["rows"]
    assert head[0] == "Time (UTC)" and len(head) == len(served_series) + 1, head
    assert all(r[1] == clock(r[0]) for r in rows), rows[:3]
    # The table lists the points the paths draw.
    assert all(p["points"] == len(rows) and p["segments"] == len(rows) - 1 for p in snap["paths"]), (snap["paths"], len(rows))
    # The page read a moment before this read (it refreshes every few seconds while the
    # simulated clock runs): over the moments both windows cover, the points are the same, one
    # for one, with the same values (the simulated telemetry is deterministic).
    served_rows = [[pts[0][0], clock(pts[0][0])] + [shown(metric, p[1]) for p in pts]
                   for pts in zip(*(s["points"] for s in served_series))]
    lo, hi = max(rows[0][0], served_rows[0][0]), min(rows[-1][0], served_rows[-1][0])
    mine = [r for r in rows if lo <= r[0] <= hi]
    theirs = [r for r in served_rows if lo <= r[0] <= hi]
    assert len(mine) >= 10, (lo, hi, len(rows), len(served_rows))
    assert mine == theirs, (mine[:5], theirs[:5])
    assert "Time (UTC)" in snap["labels"], snap["labels"]
    assert snap["times"] and all(len(x) == 8 and x.count(":") == 2 for x in snap["times"]), snap["times"]


def retry(check, attempts: int = 6):
    """Runs `check` again when the plot was redrawn under it (it refreshes every few seconds)."""
    for attempt in range(attempts):
        try:
            return check()
        except (StaleElementReferenceException, AssertionError):
            if attempt == attempts - 1:
                raise
            time.sleep(0.7)


def test_a_job_page_plots_gpu_use_throughput_and_loss_next_to_its_logs(wl_ui, mx):
    ui = wl_ui
    server = ui.server
    # The job runs and logs steps.
    deadline = time.time() + 60
    while time.time() < deadline:
        v = served(server, f"job={JOB}")
        if any(s["metric"] == "loss" and len(s["points"]) >= 10 for s in v["series"]):
            break
        time.sleep(0.5)
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}/jobs/{JOB}")
    ui.wait(lambda: len(ui.all("#job-metrics figure.metric-figure")) == 4, 30, "four plots")
    # Next to the logs: the metrics card comes right before the logs card.
    order = ui.js("return [...document.querySelectorAll('section.card')].map((s) => s.id)")
    assert order.index("job-metrics") + 1 == order.index("logs-card"), order

    def check():
        v = served(server, f"job={JOB}")
        labels = {}
        for m in ("gpu_utilization", "gpu_memory_used", "throughput", "loss"):
            snap = snapshot(ui, f'#job-metrics figure.metric-figure[data-metric="{m}"]')
            check_against_server(snap, [s for s in v["series"] if s["metric"] == m], m)
            labels[m] = snap["y_label"]
            if m == "gpu_utilization":
                # The latest value in the caption is the last point drawn; a training job's GPUs are busy.
                assert 85 <= float(snap["latest"]) <= 98, snap["latest"]
                assert snap["latest_text"] == f"latest {snap['rows'][-1][2]}", snap["latest_text"]
            if m == "throughput":
                assert float(snap["latest"]) > 1000, snap["latest"]
        assert labels == {"gpu_utilization": "GPU utilization (%)", "gpu_memory_used": "GPU memory used (GiB)",
                          "throughput": "Throughput (tokens/s)", "loss": "Loss"}, labels

    retry(check)
    assert "Simulated telemetry" in ui.text("#job-metrics .metrics-status")
    ui.screenshot("job-metrics")


def test_a_node_plots_a_line_per_gpu_from_the_capacity_grid(wl_ui, mx):
    ui = wl_ui
    server = ui.server
    status, cap = server.api("GET", f"/api/clusters/{CLUSTER}/capacity")
    assert status == 200, cap
    node = cap["node_list"][0]["name"]
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}")
    ui.click_css(f'#node-grid button.tile-metrics[data-node="{node}"]', 30)
    ui.wait(lambda: ui.all('#node-metrics figure.metric-figure[data-metric="gpu_utilization"]'), 30, "the node's plots")
    assert ui.text("#node-metrics-title") == f"GPU metrics of node {node}"

    def check():
        v = served(server, f"node={node}")
        for m in ("gpu_utilization", "gpu_memory_used"):
            series = sorted((s for s in v["series"] if s["metric"] == m), key=lambda s: s["gpu"])
            assert len(series) == 4, series
            snap = snapshot(ui, f'#node-metrics figure.metric-figure[data-metric="{m}"]')
            check_against_server(snap, series, m)
            assert snap["lines"] == "4"
            legend = snap["legend"]
            assert [x.split()[0:2] for x in legend] == [["GPU", str(g)] for g in range(4)], legend
            if m == "gpu_utilization":
                # The job holds two GPUs (busy), the other two are idle.
                latest = [float(x.split()[-1]) for x in legend]
                assert sum(1 for u in latest if u >= 85) == 2 and sum(1 for u in latest if u == 0) == 2, latest

    retry(check)
    ui.screenshot("node-metrics")
    ui.click_css("#close-node-metrics")
    ui.wait(lambda: not ui.all("#node-metrics"), 10, "the plots close")
