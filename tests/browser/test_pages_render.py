"""Load every registered page in headless Chromium, wait until it has finished running and drawn
its main figure, and check it rendered without an exception or a request leaving the machine, and
without a critical or serious accessibility finding of axe-core (injected from tests/browser/node_modules)
on the page as opened and on each of its tabs."""
from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from dashboard.page_registry import HOME, PAGES
from tests.browser.accessibility import axe_violations, describe, tab_findings
from tests.browser.dashboard_server import (ARTIFACTS, BROWSER_MARKS, CHROMIUM, CHROMIUM_FLAGS, REPO_ROOT,
                                            open_page, wait_for_figure, wait_until_idle)

README_SHOT = REPO_ROOT / "docs" / "home.png"

pytestmark = BROWSER_MARKS


@pytest.fixture
def server(session_server):
    return session_server[0]


def test_every_page_renders_without_exception(server):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    failures: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=CHROMIUM_FLAGS)
        page, outside_requests = open_page(browser, curator_of=server)
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        # a tool's own URL first in a new browser session: a shared deep link must open without a
        # 'Page not found' dialog (Streamlit raises it when a pages/ folder sits beside app.py)
        for entry in (*PAGES, HOME):
            start = time.perf_counter()
            page.goto(f"{server}/{'' if entry.url_path == 'home' else entry.url_path}")
            try:
                wait_until_idle(page, timeout_ms=300_000)
                if not page.locator("[data-testid='stException']").count():   # reported below
                    wait_for_figure(page, entry.main_figure, timeout_ms=60_000)
                    wait_until_idle(page, timeout_ms=60_000)   # drawing the figure may not rerun the page
            except Exception as exc:  # noqa: BLE001 - every page is checked; the failure is reported below
                failures.append(f"{entry.title}: did not finish drawing {entry.main_figure!r} ({exc})"[:600])
            timings[entry.url_path] = round(time.perf_counter() - start, 2)
            print(f"{entry.title}: drawn after {timings[entry.url_path]:.1f} s")
            try:      # accessibility of the page as drawn: no critical or serious axe-core finding
                if found := axe_violations(page):
                    failures.append(f"{entry.title}: accessibility\n{describe(found)}")
            except Exception as exc:  # noqa: BLE001 - reported with the others
                failures.append(f"{entry.title}: the accessibility check did not run ({exc})"[:600])
            shot = ARTIFACTS / f"{entry.url_path}.png"
            page.screenshot(path=str(shot), full_page=True)
            exceptions = page.locator("[data-testid='stException']")
            if exceptions.count():
                failures.append(f"{entry.title}: {exceptions.first.inner_text()[:500]}")
            title = page.locator("h1")
            if not title.count() or not title.first.inner_text().strip():
                failures.append(f"{entry.title}: no page title rendered")
            if page.get_by_text("Under construction").count():
                failures.append(f"{entry.title}: still a placeholder")
            if page.get_by_text("Page not found").count():
                failures.append(f"{entry.title}: Streamlit reported 'Page not found' for its URL")
            if entry.url_path == "home" and os.environ.get("UPDATE_README_SCREENSHOT") == "1":
                README_SHOT.parent.mkdir(exist_ok=True)
                shutil.copy(shot, README_SHOT)
            try:      # and of every other tab, each opened in turn
                failures.extend(tab_findings(page, entry.title))
            except Exception as exc:  # noqa: BLE001 - reported with the others
                failures.append(f"{entry.title}: the tabs' accessibility check did not run ({exc})"[:600])
        browser.close()
    (ARTIFACTS / "render_times.json").write_text(json.dumps(timings, indent=2))
    (ARTIFACTS / "requests.json").write_text(json.dumps(sorted(set(requested)), indent=1))
    assert not failures, "\n".join(failures)
    assert not outside_requests, f"pages requested outside addresses: {sorted(set(outside_requests))[:5]}"


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
        page, outside = open_page(browser, height=1600, curator_of=server)
        page.goto(f"{server}/district-maps")
        wait_until_idle(page, timeout_ms=120_000)
        page.get_by_text("My block files (TIGER/Line + PL 94-171)").click()
        wait_until_idle(page, timeout_ms=60_000)
        uploader = page.locator("[data-testid='stFileUploader']")
        zip_input = uploader.filter(has_text="Block shapefile").locator("input[type=file]")
        csv_input = uploader.filter(has_text="Block counts CSV").locator("input[type=file]")
        zip_input.set_input_files(files=[{"name": "blocks.zip", "mimeType": "application/zip", "buffer": shapes}])
        page.wait_for_timeout(1000)
        csv_input.set_input_files(files=[{"name": "pl.csv", "mimeType": "text/csv", "buffer": bad}])
        page.wait_for_timeout(1000)
        wait_until_idle(page, timeout_ms=60_000)
        error = page.locator("[data-testid='stAlertContentError']")
        assert "negative" in error.first.inner_text(timeout=30_000).lower()

        csv_input.set_input_files(files=[{"name": "pl.csv", "mimeType": "text/csv", "buffer": counts}])
        page.get_by_text("Your blocks: 64 blocks in 2 counties, total population 640").first.wait_for(timeout=60_000)
        wait_until_idle(page, timeout_ms=120_000)
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
    assert not outside, f"the page requested outside addresses: {sorted(set(outside))[:5]}"


def test_budget_page_takes_a_district_plan_csv_as_a_target(server):
    """The plan export of the District maps page, loaded on the Budget allocation page (Georgia)."""
    from playwright.sync_api import sync_playwright

    from core.census.budget_plan import load_geography
    from core.geography.assignments import plan_to_frame
    from core.geography.sources import GEOGRAPHIES

    geo = load_geography("georgia", (1,), 0)
    h = geo.hierarchy
    labels = (h.ancestors_at(1) - h.level_offsets[1]) % 14          # 14 districts of whole counties
    csv = plan_to_frame(geo.leaf_ids, labels).to_csv(index=False).encode()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        page, outside = open_page(browser, height=2400, curator_of=server)
        page.goto(f"{server}/budget-allocation")
        wait_until_idle(page, timeout_ms=120_000)
        page.get_by_text(GEOGRAPHIES["georgia"], exact=True).click()
        wait_until_idle(page, timeout_ms=120_000)
        page.get_by_text("Your district plan as a target").click()
        # the page's first file input is the saved-report loader's: pick the plan uploader by its label
        page.locator("[data-testid='stFileUploader']").filter(has_text="Plan CSV").locator(
            "input[type=file]").first.set_input_files(files=[{"name": "plan.csv", "mimeType": "text/csv",
                                                              "buffer": csv}])
        # the plan becomes a bar of the target error chart (an SVG tick label)
        page.locator(".js-plotly-plot text", has_text="your 14-district plan").first.wait_for(timeout=120_000)
        wait_until_idle(page, timeout_ms=120_000)
        assert not page.locator("[data-testid='stAlertContentError']").count()
        assert not page.locator("[data-testid='stException']").count()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "budget-allocation-plan.png"), full_page=True)
        browser.close()
    assert not outside, f"the page requested outside addresses: {sorted(set(outside))[:5]}"
