"""End-to-end tests of the web UI in a real headless Chromium against a real server on the
simulated cloud. Screenshots of every screen land in target/ui-artifacts/.

Each test sets up what it needs (clusters are created through the UI where that is what the
test is about, otherwise through the REST API), so tests can run alone with -k.
"""

from __future__ import annotations

import json
import time

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from conftest import ARTIFACTS, TOKEN

ACTIVE = {"submitting", "submitted", "polling"}


# ---- helpers ---------------------------------------------------------------------------------


def set_value(el, value: str) -> None:
    el.send_keys(Keys.CONTROL, "a")
    el.send_keys(Keys.DELETE)
    if value:
        el.send_keys(value)


def field(ui, path: str):
    return ui.css(f'[data-field="{path}"]')


def open_create_form(ui):
    ui.login()
    ui.go("#/clusters/new")
    ui.wait(lambda: len(ui.all("input[name=availability_zones]")) >= 2, 10, "zones loaded")
    ui.wait(lambda: field(ui, "hyperpod.instance_groups[0].instance_type").get_attribute("value"), 10, "instance types loaded")


def fill_create_form(ui, name: str, count: str = "2"):
    open_create_form(ui)
    set_value(ui.css("#f-name"), name)
    set_value(field(ui, "hyperpod.instance_groups[0].count"), count)


def review_plan(ui):
    ui.click(ui.css("form.create-form button[type=submit]"))
    return ui.wait_css("section.plan", 10)


def steps(ui) -> dict[str, str]:
    return {li.get_attribute("data-step-key"): li.get_attribute("data-phase") for li in ui.all("li.step")}


def op_status(ui) -> str | None:
    panels = ui.all("is-operation-progress")
    return panels[0].get_attribute("data-status") if panels else None


def wait_all_green(ui, timeout: float = 45) -> dict[str, str]:
    ui.wait(lambda: op_status(ui) == "succeeded" and steps(ui) and all(p == "succeeded" for p in steps(ui).values()),
            timeout, "every step succeeded")
    return steps(ui)


def current_op_id(ui) -> str:
    url = ui.d.current_url
    assert "#/operations/op-" in url, url
    return url.split("#/operations/")[1]


def create_via_api(server, name: str, count: int = 1) -> str:
    status, body = server.api("POST", "/api/clusters", {
        "name": name,
        "region": "us-east-1",
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": {"instance_groups": [
            {"name": "workers", "instance_type": "ml.g5.xlarge", "count": count, "availability_zone": "us-east-1a"}]},
    })
    assert status == 202, body
    return body["operation"]["id"]


def ensure_cluster(server, name: str) -> None:
    """A ready cluster named `name` (created through the API if missing)."""
    status, _ = server.api("GET", f"/api/clusters/{name}")
    if status == 200:
        return
    op = server.wait_operation(create_via_api(server, name))
    assert op["status"] == "succeeded", op


def error_for(ui, path: str):
    """The finding shown next to the input with data-field=path (and that input)."""
    control = field(ui, path)
    container = control.find_element(By.XPATH, "./ancestor-or-self::*[contains(@class,'field') or self::fieldset][1]")
    msgs = container.find_elements(By.CSS_SELECTOR, f'.field-error[data-error-for="{path}"]')
    return control, msgs


# ---- tests -----------------------------------------------------------------------------------


