"""Fixtures of the end-to-end UI suite: a real instantstart-server on loopback (simulated cloud)
and a real headless Chromium driven by Selenium.

Nothing is built here. The server binary comes from INSTANTSTART_SERVER_BIN (`cargo xtask
ui-test` builds it and sets it). The server gets a free 127.0.0.1 port, a temporary data dir
and a known token, and is always killed at the end. Screenshots go to target/ui-artifacts/.
"""

from __future__ import annotations

import atexit
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = pathlib.Path(os.environ.get("INSTANTSTART_UI_ARTIFACTS", ROOT / "target" / "ui-artifacts"))
TOKEN = "ist_ui_suite_token_for_loopback_tests_only"
# 300x: EKS's 10 minutes take 2 s, the whole pipeline about 6 s — slow enough to reload mid-way.
SIM_SPEED = os.environ.get("INSTANTSTART_UI_SIM_SPEED", "300")
# The day-2 tests (scale, add, reboot, replace, features) only need to see operations finish:
# a second server at 3000x (a cluster in under a second). It is reached as "localhost" so its
# session cookie does not replace the first server's (cookies ignore the port).
FAST_SIM_SPEED = os.environ.get("INSTANTSTART_UI_FAST_SIM_SPEED", "3000")
# The workload tests watch training jobs run (a simulated job trains for 5 minutes: 5 s at 60x,
# long enough to see its logs stream and a process fault restart it in place).
WORKLOAD_SIM_SPEED = os.environ.get("INSTANTSTART_UI_WORKLOAD_SIM_SPEED", "60")
CHROMIUM = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER_BIN", "/usr/bin/chromedriver")

_live_servers: list[subprocess.Popen] = []


def _kill_leftovers() -> None:
    for p in _live_servers:
        if p.poll() is None:
            p.kill()
            p.wait()


atexit.register(_kill_leftovers)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One instantstart-server process; can be stopped and started again on the same port and
    data dir (a restart: operations resume, sessions stay valid)."""

    def __init__(self, binary: str, data_dir: pathlib.Path, port: int, speed: str = SIM_SPEED, host: str = "127.0.0.1",
                 label: str = "server", env: dict[str, str] | None = None):
        self.binary = binary
        self.env = env or {}
        self.data_dir = data_dir
        self.port = port
        self.speed = speed
        self.host = host
        self.label = label
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        """The origin the browser uses."""
        return f"http://{self.host}:{self.port}"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.starts += 1
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        log = open(ARTIFACTS / f"{self.label}-{self.starts}.log", "wb")
        env = dict(os.environ, INSTANTSTART_TOKEN=TOKEN, RUST_LOG=os.environ.get("RUST_LOG", "warn"), **self.env)
        self.proc = subprocess.Popen(
            [self.binary, "--listen", f"127.0.0.1:{self.port}", "--data-dir", str(self.data_dir), "--sim-speed", self.speed],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        _live_servers.append(self.proc)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"instantstart-server exited with {self.proc.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"{self.api_url}/healthz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("instantstart-server did not become healthy within 30 s")

    def stop(self) -> None:
        """Graceful stop (SIGTERM), then SIGKILL if it lingers."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def api(self, method: str, path: str, body=None, headers=None):
        """Calls the REST API with the bearer token; returns (status, parsed JSON or None)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.api_url}{path}", data=data, method=method)
        req.add_header("Authorization", f"Bearer {TOKEN}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                raw = r.read()
                return r.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, raw.decode(errors="replace")

    def kube_api(self) -> str:
        """The simulated clusters' Kubernetes API (the server prints its URL when it starts)."""
        log = ARTIFACTS / f"{self.label}-{self.starts}.log"
        deadline = time.time() + 10
        while time.time() < deadline:
            m = re.search(r"Kubernetes API: (http://[^\s/]+)/clusters/", log.read_text(errors="replace"))
            if m:
                return m.group(1)
            time.sleep(0.1)
        raise RuntimeError(f"the server did not print its simulated Kubernetes API; see {log}")

    def kube_create(self, cluster: str, obj: dict) -> dict:
        """Creates `obj` in InstantStart cluster `cluster` the way another tool would: straight
        through the (simulated) Kubernetes API, without InstantStart's labels."""
        status, rec = self.api("GET", f"/api/clusters/{cluster}")
        assert status == 200, rec
        record = rec.get("record", rec)
        api_version, kind = obj["apiVersion"], obj["kind"]
        plural = {"Deployment": "deployments", "HyperPodPyTorchJob": "hyperpodpytorchjobs",
                  "InferenceEndpointConfig": "inferenceendpointconfigs"}[kind]
        prefix = "api/v1" if api_version == "v1" else f"apis/{api_version}"
        ns = obj["metadata"].get("namespace", "default")
        url = (f"{self.kube_api()}/clusters/{record['region']}/{record['eks_cluster']}/"
               f"{prefix}/namespaces/{ns}/{plural}")
        req = urllib.request.Request(url, data=json.dumps(obj).encode(), method="POST")
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def submit_gpu_cluster(self, name: str, nodes: int = 2) -> str:
        """Submits a cluster with one group (`workers`) of `nodes` ml.g5.xlarge nodes (one GPU
        each) in us-east-1a and its shared bucket; returns the create operation's id."""
        status, body = self.api("POST", "/api/clusters", {
            "name": name,
            "region": "us-east-1",
            "availability_zones": ["us-east-1a", "us-east-1b"],
            "hyperpod": {"instance_groups": [
                {"name": "workers", "instance_type": "ml.g5.xlarge", "count": nodes, "availability_zone": "us-east-1a"}]},
        })
        assert status == 202, body
        return body["operation"]["id"]

    def ready_gpu_cluster(self, name: str, timeout: float = 60, nodes: int = 2) -> str:
        """The same cluster as `submit_gpu_cluster`, waited for until it succeeded; returns `name`."""
        op = self.wait_operation(self.submit_gpu_cluster(name, nodes), timeout)
        assert op["status"] == "succeeded", op
        return name

    def wait_operation(self, op_id: str, timeout: float = 60) -> dict:
        deadline = time.time() + timeout
        while time.time() < deadline:
            status, op = self.api("GET", f"/api/operations/{op_id}")
            if status == 200 and op["status"] != "running":
                return op
            time.sleep(0.2)
        raise AssertionError(f"operation {op_id} still running after {timeout} s")


