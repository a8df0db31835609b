"""Workload screens in a real headless Chromium against a real server on the simulated cloud:
the Storage tab (bucket, listing with drill-down, model download followed to the end, an FSx
for Lustre volume created with the server's findings on its fields, then deleted), a
training job (per-recipe form, rendered manifests reviewed, submitted, logs streaming over the
WebSocket, recovery budget, delete) and an inference endpoint (deploy, ready, chat answer with
its latency, scale with the server's diff, delete leaves nothing).

The module has its own server (`workloads_server`, started for the module and always stopped)
with one cluster, "wl", created through the REST API. Screenshots land in target/ui-artifacts/.
"""

from __future__ import annotations

import re
import time

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

CLUSTER = "wl"
MODEL_REPO = "Qwen/Qwen3-0.6B"
MODEL_PATH = "models/Qwen/Qwen3-0.6B"


# ---- helpers ---------------------------------------------------------------------------------


def set_value(el, value: str) -> None:
    el.send_keys(Keys.CONTROL, "a")
    el.send_keys(Keys.DELETE)
    if value:
        el.send_keys(value)


def field(ui, path: str, scope: str = ""):
    return ui.css(f'{scope} [data-field="{path}"]'.strip())


def activity_op(ui, slot: str) -> str | None:
    """The operation followed by the progress panel in `slot`, if any."""
    panels = ui.all(f"{slot} .activity[data-operation]")
    return panels[0].get_attribute("data-operation") if panels else None


def panel_status(ui, slot: str, op: str) -> str | None:
    panels = ui.all(f'{slot} .activity[data-operation="{op}"] is-operation-progress')
    return panels[0].get_attribute("data-status") if panels else None


def wait_green(ui, slot: str, timeout: float = 30, before: str | None = None) -> str:
    """Waits for a progress panel in `slot` following another operation than `before` to end
    green; returns its operation id."""
    ui.wait(lambda: activity_op(ui, slot) not in (None, before), 10, f"a progress panel in {slot}")
    op = activity_op(ui, slot)
    ui.wait(lambda: panel_status(ui, slot, op) in ("succeeded", "failed", "needs_attention", "cancelled"), timeout,
            f"the operation in {slot} ends")
    assert panel_status(ui, slot, op) == "succeeded", ui.text(f"{slot} .activity")
    return op


def confirm_typed(ui, name: str) -> None:
    dlg = ui.wait_css("dialog[open]")
    dlg.find_element(By.CSS_SELECTOR, "input[name=confirm]").send_keys(name)
    ui.click(dlg.find_element(By.CSS_SELECTOR, "button[type=submit]"))


def errors_for(scope, path: str) -> list[str]:
    return [e.text for e in scope.find_elements(By.CSS_SELECTOR, f'.field-error[data-error-for="{path}"]') if e.is_displayed()]


@pytest.fixture(scope="module")
def wl(workloads_server):
    """A ready cluster with one group of eight ml.g5.xlarge nodes and its shared storage: the
    module's jobs and endpoints stay on it, a GPU each (the simulated scheduler counts them)."""
    return workloads_server.ready_gpu_cluster(CLUSTER, 90, nodes=8)


def ensure_model(server) -> None:
    """The model is in the bucket (downloaded through the REST API when the storage test did not)."""
    status, body = server.api("GET", f"/api/clusters/{CLUSTER}/downloads")
    assert status == 200, body
    if any(d["repo_id"] == MODEL_REPO and d["phase"] == "succeeded" for d in body):
        return
    status, body = server.api("POST", f"/api/clusters/{CLUSTER}/downloads", {"namespace": "default", "repo_id": MODEL_REPO})
    assert status == 202, body
    assert server.wait_operation(body["operation"]["id"], 60)["status"] == "succeeded"


# ---- storage ---------------------------------------------------------------------------------


def test_storage_tab_lists_the_bucket_and_downloads_a_model(wl_ui, wl):
    ui = wl_ui
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}")
    ui.click(ui.wait_css('nav.tabs a[data-tab="storage"]'))
    ui.wait(lambda: ui.all("#storage-bucket") and ui.text("#storage-bucket"), 10, "the shared bucket")
    status, storages = ui.server.api("GET", f"/api/clusters/{CLUSTER}/storage")
    assert status == 200 and storages, storages
    assert ui.text("#storage-bucket") == storages[0]["bucket"]
    assert ui.text("#storage-mount") == storages[0]["mount_path"]
    assert ui.css('nav.tabs a[aria-current="page"]').get_attribute("data-tab") == "storage"
    ui.screenshot("storage")

    # A missing repository id is refused next to its field (the backend's finding).
    form = ui.css("#download-form")
    ui.click_css("#download-submit")
    ui.wait(lambda: errors_for(form, "repo_id"), 10, "the finding next to the repository field")
    assert field(ui, "repo_id", "#download-form").get_attribute("aria-invalid") == "true"
    assert not ui.all("#download-activity .activity"), "nothing was started"

    # The token is a Secret reference: there is no field for the token itself.
    assert not ui.all('#download-form input[type="password"]')
    ui.click(field(ui, "hf_token.enabled", "#download-form"))
    assert field(ui, "hf_token.name", "#download-form").is_displayed()
    ui.click(field(ui, "hf_token.enabled", "#download-form"))

    set_value(field(ui, "repo_id", "#download-form"), MODEL_REPO)
    ui.click_css("#download-submit")
    op_id = wait_green(ui, "#download-activity", 60)
    ui.wait(lambda: any(r.get_attribute("data-phase") == "succeeded" for r in ui.all("#downloads-table tbody tr")), 15,
            "the download listed as succeeded")
    ui.screenshot("download-green")
    status, op = ui.server.api("GET", f"/api/operations/{op_id}")
    assert op["kind"] == "download_model" and op["actor"]["face"] == "ui", op
    status, downloads = ui.server.api("GET", f"/api/clusters/{CLUSTER}/downloads")
    names = {d["name"] for d in downloads}
    # The table redraws while it polls: read the row inside a wait (a stale row is read again).
    ui.wait(lambda: ui.css("#downloads-table tbody tr").get_attribute("data-download") in names, 10,
            f"the listed download is one of {names}")

    # Drill down: models/ → Qwen/ → the model's files, then back to the root.
    ui.click_css("#refresh-storage")
    ui.wait(lambda: ui.all('#storage-table tr[data-key="models/"] button'), 10, "the models/ prefix")
    ui.click_css('#storage-table tr[data-key="models/"] button')
    ui.wait(lambda: ui.all('#storage-table tr[data-key="models/Qwen/"]'), 10, "models/Qwen/")
    ui.click_css('#storage-table tr[data-key="models/Qwen/"] button')
    ui.wait(lambda: ui.all(f'#storage-table tr[data-key="{MODEL_PATH}/"]'), 10, "the model's prefix")
    assert "Qwen" in ui.text("#storage-path")
    ui.screenshot("storage-drilldown")
    ui.click_css("#storage-path button")
    ui.wait(lambda: ui.all('#storage-table tr[data-key="models/"]'), 10, "back at the root")