def test_login_then_401_returns_to_login(ui):
    ui.d.delete_all_cookies()
    ui.go("#/operations")
    ui.js("sessionStorage.clear()")
    ui.go("#/operations")
    token = ui.wait_css("#token")
    assert "#/login" in ui.d.current_url
    assert ui.d.switch_to.active_element == token, "the token input has focus"
    assert not ui.css("#topbar").is_displayed()
    token.send_keys("ist_wrong")
    token.send_keys(Keys.ENTER)
    ui.wait_css('.field-error[data-error-for="token"]')
    assert token.get_attribute("aria-invalid") == "true"
    assert "not valid" in ui.text('.field-error[data-error-for="token"]')
    ui.screenshot("login-rejected")
    set_value(token, TOKEN)
    token.send_keys(Keys.ENTER)
    # Back where the user was headed, with the session.
    ui.wait(lambda: "#/operations" in ui.d.current_url and ui.all("#operations-table, .view p.muted"), 10, "operations after login")
    assert ui.logged_in()
    assert ui.css("#topbar").is_displayed()
    # The cookie expires/disappears: the next API call answers 401 and the UI asks to log in again.
    ui.d.delete_all_cookies()
    ui.go("#/clusters")
    ui.wait_css("#token", 10)
    assert "session ended" in ui.text(".login-card")
    ui.screenshot("session-ended")
    ui.login()


def test_validation_errors_are_shown_next_to_their_fields(ui):
    open_create_form(ui)
    set_value(ui.css("#f-name"), "Bad_Name")
    # Only one AZ, and a group far too large.
    boxes = ui.all("input[name=availability_zones]:checked")
    for b in boxes[1:]:
        ui.click(b)
    set_value(field(ui, "hyperpod.instance_groups[0].count"), "5000")
    ui.click(ui.css("form.create-form button[type=submit]"))
    summary = ui.wait_css(".error-summary")
    assert ui.d.switch_to.active_element == summary, "the summary takes focus"
    for path in ("name", "availability_zones", "hyperpod.instance_groups[0].count"):
        _, msgs = error_for(ui, path)
        assert msgs and msgs[0].is_displayed(), f"finding next to {path}"
    name_input, msgs = error_for(ui, "name")
    assert name_input.get_attribute("aria-invalid") == "true"
    assert msgs[0].get_attribute("id") in name_input.get_attribute("aria-describedby")
    assert "lowercase" in msgs[0].text
    count_input, _ = error_for(ui, "hyperpod.instance_groups[0].count")
    assert count_input.get_attribute("aria-invalid") == "true"
    assert not ui.all("section.plan"), "no plan for an invalid request"
    ui.screenshot("field-errors")

    # The summary links focus the field.
    link = [a for a in summary.find_elements(By.CSS_SELECTOR, "a") if a.text.startswith("name:")][0]
    ui.click(link)
    assert ui.d.switch_to.active_element == name_input

    # A second instance group: findings use its index ([1]) and land in its inputs.
    ui.click(ui.css(".hp-body > button"))
    set_value(field(ui, "hyperpod.instance_groups[1].name"), "workers")  # duplicate name
    set_value(field(ui, "hyperpod.instance_groups[1].count"), "abc")     # not a number
    ui.click(ui.css("form.create-form button[type=submit]"))
    ui.wait_css('.field-error[data-error-for="hyperpod.instance_groups[1].count"]')
    _, msgs = error_for(ui, "hyperpod.instance_groups[1].count")
    assert msgs, "the decode error names the field of group 2"

    # Fixing the fields clears the findings and produces a plan.
    set_value(field(ui, "hyperpod.instance_groups[1].count"), "1")
    set_value(field(ui, "hyperpod.instance_groups[1].name"), "second")
    set_value(ui.css("#f-name"), "valid-name")
    set_value(field(ui, "hyperpod.instance_groups[0].count"), "2")
    ui.click(ui.all("input[name=availability_zones]:not(:checked)")[0])
    # The advanced CIDR override is also validated by the backend, next to its input.
    ui.click(ui.css("details.advanced > summary"))
    set_value(ui.css("#f-cidr"), "8.8.0.0/16")
    ui.click(ui.css("form.create-form button[type=submit]"))
    ui.wait_css('.field-error[data-error-for="network.cidr"]')
    assert ui.css("#f-cidr").get_attribute("aria-invalid") == "true"
    ui.screenshot("cidr-error")
    set_value(ui.css("#f-cidr"), "")
    # So are the EKS API's public access blocks: a private range is refused next to its input.
    set_value(ui.css("#f-api-access"), "203.0.113.0/24, 10.0.0.0/8")
    ui.click(ui.css("form.create-form button[type=submit]"))
    ui.wait_css('.field-error[data-error-for="public_access_cidrs[1]"]')
    assert ui.css("#f-api-access").get_attribute("aria-invalid") == "true"
    set_value(ui.css("#f-api-access"), "203.0.113.0/24")
    review_plan(ui)
    assert not ui.all(".field-error"), "findings cleared"

    # Instance types are offered per AZ: in the simulated us-east-1, p5 only in 1b, 1d and 1f.
    type_select = Select(field(ui, "hyperpod.instance_groups[0].instance_type"))
    Select(field(ui, "hyperpod.instance_groups[0].availability_zone")).select_by_value("us-east-1a")
    assert "ml.p5.48xlarge" not in [o.get_attribute("value") for o in type_select.options]
    Select(field(ui, "hyperpod.instance_groups[0].availability_zone")).select_by_value("us-east-1b")
    assert "ml.p5.48xlarge" in [o.get_attribute("value") for o in type_select.options]
    # Preflight: a new account has no p5 quota; the plan explains it next to the count and
    # does not let the request go ahead.
    type_select.select_by_value("ml.p5.48xlarge")
    set_value(field(ui, "hyperpod.instance_groups[0].count"), "4")
    plan = review_plan(ui)
    failed = plan.find_elements(By.CSS_SELECTOR, '.checks-list li[data-status="fail"]')
    if failed:
        assert failed[0].get_attribute("data-field") == "hyperpod.instance_groups[0].count"
        _, msgs = error_for(ui, "hyperpod.instance_groups[0].count")
        assert msgs and "quota" in msgs[0].text.lower(), [m.text for m in msgs]
        assert not ui.css("#create-submit").is_enabled()
        ui.screenshot("preflight-quota")


