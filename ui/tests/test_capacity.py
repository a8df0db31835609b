"""GPU capacity and node health on the cluster page, in a real headless Chromium against a real
server on the simulated cloud: the grid of nodes coloured by health with their GPU use.

One cluster ("gv": two ml.g5.xlarge nodes, one GPU each, node recovery off so a failed deep
health check leaves the node failed) on the module's workloads server. An endpoint takes the
GPU of one node; a deep health check that fails (the sim's `ResourceFails` fault) marks the
other. The test asserts the colours (computed styles against the theme's variables), the
words, the cells and the numbers, not only that the picture is there.
"""

from __future__ import annotations

import time

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By

CLUSTER = "gv"
MODEL_REPO = "Qwen/Qwen3-0.6B"
MODEL_PATH = "models/Qwen/Qwen3-0.6B"


@pytest.fixture(scope="module")
def gv(workloads_server):
    server = workloads_server
    status, body = server.api("POST", "/api/clusters", {
        "name": CLUSTER,
        "region": "us-east-1",
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": {"node_recovery": "None", "instance_groups": [
            {"name": "workers", "instance_type": "ml.g5.xlarge", "count": 2, "availability_zone": "us-east-1a"}]},
    })
    assert status == 202, body
    assert server.wait_operation(body["operation"]["id"], 90)["status"] == "succeeded"
    status, body = server.api("POST", f"/api/clusters/{CLUSTER}/downloads", {"namespace": "default", "repo_id": MODEL_REPO})
    assert status == 202, body
    assert server.wait_operation(body["operation"]["id"], 60)["status"] == "succeeded"
    status, body = server.api("POST", f"/api/clusters/{CLUSTER}/endpoints", {
        "route": "self_managed", "name": "chat", "namespace": "default", "instance_type": "ml.g5.xlarge", "replicas": 1,
        "image": "vllm/vllm-openai:v0.10.1", "port": 8000, "engine": {"kind": "vllm", "model": MODEL_PATH},
    })
    assert status == 202, body
    assert server.wait_operation(body["operation"]["id"], 60)["status"] == "succeeded"
    return CLUSTER


def capacity(server) -> dict:
    status, body = server.api("GET", f"/api/clusters/{CLUSTER}/capacity")
    assert status == 200, body
    return body


def wait_for(server, predicate, timeout: float = 30):
    import time
    end = time.time() + timeout
    while time.time() < end:
        c = capacity(server)
        if predicate(c):
            return c
        time.sleep(0.3)
    raise AssertionError(f"capacity never matched: {c}")


def colour_of(ui, var: str) -> str:
    """The computed colour of a theme variable, as the browser writes colours (rgb(...))."""
    return ui.js(
        "const p = document.createElement('span'); p.style.color = `var(${arguments[0]})`;"
        "document.body.appendChild(p); const c = getComputedStyle(p).color; p.remove(); return c;", var)


def border_of(ui, element) -> str:
    """An element's computed left border colour, written the way `colour_of` writes colours."""
    return ui.js("return getComputedStyle(arguments[0]).borderLeftColor;", element)


def test_the_node_grid_colours_nodes_by_health_and_shows_gpu_use(wl_ui, gv):
    ui = wl_ui
    server = ui.server
    # The endpoint's pod holds the GPU of one node; the other is idle.
    c = wait_for(server, lambda c: c["accelerators"]["gpus"]["allocated"] == 1)
    assert c["accelerators"]["gpus"] == {"total": 2, "allocated": 1, "free": 1, "unavailable": 0}, c
    busy = next(n for n in c["node_list"] if n["workloads"])
    idle = next(n for n in c["node_list"] if not n["workloads"])
    assert busy["workloads"][0]["name"] == "chat" and busy["workloads"][0]["kind"] == "inference", busy

    # A deep health check of the idle node fails: it turns failed (node recovery is off).
    status, _ = server.api("PUT", "/api/sim/faults", {"fail_apis": {"sagemaker:StartClusterHealthCheck": {
        "mode": "resource_fails", "reason": "GPU stress test failed (injected by the UI test)"}}})
    assert status == 200
    try:
        status, body = server.api("POST", f"/api/clusters/{CLUSTER}/health-checks", {"instance_groups": [
            {"name": "workers", "node_ids": [idle["instance_id"]], "checks": ["InstanceStress"]}]})
        assert status == 202, body
        server.wait_operation(body["operation"]["id"], 60)
    finally:
        server.api("PUT", "/api/sim/faults", {})
    c = wait_for(server, lambda c: any(n["health"] == "failed" for n in c["node_list"]))
    sick = next(n for n in c["node_list"] if n["instance_id"] == idle["instance_id"])
    assert sick["health_label"] == "UnschedulablePendingReplacement" and sick["deep_health_check"] == "Failed", sick
    assert sick["taints"] and sick["taints"][0]["effect"] == "NoSchedule", sick
    assert c["accelerators"]["gpus"] == {"total": 2, "allocated": 1, "free": 0, "unavailable": 1}, c

    ui.login()
    ui.go(f"#/clusters/{CLUSTER}")
    tile = lambda nid: ui.css(f'#node-grid li.node-tile[data-node="{nid}"]')  # noqa: E731
    ui.wait(lambda: len(ui.all("#node-grid li.node-tile")) == 2
            and tile(idle["instance_id"]).get_attribute("data-health") == "failed", 20, "two tiles, one failed")

    # The grid is redrawn while the page polls: read it again when an element went stale.
    def check_grid():
        # Colours: the failed node is drawn in the theme's "bad" colour, the healthy one in "ok".
        bad, ok = colour_of(ui, "--bad"), colour_of(ui, "--ok")
        assert bad != ok
        failed_tile, healthy_tile = tile(idle["instance_id"]), tile(busy["instance_id"])
        assert "tone-bad" in failed_tile.get_attribute("class")
        assert border_of(ui, failed_tile) == bad
        assert healthy_tile.get_attribute("data-health") == "healthy"
        assert border_of(ui, healthy_tile) == ok
        # Words next to the colours, never colour alone.
        assert "failed" in failed_tile.text and "healthy" in healthy_tile.text
        assert "UnschedulablePendingReplacement" in failed_tile.get_attribute("title")

        # GPU use: one cell per GPU, filled when held; the workload is named on its node.
        assert len(healthy_tile.find_elements(By.CSS_SELECTOR, ".accel-cells span.used")) == 1
        assert len(failed_tile.find_elements(By.CSS_SELECTOR, ".accel-cells span.used")) == 0
        assert len(failed_tile.find_elements(By.CSS_SELECTOR, ".accel-cells span.idle")) == 1
        assert "1/1 GPU in use" in healthy_tile.text and "0/1 GPU in use" in failed_tile.text
        assert healthy_tile.find_element(By.CSS_SELECTOR, 'li[data-workload="default/chat"]').get_attribute("data-kind") == "inference"

        # The totals and the legend.
        assert (ui.text("#capacity-allocated"), ui.text("#capacity-free"), ui.text("#capacity-unavailable")) == ("1", "0", "1")
        legend = {li.get_attribute("data-health"): li.text for li in ui.all(".node-legend li")}
        assert legend.keys() == {"failed", "healthy"} and "1 failed" in legend["failed"], legend

    for attempt in range(5):
        try:
            check_grid()
            break
        except StaleElementReferenceException:
            if attempt == 4:
                raise
            time.sleep(0.5)
    ui.screenshot("capacity-grid")
