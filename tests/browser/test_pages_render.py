"""Load every registered page in headless Chromium and check it rendered without an exception."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from dashboard.page_registry import HOME, PAGES

REPO_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = REPO_ROOT / "tests" / "browser" / "artifacts"
README_SHOT = REPO_ROOT / "docs" / "home.png"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read().strip() == b"ok":
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError("the dashboard did not start within a minute")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = _free_port()
    env = dict(os.environ, DASHBOARD_CACHE_DIR=str(tmp_path_factory.mktemp("browser_cache")))
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "dashboard/app.py", "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1",
         "--browser.gatherUsageStats", "false"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def _wait_until_idle(page, timeout_ms: int) -> None:
    """Wait until Streamlit has started and finished running the page's script."""
    page.wait_for_selector("[data-testid='stMain']", timeout=timeout_ms)
    page.wait_for_function(
        "() => document.querySelector('[data-testid=\"stMainBlockContainer\"]') !== null"
        " && document.querySelectorAll('[data-testid=\"stMainBlockContainer\"] *').length > 5",
        timeout=timeout_ms)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout_ms)


def test_every_page_renders_without_exception(server):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    failures: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        outside_requests: list[str] = []
        page.on("request", lambda r: None if r.url.startswith(("http://127.0.0.1", "data:", "blob:"))
                else outside_requests.append(r.url))
        # a tool's own URL first on the fresh server: a shared deep link must open without a
        # 'Page not found' dialog (Streamlit raises it when a pages/ folder sits beside app.py)
        for entry in (*PAGES, HOME):
            start = time.perf_counter()
            page.goto(f"{server}/{'' if entry.url_path == 'home' else entry.url_path}")
            _wait_until_idle(page, timeout_ms=120_000)
            page.wait_for_timeout(1500)  # let plotly draw before the screenshot
            timings[entry.url_path] = round(time.perf_counter() - start, 2)
            shot = ARTIFACTS / f"{entry.url_path}.png"
            page.screenshot(path=str(shot), full_page=True)
            exceptions = page.locator("[data-testid='stException']")
            if exceptions.count():
                failures.append(f"{entry.title}: {exceptions.first.inner_text()[:500]}")
            title_text = page.locator("h1").first.inner_text(timeout=10_000)
            if not title_text.strip():
                failures.append(f"{entry.title}: no page title rendered")
            if page.get_by_text("Under construction").count():
                failures.append(f"{entry.title}: still a placeholder")
            if page.get_by_text("Page not found").count():
                failures.append(f"{entry.title}: Streamlit reported 'Page not found' for its URL")
            if entry.url_path == "home" and os.environ.get("UPDATE_README_SCREENSHOT") == "1":
                README_SHOT.parent.mkdir(exist_ok=True)
                shutil.copy(shot, README_SHOT)
        browser.close()
    (ARTIFACTS / "render_times.json").write_text(json.dumps(timings, indent=2))
    assert not failures, "\n".join(failures)
    assert not outside_requests, f"pages requested outside addresses: {outside_requests[:5]}"


def _upload(page, name: str, payload: bytes) -> None:
    page.locator("input[type=file]").first.set_input_files(
        files=[{"name": name, "mimeType": "text/csv", "buffer": payload}])
    page.wait_for_timeout(1000)
    _wait_until_idle(page, timeout_ms=60_000)


def test_microdata_upload_rejects_bad_files_and_feeds_the_page(server):
    """The upload path AppTest cannot drive: bad files get a named error, a good file drives the page."""
    from playwright.sync_api import sync_playwright

    from core.datasets import load_adult

    adult = load_adult().sample(3000, random_state=1)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1600})
        page.goto(f"{server}/stratified-synthesis")
        _wait_until_idle(page, timeout_ms=120_000)
        page.locator("[data-testid='stSelectbox']").filter(has_text="Microdata").first.click()
        page.get_by_role("option", name="Upload CSV").click()
        _wait_until_idle(page, timeout_ms=60_000)

        _upload(page, "semicolons.csv", adult.head(50).to_csv(sep=";", index=False).encode())
        error = page.locator("[data-testid='stAlertContentError']")
        assert "semicolon" in error.first.inner_text(timeout=30_000)
        _upload(page, "binary.csv", bytes(range(256)) * 20)
        assert "binary" in error.first.inner_text(timeout=30_000)

        _upload(page, "adult_sample.csv", adult.to_csv(index=False).encode())
        page.get_by_text("adult_sample.csv: 3,000 rows x 15 columns").first.wait_for(timeout=30_000)
        assert not error.count()
        metrics = [m.split() for m in page.locator("[data-testid='stMetric']").all_inner_texts()]
        assert ["Rows", "3,000"] in metrics and ["Strata", "(public", "domain)", "10"] in metrics
        assert not page.locator("[data-testid='stException']").count()
        browser.close()


