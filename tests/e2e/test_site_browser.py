"""The results site (``nfvperf site``, issue 17 item 4) opened in headless Chromium (Debian's
``chromium`` and ``chromium-driver``, driven by selenium).

The store comes from real short runs on the simulated DUT through the CLI: eight runs of one
throughput suite, the last four with the DUT's capacity lowered 15 %, a study run, and a run
still marked running on another host.  Then, in the browser: the index lists every run and its
filters work, the 64 B trend page shows its plot with the regression marked at the first lowered
run, every link of every page resolves (no 404 from file://), the pages load from a web server
too (loopback), and the console has no error on any page.

Skips (with the reason) only when the browser, its driver or selenium is not installed.
"""
from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

import pytest
import yaml

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           COLUMNS="200")
CHROMIUM = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")
BEFORE, AFTER = 4, 4          # runs at full capacity, then at 85 %
SUITE = {
    "name": "site-trend",
    "description": "zero-loss throughput at 64 B on the sim (the site's browser test)",
    "topology": {"kind": "p-ovs-p", "dut": "ovs-dpdk", "ports": 2},
    "traffic": {"frame_sizes": [64], "flows_per_port": 1, "bidirectional": True, "link_speed": "10G"},
    "profile": "quick",
    "sim": {"capacity_pps": {64: 2000000}, "seed": 3},
    "tests": [{"method": "throughput", "search": "binary", "resolution_pct": 0.1}],
}


