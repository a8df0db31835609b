"""Training history screen in a real headless Chromium against a real server on the simulated
cloud: create a tracking server from the screen, a HyperPod job that reports to it, then the
runs table and the SVG line plots of loss and throughput (axes, labels, hover readout, keyboard
readout, the points table), in the light and the dark theme.

It uses the fast server (3000x: a cluster in about a second, the tracking server's 20 minutes in
under half a second) with its own cluster, "hist", created through the REST API.
"""

from __future__ import annotations

import re

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

CLUSTER = "hist"


@pytest.fixture(scope="module")
def hist(fast_server):
    status, body = fast_server.api("POST", "/api/clusters", {
        "name": CLUSTER,
        "region": "us-east-1",
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": {"instance_groups": [
            {"name": "workers", "instance_type": "ml.g5.2xlarge", "count": 2, "availability_zone": "us-east-1a"}]},
    })
    assert status == 202, body
    assert fast_server.wait_operation(body["operation"]["id"], 90)["status"] == "succeeded"
    return CLUSTER


def submit_tracked_job(server, arn: str, name: str) -> None:
    status, body = server.api("POST", f"/api/clusters/{CLUSTER}/jobs", {
        "runtime": "hyperpod",
        "job": {"name": name, "namespace": "default", "image": "pytorch/pytorch:2.5.1", "instance_type": "ml.g5.2xlarge",
                "nodes": 2, "mlflow": {"tracking_server_arn": arn, "experiment": "llama-sft"}},
        "recipe": {"kind": "torch", "script": "scripts/train.py"},
    })
    assert status == 202, body
    assert server.wait_operation(body["operation"]["id"], 60)["status"] == "succeeded"


def stroke(ui, metric: str) -> str:
    return ui.js("return getComputedStyle(document.querySelector(`svg[data-metric='${arguments[0]}'] .plot-line`)).stroke", metric)


def test_create_a_server_then_plot_the_loss_and_throughput_of_a_run(fast_ui, hist, fast_server):
    ui = fast_ui
    ui.login()
    ui.go("#/history")
    # The nav links the screen; with no server yet, the create form is offered.
    ui.wait_css("nav a[href='#/history'][aria-current='page']")
    form = ui.wait_css("#history-create")
    name = ui.css("#history-new-name")
    name.clear()
    name.send_keys("team")
    cluster = ui.css("#history-new-cluster")
    cluster.clear()
    cluster.send_keys(CLUSTER)
    ui.click(form.find_element("css selector", "button[type=submit]"))
    link = ui.wait_css("#history-create a[href^='#/operations/']")
    op_id = link.get_attribute("href").rsplit("/", 1)[1]
    assert fast_server.wait_operation(op_id, 30)["status"] == "succeeded"

    status, servers = fast_server.api("GET", "/api/mlflow/servers")
    assert status == 200 and servers[0]["name"] == "team", servers
    submit_tracked_job(fast_server, servers[0]["arn"], "sft")

    ui.go("#/history?server=team")
    ui.wait(lambda: ui.all("#history-runs-table tbody tr"), 20, "runs table")
    row = ui.css("#history-runs-table tbody tr")
    assert "sft" in row.text and "llama-sft" in row.text
    assert ui.text("#history-server-arn") == servers[0]["arn"]
    # Both plots, with axes, tick labels, axis labels and a line through every point.
    loss = ui.wait_css("svg.plot[data-metric='loss']")
    ui.wait_css("svg.plot[data-metric='throughput']")
    points = int(loss.get_attribute("data-points"))
    assert points >= 10, points
    d = ui.js("return document.querySelector(\"svg[data-metric='loss'] .plot-line\").getAttribute('d')")
    assert d.startswith("M") and d.count("L") == points - 1, d
    labels = ui.js("return [...document.querySelectorAll(\"svg[data-metric='loss'] .plot-label\")].map((t) => t.textContent)")
    assert labels == ["Step", "Loss"], labels
    assert len(ui.all("svg[data-metric='loss'] .plot-tick")) >= 6
    # The loss falls: the first point is drawn lower on screen (larger y) at the end.
    ys = [float(v) for v in re.findall(r"[ML][\d.]+,([\d.]+)", d)]
    assert ys[-1] > ys[0], ys
    ui.screenshot("history-light")

    # Hover shows the value under the pointer; the keyboard walks the points.
    ActionChains(ui.d).move_to_element(loss).perform()
    ui.wait(lambda: "step" in ui.text(".plot-value[data-metric='loss']"), 5, "hover readout")
    assert ui.css("svg[data-metric='loss'] .plot-readout").get_attribute("visibility") == "visible"
    loss.send_keys(Keys.END)
    last = ui.text(".plot-value[data-metric='loss']")
    assert re.search(r"step \d+: [\d.]+", last), last
    loss.send_keys(Keys.HOME)
    first = ui.text(".plot-value[data-metric='loss']")
    assert first != last and re.search(r"step 1: ", first), first
    # The points table under the plot matches the series the API returns.
    run_id = row.get_attribute("data-run")
    status, metrics = fast_server.api("GET", f"/api/mlflow/servers/team/runs/{run_id}/metrics")
    assert status == 200
    assert len(metrics["series"]["loss"]) == points
    rows = ui.js("return document.querySelectorAll(\"figure[data-metric='loss'] details tbody tr\").length")
    assert rows == points

    # A newer run is listed first; ?job= (from a job's page) selects that job's run instead.
    submit_tracked_job(fast_server, servers[0]["arn"], "dpo")
    ui.go("#/history?server=team&job=sft")
    ui.wait(lambda: len(ui.all("#history-runs-table tbody tr")) == 2, 20, "two runs")
    names = [b.text for b in ui.all("#history-runs-table tbody th button")]
    assert names == ["dpo", "sft"], names
    selected = ui.css("#history-runs-table tbody tr.selected")
    assert selected.get_attribute("data-run") == run_id
    assert f"run={run_id}" in ui.d.current_url
    # Choosing the other run plots it.
    ui.click(ui.all("#history-runs-table tbody th button")[0])
    ui.wait(lambda: ui.text("#history-plot-heading").startswith("dpo"), 10, "dpo plotted")

    # Dark theme: the same plot in the theme's colours, every control labelled.
    light = stroke(ui, "loss")
    ui.js("localStorage.setItem('instantstart.theme', 'dark')")
    try:
        ui.go(f"#/history?server=team&run={run_id}")
        ui.wait_css("svg.plot[data-metric='loss']")
        assert ui.js("return document.documentElement.dataset.theme") == "dark"
        assert stroke(ui, "loss") != light
        assert stroke(ui, "loss") != stroke(ui, "throughput")
        unlabeled = ui.js("""
          return [...document.querySelectorAll('.history-view input, .history-view select')]
            .filter((el) => el.offsetParent !== null && !(el.labels && el.labels.length) && !el.getAttribute('aria-label'))
            .map((el) => el.id);
        """)
        assert not unlabeled, unlabeled
        ui.screenshot("history-dark")
    finally:
        ui.js("localStorage.removeItem('instantstart.theme')")


