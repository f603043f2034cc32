"""The rendered report, opened in a real browser (headless Chromium) with no network: do the figures render?

Each page is loaded from a copy that carries a small probe script; after the page's own scripts have run, the
probe writes what the browser sees (images decoded, plotly SVG nodes drawn, script errors) into the DOM, which
Chromium dumps. Skipped where Chromium is not installed (Debian: apt-get install chromium).
"""
import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (Debian: apt-get install chromium)")

PROBE = """<script>
window.__probeErrors = [];
window.addEventListener("error", e => window.__probeErrors.push(String(e.message || e.type)));
window.addEventListener("load", () => setTimeout(() => {
  const images = Array.from(document.images);
  const seen = {
    images: images.length,
    broken: images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.alt || i.src.slice(0, 80)),
    plots: document.querySelectorAll(".plotly-graph-div").length,
    drawn: document.querySelectorAll(".plotly-graph-div svg.main-svg").length,
    errors: window.__probeErrors,
    // a reader scrolls past long printed output; the longest <pre> output, in lines
    longest_pre: Math.max(0, ...Array.from(document.querySelectorAll(".jp-OutputArea-output pre"))
      .map(p => p.textContent.replace(/\\n$/, "").split("\\n").length)),
    // figures a reader cannot name: an output image without alt text, a plotly figure without a title
    untitled: images.filter(i => i.closest(".jp-OutputArea-output") && !(i.alt || "").trim()).length
      + Array.from(document.querySelectorAll(".plotly-graph-div"))
          .filter(d => !(d.querySelector(".gtitle") || {}).textContent).length,
  };
  const out = document.createElement("pre");
  out.id = "rrlib-probe";
  out.textContent = JSON.stringify(seen);
  document.body.appendChild(out);
}, 500));
</script>"""


def browse(page: Path, profile: Path) -> dict:
    """What Chromium sees on ``page`` once loaded, with every network request refused."""
    probe = page.with_name(f"probe-{page.name}")  # beside the page, so relative links resolve the same
    probe.write_text(page.read_text(encoding="utf-8").replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    try:
        dom = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",  # no network: a fetch would fail
             f"--user-data-dir={profile}", "--virtual-time-budget=15000", "--dump-dom", probe.as_uri()],
            capture_output=True, text=True, timeout=180).stdout
    finally:
        probe.unlink()
    found = re.search(r'<pre id="rrlib-probe">(.*?)</pre>', dom, re.S)
    assert found, f"{page.name}: the page never finished loading"
    return json.loads(html.unescape(found.group(1)))


@pytest.fixture(scope="module")
def seen(quick_report, tmp_path_factory):
    """Every page of the quick report as the browser saw it."""
    paper = quick_report / "paper"
    profile = tmp_path_factory.mktemp("chromium-profile")
    return {page.name: browse(page, profile) for page in sorted(paper.glob("*.html"))}


def test_every_page_loads_without_script_errors_or_broken_images(seen):
    assert "index.html" in seen and len(seen) >= 9  # index + four notebooks, each full and reader's
    for name, page in seen.items():
        assert page["errors"] == [], f"{name}: script errors {page['errors']}"
        assert page["broken"] == [], f"{name}: images that did not load: {page['broken']}"
        assert page["images"] > 0, f"{name}: no image at all"


def test_pages_read_as_a_report(seen):
    for name, page in seen.items():
        assert page["longest_pre"] <= 25, f"{name}: a printed output of {page['longest_pre']} lines"
        assert page["untitled"] == 0, f"{name}: {page['untitled']} figures without a title or caption"


def test_page_links_resolve(quick_report):
    paper = quick_report / "paper"
    for page in paper.glob("*.html"):
        for target in re.findall(r'href="((?:tables|figures)/[^"#]+)"', page.read_text(encoding="utf-8")):
            assert (paper / target).is_file(), f"{page.name} links a missing {target}"


def test_plotly_figures_draw_offline(seen, quick_report):
    interactive = {name: page for name, page in seen.items() if page["plots"]}
    assert {"04_statistics.html", "04_statistics.reader.html"} <= set(interactive)
    for name, page in interactive.items():
        assert page["drawn"] >= page["plots"], f"{name}: {page['plots']} plotly figures, {page['drawn']} SVGs drawn"
    for page in (quick_report / "paper").glob("*.html"):
        sources = re.findall(r"<script[^>]*\bsrc=[\"']([^\"']+)", page.read_text(encoding="utf-8"))
        assert sources == [], f"{page.name} fetches scripts: {sources}"


def test_index_links_resolve(quick_report):
    paper = quick_report / "paper"
    index = (paper / "index.html").read_text(encoding="utf-8")
    targets = re.findall(r'(?:href|src)="([^"#]+)"', index)
    assert targets
    for target in targets:
        assert (paper / target).is_file(), f"index.html links a missing {target}"


WIDTH_PROBE = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const cells = Array.from(document.querySelectorAll("table.rrlib-ledger th, table.rrlib-ledger td"));
  const out = document.createElement("pre");
  out.id = "rrlib-probe";
  out.textContent = JSON.stringify({cells: cells.length, window: window.innerWidth,
    rightmost: Math.max(0, ...cells.map(c => c.getBoundingClientRect().right)),
    scroll: document.documentElement.scrollWidth});
  document.body.appendChild(out);
}, 500));
</script>"""


@pytest.mark.parametrize("name", ["07_claims.reader.html", "07_claims.html"])
def test_the_claims_ledger_fits_a_1300_pixel_window(name, tmp_path):
    """The committed page 07 in a 1,300-pixel window: no cell of the ledger ends past the window's right edge, and
    the screenshot Chromium takes at that size is that wide (what a reader at that width sees)."""
    page = Path(__file__).resolve().parents[1] / "paper" / name
    probe = tmp_path / name  # a copy: the committed page is never written; its figures do not set the table's width
    probe.write_text(page.read_text(encoding="utf-8").replace("<head>", "<head>" + WIDTH_PROBE, 1), encoding="utf-8")
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>", f"--user-data-dir={tmp_path / 'p'}",
             "--window-size=1300,2000", "--virtual-time-budget=15000"]
    dom = subprocess.run(flags + ["--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=180).stdout
    shot = tmp_path / "ledger.png"
    subprocess.run(flags + [f"--screenshot={shot}", probe.as_uri()], capture_output=True, timeout=180)
    seen = json.loads(html.unescape(re.search(r'<pre id="rrlib-probe">(.*?)</pre>', dom, re.S).group(1)))
    assert seen["window"] == 1300 and seen["cells"] >= 4 * 40, seen  # a header and a line per claim
    assert seen["rightmost"] <= seen["window"], f"{name}: a ledger cell ends at {seen['rightmost']} px"
    assert int.from_bytes(shot.read_bytes()[16:20], "big") == 1300  # the PNG's width, from its header
