"""FSx for Lustre volumes in the workload forms, in a real headless Chromium against a real server
on the simulated cloud: without a volume the job, download and endpoint forms say so and link to
the Storage tab; with volumes (created through the REST API) a training job mounts one at a path
of its own, a model download lands in one instead of the bucket and an endpoint serves its model
from one, each submitted through its form; the rendered objects the operation recorded carry the
claim `fsx-<name>` and the mount path. A volume deleted while the form was open is refused by
the server next to its row.

The module has its own server (`workloads_server`) with one cluster, "vol", created through the
REST API. Screenshots land in target/ui-artifacts/.
"""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select
from test_workloads import errors_for, field, set_value, wait_green

CLUSTER = "vol"
MODEL_REPO = "Qwen/Qwen3-0.6B"
MODEL_PATH = "models/Qwen/Qwen3-0.6B"


@pytest.fixture(scope="module")
def vol(workloads_server):
    """A ready cluster with two ml.g5.xlarge nodes and its shared bucket, no FSx volume yet."""
    # A generous timeout: the simulated pipeline slows down on a busy machine.
    return workloads_server.ready_gpu_cluster(CLUSTER, 180)


def create_volume(server, name: str) -> None:
    status, body = server.api("POST", f"/api/clusters/{CLUSTER}/storage/fsx", {"name": name})
    assert status == 202, body
    op = server.wait_operation(body["operation"]["id"], 120)
    assert op["status"] == "succeeded", op


def delete_volume(server, name: str) -> None:
    status, body = server.api("DELETE", f"/api/clusters/{CLUSTER}/storage/fsx/{name}")
    assert status == 202, body
    op = server.wait_operation(body["operation"]["id"], 60)
    assert op["status"] == "succeeded", op


def rendered_pod_spec(server, op_id: str, kind: str) -> dict:
    """The pod template of the object of `kind` the operation rendered (and recorded before its
    first apply)."""
    status, op = server.api("GET", f"/api/operations/{op_id}")
    assert status == 200, op
    objects = op["request"]["rendered"]["objects"]
    obj = next((o for o in objects if o["kind"] == kind), None)
    assert obj, f"no {kind} in {[o['kind'] for o in objects]}"
    spec = obj["spec"]
    if "replicaSpecs" in spec:
        return spec["replicaSpecs"][0]["template"]["spec"]
    return spec["template"]["spec"]


def claim_volume(pod: dict, claim: str) -> dict:
    found = [v for v in pod.get("volumes", []) if v.get("persistentVolumeClaim", {}).get("claimName") == claim]
    assert found, f"no volume of claim {claim}: {pod.get('volumes')}"
    return found[0]


def mounts(pod: dict) -> dict[str, str]:
    """Mount path → volume name of the first container."""
    return {m["mountPath"]: m["name"] for m in pod["containers"][0].get("volumeMounts", [])}


def op_of_page(ui) -> str:
    url = ui.d.current_url
    assert "?op=" in url, url
    return url.split("?op=", 1)[1].split("&", 1)[0]


def test_forms_say_when_the_cluster_has_no_volume(wl_ui, vol):
    ui = wl_ui
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}/jobs/new")
    note = ui.wait_css('#job-form [data-field="job.volumes"] .volumes-empty')
    assert "no FSx for Lustre volume" in note.text
    link = note.find_element(By.CSS_SELECTOR, "a")
    assert link.get_attribute("href").endswith(f"#/clusters/{CLUSTER}/storage"), link.get_attribute("href")
    assert not ui.all('#job-form [data-field="job.volumes"] input'), "no empty control"
    ui.screenshot("job-form-no-volume")

    ui.go(f"#/clusters/{CLUSTER}/endpoints/new")
    ui.wait_css('#endpoint-form [data-field="volumes"] .volumes-empty a')
    assert not ui.all('#endpoint-form [data-field="model_volume"]'), "no model-volume choice without volumes"

    ui.go(f"#/clusters/{CLUSTER}/storage")
    ui.wait(lambda: ui.all("#download-form .volumes-empty"), 10, "the download form's note")
    assert "shared bucket" in ui.text("#download-form .volumes-empty")
    assert not ui.all('#download-form [data-field="volume"]')