def test_a_download_is_deleted_from_the_list_and_its_files_stay(wl_ui, wl):
    ui = wl_ui
    ensure_model(ui.server)
    status, downloads = ui.server.api("GET", f"/api/clusters/{CLUSTER}/downloads")
    name = downloads[0]["name"]
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}/storage")
    ui.wait(lambda: ui.all(f'#downloads-table tr[data-download="{name}"] button'), 10, "the download with its Delete…")
    ui.click_css(f'#downloads-table tr[data-download="{name}"] button')
    confirm_typed(ui, name)
    op_id = wait_green(ui, "#download-activity", 30)
    ui.wait(lambda: not ui.all(f'#downloads-table tr[data-download="{name}"]'), 10, "the download gone from the list")
    ui.screenshot("download-deleted")
    status, op = ui.server.api("GET", f"/api/operations/{op_id}")
    assert op["kind"] == "delete_download" and op["actor"]["face"] == "ui", op
    status, downloads = ui.server.api("GET", f"/api/clusters/{CLUSTER}/downloads")
    assert name not in {d["name"] for d in downloads}, downloads
    status, files = ui.server.api("GET", f"/api/clusters/{CLUSTER}/storage/objects?prefix={MODEL_PATH}/")
    assert status == 200 and files["entries"], "the model stays in the bucket"


def test_an_fsx_volume_is_created_from_the_storage_tab_and_deleted(wl_ui, wl):
    ui = wl_ui
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}/storage")
    ui.wait(lambda: ui.all("#fsx-empty"), 10, "no FSx volume yet")
    form = ui.css("#fsx-form")
    # Attaching a file system FSx does not know: the assessment's finding lands on its field.
    set_value(field(ui, "name", "#fsx-form"), "shared")
    set_value(field(ui, "file_system_id", "#fsx-form"), "fs-0123456789abcdef0")
    ui.click_css("#fsx-submit")
    ui.wait(lambda: errors_for(form, "file_system_id"), 10, "the attach finding on its field")
    assert "fs-0123456789abcdef0" in errors_for(form, "file_system_id")[0]
    status, storages = ui.server.api("GET", f"/api/clusters/{CLUSTER}/storage")
    assert [s["kind"] for s in storages] == ["s3"], storages
    set_value(field(ui, "file_system_id", "#fsx-form"), "")
    set_value(field(ui, "name", "#fsx-form"), "scratch")
    Select(field(ui, "deployment_type", "#fsx-form")).select_by_value("PERSISTENT_2")
    set_value(field(ui, "storage_capacity_gib", "#fsx-form"), "3000")
    ui.click_css("#fsx-submit")
    # The server's findings land on their fields: the capacity step and the missing throughput.
    ui.wait(lambda: errors_for(form, "storage_capacity_gib") and errors_for(form, "per_unit_storage_throughput"), 10,
            "the findings on their fields")
    assert "2400" in errors_for(form, "storage_capacity_gib")[0]
    ui.screenshot("fsx-findings")
    set_value(field(ui, "storage_capacity_gib", "#fsx-form"), "2400")
    Select(field(ui, "per_unit_storage_throughput", "#fsx-form")).select_by_value("250")
    # A link to the shared bucket: a directory without its leading / is a finding on its field.
    field(ui, "data_repository", "#fsx-form").click()
    set_value(field(ui, "data_repository.bucket_prefix", "#fsx-form"), "datasets/")
    set_value(field(ui, "data_repository.file_system_path", "#fsx-form"), "datasets")
    ui.click_css("#fsx-submit")
    ui.wait(lambda: errors_for(form, "data_repository.file_system_path"), 10, "the link finding on its field")
    set_value(field(ui, "data_repository.file_system_path", "#fsx-form"), "/datasets")
    ui.click_css("#fsx-submit")
    op_id = wait_green(ui, "#fsx-activity", 60)
    ui.wait(lambda: ui.all('#fsx-table tr[data-fsx="scratch"][data-lifecycle="AVAILABLE"]'), 15, "the volume, available")
    row = ui.text('#fsx-table tr[data-fsx="scratch"]')
    assert "PERSISTENT_2" in row and "250 MB/s/TiB" in row and "2400 GiB" in row and "/fsx/scratch" in row, row
    assert ui.all('#fsx-table tr[data-fsx="scratch"][data-ownership="created"]') and "attached" not in row, row
    link = ui.text('#fsx-table tr[data-fsx="scratch"] [data-link="/datasets"]')
    assert "s3://" in link and "datasets/" in link and "import NEW, CHANGED, DELETED" in link and "Lustre 2.15" in row, (link, row)
    ui.screenshot("fsx-volume")
    status, op = ui.server.api("GET", f"/api/operations/{op_id}")
    assert op["kind"] == "create_file_system" and op["actor"]["face"] == "ui", op
    status, storages = ui.server.api("GET", f"/api/clusters/{CLUSTER}/storage")
    assert [s["kind"] for s in storages] == ["s3", "fsx_lustre"], storages
    # The bucket's card still shows the bucket, not the volume.
    assert ui.text("#storage-bucket") == storages[0]["bucket"]
    ui.click_css('#fsx-table tr[data-fsx="scratch"] button')
    confirm_typed(ui, "scratch")
    wait_green(ui, "#fsx-activity", 60, before=op_id)
    ui.wait(lambda: ui.all("#fsx-empty"), 15, "the volume gone from the list")
    status, storages = ui.server.api("GET", f"/api/clusters/{CLUSTER}/storage")
    assert [s["kind"] for s in storages] == ["s3"], storages


# ---- training job ----------------------------------------------------------------------------