def _block_files(tmp_path) -> tuple[bytes, bytes]:
    """A TIGER-style zipped shapefile of 64 blocks (8 x 8 boxes: 2 counties x 2 tracts x 2 block groups x
    8 blocks) and its PL-style counts, every tract holding the same 160 people."""
    import io
    import zipfile

    import geopandas as gpd
    import numpy as np
    import pandas as pd
    import shapely

    rows, cols = divmod(np.arange(64), 8)
    geoids = [f"13{1 + 2 * (c // 4):03d}{100 * (1 + r // 4):06d}{1 + (r % 4) // 2}{1 + (r % 2) * 4 + c % 4:03d}"
              for r, c in zip(rows, cols)]
    boxes = [shapely.box(-84 + 0.01 * c, 33 + 0.01 * r, -83.99 + 0.01 * c, 33.01 + 0.01 * r) for r, c in zip(rows, cols)]
    folder = tmp_path / "tiger"
    folder.mkdir()
    gpd.GeoDataFrame({"GEOID20": geoids}, geometry=boxes, crs="EPSG:4269").to_file(folder / "blocks.shp")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for f in folder.iterdir():
            z.write(f, f.name)
    counts = pd.DataFrame({"GEOID": geoids, "total": 10, "vap": 8, "black": 3, "bvap": 2})
    return buf.getvalue(), counts.to_csv(index=False).encode()


def test_district_upload_builds_a_map_and_rejects_bad_counts(server, tmp_path):
    """The TIGER/PL upload path of the district maps page, driven as a user would."""
    from playwright.sync_api import sync_playwright

    shapes, counts = _block_files(tmp_path)
    bad = counts.decode().replace(",10,8,", ",-10,8,", 1).encode()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1600})
        page.goto(f"{server}/district-maps")
        _wait_until_idle(page, timeout_ms=120_000)
        page.get_by_text("My TIGER/Line + PL 94-171 files").click()
        _wait_until_idle(page, timeout_ms=60_000)
        inputs = page.locator("input[type=file]")
        inputs.nth(0).set_input_files(files=[{"name": "blocks.zip", "mimeType": "application/zip", "buffer": shapes}])
        page.wait_for_timeout(1000)
        inputs.nth(1).set_input_files(files=[{"name": "pl.csv", "mimeType": "text/csv", "buffer": bad}])
        page.wait_for_timeout(1000)
        _wait_until_idle(page, timeout_ms=60_000)
        error = page.locator("[data-testid='stAlertContentError']")
        assert "negative" in error.first.inner_text(timeout=30_000).lower()

        inputs.nth(1).set_input_files(files=[{"name": "pl.csv", "mimeType": "text/csv", "buffer": counts}])
        page.get_by_text("Your blocks: 64 blocks in 2 counties, total population 640").first.wait_for(timeout=60_000)
        _wait_until_idle(page, timeout_ms=120_000)
        # the plan and the noisy runs follow the geography: wait for the districts' metric itself
        districts = page.locator("[data-testid='stMetric']").filter(has=page.get_by_text("Districts", exact=True))
        districts.first.wait_for(timeout=120_000)
        assert districts.first.inner_text().split() == ["Districts", "4"]
        assert not error.count()
        page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
        assert not page.locator("[data-testid='stException']").count()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "district-maps-upload.png"), full_page=True)
        browser.close()


def test_budget_page_takes_a_district_plan_csv_as_a_target(server):
    """The plan export of the District maps page, loaded on the Budget allocation page (Georgia)."""
    from playwright.sync_api import sync_playwright

    from core.census.budget_plan import load_geography
    from core.geography.assignments import plan_to_frame

    geo = load_geography("georgia", (1,), 0)
    h = geo.hierarchy
    labels = (h.ancestors_at(1) - h.level_offsets[1]) % 14          # 14 districts of whole counties
    csv = plan_to_frame(geo.leaf_ids, labels).to_csv(index=False).encode()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 2400})
        page.goto(f"{server}/budget-allocation")
        _wait_until_idle(page, timeout_ms=120_000)
        page.get_by_text("Georgia", exact=True).click()
        _wait_until_idle(page, timeout_ms=120_000)
        page.get_by_text("Your district plan as a target").click()
        page.locator("input[type=file]").first.set_input_files(
            files=[{"name": "plan.csv", "mimeType": "text/csv", "buffer": csv}])
        # the plan becomes a bar of the target error chart (an SVG tick label)
        page.locator(".js-plotly-plot text", has_text="your 14-district plan").first.wait_for(timeout=120_000)
        _wait_until_idle(page, timeout_ms=120_000)
        assert not page.locator("[data-testid='stAlertContentError']").count()
        assert not page.locator("[data-testid='stException']").count()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "budget-allocation-plan.png"), full_page=True)
        browser.close()
