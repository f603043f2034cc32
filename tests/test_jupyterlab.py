"""JupyterLab as the README says: it opens the text notebooks, notebook 01's live controls redraw its figure, and a
committed notebook opened and saved is byte for byte as committed.

A JupyterLab server on localhost serves a folder (notebook 01's .py source and its .ipynb with quick parameters, or
a git repository of the committed notebooks); headless Chromium, driven over the DevTools protocol, opens a
notebook: it runs every cell, finds the slider and the figure, moves the slider with the keyboard and sees the
figure change; or it waits for the kernel, saves, and git sees no change. Skipped where JupyterLab or Chromium is
not installed.
"""
import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
websocket = pytest.importorskip("websocket")  # websocket-client: a dependency of jupyter_server
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None or shutil.which("jupyter-lab") is None,
                                 reason="needs JupyterLab (requirements.txt) and Chromium (scripts/setup.sh --browser)")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class Page:
    """One Chromium tab over the DevTools protocol: evaluate JavaScript, press keys."""

    def __init__(self, ws_url: str):
        self.ws = websocket.create_connection(ws_url, timeout=120)
        self.next_id = 0

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                assert "error" not in reply, reply["error"]
                return reply["result"]

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def press(self, key: str, code: int):
        for kind in ("rawKeyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key=key, code=key, windowsVirtualKeyCode=code)


@pytest.fixture
def lab(tmp_path, data):
    """A JupyterLab server over a folder holding notebook 01 (quick parameters), and a headless Chromium tab."""
    import nbformat

    from rrlib.report.notebooks import NOTEBOOKS, notebook_source

    nb = next(n for n in NOTEBOOKS if n.name == "01_mechanism")
    root = tmp_path / "lab"
    root.mkdir()
    shutil.copy(REPO / "notebooks" / "01_mechanism.py", root)
    quick = notebook_source(nb)
    where = next(i for i, c in enumerate(quick.cells) if "parameters" in c.metadata.get("tags", []))
    values = {**nb.quick, "out_root": str(tmp_path / "runs"), "local_out_root": str(tmp_path / "local")}
    quick.cells.insert(where + 1, nbformat.v4.new_code_cell("\n".join(f"{k} = {v!r}" for k, v in values.items())))
    nbformat.write(quick, root / "quick.ipynb")
    with served(tmp_path, root, "quick.ipynb") as opened:
        yield opened


@contextlib.contextmanager
def served(tmp_path, root: Path, notebook: str):
    """A JupyterLab server over ``root`` and a headless Chromium tab with ``notebook`` open in it: (tab, the
    server's REST API)."""
    token, port, debug_port = secrets.token_hex(16), free_port(), free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    server = subprocess.Popen(
        ["jupyter-lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1", f"--IdentityProvider.token={token}", "--allow-root",
         f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True"],
        env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=(tmp_path / "lab.log").open("w"))
    browser = None
    try:
        base = f"http://127.0.0.1:{port}"

        def api(path):
            try:
                with urllib.request.urlopen(f"{base}{path}{'&' if '?' in path else '?'}token={token}") as reply:
                    return json.loads(reply.read())
            except OSError:
                return None

        wait_for(lambda: api("/api/status"), 90, "the JupyterLab server")
        browser = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run",
             f"--user-data-dir={tmp_path / 'chrome'}",
             f"--remote-debugging-port={debug_port}", "--window-size=1400,1000",
             f"{base}/lab/tree/{notebook}?token={token}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def tab():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{debug_port}/json/list") as reply:
                    pages = [t for t in json.loads(reply.read()) if t["type"] == "page" and "/lab" in t["url"]]
                return pages[0]["webSocketDebuggerUrl"] if pages else None
            except OSError:
                return None

        yield Page(wait_for(tab, 60, "Chromium's tab")), api
    finally:
        for process in (browser, server):
            if process is not None:
                process.terminate()
                process.wait(timeout=30)


def opened_with_its_kernel(page):
    wait_for(lambda: page.js("!!(window.jupyterapp && document.querySelector('.jp-Notebook .jp-Cell'))"), 120,
             "the notebook to open")
    kernel_idle = ("(() => { const s = jupyterapp.shell.currentWidget?.sessionContext?.session;"
                   " return s?.kernel?.status === 'idle'; })()")
    wait_for(lambda: page.js(kernel_idle), 120, "the kernel")


def test_lab_opens_the_text_notebook_and_the_slider_redraws_the_figure(lab):
    page, api = lab
    # jupytext's contents manager: the .py source opens as a notebook, cells and all
    text_notebook = api("/api/contents/01_mechanism.py?type=notebook&content=1")
    assert text_notebook["type"] == "notebook" and len(text_notebook["content"]["cells"]) > 10

    opened_with_its_kernel(page)
    page.js("jupyterapp.commands.execute('notebook:run-all-cells')")
    figure = "document.querySelector('.jp-OutputArea .widget-image, .jp-OutputArea img.widget-image')"
    wait_for(lambda: page.js(f"!!({figure} && {figure}.src)"), 300, "the live figure to render")
    assert page.js("document.querySelectorAll('.jp-OutputArea .widget-slider').length") >= 2
    before = page.js(f"{figure}.src")
    page.js("document.querySelector('.jp-OutputArea .widget-slider .noUi-handle').focus()")
    for _ in range(4):  # four steps of 0.05 in cos(u, h)
        page.press("ArrowRight", 39)
    wait_for(lambda: page.js(f"{figure}.src") != before, 60, "the figure to change after the slider moved")


def test_a_committed_notebook_opened_and_saved_is_as_committed(tmp_path):
    """JupyterLab writes the kernel's language_info into a notebook it opens: the committed .ipynb carry it, so
    opening one changes nothing to save, and saving it (both files of the pair, through jupytext) leaves git status
    clean."""
    root = tmp_path / "clone"
    shutil.copytree(REPO / "notebooks", root / "notebooks", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".gitignore", root)  # JupyterLab's .ipynb_checkpoints/ are ignored
    git = ["git", "-c", "user.name=ci", "-c", "user.email=ci@localhost", "-C", str(root)]
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "the committed notebooks"]):
        subprocess.run(git + command, check=True, capture_output=True)
    notebook = "notebooks/01_mechanism.ipynb"
    with served(tmp_path, root, notebook) as (page, api):
        opened_with_its_kernel(page)
        time.sleep(2)  # the kernel's info reaches the notebook's metadata
        assert page.js("jupyterapp.shell.currentWidget.context.model.dirty") is False, "opening it changed it"
        saved = api(f"/api/contents/{notebook}?content=0")["last_modified"]
        page.js("jupyterapp.commands.execute('docmanager:save')")
        wait_for(lambda: api(f"/api/contents/{notebook}?content=0")["last_modified"] != saved, 60, "the save")
    status = subprocess.run(git + ["status", "--porcelain"], capture_output=True, text=True, check=True).stdout
    assert status == "", f"saving in JupyterLab changed the committed notebooks:\n{status}"