def test_submit_a_job_from_its_recipe_form_and_follow_its_logs(wl_ui, wl):
    ui = wl_ui
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}/jobs")
    ui.click(ui.wait_css("#new-job"))
    form = ui.wait_css("#job-form")
    ui.wait(lambda: field(ui, "job.instance_type").get_attribute("value") == "ml.g5.xlarge", 10, "the cluster's instance type")
    # Each recipe has its own typed fields.
    ui.click_css('input[name=recipe][value="verl"]')
    assert field(ui, "recipe.entry_module").get_attribute("value") == "verl.trainer.main_ppo"
    assert not ui.css('[data-field="resilience"]').is_displayed(), "Ray jobs have no recovery budget fields"
    ui.click_css('input[name=recipe][value="llama_factory"]')
    assert field(ui, "recipe.config").is_displayed()
    ui.click_css('input[name=recipe][value="torch"]')
    assert field(ui, "recipe.script").is_displayed() and ui.css('[data-field="resilience"]').is_displayed()

    # A bad name is refused next to the field, nothing is applied.
    set_value(field(ui, "job.name"), "Bad_Name")
    set_value(field(ui, "recipe.script"), "code/train.py")
    ui.click_css("#job-review")
    ui.wait(lambda: errors_for(form, "job.name"), 10, "the finding next to the job name")
    ui.screenshot("job-form-error")

    set_value(field(ui, "job.name"), "sft-demo")
    ui.click_css("#job-review")
    plan = ui.wait_css("#job-plan", 10)
    kinds = [d.get_attribute("data-kind") for d in plan.find_elements(By.CSS_SELECTOR, "details.manifest")]
    assert "HyperPodPyTorchJob" in kinds, kinds
    yaml_text = plan.find_element(By.CSS_SELECTOR, "details.manifest[open] pre").get_attribute("textContent")
    assert "sft-demo" in yaml_text and "code/train.py" in yaml_text, yaml_text[:500]
    status, jobs = ui.server.api("GET", f"/api/clusters/{CLUSTER}/jobs")
    assert not any(j["name"] == "sft-demo" for j in jobs), "the dry run applied nothing"
    ui.screenshot("job-plan")

    # A process of the job will fail once it runs: the operator restarts it in place and the
    # recovery budget shows one restart used.
    status, body = ui.server.api("PUT", "/api/sim/faults", {"process_faults": [{"job": "sft-demo"}]})
    assert status == 200, body
    ui.click_css("#job-submit")
    ui.wait(lambda: "/jobs/sft-demo" in ui.d.current_url, 10, "the job page")
    wait_green(ui, "#job-activity", 60)
    # Logs stream over the WebSocket and keep coming.
    ui.wait(lambda: ui.css("#log-state").get_attribute("data-state") in ("live", "ended"), 15, "the log stream connects")
    ui.wait(lambda: len(ui.all("#job-log .log-line")) > 0, 30, "log lines")
    first = len(ui.all("#job-log .log-line"))
    status, job = ui.server.api("GET", f"/api/clusters/{CLUSTER}/jobs/sft-demo")
    assert status == 200, job
    if job["phase"] in ("running", "restarting", "pending"):
        ui.wait(lambda: len(ui.all("#job-log .log-line")) > first or ui.css("#log-state").get_attribute("data-state") == "ended",
                30, "more lines arrive while the job runs")
    # The recovery budget is visible as a meter, and the process fault used one restart of it.
    rec = ui.wait_css("#job-recovery .recovery")
    assert rec.get_attribute("data-budget") == str(job["recovery"]["budget"])
    assert rec.find_element(By.CSS_SELECTOR, "meter").get_attribute("aria-label").startswith("Recovery budget")
    ui.wait(lambda: ui.css("#job-recovery .recovery").get_attribute("data-used") == "1", 30, "one restart used")
    status, job = ui.server.api("GET", f"/api/clusters/{CLUSTER}/jobs/sft-demo")
    assert job["recovery"]["used"] == 1 and job["recovery"]["remaining"] == job["recovery"]["budget"] - 1, job
    ui.screenshot("job-logs")

    # Scrolling up pauses following; ticking Follow resumes it.
    ui.js("const l = document.getElementById('job-log'); l.scrollTop = 0; l.dispatchEvent(new Event('scroll'));")
    if ui.js("const l = document.getElementById('job-log'); return l.scrollHeight > l.clientHeight"):
        ui.wait(lambda: not ui.css("#log-follow").is_selected(), 5, "following paused")
        ui.click_css("#log-follow")
        assert ui.css("#log-follow").is_selected()

    # The list shows the job with its recipe and recovery budget.
    ui.click_css('nav.tabs a[data-tab="jobs"]')
    row = ui.wait_css('#jobs-table tr[data-job="sft-demo"]')
    assert "torch" in row.text and row.find_elements(By.CSS_SELECTOR, ".recovery meter")
    ui.screenshot("jobs-list")

    # Delete with the typed confirmation; the job is gone.
    ui.click(row.find_element(By.CSS_SELECTOR, "button.danger-outline"))
    confirm_typed(ui, "sft-demo")
    wait_green(ui, "#jobs-activity", 60)
    ui.wait(lambda: not ui.all('#jobs-table tr[data-job="sft-demo"]'), 15, "the job leaves the list")
    status, _ = ui.server.api("GET", f"/api/clusters/{CLUSTER}/jobs/sft-demo")
    assert status == 404


def test_job_logs_reconnect_after_a_server_restart_without_doubled_lines(wl_ui, wl):
    ui = wl_ui
    server = ui.server
    status, body = server.api("POST", f"/api/clusters/{CLUSTER}/jobs", {
        "runtime": "hyperpod",
        "job": {"name": "logs-restart", "namespace": "default", "image": "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime",
                "instance_type": "ml.g5.xlarge", "nodes": 1},
        "recipe": {"kind": "torch", "script": "code/train.py"},
    })
    assert status == 202, body
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}/jobs/logs-restart")
    ui.wait(lambda: len(ui.all("#job-log .log-line")) >= 3, 30, "the first log lines")
    server.stop()
    try:
        ui.wait(lambda: ui.css("#log-state").get_attribute("data-state") in ("reconnecting", "ended"), 15, "the stream notices")
        if ui.css("#log-state").get_attribute("data-state") == "reconnecting":
            ui.screenshot("logs-reconnecting")
    finally:
        server.start()
    if ui.css("#log-state").get_attribute("data-state") == "ended":
        ui.click_css("#log-reconnect")
    ui.wait(lambda: ui.css("#log-state").get_attribute("data-state") in ("live", "ended"), 30, "connected again")
    time.sleep(1.5)
    lines = [e.get_attribute("textContent") for e in ui.all("#job-log .log-line")]
    steps = [int(t.split("step ", 1)[1].split()[0]) for t in lines if "step " in t and " | loss " in t]
    assert steps, lines[:20]
    assert len(steps) == len(set(steps)), f"a line shown twice after the reconnect: {steps}"
    assert steps == sorted(steps), steps
    # The reconnect asked for the last 5,000 lines, which reach back to what was shown: no gap.
    markers = [e.get_attribute("textContent") for e in ui.all("#job-log .log-marker")]
    assert not markers, markers
    ui.screenshot("logs-after-restart")


# ---- endpoint --------------------------------------------------------------------------------