def pytest_sessionstart(session):
    """Fresh artifacts for every run."""
    if ARTIFACTS.exists():
        for f in ARTIFACTS.iterdir():
            if f.suffix in (".png", ".log", ".json"):
                f.unlink()


def _server(**kwargs):
    binary = os.environ.get("INSTANTSTART_SERVER_BIN")
    if not binary or not os.path.exists(binary):
        pytest.exit("set INSTANTSTART_SERVER_BIN to a built instantstart-server (cargo xtask ui-test does)", returncode=2)
    data_dir = pathlib.Path(tempfile.mkdtemp(prefix="instantstart-ui-"))
    srv = Server(binary, data_dir, free_port(), **kwargs)
    try:
        srv.start()
        yield srv
    finally:
        srv.stop()
        _kill_leftovers()
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def server():
    yield from _server()


@pytest.fixture(scope="session")
def fast_server():
    """A second server at FAST_SIM_SPEED for the day-2 tests (see FAST_SIM_SPEED)."""
    yield from _server(speed=FAST_SIM_SPEED, host="localhost", label="fast-server")


@pytest.fixture(scope="module")
def workloads_server():
    """The workload tests' own server (storage, jobs, endpoints), started for their module and
    always stopped after it. Reached as "workloads.localhost" (Chromium resolves *.localhost to
    loopback), so its session cookie is its own."""
    yield from _server(speed=WORKLOAD_SIM_SPEED, host="workloads.localhost", label="workloads-server")


def chromium_options(profile: str) -> Options:
    """Headless Chromium with its profile in `profile`, the browser console logged."""
    opts = Options()
    opts.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-quic",
        "--disable-extensions",
        "--window-size=1440,1000",
        "--force-color-profile=srgb",
        f"--user-data-dir={profile}",
    ):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return opts


def chromium(opts: Options):
    """A Chromium session through Debian's chromedriver."""
    drv = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(30)
    return drv


@pytest.fixture(scope="session")
def driver():
    profile = tempfile.mkdtemp(prefix="instantstart-chromium-")
    drv = chromium(chromium_options(profile))
    try:
        yield drv
    finally:
        drv.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)


# Console messages that are expected: failed HTTP answers the UI handles (404 features, 400
# validation, 401 after logout) and WebSocket reconnects while the server restarts.
EXPECTED_CONSOLE = (
    "Failed to load resource",
    "WebSocket connection to",
    "net::ERR_CONNECTION_REFUSED",
)