def test_a_job_mounts_a_volume_from_its_form_and_a_vanished_one_is_refused_on_its_row(wl_ui, vol):
    ui = wl_ui
    create_volume(ui.server, "shared")
    create_volume(ui.server, "old")
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}/jobs/new")
    form = ui.wait_css("#job-form")
    ui.wait(lambda: ui.all('#job-form input[data-volume="shared"]') and ui.all('#job-form input[data-volume="old"]'), 15,
            "both volumes offered")
    ui.wait(lambda: field(ui, "job.instance_type").get_attribute("value") == "ml.g5.xlarge", 10, "the cluster's instance type")
    set_value(field(ui, "job.name"), "fsx-train")
    set_value(field(ui, "recipe.script"), "code/train.py")
    ui.click_css('#job-form input[data-volume="shared"]')
    ui.click_css('#job-form input[data-volume="old"]')
    path = ui.css('#job-form .volume-row[data-volume="shared"] input[type="text"]')
    assert path.get_attribute("placeholder") == "/fsx/shared"
    set_value(path, "/data")
    ui.screenshot("job-form-volumes")

    # The volume goes away while the form is open: the server's finding lands on its row.
    delete_volume(ui.server, "old")
    old_field = ui.css('#job-form input[data-volume="old"]').get_attribute("data-field")
    assert old_field and old_field.startswith("job.volumes["), old_field
    ui.click_css("#job-review")
    ui.wait(lambda: errors_for(form, old_field), 15, f"the finding on {old_field}")
    assert "old" in errors_for(form, old_field)[0], errors_for(form, old_field)
    assert ui.css('#job-form .volume-row[data-volume="old"] .field-error').is_displayed()
    assert not ui.all("#job-plan")
    ui.js("document.querySelector('#job-form .volume-row[data-volume=\"old\"]').scrollIntoView({block: 'center'})")
    ui.screenshot("job-form-volume-finding")

    ui.click_css('#job-form input[data-volume="old"]')
    assert ui.css('#job-form input[data-volume="shared"]').get_attribute("data-field") == "job.volumes[0].name"
    ui.click_css("#job-review")
    plan = ui.wait_css("#job-plan", 15)
    yaml_text = plan.find_element(By.CSS_SELECTOR, "details.manifest[open] pre").get_attribute("textContent")
    assert "fsx-shared" in yaml_text and "/data" in yaml_text, yaml_text[:800]
    ui.click_css("#job-submit")
    ui.wait(lambda: "/jobs/fsx-train" in ui.d.current_url, 10, "the job page")
    pod = rendered_pod_spec(ui.server, op_of_page(ui), "HyperPodPyTorchJob")
    claim_volume(pod, "fsx-shared")
    assert mounts(pod).get("/data") == "fsx-shared", mounts(pod)
    assert "/s3" in mounts(pod), "the bucket stays mounted"
    # The job page lists what its pods mount, the volume linking to the Storage tab.
    ui.wait(lambda: ui.all('#job-volumes li[data-volume="shared"]'), 20, "the job's volumes")
    line = ui.text('#job-volumes li[data-volume="shared"]')
    assert "/data" in line and "FSx for Lustre" in line, line
    assert ui.css('#job-volumes li[data-volume="shared"] a').get_attribute("href").endswith(f"#/clusters/{CLUSTER}/storage")
    assert ui.all('#job-volumes li[data-mount-path="/s3"]'), "the bucket is listed too"


def test_a_model_download_lands_in_a_volume_chosen_in_its_form(wl_ui, vol):
    ui = wl_ui
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}/storage")
    ui.wait(lambda: ui.all('#download-form select[data-field="volume"] option[value="shared"]'), 15, "the volume choice")
    Select(field(ui, "volume", "#download-form")).select_by_value("shared")
    ui.wait(lambda: "volume shared" in ui.text('#download-form .field:has(> [data-field="destination"]) > label'), 5,
            "the destination's label names the volume")
    set_value(field(ui, "repo_id", "#download-form"), MODEL_REPO)
    ui.screenshot("download-into-volume")
    ui.click_css("#download-submit")
    op_id = wait_green(ui, "#download-activity", 60)
    pod = rendered_pod_spec(ui.server, op_id, "Job")
    claim_volume(pod, "fsx-shared")
    assert mounts(pod).get("/fsx/shared") == "fsx-shared", mounts(pod)
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["DESTINATION"] == f"/fsx/shared/{MODEL_PATH}", env
    status, files = ui.server.api("GET", f"/api/clusters/{CLUSTER}/storage/objects?prefix=models/")
    assert status == 200 and files["entries"] == [], f"nothing in the bucket: {files}"


def test_an_endpoint_serves_its_model_from_a_volume_chosen_in_its_form(wl_ui, vol):
    ui = wl_ui
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}/endpoints/new")
    form = ui.wait_css("#endpoint-form")
    ui.wait(lambda: ui.all('#endpoint-form select[data-field="model_volume"] option[value="shared"]'), 15, "the model-volume choice")
    ui.wait(lambda: field(ui, "instance_type").get_attribute("value") == "ml.g5.xlarge", 10, "the cluster's instance type")
    set_value(field(ui, "name"), "qwen-fsx")
    Select(field(ui, "model_volume")).select_by_value("shared")
    # The model's volume is mounted: choosing it ticks it.
    assert ui.css('#endpoint-form input[data-volume="shared"]').is_selected()
    set_value(field(ui, "engine.model"), MODEL_PATH)
    ui.click_css("#endpoint-review")
    plan = ui.wait_css("#endpoint-plan", 15)
    assert not form.find_elements(By.CSS_SELECTOR, ".field-error")
    yaml_text = " ".join(p.get_attribute("textContent") for p in plan.find_elements(By.CSS_SELECTOR, "details.manifest pre"))
    assert f"/fsx/shared/{MODEL_PATH}" in yaml_text, yaml_text[:800]
    ui.screenshot("endpoint-plan-volume")
    ui.click_css("#endpoint-deploy")
    ui.wait(lambda: "/endpoints/qwen-fsx" in ui.d.current_url, 10, "the endpoint page")
    pod = rendered_pod_spec(ui.server, op_of_page(ui), "Deployment")
    assert claim_volume(pod, "fsx-shared")["persistentVolumeClaim"]["readOnly"] is True
    assert mounts(pod).get("/fsx/shared") == "fsx-shared", mounts(pod)
    c = pod["containers"][0]
    argv = " ".join((c.get("command") or []) + (c.get("args") or []))
    assert f"/fsx/shared/{MODEL_PATH}" in argv, argv
    # The endpoint page lists the model's volume, read-only.
    ui.wait(lambda: ui.all('#endpoint-volumes li[data-volume="shared"]'), 20, "the endpoint's volumes")
    line = ui.text('#endpoint-volumes li[data-volume="shared"]')
    assert "/fsx/shared" in line and "read-only" in line, line