def test_deploy_an_endpoint_chat_scale_and_delete(wl_ui, wl):
    ui = wl_ui
    ensure_model(ui.server)
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}/endpoints")
    ui.click(ui.wait_css("#new-endpoint"))
    form = ui.wait_css("#endpoint-form")
    ui.wait(lambda: field(ui, "instance_type").get_attribute("value") == "ml.g5.xlarge", 10, "the cluster's instance type")
    set_value(field(ui, "name"), "qwen3")
    set_value(field(ui, "engine.model"), MODEL_PATH)
    # More GPUs than the instance type has: refused next to the field, nothing planned.
    set_value(field(ui, "gpus"), "4")
    ui.click_css("#endpoint-review")
    ui.wait(lambda: errors_for(form, "gpus"), 10, "the finding next to the GPUs")
    assert not ui.all("#endpoint-plan")
    set_value(field(ui, "gpus"), "")
    # An internet-facing load balancer asks for the client CIDRs allowed in.
    ui.click_css('input[name=exposure][value="load_balancer"]')
    ui.click(field(ui, "exposure.internet_facing"))
    ui.click_css("#endpoint-review")
    ui.wait(lambda: errors_for(form, "exposure.source_ranges"), 10, "the finding next to the CIDRs")
    ui.screenshot("endpoint-form-errors")
    ui.click_css('input[name=exposure][value="cluster_ip"]')
    ui.click_css("#endpoint-review")
    plan = ui.wait_css("#endpoint-plan", 10)
    kinds = [d.get_attribute("data-kind") for d in plan.find_elements(By.CSS_SELECTOR, "details.manifest")]
    assert "Deployment" in kinds and "Service" in kinds, kinds
    ui.screenshot("endpoint-plan")
    assert not form.find_elements(By.CSS_SELECTOR, ".field-error")

    ui.click_css("#endpoint-deploy")
    ui.wait(lambda: "/endpoints/qwen3" in ui.d.current_url, 10, "the endpoint page")
    wait_green(ui, "#endpoint-activity", 60)
    ui.wait(lambda: ui.css("#endpoint-ready").get_attribute("data-ready") == "true", 20, "ready")
    ui.screenshot("endpoint-ready")

    # Chat: the simulated model answers through the control plane; the latency is shown.
    ui.css("#chat-message").send_keys("What is HyperPod?")
    ui.click_css("#chat-send")
    answer = ui.wait_css("#chat-log .chat-answer", 70)
    assert answer.text.strip(), "an answer"
    latency = ui.text("#chat-log .chat-latency")
    assert latency.endswith(" ms") and int(latency.split()[0]) >= 0, latency
    ui.screenshot("endpoint-chat")

    # Scale 1 → 2: the server's diff first, then the operation, then 2 ready replicas.
    set_value(field(ui, "replicas", "#scale-form"), "2")
    ui.click_css("#scale-review")
    ui.wait_css("#scale-apply", 10)
    diff = ui.text("#scale-card ul.diff")
    assert "1" in diff and "2" in diff, diff
    before = activity_op(ui, "#endpoint-activity")
    ui.click_css("#scale-apply")
    wait_green(ui, "#endpoint-activity", 60, before)
    ui.wait(lambda: ui.css("#endpoint-replicas").get_attribute("data-desired") == "2"
            and ui.css("#endpoint-replicas").get_attribute("data-ready") == "2", 20, "2 ready replicas")
    ui.screenshot("endpoint-scaled")
    # The same count again: already in this state, no operation.
    ui.click_css("#scale-review")
    ui.wait_css("#scale-card .no-change", 10)

    # The list shows it ready with its URL.
    ui.click_css('nav.tabs a[data-tab="endpoints"]')
    row = ui.wait_css('#endpoints-table tr[data-endpoint="qwen3"]')
    ui.wait(lambda: ui.css('#endpoints-table tr[data-endpoint="qwen3"]').get_attribute("data-ready") == "true", 10, "ready in the list")
    ui.screenshot("endpoints-list")

    # Delete with the typed confirmation: nothing is left.
    ui.click(row.find_element(By.CSS_SELECTOR, "button.danger-outline"))
    confirm_typed(ui, "qwen3")
    wait_green(ui, "#endpoints-activity", 60)
    ui.wait(lambda: not ui.all('#endpoints-table tr[data-endpoint="qwen3"]'), 15, "gone from the list")
    status, _ = ui.server.api("GET", f"/api/clusters/{CLUSTER}/endpoints/qwen3")
    assert status == 404


def test_move_a_pool_worker_between_services_with_the_diff_first(wl_ui, wl):
    ui = wl_ui
    ensure_model(ui.server)
    server = ui.server
    for name, pool in (("pool-a", "pa"), ("pool-b", "pb")):
        status, body = server.api("POST", f"/api/clusters/{CLUSTER}/endpoints", {
            "route": "self_managed", "name": name, "namespace": "default", "instance_type": "ml.g5.xlarge", "replicas": 1,
            "image": "vllm/vllm-openai:v0.10.1", "port": 8000, "pool": pool,
            "engine": {"kind": "vllm", "model": MODEL_PATH},
        })
        assert status == 202, body
        assert server.wait_operation(body["operation"]["id"], 60)["status"] == "succeeded"
    status, pools = server.api("GET", f"/api/clusters/{CLUSTER}/pools")
    worker = next(w for p in pools for w in p["workers"] if w["endpoint"] == "pool-a")
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}/endpoints")
    row = ui.wait_css(f'#pools-card tr[data-worker="{worker["pod"]}"]')
    assert row.get_attribute("data-serving") == "pool-a"
    Select(row.find_element(By.CSS_SELECTOR, "select")).select_by_value("pool-b")
    ui.click(row.find_element(By.CSS_SELECTOR, "button[data-action=move]"))
    ui.wait_css("#pool-apply", 10)
    diff = ui.text('#pools-activity ul.diff')
    assert "pa" in diff and "pb" in diff, diff
    status, ops = server.api("GET", "/api/operations?limit=500")
    assert not any(o["kind"] == "assign_pool_worker" for o in ops), "the diff created no operation"
    ui.screenshot("pool-diff")
    ui.click_css("#pool-apply")
    wait_green(ui, "#pools-activity", 30)
    ui.wait(lambda: ui.css(f'#pools-card tr[data-worker="{worker["pod"]}"]').get_attribute("data-serving") == "pool-b", 10,
            "the worker serves pool-b")
    ui.screenshot("pool-moved")
    status, pools = server.api("GET", f"/api/clusters/{CLUSTER}/pools")
    moved = next(w for p in pools for w in p["workers"] if w["pod"] == worker["pod"])
    assert moved["serving"] == "pool-b" and moved["uid"] == worker["uid"], "the same pod, not restarted"
    # The same move again: already in this state.
    # The list redraws while it polls; ui.wait retries a click that lands on a replaced row.
    ui.wait(lambda: ui.click_css(f'#pools-card tr[data-worker="{worker["pod"]}"] button[data-action=move]') or True,
            10, "the move button clicked")
    ui.wait_css("#pools-activity .no-change", 10)