class UI:
    """Helpers over the driver for one test."""

    def __init__(self, driver, server, name):
        self.d = driver
        self.server = server
        self.name = name
        self.shots = 0

    def go(self, hash_: str = "") -> None:
        """Opens a route; opening the route already shown reloads it (a fresh screen)."""
        url = f"{self.server.url}/{hash_}"
        if self.d.current_url == url:
            self.d.refresh()
        else:
            self.d.get(url)

    def css(self, selector: str):
        return self.d.find_element(By.CSS_SELECTOR, selector)

    def all(self, selector: str):
        return self.d.find_elements(By.CSS_SELECTOR, selector)

    def text(self, selector: str) -> str:
        """The rendered text of the first element matching `selector`, found and read in one
        script: screens re-render as they poll, and an element found by one WebDriver call can be
        stale by the next (finding, then reading, is two calls; a tidy check forbids it)."""
        value = self.js(
            "const el = document.querySelector(arguments[0]); return el ? el.innerText : null;", selector)
        if value is None:
            raise NoSuchElementException(f"no element matches {selector}")
        return "\n".join(line.strip() for line in value.strip().splitlines())

    def wait(self, condition, timeout: float = 15, message: str = ""):
        try:
            return WebDriverWait(
                self.d, timeout, poll_frequency=0.05,
                ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
            ).until(lambda d: condition())
        except TimeoutException:
            self.screenshot("timeout")
            raise AssertionError(f"timed out after {timeout} s: {message}") from None

    def wait_css(self, selector: str, timeout: float = 15):
        def found():
            els = self.all(selector)
            return els[0] if els and els[0].is_displayed() else None

        return self.wait(found, timeout, f"visible {selector}")

    def click(self, el) -> None:
        """Scrolls `el` to the middle of the viewport (clear of the sticky top bar), then clicks."""
        self.d.execute_script("arguments[0].scrollIntoView({block: 'center', inline: 'nearest'})", el)
        el.click()

    def click_css(self, selector: str, timeout: float = 10) -> None:
        """Finds and clicks `selector`, finding it again if the page redrew it in between (lists
        and detail pages re-render as they poll)."""

        def attempt():
            self.click(self.css(selector))
            return True

        self.wait(attempt, timeout, f"click {selector}")

    def js(self, script: str, *args):
        return self.d.execute_script(script, *args)

    def screenshot(self, label: str) -> pathlib.Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.shots += 1
        path = ARTIFACTS / f"{self.name}-{self.shots:02d}-{label}.png"
        self.d.save_screenshot(str(path))
        return path

    def logged_in(self) -> bool:
        return bool(self.js("return sessionStorage.getItem('instantstart.csrf')"))

    def login(self) -> None:
        """Logs in through the login screen (once per browser tab)."""
        if not self.d.current_url.startswith(self.server.url):
            self.go("#/login")
        if self.logged_in():
            return
        self.go("#/login")
        token = self.wait_css("#token")
        token.clear()
        token.send_keys(TOKEN)
        self.css("form.login-form button[type=submit]").click()
        self.wait(lambda: self.logged_in() and "#/login" not in self.d.current_url, 10, "login")

    def console_errors(self) -> list[str]:
        logs = self.d.get_log("browser")
        return [
            e["message"]
            for e in logs
            if e["level"] == "SEVERE" and not any(x in e["message"] for x in EXPECTED_CONSOLE)
        ]


def _ui(request, driver, server):
    helper = UI(driver, server, request.node.name.replace("test_", ""))
    driver.get_log("browser")  # drop what earlier tests left
    yield helper
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        helper.screenshot("FAILED")
        (ARTIFACTS / f"{helper.name}-FAILED-console.json").write_text(json.dumps(driver.get_log("browser"), indent=2))
    else:
        errors = helper.console_errors()
        assert not errors, f"JavaScript errors in the browser console: {errors}"


@pytest.fixture
def ui(request, driver, server):
    yield from _ui(request, driver, server)


@pytest.fixture
def wl_ui(request, driver, workloads_server):
    """The browser helper on the workloads server."""
    yield from _ui(request, driver, workloads_server)


@pytest.fixture
def fast_ui(request, driver, fast_server):
    """The browser helper on the fast server (day-2 tests)."""
    yield from _ui(request, driver, fast_server)
