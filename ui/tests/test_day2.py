"""Day-2 screens of a cluster in a real headless Chromium: instance groups (scale with the
server's diff first, no-op, immutable fields, add with a plan review, delete), nodes (reboot,
replace behind the local-data acknowledgement, batch) and the Advanced features panel.

They run against the fast server (FAST_SIM_SPEED) on one cluster, "day2", created through the
REST API. Screenshots land in target/ui-artifacts/.
"""

from __future__ import annotations

import json

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

CLUSTER = "day2"


# ---- helpers ---------------------------------------------------------------------------------


def set_value(el, value: str) -> None:
    el.send_keys(Keys.CONTROL, "a")
    el.send_keys(Keys.DELETE)
    if value:
        el.send_keys(value)


@pytest.fixture(scope="module")
def day2(fast_server):
    """A ready cluster with one on-demand group of two ml.g5.xlarge nodes in us-east-1a."""
    return fast_server.ready_gpu_cluster(CLUSTER)


def operations(server) -> list[dict]:
    status, ops = server.api("GET", f"/api/operations?target=cluster/{CLUSTER}&limit=500")
    assert status == 200, ops
    return ops


def open_cluster(ui):
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}")
    ui.wait(lambda: ui.all("#groups-table tbody tr") and ui.all("#nodes-table tbody tr"), 10, "groups and nodes")


def group_row(ui, name: str):
    rows = ui.all(f'#groups-table tr[data-group="{name}"]')
    return rows[0] if rows else None


def error_next_to(ui, scope, path: str):
    """The field-error paragraphs shown for `path` inside `scope` (an element)."""
    return [e for e in scope.find_elements(By.CSS_SELECTOR, f'.field-error[data-error-for="{path}"]') if e.is_displayed()]


def activity_op(ui, slot: str) -> str | None:
    """The operation followed by the progress panel in `slot`, if any."""
    panels = ui.all(f"{slot} .activity[data-operation]")
    return panels[0].get_attribute("data-operation") if panels else None


def wait_green(ui, slot: str, before: str | None = None, timeout: float = 20) -> str:
    """Waits for a progress panel in `slot` (following another operation than `before`) to turn
    green with every step succeeded; returns the operation id."""
    ui.wait(lambda: activity_op(ui, slot) not in (None, before), 10, f"a progress panel in {slot}")
    op = activity_op(ui, slot)
    panel = f'{slot} .activity[data-operation="{op}"]'
    ui.wait(lambda: ui.css(f"{panel} is-operation-progress").get_attribute("data-status") == "succeeded",
            timeout, f"the progress panel in {slot} turns green")
    phases = [li.get_attribute("data-phase") for li in ui.all(f"{panel} li.step")]
    assert phases and all(p == "succeeded" for p in phases), phases
    return op


def dialog(ui):
    return ui.wait_css("dialog[open]")


# ---- instance groups ---------------------------------------------------------------------------