def test_sglang_with_router_and_keda_autoscaling(wl_ui, wl):
    ui = wl_ui
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}/endpoints/new")
    ui.wait_css("#endpoint-form")
    ui.wait(lambda: field(ui, "instance_type").get_attribute("value") == "ml.g5.xlarge", 10, "the cluster's instance type")
    assert not field(ui, "router").is_displayed(), "the router is an SGLang option"
    Select(field(ui, "engine.kind")).select_by_value("sglang")
    assert field(ui, "image").get_attribute("value").startswith("lmsysorg/sglang:")
    set_value(field(ui, "name"), "sgl")
    set_value(field(ui, "engine.model"), MODEL_PATH)
    ui.click_css('input[name=exposure][value="pool"]')
    set_value(field(ui, "pool"), "sgl-pool")
    ui.click(field(ui, "router"))
    ui.click(field(ui, "autoscaling.enabled"))
    set_value(field(ui, "autoscaling.min_replicas"), "1")
    set_value(field(ui, "autoscaling.max_replicas"), "3")
    set_value(field(ui, "autoscaling.cooldown_seconds"), "60")
    ui.click_css("#endpoint-review")
    plan = ui.wait_css("#endpoint-plan", 10)
    kinds = [d.get_attribute("data-kind") for d in plan.find_elements(By.CSS_SELECTOR, "details.manifest")]
    assert "ScaledObject" in kinds and kinds.count("Deployment") == 2, kinds
    ui.click_css("#endpoint-deploy")
    ui.wait(lambda: "/endpoints/sgl" in ui.d.current_url, 10, "the endpoint page")
    wait_green(ui, "#endpoint-activity", 60)
    ui.wait(lambda: ui.css("#endpoint-ready").get_attribute("data-ready") == "true", 20, "ready")
    ui.wait(lambda: "KEDA 1–3" in ui.text(":has(> #ep-sum-title)"), 10, "the autoscaler shown")

    # KEDA's signal rises in the simulated Prometheus: the replicas follow, the page shows it.
    status, body = ui.server.api("PUT", "/api/sim/scaling-metric",
                                 {"cluster": CLUSTER, "namespace": "default", "scaled_object": "sgl", "value": 100})
    assert status == 200, body
    ui.wait(lambda: ui.css("#endpoint-replicas").get_attribute("data-desired") == "3", 30, "scaled out to 3 by KEDA")
    ui.screenshot("keda-scaled-out")

    # The autoscaler's bounds are what Scale edits: only the changed one is sent, diff first.
    ui.wait(lambda: ui.all('#scale-form [data-field="autoscaling.max"]'), 10, "the scale form edits the autoscaler")
    set_value(field(ui, "autoscaling.max", "#scale-form"), "2")
    ui.click_css("#scale-review")
    ui.wait_css("#scale-apply", 10)
    before = activity_op(ui, "#endpoint-activity")
    ui.click_css("#scale-apply")
    op_id = wait_green(ui, "#endpoint-activity", 60, before)
    status, op = ui.server.api("GET", f"/api/operations/{op_id}")
    assert op["kind"] == "update_endpoint", op
    status, ep = ui.server.api("GET", f"/api/clusters/{CLUSTER}/endpoints/sgl")
    assert ep["autoscaling"]["max"] == 2 and ep["router"] is True and ep["pool"] == "sgl-pool", ep
    ui.screenshot("keda-bounds")

    # Turn autoscaling off: only that is sent; the diff names the fixed count that stays.
    ui.wait(lambda: ui.all('#scale-form [data-field="autoscaling.off"]'), 10, "the switch to turn autoscaling off")
    ui.click(field(ui, "autoscaling.off", "#scale-form"))
    assert not field(ui, "autoscaling.max", "#scale-form").is_displayed(), "the bounds are not sent"
    assert field(ui, "replicas", "#scale-form").is_displayed()
    ui.click_css("#scale-review")
    ui.wait_css("#scale-apply", 10)
    diff = ui.css("#scale-card ul.diff")
    fields = [li.get_attribute("data-field") for li in diff.find_elements(By.CSS_SELECTOR, "li")]
    assert fields == ["autoscaling", "replicas"], diff.text
    found = re.search(r"set by autoscaling \((\d+) now\)", diff.text)
    assert found and "none" in diff.text, diff.text
    kept = int(found.group(1))
    assert kept == 2, "where KEDA has it under the new maximum of 2: " + diff.text
    ui.screenshot("keda-off-diff")
    before = activity_op(ui, "#endpoint-activity")
    ui.click_css("#scale-apply")
    op_id = wait_green(ui, "#endpoint-activity", 60, before)
    status, op = ui.server.api("GET", f"/api/operations/{op_id}")
    assert op["kind"] == "update_endpoint" and op["steps"][0]["key"] == "remove:ScaledObject/sgl", op
    status, ep = ui.server.api("GET", f"/api/clusters/{CLUSTER}/endpoints/sgl")
    assert ep["autoscaling"] is None and ep["request"]["replicas"] == kept, ep
    ui.wait(lambda: ui.css("#endpoint-replicas").get_attribute("data-desired") == str(kept), 10, "the replicas stay")
    ui.wait(lambda: ui.all('#scale-form [data-field="replicas"]') and not ui.all('#scale-form [data-field="autoscaling.off"]'),
            10, "the scale form edits fixed replicas again")


@pytest.mark.parametrize("recipe, fill, expect", [
    ("llama_factory", {"recipe.config": "configs/qwen3_lora_sft.yaml", "recipe.overrides": "num_train_epochs=3"},
     ["llamafactory", "configs/qwen3_lora_sft.yaml", "num_train_epochs=3"]),
    ("ms_swift", {"recipe.config": "configs/swift_sft.yaml", "recipe.args": "--train_type=lora"},
     ["swift", "configs/swift_sft.yaml", "--train_type=lora"]),
])
def test_llama_factory_and_ms_swift_forms_render_their_manifests(wl_ui, wl, recipe, fill, expect):
    ui = wl_ui
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}/jobs/new?recipe={recipe}")
    ui.wait_css("#job-form")
    ui.wait(lambda: field(ui, "job.instance_type").get_attribute("value") == "ml.g5.xlarge", 10, "the cluster's instance type")
    set_value(field(ui, "job.name"), f"{recipe.replace('_', '-')}-plan")
    for path, value in fill.items():
        set_value(field(ui, path), value)
    ui.click_css("#job-review")
    plan = ui.wait_css("#job-plan", 10)
    text = plan.find_element(By.CSS_SELECTOR, "details.manifest pre").get_attribute("textContent")
    for piece in expect:
        assert piece in text, (piece, text[:800])
    ui.screenshot(f"{recipe}-plan")


def test_a_verl_job_on_ray_from_its_form(wl_ui, wl):
    ui = wl_ui
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}/jobs/new?recipe=verl")
    ui.wait_css("#job-form")
    assert ui.css('input[name=recipe][value="verl"]').is_selected()
    ui.wait(lambda: field(ui, "job.instance_type").get_attribute("value") == "ml.g5.xlarge", 10, "the cluster's instance type")
    set_value(field(ui, "job.name"), "verl-grpo")
    set_value(field(ui, "recipe.overrides"), "algorithm.adv_estimator=grpo")
    ui.click_css("#job-review")
    plan = ui.wait_css("#job-plan", 10)
    assert [d.get_attribute("data-kind") for d in plan.find_elements(By.CSS_SELECTOR, "details.manifest")] == ["RayJob"]
    assert "algorithm.adv_estimator=grpo" in plan.find_element(By.CSS_SELECTOR, "details.manifest pre").get_attribute("textContent")
    ui.click_css("#job-submit")
    ui.wait(lambda: "/jobs/verl-grpo" in ui.d.current_url, 10, "the job page")
    wait_green(ui, "#job-activity", 60)
    ui.wait(lambda: len(ui.all("#job-log .log-line")) > 0, 30, "the head's log lines")
    status, job = ui.server.api("GET", f"/api/clusters/{CLUSTER}/jobs/verl-grpo")
    assert job["runtime"] == "ray" and job["recovery"] is None, job
    assert "Ray" in ui.text(":has(> #job-sum-title)")
    ui.click_css('nav.tabs a[data-tab="jobs"]')
    row = ui.wait_css('#jobs-table tr[data-job="verl-grpo"]')
    assert "Ray" in row.text and not row.find_elements(By.CSS_SELECTOR, ".recovery")
    ui.screenshot("verl-in-list")


