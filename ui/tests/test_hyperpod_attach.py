"""HyperPod on an EKS-only cluster in a real headless Chromium: "Add HyperPod…" on the cluster's
page opens create's HyperPod form for that cluster, the plan is reviewed, the operation is
followed to the end; "Remove HyperPod…" asks for the cluster's name and makes it EKS-only again.

Runs against the fast server (FAST_SIM_SPEED) on one EKS-only cluster created through the API.
"""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

CLUSTER = "eksonly"


@pytest.fixture(scope="module")
def eks_only(fast_server):
    status, body = fast_server.api("POST", "/api/clusters", {
        "name": CLUSTER, "region": "us-east-1", "availability_zones": ["us-east-1a", "us-east-1b"]})
    assert status == 202, body
    op = fast_server.wait_operation(body["operation"]["id"])
    assert op["status"] == "succeeded", op
    return CLUSTER


def op_status(ui) -> str | None:
    panels = ui.all("is-operation-progress")
    return panels[0].get_attribute("data-status") if panels else None


def test_add_hyperpod_through_the_form_then_remove_it(fast_ui, fast_server, eks_only):
    ui = fast_ui
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}")
    ui.click_css("#add-hyperpod")
    ui.wait(lambda: "/hyperpod" in ui.d.current_url, 10, "the add-HyperPod form")
    ui.wait(lambda: ui.all("form.create-form") and ui.all('select[data-field="hyperpod.instance_groups[0].instance_type"] option[value]'),
            15, "the HyperPod part of the form with the region's instance types")
    assert not ui.all("#f-name"), "no cluster name: the cluster exists"
    assert ui.css("#f-region").get_attribute("readonly") is not None, "the cluster's region"
    assert not ui.all("#f-bucket"), "the cluster has its bucket"
    count = ui.css('[data-field="hyperpod.instance_groups[0].count"]')
    count.send_keys(Keys.CONTROL, "a")
    count.send_keys(Keys.DELETE)
    count.send_keys("1")
    ui.click(ui.css("form.create-form button[type=submit]"))
    plan = ui.wait_css("section.plan", 15)
    keys = [li.get_attribute("data-step-key") for li in plan.find_elements(By.CSS_SELECTOR, "ol.plan-steps li")]
    assert "hyperpod_cluster" in keys and keys[-1] == "record", keys
    assert "eks_cluster" in keys and not any(k.startswith("addon:") for k in keys), keys
    ui.screenshot("add-hyperpod-plan")
    submit = ui.css("#create-submit")
    assert submit.text == "Add HyperPod"
    ui.click(submit)
    ui.wait(lambda: "#/operations/op-" in ui.d.current_url, 10, "the progress page")
    ui.wait(lambda: op_status(ui) == "succeeded", 45, "HyperPod added")
    status, cluster = fast_server.api("GET", f"/api/clusters/{CLUSTER}")
    assert status == 200 and cluster["hyperpod_cluster"] == f"{CLUSTER}-hp", cluster

    ui.go(f"#/clusters/{CLUSTER}")
    ui.click_css("#remove-hyperpod")
    dialog = ui.wait_css("dialog[open]")
    ui.wait(lambda: dialog.find_elements(By.CSS_SELECTOR, ".plan-steps li"), 10, "the removal plan")
    dialog.find_element(By.CSS_SELECTOR, 'input[name="confirm"]').send_keys(CLUSTER)
    ui.click(dialog.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    ui.wait(lambda: "#/operations/op-" in ui.d.current_url, 10, "the progress page")
    ui.wait(lambda: op_status(ui) == "succeeded", 45, "HyperPod removed")
    status, cluster = fast_server.api("GET", f"/api/clusters/{CLUSTER}")
    assert status == 200 and cluster["hyperpod_cluster"] is None, cluster
    ui.go(f"#/clusters/{CLUSTER}")
    ui.wait_css("#add-hyperpod", 10)