def test_scale_group_shows_the_diff_then_follows_the_operation(fast_ui, day2):
    ui = fast_ui
    open_cluster(ui)
    row = group_row(ui, "workers")
    assert row.get_attribute("data-target") == "2"
    assert "On-demand" in row.text and "Standard" in row.text and "us-east-1a" in row.text
    ui.screenshot("cluster-day2")
    ui.click(row.find_element(By.CSS_SELECTOR, "button[data-action=scale]"))
    editor = ui.wait_css('[data-editor=scale][data-group="workers"]')
    count = editor.find_element(By.CSS_SELECTOR, '[data-field="patch.count"]')
    assert ui.d.switch_to.active_element == count, "the count has focus"
    # The fixed settings are shown read-only, with the note that changing them needs a new group.
    fixed = editor.find_elements(By.CSS_SELECTOR, ".fixed-set input")
    assert len(fixed) == 4 and all(f.get_attribute("readonly") is not None for f in fixed)
    assert "needs a new group" in editor.find_element(By.CSS_SELECTOR, ".fixed-set").text
    set_value(count, "3")
    ui.click(editor.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    review = ui.wait_css("[data-editor=scale] .review ul.diff")
    line = review.find_element(By.CSS_SELECTOR, 'li[data-field="count"]')
    assert "2" in line.find_element(By.CSS_SELECTOR, "del").text and "3" in line.find_element(By.CSS_SELECTOR, "ins").text
    body = json.loads(editor.find_element(By.CSS_SELECTOR, ".review pre").get_attribute("textContent"))
    assert body == {"count": 3}, "only the count is sent"
    ui.screenshot("scale-diff")
    ui.click(ui.css("#scale-apply"))
    wait_green(ui, "#groups-activity")
    ui.wait(lambda: group_row(ui, "workers").get_attribute("data-target") == "3"
            and group_row(ui, "workers").get_attribute("data-current") == "3", 10, "live counts 3 / 3")
    ui.wait(lambda: len(ui.all("#nodes-table tbody tr")) == 3, 10, "a third node")
    ui.screenshot("scale-green")
    op = next(o for o in operations(ui.server) if o["kind"] == "update_instance_group")
    assert op["status"] == "succeeded" and op["actor"]["face"] == "ui"
    assert {k: v for k, v in op["request"]["patch"].items() if v is not None} == {"count": 3}


def test_noop_scale_and_an_immutable_change_are_explained(fast_ui, day2):
    ui = fast_ui
    open_cluster(ui)
    before = len(operations(ui.server))
    target = group_row(ui, "workers").get_attribute("data-target")
    ui.click(group_row(ui, "workers").find_element(By.CSS_SELECTOR, "button[data-action=scale]"))
    editor = ui.wait_css("[data-editor=scale]")
    # The same count: the server's answer is "already in this state", and nothing is offered.
    assert editor.find_element(By.CSS_SELECTOR, '[data-field="patch.count"]').get_attribute("value") == target
    ui.click(editor.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    note = ui.wait_css("[data-editor=scale] .no-change")
    assert "Already in this state" in note.text
    assert not ui.all("#scale-apply")
    ui.screenshot("scale-noop")
    assert len(operations(ui.server)) == before, "a no-op creates no operation"

    # Asking to change a fixed setting: the control plane refuses, next to that field.
    ui.click(editor.find_element(By.XPATH, ".//button[starts-with(normalize-space(), 'Ask to change')]"))
    capacity = ui.wait_css('[data-editor=scale] select[data-field="patch.capacity"]')
    Select(capacity).select_by_value("spot")
    ui.click(editor.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    ui.wait(lambda: error_next_to(ui, editor, "patch.capacity"), 10, "finding next to the capacity")
    msg = error_next_to(ui, editor, "patch.capacity")[0]
    assert "immutable" in msg.text and "new instance group" in msg.text, msg.text
    assert capacity.get_attribute("aria-invalid") == "true"
    assert msg.get_attribute("id") in capacity.get_attribute("aria-describedby")
    remedy = editor.find_element(By.XPATH, ".//button[normalize-space()='Add a group with these settings…']")
    ui.screenshot("scale-immutable")
    assert len(operations(ui.server)) == before, "a refused change creates no operation"
    # The remedy opens the add form with the wanted settings.
    ui.click(remedy)
    add = ui.wait_css("[data-editor=add]")
    ui.wait(lambda: add.find_element(By.CSS_SELECTOR, '[data-field="group.instance_type"]').get_attribute("value"), 10, "types")
    assert add.find_element(By.CSS_SELECTOR, "input[value=spot]").is_selected()


def test_add_group_with_plan_review_then_delete_it(fast_ui, day2):
    ui = fast_ui
    open_cluster(ui)
    ui.click(ui.css("#add-group"))
    form = ui.wait_css("[data-editor=add] form")
    f = lambda path: form.find_element(By.CSS_SELECTOR, f'[data-field="{path}"]')  # noqa: E731
    ui.wait(lambda: f("group.instance_type").get_attribute("value"), 10, "instance types loaded")
    # Types are offered per zone: p5 only where AWS offers it.
    Select(f("group.availability_zone")).select_by_value("us-east-1a")
    assert "ml.p5.48xlarge" not in [o.get_attribute("value") for o in Select(f("group.instance_type")).options]
    Select(f("group.availability_zone")).select_by_value("us-east-1b")
    Select(f("group.instance_type")).select_by_value("ml.p5.48xlarge")
    set_value(f("group.name"), "big")
    set_value(f("group.count"), "2")
    ui.click(form.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    plan = ui.wait_css("[data-editor=add] .review .checks-list")
    failed = plan.find_elements(By.CSS_SELECTOR, 'li[data-status="fail"]')
    assert [li.get_attribute("data-field") for li in failed] == ["group.count"], [li.text for li in failed]
    assert "Service Quotas" in failed[0].text, "the remedy is shown in the plan"
    msgs = error_next_to(ui, form, "group.count")
    assert msgs and "quota" in msgs[0].text and "Service Quotas" in msgs[0].text, "remedy next to the field"
    assert not ui.css("#add-group-submit").is_enabled(), "a failing check blocks the request"
    ui.screenshot("add-preflight-fail")

    # EFA-only on a type without it: refused by the control plane, next to the interfaces.
    Select(f("group.instance_type")).select_by_value("ml.g5.2xlarge")
    set_value(f("group.name"), "spot")
    set_value(f("group.count"), "1")
    efa = form.find_element(By.XPATH, ".//label[starts-with(normalize-space(), 'EFA-only')]/preceding-sibling::input")
    ui.click(efa)
    ui.click(form.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    ui.wait(lambda: error_next_to(ui, form, "group.interface_mode"), 10, "finding next to the interfaces")
    assert "ml.g5.2xlarge does not support EFA-only" in error_next_to(ui, form, "group.interface_mode")[0].text
    assert efa.get_attribute("aria-invalid") == "true"
    ui.click(efa)

    # A spot group of a smaller type in us-east-1b: every check passes; the plan lists the steps.
    ui.click(form.find_element(By.CSS_SELECTOR, "input[value=spot]"))
    assert "elastic training" in form.text
    ui.click(form.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    ui.wait(lambda: ui.all("#add-group-submit") and ui.css("#add-group-submit").is_enabled(), 10, "a plan that passes")
    review = ui.css("[data-editor=add] .review")
    keys = [li.get_attribute("data-step-key") for li in review.find_elements(By.CSS_SELECTOR, "li[data-step-key]")]
    assert keys == ["placement", "instance_group"], keys
    statuses = {li.get_attribute("data-check"): li.get_attribute("data-status") for li in review.find_elements(By.CSS_SELECTOR, ".checks-list li")}
    assert statuses.get("quota") == "pass" and statuses.get("offering") == "pass", statuses
    assert not error_next_to(ui, form, "group.count"), "findings cleared"
    ui.screenshot("add-plan")
    ui.click(ui.css("#add-group-submit"))
    wait_green(ui, "#groups-activity")
    ui.wait(lambda: group_row(ui, "spot") is not None, 10, "the new group is listed")
    row = group_row(ui, "spot")
    assert "Spot" in row.text and "us-east-1b" in row.text and "ml.g5.2xlarge" in row.text
    ui.screenshot("add-green")
    op = next(o for o in operations(ui.server) if o["kind"] == "add_instance_group")
    assert op["request"]["group"]["capacity"] == {"type": "spot"} and op["request"]["group"]["availability_zone"] == "us-east-1b"

    # Scale it to zero: the group stays, with no instances.
    added = activity_op(ui, "#groups-activity")
    ui.click(group_row(ui, "spot").find_element(By.CSS_SELECTOR, "button[data-action=scale]"))
    editor = ui.wait_css('[data-editor=scale][data-group="spot"]')
    set_value(editor.find_element(By.CSS_SELECTOR, '[data-field="patch.count"]'), "0")
    ui.click(editor.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    line = ui.wait_css('[data-editor=scale] .review li[data-field="count"]')
    assert line.find_element(By.CSS_SELECTOR, "ins").text == "0"
    ui.click(ui.css("#scale-apply"))
    wait_green(ui, "#groups-activity", before=added)
    ui.wait(lambda: group_row(ui, "spot").get_attribute("data-current") == "0"
            and group_row(ui, "spot").get_attribute("data-target") == "0", 10, "spot at 0 / 0")
    assert "us-east-1b" in group_row(ui, "spot").text, "the zone is still known without nodes"

    # Delete it: the confirm button waits for the typed name.
    ui.click(group_row(ui, "spot").find_element(By.CSS_SELECTOR, "button[data-action=delete]"))
    dlg = dialog(ui)
    ui.wait(lambda: dlg.find_elements(By.CSS_SELECTOR, ".plan-mini li"), 10, "delete plan")
    confirm = dlg.find_element(By.CSS_SELECTOR, "button[type=submit]")
    assert not confirm.is_enabled()
    dlg.find_element(By.CSS_SELECTOR, '[data-field="confirm"]').send_keys("spot")
    assert confirm.is_enabled()
    added = activity_op(ui, "#groups-activity")
    ui.click(confirm)
    wait_green(ui, "#groups-activity", before=added)
    ui.wait(lambda: group_row(ui, "spot") is None, 10, "the group is gone")


# ---- nodes -------------------------------------------------------------------------------------


def node_ids(ui) -> list[str]:
    return [tr.get_attribute("data-node") for tr in ui.all("#nodes-table tbody tr")]


def node_button(ui, node: str, action: str):
    return ui.css(f'#nodes-table tr[data-node="{node}"] button[data-action="{action}"]')


def test_reboot_then_replace_behind_the_local_data_acknowledgement(fast_ui, day2):
    ui = fast_ui
    open_cluster(ui)
    first = node_ids(ui)[0]
    # Investigate: read-only facts and commands, and the ladder.
    ui.click(node_button(ui, first, "investigate"))
    panel = ui.wait_css(f'[data-investigate="{first}"]')
    assert f"hyperpod-{first}" in panel.find_element(By.CSS_SELECTOR, "pre.commands").text
    assert "Reboot" in panel.find_element(By.CSS_SELECTOR, "ol.ladder").text

    # Reboot first: a plain confirmation (nothing is lost), then the progress panel.
    ui.click(node_button(ui, first, "reboot"))
    dlg = dialog(ui)
    ui.wait(lambda: dlg.find_elements(By.CSS_SELECTOR, ".plan-mini li"), 10, "reboot plan")
    assert not dlg.find_elements(By.CSS_SELECTOR, '[data-field="acknowledge_local_data_loss"]')
    ui.screenshot("reboot-confirm")
    ui.click(dlg.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    wait_green(ui, "#nodes-activity")
    reboot = next(o for o in operations(ui.server) if o["kind"] == "reboot_nodes")
    assert reboot["request"]["node_ids"] == [first] and reboot["actor"]["face"] == "ui"
    ui.screenshot("reboot-green")

    # Replace without the acknowledgement: refused, next to the box; nothing is created.
    before = len(operations(ui.server))
    ui.wait(lambda: ui.css(f'#nodes-table tr[data-node="{first}"]').get_attribute("data-status") == "Running", 10, "running again")
    ui.click(node_button(ui, first, "replace"))
    dlg = dialog(ui)
    ack = dlg.find_element(By.CSS_SELECTOR, 'input[data-field="acknowledge_local_data_loss"]')
    assert "Local volumes on this node will be lost" in dlg.text
    assert not ack.is_selected()
    ui.click(dlg.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    ui.wait(lambda: error_next_to(ui, dlg, "acknowledge_local_data_loss"), 10, "finding next to the acknowledgement")
    assert "local volumes" in error_next_to(ui, dlg, "acknowledge_local_data_loss")[0].text
    assert ack.get_attribute("aria-invalid") == "true"
    assert ui.d.switch_to.active_element == ack, "focus on the box to tick"
    assert dlg.is_displayed(), "the dialog stays open"
    assert len(operations(ui.server)) == before, "nothing was created"
    ui.screenshot("replace-blocked")
    # With the acknowledgement: the node is replaced (a new instance id).
    rebooted = activity_op(ui, "#nodes-activity")
    ui.click(ack)
    ui.click(dlg.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    wait_green(ui, "#nodes-activity", before=rebooted)
    ui.wait(lambda: first not in node_ids(ui) and len(node_ids(ui)) >= 2, 10, "replaced node gone, a new one listed")
    replace_op = next(o for o in operations(ui.server) if o["kind"] == "replace_nodes")
    assert replace_op["request"]["acknowledge_local_data_loss"] is True and replace_op["request"]["node_ids"] == [first]
    ui.screenshot("replace-green")


def test_batch_reboot_of_selected_nodes(fast_ui, day2):
    ui = fast_ui
    open_cluster(ui)
    ids = node_ids(ui)[:2]
    for nid in ids:
        ui.click(ui.css(f'#nodes-table tr[data-node="{nid}"] input[type=checkbox]'))
    assert "2 nodes selected" in ui.text(".bulkbar")
    ui.click(ui.css(".bulkbar").find_element(By.XPATH, ".//button[normalize-space()='Reboot selected']"))
    dlg = dialog(ui)
    listed = [li.get_attribute("data-field") for li in dlg.find_elements(By.CSS_SELECTOR, ".node-list li")]
    assert listed == ["node_ids[0]", "node_ids[1]"]
    ui.screenshot("batch-reboot")
    ui.click(dlg.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    wait_green(ui, "#nodes-activity")
    op = next(o for o in operations(ui.server) if o["kind"] == "reboot_nodes")
    assert sorted(op["request"]["node_ids"]) == sorted(ids)
    assert "No nodes selected" in ui.text(".bulkbar")


def test_events_panel_and_node_detail(fast_ui, day2):
    ui = fast_ui
    open_cluster(ui)
    # The events panel: what HyperPod reported, newest first, filterable.
    ui.wait(lambda: ui.all("#events-table tbody tr"), 10, "events listed")
    text = ui.text("#events-table")
    assert "InService" in text and "launched" in text, text
    times = [t.get_attribute("datetime") for t in ui.all("#events-table tbody tr time")]
    assert times == sorted(times, reverse=True), times
    Select(ui.css("#events-resource")).select_by_value("instance")
    ui.wait(lambda: ui.all("#events-table tbody tr")
            and all(r.get_attribute("data-resource") == "instance" for r in ui.all("#events-table tbody tr")),
            10, "only node events")
    Select(ui.css("#events-resource")).select_by_value("")
    ui.screenshot("events-panel")

    # Investigate a node: its detail (DescribeClusterNode) and its latest events.
    nid = node_ids(ui)[0]
    ui.click(node_button(ui, nid, "investigate"))
    panel = ui.wait_css(f'[data-investigate="{nid}"]')
    ui.wait(lambda: panel.find_elements(By.CSS_SELECTOR, "#node-detail-props"), 10, "node detail")
    ip = panel.find_element(By.CSS_SELECTOR, '#node-detail-props dd[data-prop="private_ip"]').text
    assert ip.count(".") == 3, ip
    assert panel.find_element(By.CSS_SELECTOR, '#node-detail-props dd[data-prop="capacity_type"]').text == "OnDemand"
    rows = panel.find_elements(By.CSS_SELECTOR, "#node-events-table tbody tr")
    assert rows and any(nid in r.text for r in rows), [r.text for r in rows]
    ui.screenshot("node-detail")


# ---- capacity of a region ----------------------------------------------------------------------


def test_capacity_screen_quotas_plans_and_an_offerings_search(fast_ui, day2):
    ui = fast_ui
    ui.login()
    # The create screen links to the capacity of its region.
    ui.go("#/clusters/new")
    link = ui.wait_css("#capacity-link")
    ui.wait(lambda: "region=us-east-1" in (link.get_attribute("href") or ""), 10, "the link names the region")
    ui.click(link)
    ui.wait(lambda: ui.all("#quotas-table tbody tr"), 10, "quotas listed")
    row = ui.css('#quotas-table tr[data-instance-type="ml.g5.xlarge"]')
    cells = [c.text for c in row.find_elements(By.CSS_SELECTOR, "td")]
    quota, in_use, available = int(cells[0]), int(cells[1]), int(cells[2])
    assert in_use >= 2 and available == max(0, quota - in_use), cells  # the day2 cluster's nodes
    ui.wait(lambda: "No training plans" in ui.text("#plans-slot") or ui.all("#plans-table tbody tr"),
            10, "plans read")
    # A refused search: the finding lands next to its field; then one that finds offerings.
    count = ui.css("#offering-count")
    set_value(count, "0")
    ui.click(ui.css("#offerings-search"))
    ui.wait(lambda: error_next_to(ui, ui.css("#offerings-form"), "instance_count"), 10, "finding next to the count")
    set_value(count, "2")
    ui.click(ui.css("#offerings-search"))
    ui.wait(lambda: ui.all("#offerings-table tbody tr"), 10, "offerings listed")
    assert not error_next_to(ui, ui.css("#offerings-form"), "instance_count")
    first = ui.all("#offerings-table tbody tr")[0]
    assert first.get_attribute("data-offering").startswith("tpo-") and "2 × ml.p5.48xlarge" in first.text, first.text
    assert "does not buy plans" in ui.text("#offerings-slot")
    ui.screenshot("capacity")


# ---- Advanced features -------------------------------------------------------------------------


def test_features_panel_diff_then_state_change(fast_ui, day2):
    ui = fast_ui
    ui.login()
    # The patch builder sends only what changed (runs the UI's own module in the browser).
    result = ui.d.execute_async_script("""
        const done = arguments[arguments.length - 1];
        import('/lib/features.js').then((f) => {
          const actual = f.normalizeFeatures({training_operator: false, inference_operator: true,
            tiered_checkpointing: {memory_percent: 20}, managed_autoscaling: false});
          done({
            none: f.featuresPatch(actual, {...actual}),
            one: f.featuresPatch(actual, {...actual, training_operator: true}),
            tier: f.featuresPatch(actual, {...actual, tiered_checkpointing: {memory_percent: 35}}),
            off: f.featuresPatch(actual, {...actual, tiered_checkpointing: null, inference_operator: false}),
            named: f.featuresPatch(actual, {...actual, managed_autoscaling: true,
              autoscaling_instance_groups: f.parseGroups(' workers, spot ')}),
            all: f.featuresPatch(actual, {...actual, managed_autoscaling: true, autoscaling_instance_groups: f.parseGroups('')}),
          });
        }).catch((e) => done({error: String(e)}));
    """)
    assert result == {
        "none": {},
        "one": {"training_operator": True},
        "tier": {"tiered_checkpointing": {"enabled": True, "memory_percent": 35}},
        "off": {"inference_operator": False, "tiered_checkpointing": {"enabled": False}},
        "named": {"managed_autoscaling": True, "autoscaling_instance_groups": ["workers", "spot"]},
        "all": {"managed_autoscaling": True},
    }, result

    ui.go(f"#/clusters/{CLUSTER}")
    panel = ui.wait_css("is-features-panel")
    ui.wait(lambda: panel.get_attribute("data-state") == "available", 10, "features loaded")
    assert "not general EC2 capacity" in panel.find_element(By.CSS_SELECTOR, ".scope-note").text
    sw = lambda key: panel.find_element(By.CSS_SELECTOR, f'input[data-field="{key}"]')  # noqa: E731
    assert not sw("training_operator").is_selected()

    # A field error from the server lands next to its input (patch.… → the memory input).
    ui.click(sw("tiered_checkpointing"))
    assert panel.find_element(By.CSS_SELECTOR, ".elastic-note").is_displayed(), "the elastic-training note"
    memory = panel.find_element(By.CSS_SELECTOR, 'input[data-field="tiered_checkpointing.memory_percent"]')
    set_value(memory, "0")
    ui.click(panel.find_element(By.XPATH, ".//button[normalize-space()='Review changes']"))
    ui.wait(lambda: error_next_to(ui, panel, "patch.tiered_checkpointing.memory_percent"), 10, "memory finding")
    assert memory.get_attribute("aria-invalid") == "true"
    ui.click(sw("tiered_checkpointing"))

    # Managed autoscaling for a group that does not exist: the finding (with its index) lands
    # next to the instance-groups input.
    groups = panel.find_element(By.CSS_SELECTOR, 'input[data-field="autoscaling_instance_groups"]')
    assert not groups.is_enabled(), "the group list goes with the autoscaling switch"
    ui.click(sw("managed_autoscaling"))
    set_value(groups, "no-such-group")
    ui.click(panel.find_element(By.XPATH, ".//button[normalize-space()='Review changes']"))
    ui.wait(lambda: error_next_to(ui, panel, "patch.autoscaling_instance_groups[0]"), 10, "group finding")
    assert groups.get_attribute("aria-invalid") == "true"
    set_value(groups, "")
    ui.click(sw("managed_autoscaling"))

    # Flip one switch: its diff, then the server's diff against the real state, then apply.
    ui.click(sw("training_operator"))
    ui.click(panel.find_element(By.XPATH, ".//button[normalize-space()='Review changes']"))
    box = ui.wait_css("is-features-panel .diff-box")
    body = json.loads(box.find_element(By.CSS_SELECTOR, "pre").get_attribute("textContent"))
    assert body == {"training_operator": True}, "only the changed field is sent"
    ui.wait(lambda: ui.all("#features-apply"), 10, "server diff")
    server_diff = box.find_element(By.CSS_SELECTOR, ".server-plan ul.diff")
    assert [li.get_attribute("data-field") for li in server_diff.find_elements(By.CSS_SELECTOR, "li")] == ["training_operator"]
    assert box.find_elements(By.CSS_SELECTOR, ".server-plan li[data-step-key]"), "steps shown"
    ui.screenshot("features-diff")
    ui.click(ui.css("#features-apply"))
    wait_green(ui, "is-features-panel")
    ui.wait(lambda: "Applied" in panel.text, 10, "applied")
    assert sw("training_operator").is_selected(), "the panel shows the real state after the change"
    assert panel.find_element(By.CSS_SELECTOR, '[data-feature="training_operator"] .state-text').text == "on"
    change = next(o for o in operations(ui.server) if o["kind"] == "set_features")
    assert change["status"] == "succeeded" and change["actor"]["face"] == "ui"
    assert {k: v for k, v in change["request"]["patch"].items() if v is not None} == {"training_operator": True}
    ui.screenshot("features-applied")

    # Someone else turns the inference operator on while this panel still shows it off: the
    # server's diff says there is nothing to do, and no operation is created.
    ui.click(sw("inference_operator"))
    status, r = ui.server.api("PATCH", f"/api/clusters/{CLUSTER}/features", {"inference_operator": True})
    assert status == 202, r
    assert ui.server.wait_operation(r["operation"]["id"])["status"] == "succeeded"
    before = len(operations(ui.server))
    ui.click(panel.find_element(By.XPATH, ".//button[normalize-space()='Review changes']"))
    note = ui.wait_css("is-features-panel .diff-box .no-change")
    assert "Already in this state" in note.text
    assert not ui.all("#features-apply")
    assert len(operations(ui.server)) == before
    ui.screenshot("features-noop")


def test_observability_switch_installs_the_addon_then_off_removes_it(fast_ui, day2):
    """The observability toggle (issue #21): on creates the Prometheus workspace, the collector's
    role and Pod Identity, then the add-on; off removes the add-on, association and role."""
    ui = fast_ui
    ui.login()
    ui.go(f"#/clusters/{CLUSTER}")
    panel = ui.wait_css("is-features-panel")
    ui.wait(lambda: panel.get_attribute("data-state") == "available", 10, "features loaded")
    sw = lambda: panel.find_element(By.CSS_SELECTOR, 'input[data-field="observability"]')  # noqa: E731
    assert not sw().is_selected()
    assert "Amazon Managed Service for Prometheus" in panel.find_element(
        By.CSS_SELECTOR, '[data-feature="observability"] .help').text

    ui.click(sw())
    ui.click(panel.find_element(By.XPATH, ".//button[normalize-space()='Review changes']"))
    box = ui.wait_css("is-features-panel .diff-box")
    body = json.loads(box.find_element(By.CSS_SELECTOR, "pre").get_attribute("textContent"))
    assert body == {"observability": True}, "only the changed field is sent"
    ui.wait(lambda: ui.all("#features-apply"), 10, "server diff")
    keys = [li.get_attribute("data-step-key") for li in box.find_elements(By.CSS_SELECTOR, ".server-plan li[data-step-key]")]
    for k in ("prometheus_workspace", "observability_role", "observability_identity",
              "addon:amazon-sagemaker-hyperpod-observability"):
        assert k in keys, (k, keys)
    assert keys.index("prometheus_workspace") < keys.index("addon:amazon-sagemaker-hyperpod-observability")
    ui.screenshot("observability-plan")
    ui.click(ui.css("#features-apply"))
    wait_green(ui, "is-features-panel", timeout=40)
    ui.wait(lambda: sw().is_selected(), 10, "the switch shows the add-on installed")
    status, f = ui.server.api("GET", f"/api/clusters/{CLUSTER}/features")
    assert status == 200 and f["observability"] is True, f

    # Off: the add-on, its association and its role go; the workspace (metric history) stays.
    before = activity_op(ui, "is-features-panel")
    ui.click(sw())
    ui.click(panel.find_element(By.XPATH, ".//button[normalize-space()='Review changes']"))
    box = ui.wait_css("is-features-panel .diff-box")
    ui.wait(lambda: ui.all("#features-apply"), 10, "server diff")
    keys = [li.get_attribute("data-step-key") for li in box.find_elements(By.CSS_SELECTOR, ".server-plan li[data-step-key]")]
    assert keys == ["remove:amazon-sagemaker-hyperpod-observability", "remove_observability_identity",
                    "remove_observability_role"], keys
    ui.click(ui.css("#features-apply"))
    wait_green(ui, "is-features-panel", before, timeout=40)
    ui.wait(lambda: not sw().is_selected(), 10, "the switch shows the add-on removed")
    status, f = ui.server.api("GET", f"/api/clusters/{CLUSTER}/features")
    assert status == 200 and f["observability"] is False, f


UNLABELED = """
    return [...arguments[0].querySelectorAll('input, select, textarea, button')]
      .filter((el) => el.type !== 'hidden')
      .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                      && !el.textContent.trim() && !el.getAttribute('aria-labelledby'))
      .map((el) => el.outerHTML.slice(0, 120));
"""


def test_day2_screens_in_the_dark_theme_with_labels_and_keyboard(fast_ui, day2):
    ui = fast_ui
    open_cluster(ui)
    ui.js("localStorage.setItem('instantstart.theme', 'dark')")
    try:
        ui.go(f"#/clusters/{CLUSTER}")
        ui.wait(lambda: ui.all("#groups-table tbody tr"), 10, "groups")
        scale = group_row(ui, "workers").find_element(By.CSS_SELECTOR, "button[data-action=scale]")
        ui.click(scale)
        editor = ui.wait_css("[data-editor=scale]")
        ui.click(editor.find_element(By.XPATH, ".//button[starts-with(normalize-space(), 'Ask to change')]"))
        ui.wait_css('[data-editor=scale] select[data-field="patch.capacity"]')
        ui.js("document.getElementById('groups-card').scrollIntoView()")
        ui.screenshot("dark-scale")
        assert ui.js(UNLABELED, editor) == [], "every control of the scale editor has a name"
        # Escape closes the editor and gives focus back to the button that opened it.
        editor.find_element(By.CSS_SELECTOR, '[data-field="patch.count"]').send_keys(Keys.ESCAPE)
        ui.wait(lambda: not ui.all("[data-editor=scale]"), 5, "editor closed")
        assert ui.d.switch_to.active_element.get_attribute("data-action") == "scale"
        ui.click(ui.css("#add-group"))
        add = ui.wait_css("[data-editor=add]")
        ui.wait(lambda: add.find_element(By.CSS_SELECTOR, '[data-field="group.instance_type"]').get_attribute("value"), 10, "types")
        ui.screenshot("dark-add")
        assert ui.js(UNLABELED, add) == [], "every control of the add form has a name"
        nid = node_ids(ui)[0]
        ui.click(node_button(ui, nid, "investigate"))
        panel = ui.wait_css(f'[data-investigate="{nid}"]')
        ui.screenshot("dark-investigate")
        assert ui.js(UNLABELED, panel) == []
        ui.click(node_button(ui, nid, "replace"))
        dlg = dialog(ui)
        ui.screenshot("dark-replace")
        assert ui.js(UNLABELED, dlg) == []
        assert ui.js(UNLABELED, ui.css("#nodes-card")) == []
        ui.click(dlg.find_element(By.XPATH, ".//button[normalize-space()='Cancel']"))
    finally:
        ui.js("localStorage.removeItem('instantstart.theme')")


# ---- platform software update ------------------------------------------------------------------


def test_update_software_shows_each_groups_software_the_plan_then_follows_the_operation(fast_ui, day2):
    ui = fast_ui
    open_cluster(ui)
    cell = group_row(ui, "workers").find_element(By.CSS_SELECTOR, "td.software")
    assert "2025.10.1" in cell.text, cell.text
    ui.click(ui.css("#update-software"))
    dlg = dialog(ui)
    # Each group with its software, and the server's plan: the release now → after.
    label = dlg.find_element(By.XPATH, ".//label[strong[normalize-space()='workers']]")
    assert "2025.10.1" in label.text, label.text
    line = ui.wait_css('dialog[open] ul.diff li[data-field="instance_groups.workers.software"]')
    assert "2025.10.1" in line.find_element(By.CSS_SELECTOR, "del").text
    assert "latest" in line.find_element(By.CSS_SELECTOR, "ins").text
    assert "root volume" in dlg.text
    ui.screenshot("software-update-plan")
    ui.click(dlg.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    wait_green(ui, "#groups-activity", timeout=40)
    ui.wait(lambda: "2025.11.2" in group_row(ui, "workers").find_element(By.CSS_SELECTOR, "td.software").text,
            10, "the group on the latest release")
    op = next(o for o in operations(ui.server) if o["kind"] == "update_software")
    assert op["status"] == "succeeded" and op["actor"]["face"] == "ui"
    assert op["request"]["cluster"] == CLUSTER