def test_delete_a_server_after_typing_its_name(fast_ui, hist, fast_server):
    ui = fast_ui
    ui.login()
    status, body = fast_server.api("POST", "/api/mlflow/servers", {"name": "scratch", "cluster": CLUSTER})
    assert status == 202, body
    assert fast_server.wait_operation(body["operation"]["id"], 30)["status"] == "succeeded"

    ui.go("#/history?server=scratch")
    button = ui.wait_css("#history-delete-server")
    assert button.get_attribute("aria-label") == "Delete tracking server scratch…"
    ui.click(button)
    dlg = ui.wait_css("dialog[open]")
    assert "scratch" in dlg.text and "IAM role" in dlg.text, dlg.text
    dlg.find_element(By.CSS_SELECTOR, "input[name=confirm]").send_keys("scratch")
    ui.click(dlg.find_element(By.CSS_SELECTOR, "button[type=submit]"))

    # The operation's progress shows in place and ends green; the server leaves the picker.
    panel = ui.wait_css("#history-activity .activity[data-operation]")
    op_id = panel.get_attribute("data-operation")
    progress = f'#history-activity .activity[data-operation="{op_id}"] is-operation-progress'
    ui.wait(lambda: ui.css(progress).get_attribute("data-status") in ("succeeded", "failed", "needs_attention"), 30,
            "the delete ends")
    assert ui.css(progress).get_attribute("data-status") == "succeeded", ui.text("#history-activity")
    ui.wait(lambda: "scratch" not in ui.text("#history-server"), 15, "scratch leaves the picker")
    assert "scratch" not in ui.d.current_url
    status, servers = fast_server.api("GET", "/api/mlflow/servers")
    assert status == 200 and "scratch" not in [s["name"] for s in servers], servers
    status, op = fast_server.api("GET", f"/api/operations/{op_id}")
    assert op["kind"] == "delete_tracking_server" and [s["key"] for s in op["steps"]] == ["tracking_server", "role", "writer_role"], op
    ui.screenshot("history-deleted")