def test_a_managed_endpoint_from_the_form_answers_in_the_chat(wl_ui, wl):
    ui = wl_ui
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}/endpoints/new?route=managed")
    ui.wait_css("#endpoint-form")
    assert ui.css('input[name=route][value="managed"]').is_selected()
    status, cluster = ui.server.api("GET", f"/api/clusters/{CLUSTER}")
    ui.wait(lambda: field(ui, "model_source.bucket").get_attribute("value") == cluster["bucket"], 10, "the shared bucket by default")
    assert not field(ui, "engine.model").is_displayed(), "self-managed fields are hidden"
    set_value(field(ui, "name"), "managed-qwen")
    set_value(field(ui, "model_source.model_location"), MODEL_PATH)
    ui.click_css("#endpoint-review")
    plan = ui.wait_css("#endpoint-plan", 10)
    assert "InferenceEndpointConfig" in [d.get_attribute("data-kind") for d in plan.find_elements(By.CSS_SELECTOR, "details.manifest")]
    ui.click_css("#endpoint-deploy")
    ui.wait(lambda: "/endpoints/managed-qwen" in ui.d.current_url, 10, "the endpoint page")
    wait_green(ui, "#endpoint-activity", 60)
    ui.wait(lambda: ui.css("#endpoint-ready").get_attribute("data-ready") == "true", 20, "ready")
    ui.css("#chat-message").send_keys("Hello")
    ui.css("#chat-message").send_keys(Keys.CONTROL, Keys.ENTER)
    answer = ui.wait_css("#chat-log .chat-answer", 70)
    assert "Hello" in answer.text, answer.text
    ui.screenshot("managed-chat")


def test_a_tracked_job_links_its_training_history(wl_ui, wl):
    ui = wl_ui
    server = ui.server
    status, body = server.api("POST", "/api/mlflow/servers", {"name": "wl-tracking", "cluster": CLUSTER})
    assert status == 202, body
    assert server.wait_operation(body["operation"]["id"], 90)["status"] == "succeeded"
    status, servers = server.api("GET", "/api/mlflow/servers")
    arn = next(s["arn"] for s in servers if s["name"] == "wl-tracking")
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}/jobs/new")
    ui.wait_css("#job-form")
    ui.wait(lambda: field(ui, "job.instance_type").get_attribute("value") == "ml.g5.xlarge", 10, "the cluster's instance type")
    set_value(field(ui, "job.name"), "tracked")
    set_value(field(ui, "recipe.script"), "code/train.py")
    ui.click_css("#job-form > details.advanced > summary")
    set_value(field(ui, "job.mlflow.tracking_server_arn"), arn)
    ui.click_css("#job-review")
    plan = ui.wait_css("#job-plan", 10)
    job = plan.find_element(By.CSS_SELECTOR, 'details.manifest[data-kind="HyperPodPyTorchJob"] pre').get_attribute("textContent")
    assert "MLFLOW_TRACKING_URI" in job and "serviceAccountName: tracked-mlflow" in job, job
    # Its own service account, which the operation binds to the server's writer role first.
    assert plan.find_elements(By.CSS_SELECTOR, 'details.manifest[data-kind="ServiceAccount"][data-name="tracked-mlflow"]')
    assert "pod_identity" in plan.text or "Pod Identity" in plan.text, plan.text
    ui.click_css("#job-submit")
    ui.wait(lambda: "/jobs/tracked" in ui.d.current_url, 10, "the job page")
    ui.wait_css("#job-history-link", 15)

    def click_history_link():
        # The job page redraws its header on every poll: a found link may be replaced before the click.
        try:
            ui.click_css("#job-history-link")
            return True
        except StaleElementReferenceException:
            return False

    ui.wait(click_history_link, 15, "the training-history link clicked")
    # The history view may rewrite its query once it has selected the run: check what it shows.
    ui.wait(lambda: "#/history" in ui.d.current_url, 10, "the training history")
    ui.wait(lambda: ui.all("#history-server") and ui.css("#history-server").get_attribute("value") == "wl-tracking", 15,
            "its tracking server selected")
    ui.wait(lambda: "tracked" in ui.text("main") and ui.all("svg"), 15, "the job's run with its plots")
    ui.screenshot("job-training-history")


def test_workload_screens_in_the_dark_theme_with_labels(wl_ui, wl):
    ui = wl_ui
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}/endpoints/new")
    ui.wait_css("#endpoint-form")
    ui.js("localStorage.setItem('instantstart.theme', 'dark')")
    try:
        for route, form in ((f"#/clusters/{CLUSTER}/jobs/new", "#job-form"), (f"#/clusters/{CLUSTER}/endpoints/new", "#endpoint-form"),
                            (f"#/clusters/{CLUSTER}/storage", "#download-form")):
            ui.go(route)
            ui.wait_css(form)
            time.sleep(0.3)
            assert ui.js("return document.documentElement.dataset.theme") == "dark"
            # Every visible control has a label.
            unlabeled = ui.js("""
              return [...document.querySelectorAll(arguments[0] + ' input, ' + arguments[0] + ' select, ' + arguments[0] + ' textarea')]
                .filter((el) => el.offsetParent !== null && el.type !== 'hidden')
                .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label'))
                .map((el) => el.name || el.id);
            """, form)
            assert not unlabeled, unlabeled
            ui.screenshot(f"dark-{form.strip('#')}")
        # The top-level links lead to the active cluster's pages (or ask which one).
        ui.go("#/jobs")
        ui.wait(lambda: "/jobs" in ui.d.current_url and (ui.all("#cluster-choice a") or "/clusters/" in ui.d.current_url), 10, "jobs page or chooser")
    finally:
        ui.js("localStorage.removeItem('instantstart.theme')")


# ---- foreign workloads and simulated times -----------------------------------------------------