def nfv(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "nfvperf", *args], capture_output=True, text=True, cwd=REPO,
                       env=ENV, timeout=timeout)
    assert p.returncode == 0, f"{args}: rc={p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """(site dir, store path, run ids of the trend suite, the study run, the running run)."""
    tmp = tmp_path_factory.mktemp("site")
    db, out = str(tmp / "results.db"), str(tmp / "out")
    full, low = tmp / "site-trend.yaml", tmp / "site-trend-low.yaml"
    full.write_text(yaml.safe_dump(SUITE))
    lowered = json.loads(json.dumps(SUITE))
    lowered["sim"]["capacity_pps"] = {64: int(2000000 * 0.85)}
    low.write_text(yaml.safe_dump(lowered))
    ids = []
    for suite in [full] * BEFORE + [low] * AFTER:
        nfv("run", str(suite), "--tg", "sim", "--quick", "--db", db, "--out", out, "--no-progress")
        ids.append(len(ids) + 1)
    nfv("run", "suites/study-flows.yaml", "--tg", "sim", "--quick", "--db", db, "--out", out, "--no-progress")
    study = len(ids) + 1
    sys.path.insert(0, str(REPO / "src"))
    from nfvperf.store import Store
    store = Store(db)
    try:                   # a run in progress on another controller: listed as running
        running = store.create_run(suite="site-trend", suite_path=None, topology="p-ovs-p", dut="ovs-dpdk",
                                   tg="sim", profile="quick", config={},
                                   environment={"hostname": "elsewhere", "pid": 1}).id
    finally:
        store.close()
    p = nfv("site", str(tmp / "site"), "--db", db)
    assert "page(s) written" in p.stdout
    return tmp / "site", db, ids, study, running


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not CHROMIUM or not DRIVER:
        pytest.skip("headless Chromium is not installed (apt-get install chromium chromium-driver; "
                    "scripts/install-deps.sh installs both)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install selenium; it is in the dev extras)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1300,1000", f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(DRIVER), options=opts)
    drv.set_page_load_timeout(60)
    yield drv
    drv.quit()


def console_errors(drv) -> list[str]:
    """The console entries of the pages loaded since the last call that are errors."""
    return [f"{e.get('level')}: {e.get('message')}" for e in drv.get_log("browser")
            if e.get("level") in ("SEVERE", "ERROR")]


def open_page(drv, url: str) -> None:
    drv.get(url)
    assert drv.execute_script("return document.readyState") == "complete"
    errors = console_errors(drv)
    assert not errors, f"{url}: console errors {errors}"


def test_index_lists_every_run_and_filters(site, browser) -> None:
    root, _db, ids, study, running = site
    open_page(browser, (root / "index.html").as_uri())
    listed = browser.execute_script(
        "return Array.from(document.querySelectorAll('#runs tbody tr')).map(r => r.id)")
    assert sorted(listed) == sorted(f"run-{i}" for i in ids + [study, running])
    status = browser.execute_script(f"return document.querySelector('#run-{running} td.status').textContent")
    assert status == "running"
    shown = browser.execute_script("""
        const f = document.getElementById('filters');
        f.elements.suite.value = 'study-flows';
        f.elements.suite.dispatchEvent(new Event('change', {bubbles: true}));
        const visible = Array.from(document.querySelectorAll('#runs tbody tr')).filter(r => !r.hidden);
        return [visible.map(r => r.id), document.getElementById('shown').textContent];""")
    assert shown == [[f"run-{study}"], f"1 of {len(ids) + 2} runs shown"]
    browser.execute_script("document.getElementById('filters').reset()")
    browser.execute_script("document.getElementById('filters').dispatchEvent(new Event('change'))")
    assert browser.execute_script(
        "return document.querySelectorAll('#runs tbody tr:not([hidden])').length") == len(ids) + 2
    assert not console_errors(browser)


def _trend_page(db: str, first_low: int) -> str:
    """The file of the 64 B throughput series of the trend suite, checked to hold the change."""
    doc = json.loads(nfv("trend", "--db", db, "--json").stdout)
    hits = [s for s in doc["series"] if first_low in [c["run"] for c in s["changes"]]]
    assert hits, f"no series with a change at run {first_low}: {[(s['id'], s['changes']) for s in doc['series']]}"
    from nfvperf.site.trends import series_file
    return series_file(hits[0]["id"])


def test_trend_page_marks_the_regression(site, browser) -> None:
    root, db, ids, _study, _running = site
    first_low = ids[BEFORE]
    page = root / "trends" / _trend_page(db, first_low)
    open_page(browser, page.as_uri())
    plot = browser.execute_script("""
        const svg = document.querySelector('#trend-plot svg');
        if (!svg) return null;
        const box = svg.getBoundingClientRect();
        const marks = Array.from(svg.querySelectorAll('[id^="change-"]')).map(e => e.id);
        return {w: box.width, h: box.height, marks: marks,
                points: svg.querySelectorAll('#points path, #points use').length};""")
    assert plot is not None, "the trend page has no plot"
    assert plot["w"] > 300 and plot["h"] > 150
    assert plot["marks"] == [f"change-regression-{first_low}"]
    assert plot["points"] >= len(ids)
    row = browser.execute_script("return document.querySelector('#changes tr.changed-regression').textContent")
    assert f"run {first_low}" in row and "-15" in row


def _links(drv) -> list[str]:
    return drv.execute_script("return Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")


def test_every_link_resolves_from_file_urls(site, browser) -> None:
    root, *_ = site
    start = (root / "index.html").as_uri()
    seen, todo, pages = set(), [start], 0
    while todo:
        url = todo.pop()
        if url in seen:
            continue
        seen.add(url)
        parsed = urlparse(url)
        assert parsed.scheme == "file", f"a link leaves the site: {url}"
        path = Path(unquote(parsed.path))
        assert path.is_file(), f"broken link: {url}"
        assert root.resolve() in path.resolve().parents, f"a link leaves the site: {url}"
        open_page(browser, url)
        pages += 1
        todo += [urldefrag(h)[0] for h in _links(browser) if urldefrag(h)[0] not in seen]
    built = {p for p in root.rglob("*.html")}
    assert {Path(unquote(urlparse(u).path)) for u in seen} == built, "pages no link reaches"
    assert pages == len(built)


def test_pages_from_a_web_server(site, browser) -> None:
    """The same pages over HTTP on the loopback (no favicon or asset request fails)."""
    root, *_ = site
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{port}/"
        open_page(browser, base + "index.html")
        for href in sorted(set(_links(browser)))[:12]:
            open_page(browser, urldefrag(href)[0])
        assert browser.execute_script("return getComputedStyle(document.body).maxWidth") != "none"
    finally:
        srv.shutdown()
        srv.server_close()