def test_create_cluster_live_progress_with_reload(ui, server):
    fill_create_form(ui, "alpha", count="2")
    plan = review_plan(ui)
    keys = [li.get_attribute("data-step-key") for li in plan.find_elements(By.CSS_SELECTOR, "li[data-step-key]")]
    for k in ("vpc", "nat_gateway", "eks_cluster", "select_active", "addon:cert-manager", "hyperpod_cluster", "storage"):
        assert k in keys, f"plan has {k}"
    assert "Plan for cluster/alpha" in plan.text
    assert "simulated cloud" in plan.text
    ui.screenshot("plan")
    # A double click sends one request (and both would carry the same Idempotency-Key).
    ui.js("const b = document.getElementById('create-submit'); b.click(); b.click();")
    ui.wait(lambda: "#/operations/op-" in ui.d.current_url, 10, "progress page")
    op_id = current_op_id(ui)
    ui.wait_css("li.step")

    # Reload while the EKS control plane is being created: the panel comes back from the URL.
    ui.wait(lambda: steps(ui).get("eks_cluster") in ACTIVE, 15, "eks_cluster running")
    ui.screenshot("progress-running")
    timing = ui.text('li.step[data-step-key="eks_cluster"] .step-timing')
    assert "running for" in timing and ("left" in timing or "longer" in timing), timing
    ui.d.refresh()
    ui.wait_css("li.step")
    assert current_op_id(ui) == op_id
    ui.wait(lambda: ui.css(".conn").get_attribute("data-state") == "live", 10, "stream live after reload")
    assert steps(ui)["vpc"] == "succeeded", "state after the reload comes from the server"

    final = wait_all_green(ui)
    assert len(final) >= 10
    assert all(t == "✓" for t in (e.text for e in ui.all("li.step .step-icon")))
    assert ui.text(".op-counts") == f"{len(final)} of {len(final)} steps done"
    ui.screenshot("progress-succeeded")

    _, ops = server.api("GET", "/api/operations?target=cluster/alpha")
    assert len(ops) == 1, "one operation despite the double click"
    assert ops[0]["actor"]["face"] == "ui"
    assert ops[0]["idempotency_key"], "the UI sent an Idempotency-Key"

    # The cluster: ready, active, with its instance group and nodes.
    ui.click(ui.css(".op-banner a.btn"))
    ui.wait(lambda: ui.all("#groups-table tr[data-group=workers]"), 10, "instance groups table")
    row = ui.css("#groups-table tr[data-group=workers]")
    # The form's default: the offered type with the fewest accelerators (then least memory).
    chosen = ops[0]["request"]["hyperpod"]["instance_groups"][0]["instance_type"]
    assert chosen.startswith("ml.g"), chosen
    assert chosen in row.text and "/ 2" in row.text and "On-demand" in row.text
    ui.wait(lambda: len(ui.all("#nodes-table tbody tr")) == 2, 10, "two nodes")
    assert "Active" in ui.text(".title-badges")
    ui.screenshot("cluster-detail")

    ui.go("#/clusters")
    ui.wait(lambda: ui.all('tr[data-cluster="alpha"]'), 10, "alpha listed")
    tr = ui.css('tr[data-cluster="alpha"]')
    assert tr.get_attribute("data-status") == "ready"
    assert tr.get_attribute("data-active") == "true"
    ui.screenshot("clusters")

    # Valid but impossible now (422): the name is taken; shown next to the name field.
    fill_create_form(ui, "alpha")
    ui.click(ui.css("form.create-form button[type=submit]"))
    summary = ui.wait_css(".error-summary")
    assert "cannot be applied" in summary.text
    _, msgs = error_for(ui, "name")
    assert msgs and "already exists" in msgs[0].text, [m.text for m in msgs]
    assert not ui.all("section.plan")
    ui.screenshot("name-taken-422")