def test_foreign_jobs_and_endpoints_are_listed_read_only_with_sim_times(wl_ui, wl):
    """Objects another tool applied through the cluster's Kubernetes API show a "foreign"
    badge and no mutation; times read from the simulated cloud carry the "sim" marker."""
    server = wl_ui.server
    server.kube_create(wl, {
        "apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
        "metadata": {"name": "legacy-ui", "namespace": "default",
                     "annotations": {"sim.instantstart.io/duration-seconds": "1000000"}},
        "spec": {"replicaSpecs": [{"name": "pods", "replicas": 1, "template": {"spec": {"containers": [
            {"name": "pytorch", "image": "pytorch/pytorch:2.5.1"}]}}}]},
    })
    server.kube_create(wl, {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "tgi-ui", "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "tgi-ui"}},
                 "template": {"metadata": {"labels": {"app": "tgi-ui"}}, "spec": {"containers": [
                     {"name": "tgi", "image": "ghcr.io/huggingface/text-generation-inference:2.4.0"}]}}},
    })
    wl_ui.login()

    # Jobs list: the badge, no Delete button, and a creation time marked as simulated.
    wl_ui.go(f"#/clusters/{wl}/jobs")
    row = wl_ui.wait_css('tr[data-job="legacy-ui"][data-foreign="true"]', 20)
    badge = row.find_element(By.CSS_SELECTOR, ".foreign-badge")
    assert "Not created by InstantStart" in badge.get_attribute("title")
    assert not row.find_elements(By.CSS_SELECTOR, "button"), "a foreign job offers no mutation"
    assert "read-only" in row.text
    marker = row.find_element(By.CSS_SELECTOR, ".sim-marker")
    assert marker.text == "sim"
    assert "Simulated-cloud time" in marker.get_attribute("title")
    wl_ui.screenshot("foreign-job-row")

    # Job page: readable (pods), no Delete, the note says who manages it.
    wl_ui.go(f"#/clusters/{wl}/jobs/legacy-ui")
    wl_ui.wait(lambda: wl_ui.all("#foreign-note") and wl_ui.css("#foreign-note").is_displayed(), 15, "foreign note")
    assert not wl_ui.css("#delete-job").is_displayed()
    assert wl_ui.all(".title-badges .foreign-badge")
    wl_ui.wait(lambda: wl_ui.all('#pods-table tr[data-pod="legacy-ui-pods-0"]'), 20, "the foreign job's pod")

    # Endpoints: the foreign TGI Deployment is listed read-only; its page has no scale or delete.
    wl_ui.go(f"#/clusters/{wl}/endpoints")
    row = wl_ui.wait_css('tr[data-endpoint="tgi-ui"][data-foreign="true"]', 20)
    assert row.find_elements(By.CSS_SELECTOR, ".foreign-badge")
    assert not row.find_elements(By.CSS_SELECTOR, "button")
    wl_ui.go(f"#/clusters/{wl}/endpoints/tgi-ui")
    wl_ui.wait(lambda: wl_ui.all("#foreign-note") and wl_ui.css("#foreign-note").is_displayed(), 15, "foreign note")
    assert not wl_ui.css("#delete-endpoint").is_displayed()
    assert not wl_ui.css("#scale-card").is_displayed()
    wl_ui.screenshot("foreign-endpoint-page")


def test_jobs_of_two_teams_show_queued_admitted_and_preempted(wl_ui, wl):
    """Task governance contention on the jobs screen: two teams with one GPU each, research
    borrows prod's idle one, prod takes it back, and a higher-priority research job submitted
    from the form preempts research's lower-priority one; each row shows its admission."""
    ui = wl_ui
    server = ui.server
    status, body = server.api("PUT", f"/api/clusters/{CLUSTER}/governance", {
        "priority_classes": [{"name": "inference", "weight": 100}, {"name": "training", "weight": 50}],
        "teams": [
            {"name": "research", "quotas": [{"instance_type": "ml.g5.xlarge", "count": 1}], "borrow_limit": 100},
            {"name": "prod", "quotas": [{"instance_type": "ml.g5.xlarge", "count": 1}], "sharing": "Lend"},
        ],
    })
    assert status == 202, body
    assert server.wait_operation(body["operation"]["id"], 60)["status"] == "succeeded"

    def submit(name, team, priority):
        status, body = server.api("POST", f"/api/clusters/{CLUSTER}/jobs", {
            "runtime": "hyperpod",
            "job": {"name": name, "namespace": f"hyperpod-ns-{team}", "image": "pytorch/pytorch:2.5.1",
                    "instance_type": "ml.g5.xlarge", "nodes": 1, "team": team, "priority": priority,
                    "storage": {"claim_name": "team-data"},
                    "env": [{"name": "SIM_DURATION_SECONDS", "value": "10000000"}]},
            "recipe": {"kind": "torch", "script": "scripts/train.py"},
        })
        assert status == 202, body
        assert server.wait_operation(body["operation"]["id"], 60)["status"] == "succeeded"

    submit("gov-r1", "research", "training")
    submit("gov-r2", "research", "training")  # borrows prod's idle GPU
    submit("gov-p1", "prod", "training")  # prod takes its GPU back: gov-r2 is evicted

    ui.login()
    ui.go(f"#/clusters/{CLUSTER}/jobs")

    def admission(job):
        rows = ui.all(f'#jobs-table tr[data-job="{job}"] .admission')
        return rows[0].get_attribute("data-admission") if rows else None

    ui.wait(lambda: admission("gov-p1") == "admitted", 20, "prod's job admitted")
    assert admission("gov-r1") == "admitted"
    assert admission("gov-r2") == "preempted"
    cell = ui.css('#jobs-table tr[data-job="gov-r2"] .admission')
    assert "InCohortReclamation" in cell.get_attribute("title"), cell.get_attribute("title")
    assert "research / training" in cell.text

    # A higher-priority research job from the form: the plan shows the Kueue labels.
    ui.click(ui.wait_css("#new-job"))
    form = ui.wait_css("#job-form")
    ui.wait(lambda: field(ui, "job.instance_type").get_attribute("value") == "ml.g5.xlarge", 10, "the instance type")
    ui.click_css('input[name=recipe][value="torch"]')
    set_value(field(ui, "job.name"), "gov-r4")
    set_value(field(ui, "job.namespace"), "hyperpod-ns-research")
    set_value(field(ui, "job.team"), "research")
    set_value(field(ui, "job.priority"), "urgent")
    set_value(field(ui, "job.storage.claim_name"), "team-data")
    set_value(field(ui, "recipe.script"), "scripts/train.py")
    ui.click_css("#job-review")
    # An unknown priority class is refused next to its field, with the valid ones.
    ui.wait(lambda: errors_for(form, "job.priority"), 10, "the finding next to the priority")
    assert "inference, training" in errors_for(form, "job.priority")[0]
    set_value(field(ui, "job.priority"), "inference")
    ui.click_css("#job-review")
    plan = ui.wait_css("#job-plan", 10)
    yaml_text = plan.find_element(By.CSS_SELECTOR, "details.manifest[open] pre").get_attribute("textContent")
    assert "hyperpod-ns-research-localqueue" in yaml_text and "inference-priority" in yaml_text, yaml_text[:800]
    ui.click_css("#job-submit")
    ui.wait(lambda: "/jobs/gov-r4" in ui.d.current_url, 10, "the job page")
    wait_green(ui, "#job-activity", 60)
    ui.wait(lambda: ui.all("#job-admission .admission")
            and ui.css("#job-admission .admission").get_attribute("data-admission") == "admitted", 20, "gov-r4 admitted")
    ui.screenshot("job-admission")

    ui.click_css('nav.tabs a[data-tab="jobs"]')
    ui.wait(lambda: admission("gov-r1") == "preempted", 20, "gov-r1 preempted by the higher-priority job")
    title = ui.css('#jobs-table tr[data-job="gov-r1"] .admission').get_attribute("title")
    assert "InClusterQueue" in title and "gov-r4" in title, title
    assert admission("gov-r4") == "admitted" and admission("gov-p1") == "admitted"
    ui.screenshot("jobs-admission")

    # Leave the cluster as the other tests expect it: no team jobs, governance off.
    for name, team in [("gov-r1", "research"), ("gov-r2", "research"), ("gov-p1", "prod"), ("gov-r4", "research")]:
        status, body = server.api("DELETE", f"/api/clusters/{CLUSTER}/jobs/{name}?namespace=hyperpod-ns-{team}")
        assert status == 202, body
        assert server.wait_operation(body["operation"]["id"], 60)["status"] == "succeeded"
    status, body = server.api("PUT", f"/api/clusters/{CLUSTER}/governance", {"enabled": False})
    assert status == 202, body
    assert server.wait_operation(body["operation"]["id"], 60)["status"] == "succeeded"