def test_failed_step_is_retried_from_the_ui(ui, server):
    status, _ = server.api("PUT", "/api/sim/faults", {"fail_apis": {"sagemaker:CreateCluster": {
        "mode": "fail_once", "kind": "quota_exceeded",
        "message": "ResourceLimitExceeded: ml.g5.xlarge for cluster usage (injected by the UI test)"}}})
    assert status == 200
    try:
        fill_create_form(ui, "beta", count="1")
        review_plan(ui)
        ui.click(ui.css("#create-submit"))
        ui.wait(lambda: "#/operations/op-" in ui.d.current_url, 10, "progress page")
        ui.wait(lambda: op_status(ui) == "failed", 45, "operation failed")
    finally:
        server.api("PUT", "/api/sim/faults", {})
    assert steps(ui)["hyperpod_cluster"] == "failed"
    row = ui.css('li.step[data-step-key="hyperpod_cluster"]')
    assert "ResourceLimitExceeded" in row.find_element(By.CSS_SELECTOR, ".step-error").text
    assert "Failed" in ui.text(".op-banner")
    retry = row.find_element(By.XPATH, ".//button[normalize-space()='Retry step']")
    assert retry.is_enabled()
    # Every other step finished; only the failed one offers a retry.
    assert len([b for b in ui.all("li.step button") if b.is_displayed()]) == 1
    ui.screenshot("step-failed")
    # The banner leads to the failed step.
    ui.click(ui.css(".op-banner .actions button"))
    assert ui.d.switch_to.active_element == retry
    ui.click(retry)
    wait_all_green(ui)
    ui.screenshot("retried-succeeded")
    _, op = server.api("GET", f"/api/operations/{current_op_id(ui)}")
    hp = next(s for s in op["steps"] if s["key"] == "hyperpod_cluster")
    assert hp["attempts"] == 2
    _, audit = server.api("GET", "/api/audit?limit=20")
    assert any(a["action"] == "step.retry" and a["actor"]["face"] == "ui" for a in audit)


def test_progress_survives_a_server_restart(ui, server):
    ui.login()
    op_id = create_via_api(server, "gamma", count=1)
    ui.go(f"#/operations/{op_id}")
    ui.wait(lambda: ui.all(".conn[data-state=live]") and steps(ui).get("eks_cluster") in ACTIVE | {"pending"}, 10, "following")
    server.stop()
    ui.wait(lambda: ui.css(".conn").get_attribute("data-state") == "reconnecting", 10, "reconnecting shown")
    assert "Reconnecting" in ui.text(".conn")
    ui.screenshot("reconnecting")
    server.start()
    ui.wait(lambda: ui.css(".conn").get_attribute("data-state") == "live", 20, "reconnected")
    wait_all_green(ui)
    assert current_op_id(ui) == op_id


def test_cancel_then_continue_from_the_ui(ui, server):
    ui.login()
    op_id = create_via_api(server, "epsilon", count=1)
    ui.go(f"#/operations/{op_id}")
    ui.wait(lambda: steps(ui).get("eks_cluster") in ACTIVE, 15, "eks_cluster running")
    ui.click(ui.css(".op-actions button"))
    dialog = ui.wait_css("dialog[open]")
    assert "Nothing is rolled back" in dialog.text
    ui.click(dialog.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    ui.wait(lambda: op_status(ui) == "cancelled", 15, "cancelled")
    assert "Cancelled" in ui.text(".op-banner")
    assert not ui.css(".op-actions button").is_displayed(), "no Cancel on a stopped operation"
    cancelled = [k for k, p in steps(ui).items() if p == "cancelled"]
    assert cancelled, steps(ui)
    ui.screenshot("cancelled")
    assert not [b for b in ui.all("li.step .step-actions button") if b.is_displayed()], "cancelled steps resume from the banner"
    # Resume: retrying a cancelled step continues every cancelled step.
    ui.click(ui.css("#resume-operation"))
    wait_all_green(ui)


def test_operations_and_audit_view(ui, server):
    ensure_cluster(server, "alpha")
    ui.login()
    ui.go("#/operations")
    ui.wait(lambda: ui.all("#operations-table tbody tr") and ui.all("#audit-table tbody tr"), 10, "tables")
    faces = {tr.get_attribute("data-face") for tr in ui.all("#operations-table tbody tr")}
    assert faces & {"ui", "api"}, faces
    first = ui.css("#operations-table tbody tr")
    assert first.find_elements(By.CSS_SELECTOR, "is-status")
    actions = {tr.get_attribute("data-action") for tr in ui.all("#audit-table tbody tr")}
    assert "operation.create" in actions or any(a.startswith("operation") for a in actions), actions
    ui.screenshot("operations")
    # Filter by status.
    Select(ui.css("#ops-status")).select_by_value("succeeded")
    ui.wait(lambda: all(tr.get_attribute("data-status") == "succeeded" for tr in ui.all("#operations-table tbody tr")), 10, "filtered")


def test_import_and_delete_with_typed_confirmation(ui, server):
    ensure_cluster(server, "delta")
    ui.login()
    ui.go("#/clusters")
    ui.wait(lambda: ui.all('tr[data-cluster="delta"]'), 10, "delta listed")

    # Import: a field-level error inside the dialog first, then the real import.
    ui.click(ui.css(".view-actions button.btn"))
    dialog = ui.wait_css("dialog[open]")
    # The region's EKS clusters are listed with what InstantStart knows of them.
    found = lambda: dialog.find_element(By.ID, "imp-eks-found").text
    ui.wait(lambda: "managed as delta" in found() and "HyperPod delta-hp" in found(), 10, "EKS clusters listed")
    set_value(dialog.find_element(By.CSS_SELECTOR, '[data-field="name"]'), "Delta Imported")
    set_value(dialog.find_element(By.CSS_SELECTOR, '[data-field="eks_cluster"]'), "delta")
    ui.click(dialog.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    ui.wait_css('dialog[open] .field-error[data-error-for="name"]')
    ui.screenshot("import-error")
    set_value(dialog.find_element(By.CSS_SELECTOR, '[data-field="name"]'), "delta-imported")
    set_value(dialog.find_element(By.CSS_SELECTOR, '[data-field="hyperpod_cluster"]'), "delta-hp")
    ui.click(dialog.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    ui.wait(lambda: "#/operations/op-" in ui.d.current_url, 10, "import operation")
    wait_all_green(ui)
    assert "imported" in ui.text(".op-banner")

    # Make the imported one active from the list.
    ui.go("#/clusters")
    ui.wait(lambda: ui.all('tr[data-cluster="delta-imported"] button'), 10, "imported listed")
    ui.click_css('tr[data-cluster="delta-imported"] button[aria-label^="Make"]')
    ui.wait(lambda: ui.css('tr[data-cluster="delta-imported"]').get_attribute("data-active") == "true", 10, "active switched")
    assert "delta-imported" in ui.text(".active-chip")
    _, active = server.api("GET", "/api/active-cluster")
    assert active == {"name": "delta-imported"}

    # A tracking server created for delta: the delete plan removes it unless it is kept.
    status, body = server.api("POST", "/api/mlflow/servers", {"name": "delta-history", "cluster": "delta"})
    assert status == 202, body
    assert server.wait_operation(body["operation"]["id"], 60)["status"] == "succeeded"
    server_step = "Delete MLflow tracking server delta-history"
    plan_text = lambda: " ".join(li.text for li in dialog.find_elements(By.CSS_SELECTOR, ".plan-mini li"))

    # Delete delta: the confirm button stays disabled until the name is typed.
    ui.click_css('tr[data-cluster="delta"] button[aria-label^="Delete"]')
    dialog = ui.wait_css("dialog[open]")
    ui.wait(lambda: server_step in plan_text(), 10, "delete plan shown with the tracking server")
    ui.click(dialog.find_element(By.CSS_SELECTOR, "#del-keep-servers"))
    ui.wait(lambda: plan_text() and server_step not in plan_text(), 10, "plan without the kept tracking server")
    confirm = dialog.find_element(By.CSS_SELECTOR, "button[type=submit]")
    assert not confirm.is_enabled()
    typed = dialog.find_element(By.CSS_SELECTOR, '[data-field="confirm"]')
    typed.send_keys("delt")
    assert not confirm.is_enabled()
    typed.send_keys("a")
    assert confirm.is_enabled()
    ui.click(dialog.find_element(By.CSS_SELECTOR, "#del-bucket"))
    ui.screenshot("delete-confirm")
    ui.click(confirm)
    ui.wait(lambda: "#/operations/op-" in ui.d.current_url, 10, "delete operation")
    wait_all_green(ui)
    _, op = server.api("GET", f"/api/operations/{current_op_id(ui)}")
    assert op["kind"] == "delete_cluster" and op["request"]["delete_bucket"] is True
    assert op["request"]["keep_tracking_servers"] is True and "tracking_servers" not in op["request"], op["request"]
    status, servers = server.api("GET", "/api/mlflow/servers")
    assert "delta-history" in {s["name"] for s in servers}, "a kept tracking server outlives its cluster"
    ui.go("#/clusters")
    ui.wait(lambda: ui.all('tr[data-cluster="delta-imported"]') and not ui.all('tr[data-cluster="delta"]'), 10, "delta gone")


def test_theme_keyboard_and_labels(ui, server):
    ensure_cluster(server, "alpha")
    ui.login()
    ui.go("#/clusters")
    ui.wait_css("#clusters-table")
    # Every control of every form has an accessible name.
    for route in ("#/clusters/new", "#/clusters/alpha"):
        ui.go(route)
        ui.wait_css("h1")
        time.sleep(0.5)
        unlabeled = ui.js("""
            return [...document.querySelectorAll('input, select, textarea, button')]
              .filter((el) => el.type !== 'hidden')
              .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                              && !el.textContent.trim() && !el.getAttribute('aria-labelledby'))
              .map((el) => el.outerHTML.slice(0, 120));
        """)
        assert unlabeled == [], f"{route}: {unlabeled}"
    # The first Tab reaches the skip link; the route heading has focus after navigation.
    ui.go("#/clusters")
    ui.wait_css("#clusters-table")
    assert ui.js("return document.activeElement.tagName") == "H1"
    first = ui.js("return document.querySelector('a[href], button, input, select').className")
    assert first == "skip-link", "the skip link is the first stop of the tab order"
    ui.js("document.querySelector('.skip-link').focus()")
    ActionChains(ui.d).send_keys(Keys.ENTER).perform()
    assert ui.js("return document.activeElement.tagName") == "H1"
    assert "#/clusters" in ui.d.current_url, "the skip link does not break the hash route"
    # Dark theme by the toggle, remembered across reloads.
    ui.js("localStorage.removeItem('instantstart.theme')")
    ui.click(ui.css("#theme-toggle"))
    theme = ui.js("return document.documentElement.dataset.theme")
    assert theme in ("dark", "light")
    if theme == "light":
        ui.click(ui.css("#theme-toggle"))
    assert ui.js("return document.documentElement.dataset.theme") == "dark"
    ui.d.refresh()
    ui.wait_css("#clusters-table")
    assert ui.js("return document.documentElement.dataset.theme") == "dark"
    bg = ui.js("return getComputedStyle(document.body).backgroundColor")
    assert bg == "rgb(13, 17, 23)", bg
    ui.screenshot("dark-clusters")
    _, ops = server.api("GET", "/api/operations?target=cluster/alpha&limit=1")
    ui.go(f"#/operations/{ops[0]['id']}")
    wait_all_green(ui)
    ui.screenshot("dark-progress")
    ui.go("#/clusters/new")
    ui.wait_css("#f-name")
    ui.screenshot("dark-create")
    ui.js("localStorage.removeItem('instantstart.theme')")


def test_the_top_navigation_is_one_line_at_1400_px_with_the_sim_badge(ui, server):
    ui.login()
    ui.go("#/clusters")
    ui.wait_css(".topbar .env.sim")
    # The admin sees every link (Tokens too): the widest bar.
    ui.wait_css('.topbar nav a[href="#/tokens"]')
    before = ui.d.get_window_size()
    try:
        # The viewport (not the window) is 1400 CSS pixels wide.
        ui.d.set_window_size(1400, 900)
        inner = ui.js("return window.innerWidth")
        ui.d.set_window_size(1400 + (1400 - inner), 900)
        assert ui.js("return window.innerWidth") == 1400
        layout = ui.js("""
            const nav = document.querySelector('.topbar nav');
            const links = [...nav.querySelectorAll('a')].map((a) => a.getBoundingClientRect());
            const lh = parseFloat(getComputedStyle(nav.querySelector('a')).lineHeight) || 24;
            const bar = document.querySelector('.topbar').getBoundingClientRect();
            const env = document.querySelector('.topbar .env.sim').getBoundingClientRect();
            return { tops: links.map((r) => Math.round(r.top)), heights: links.map((r) => r.height), lh,
                     bar: bar.height, envHeight: env.height, scroll: nav.scrollWidth, client: nav.clientWidth };
        """)
        ui.screenshot("nav-1400")
        assert len(set(layout["tops"])) == 1, f"nav links on several rows: {layout}"
        assert max(layout["heights"]) < 2 * layout["lh"], f"a nav link wraps inside: {layout}"
        assert layout["scroll"] <= layout["client"] + 1, f"nav links cut off: {layout}"
        assert layout["envHeight"] < 2 * layout["lh"], f"the sim badge wraps: {layout}"
        assert layout["bar"] < 70, f"the top bar is more than one line: {layout}"
    finally:
        ui.d.set_window_size(before["width"], before["height"])


TRAFFIC_JS = """
return performance.getEntriesByType('resource')
  .filter(e => new URL(e.name).pathname.startsWith('/api/'))
  .map(e => ({ path: new URL(e.name).pathname, status: e.responseStatus || 0,
               transfer: e.transferSize, body: e.encodedBodySize }));
"""


def test_re_reads_revalidate_with_etags(ui, server):
    """A cluster page left open re-reads the cluster every few seconds; unchanged answers come
    back as 304 (a few hundred bytes) and the page still shows the data. The numbers (requests
    and bytes per minute, with the bodies a plain re-read would have carried) are written to
    target/ui-artifacts/traffic.json."""
    ensure_cluster(server, "traffic")
    ui.login()
    ui.go("#/clusters/traffic")
    ui.wait(lambda: ui.all("#groups-table tr[data-group=workers]"), 15, "instance groups table")
    ui.js("performance.setResourceTimingBufferSize(100000); performance.clearResourceTimings();")
    window = 12.0
    time.sleep(window)
    reads = ui.js(TRAFFIC_JS)
    assert ui.all("#groups-table tr[data-group=workers]"), "the page still shows the cluster"
    assert len(reads) >= 3, f"the page re-reads while open: {reads}"
    revalidated = [r for r in reads if r["status"] == 304 or (r["body"] > 0 and r["transfer"] < r["body"])]
    assert revalidated, f"no read was answered 304: {reads}"
    transferred = sum(r["transfer"] for r in reads)
    bodies = sum(r["body"] for r in reads)
    assert transferred < bodies, f"{transferred} bytes transferred for {bodies} bytes of bodies"
    per_minute = 60.0 / window
    report = {
        "page": "#/clusters/traffic (cluster page, idle cluster)",
        "window_seconds": window,
        "requests_per_minute": round(len(reads) * per_minute),
        "answered_304_per_minute": round(len(revalidated) * per_minute),
        "bytes_per_minute_transferred": round(transferred * per_minute),
        "bytes_per_minute_without_revalidation": round(bodies * per_minute),
        "by_path": sorted({r["path"] for r in reads}),
    }
    (ARTIFACTS / "traffic.json").write_text(json.dumps(report, indent=2))
    print("traffic:", json.dumps(report))


def test_a_token_is_minted_bound_to_a_kubernetes_identity(ui, server):
    """The tokens screen mints a token bound to a Kubernetes user, groups and namespaces, and
    the list shows the binding (unbound tokens say so)."""
    ui.login()
    ui.go("#/tokens")
    set_value(ui.wait_css("#token-name"), "alice-ui")
    Select(ui.css("#token-scope")).select_by_value("workloads")
    set_value(ui.css("#token-kube-user"), "alice")
    set_value(ui.css("#token-kube-groups"), "team-a, ml")
    set_value(ui.css("#token-kube-namespaces"), "team-a")
    set_value(ui.css("#token-kube-system-namespaces"), "monitoring")
    set_value(ui.css("#token-kube-service-accounts"), "trainer")
    ui.css("#token-form button[type=submit]").click()
    ui.wait_css("#token-secret-value")
    row = '#tokens-table tr[data-token="alice-ui"]'
    want = "alice (team-a, ml) in team-a + system monitoring, service accounts trainer"
    ui.wait(lambda: ui.all(row) and want in ui.all(row)[0].text, 10, "the binding")
    assert "workloads" in ui.all(row)[0].text, "the scope an agent that runs jobs gets"
    status, listed = server.api("GET", "/api/tokens")
    assert next(t for t in listed if t["name"] == "alice-ui")["scope"] == "workloads", listed
    # A namespace that is not a system one is refused under system namespaces, naming the field.
    set_value(ui.css("#token-name"), "wrong-ui")
    set_value(ui.css("#token-kube-user"), "bob")
    set_value(ui.css("#token-kube-namespaces"), "team-b")
    set_value(ui.css("#token-kube-system-namespaces"), "team-c")
    ui.css("#token-form button[type=submit]").click()
    ui.wait(lambda: "kube_bindings[0].system_namespaces[0]" in ui.text("#token-error"), 10, "the finding")
    set_value(ui.css("#token-kube-system-namespaces"), "")
    # A binding the rules refuse names its field.
    set_value(ui.css("#token-name"), "root-ui")
    set_value(ui.css("#token-kube-user"), "system:admin")
    set_value(ui.css("#token-kube-namespaces"), "team-a")
    ui.css("#token-form button[type=submit]").click()
    ui.wait(lambda: "kube_bindings[0].user" in ui.text("#token-error"), 10, "the finding")