def test_the_governance_panel_shows_teams_usage_and_changes_a_quota(wl_ui, wl):
    """The cluster screen's governance panel: each team's guaranteed and borrowable GPUs, its
    admitted and queued jobs and the GPUs they hold (research borrows prod's idle one), the
    priority classes; the editor refuses a bad weight next to its field, then reviews the
    server's diff and applies a larger borrow limit, followed in place."""
    ui = wl_ui
    server = ui.server
    status, body = server.api("PUT", f"/api/clusters/{CLUSTER}/governance", {
        "priority_classes": [{"name": "inference", "weight": 100}, {"name": "training", "weight": 50}],
        "teams": [
            {"name": "research", "quotas": [{"instance_type": "ml.g5.xlarge", "count": 1}], "borrow_limit": 100},
            {"name": "prod", "quotas": [{"instance_type": "ml.g5.xlarge", "accelerators": 1}], "sharing": "Lend"},
        ],
    })
    assert status == 202, body
    assert server.wait_operation(body["operation"]["id"], 60)["status"] == "succeeded"
    jobs = ["pan-r1", "pan-r2", "pan-r3"]
    for name in jobs:
        status, body = server.api("POST", f"/api/clusters/{CLUSTER}/jobs", {
            "runtime": "hyperpod",
            "job": {"name": name, "namespace": "hyperpod-ns-research", "image": "pytorch/pytorch:2.5.1",
                    "instance_type": "ml.g5.xlarge", "nodes": 1, "team": "research", "priority": "training",
                    "storage": {"claim_name": "team-data"},
                    "env": [{"name": "SIM_DURATION_SECONDS", "value": "10000000"}]},
            "recipe": {"kind": "torch", "script": "scripts/train.py"},
        })
        assert status == 202, body
        assert server.wait_operation(body["operation"]["id"], 60)["status"] == "succeeded"

    ui.login()
    ui.go(f"#/clusters/{CLUSTER}")
    ui.wait_css("#governance-card", 20)

    def cell(team, cls, attr="data-gpus"):
        # Read in one script: the panel re-renders while it polls, so an element found by one
        # WebDriver call may be gone (stale) by the next.
        return ui.js(
            "const e = document.querySelector(arguments[0]); return e ? e.getAttribute(arguments[1]) : null;",
            f'#governance-teams tr[data-team="{team}"] .{cls}',
            attr,
        )

    # research: its own GPU and prod's idle one (borrowed); the third job waits.
    ui.wait(lambda: cell("research", "admitted", "data-count") == "2", 20, "research's two jobs admitted")
    assert cell("research", "queued", "data-count") == "1"
    assert (cell("research", "in-use"), cell("research", "in-use", "data-borrowed")) == ("2", "1")
    assert (cell("research", "guaranteed"), cell("research", "borrowable")) == ("1", "1")
    assert (cell("prod", "guaranteed"), cell("prod", "borrowable"), cell("prod", "admitted", "data-count")) == ("1", "0", "0")
    row_text = ui.js("return document.querySelector(arguments[0]).innerText;", '#governance-teams tr[data-team="research"]')
    assert "hyperpod-ns-research-localqueue" in row_text, row_text
    def text(selector):  # one script, like cell(): the element may be re-rendered between calls
        return ui.js("const e = document.querySelector(arguments[0]); return e ? e.innerText : null;", selector)

    classes = text("#governance-classes")
    assert "kueue.x-k8s.io/priority-class: inference-priority" in (classes or ""), classes
    assert (text("#governance-summary") or "").startswith("On."), text("#governance-summary")
    ui.js("const e = document.querySelector(arguments[0]); if (e) e.scrollIntoView();", "#governance-card")
    ui.screenshot("governance-panel")

    # Edit: a weight over 100 is refused next to its field.
    ui.click_css("#governance-edit")
    form = ui.wait_css("#governance-form")
    weight = form.find_element(By.CSS_SELECTOR, '[data-field="priority_classes[0].weight"]')
    set_value(weight, "101")
    ui.click_css("#governance-review")

    def weight_errors():  # the server may name the field under the request's `governance`
        return [e.text for e in form.find_elements(By.CSS_SELECTOR, '.field-error[data-error-for$="priority_classes[0].weight"]')
                if e.is_displayed()]

    ui.wait(weight_errors, 10, "the finding next to the weight")
    assert "0-100" in weight_errors()[0], weight_errors()
    set_value(form.find_element(By.CSS_SELECTOR, '[data-field="priority_classes[0].weight"]'), "100")

    # A larger borrow limit for research: the server's diff, then applied and followed.
    research = [f for f in form.find_elements(By.CSS_SELECTOR, "fieldset.gov-team")
                if f.find_element(By.CSS_SELECTOR, "[data-leaf=name]").get_attribute("value") == "research"][0]
    set_value(research.find_element(By.CSS_SELECTOR, "[data-leaf=borrow_limit]"), "200")
    ui.click_css("#governance-review")
    plan = ui.wait_css("#governance-plan .diff", 10)
    assert [li.get_attribute("data-field") for li in plan.find_elements(By.CSS_SELECTOR, "li")] == ["teams.research"], plan.text
    ui.click_css("#governance-apply")
    wait_green(ui, "#governance-activity", 60)
    ui.wait(lambda: cell("research", "borrowable") == "2", 20, "research may borrow 200% of its GPU")
    ui.js("const e = document.querySelector(arguments[0]); if (e) e.scrollIntoView();", "#governance-card")
    ui.screenshot("governance-panel-applied")

    # Leave the cluster as the other tests expect it: no team jobs, governance off.
    for name in jobs:
        status, body = server.api("DELETE", f"/api/clusters/{CLUSTER}/jobs/{name}?namespace=hyperpod-ns-research")
        assert status == 202, body
        assert server.wait_operation(body["operation"]["id"], 60)["status"] == "succeeded"
    status, body = server.api("PUT", f"/api/clusters/{CLUSTER}/governance", {"enabled": False})
    assert status == 202, body
    assert server.wait_operation(body["operation"]["id"], 60)["status"] == "succeeded"
