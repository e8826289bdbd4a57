"""Stakeholder reports open offline: every page's report, opened from a file in headless Chromium
with every request recorded, draws its figures and shows its headline numbers without a single
request outside the file itself; and the dashboard's one-click buttons download such a file and its PDF."""
from __future__ import annotations

import plotly.graph_objects as go

from core.report import build_report
from core.stakeholder_report import format_number, report_html
from tests.browser.accessibility import axe_violations, describe
from tests.browser.dashboard_server import (ARTIFACTS, BROWSER_MARKS, CHROMIUM, CHROMIUM_FLAGS, open_page,
                                            wait_until_idle)
from tests.unit.test_stakeholder_report import PAGES

pytestmark = BROWSER_MARKS


def _figures(result) -> list[go.Figure]:
    """Two small figures from the result's headline numbers (the first carries plotly.js)."""
    names, values = zip(*result.headline().items())
    return [go.Figure(go.Bar(x=list(names), y=[float(v) for v in values])),
            go.Figure(go.Scatter(x=list(range(len(values))), y=[float(v) for v in values]))]


def _open_offline(browser, path):
    """Open a local file with every request recorded; returns (page, requests not to the file)."""
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    own = path.as_uri()
    outside: list[str] = []
    page.on("request", lambda r: None if r.url == own or r.url.startswith(("data:", "blob:"))
            else outside.append(r.url))
    page.on("websocket", lambda s: outside.append(s.url))
    page.goto(own)
    page.wait_for_load_state("networkidle")
    return page, outside


def test_every_pages_report_opens_offline(tmp_path):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        for title, make in PAGES.items():
            result = make()
            text = report_html(result, page=title, figures=_figures(result),
                               report=build_report(result, page=title))
            path = tmp_path / f"{title.replace(' ', '_')}.html"
            path.write_text(text, encoding="utf-8")
            page, outside = _open_offline(browser, path)
            page.locator(".js-plotly-plot .main-svg").nth(1).wait_for(state="attached", timeout=30_000)
            body = page.inner_text("body")
            missing = [k for k, v in result.headline().items() if format_number(v) not in body]
            if missing:
                failures.append(f"{title}: headline numbers not shown: {missing[:3]}")
            if outside:
                failures.append(f"{title}: requested {sorted(set(outside))[:3]}")
            if page.locator(".js-plotly-plot").count() != 2:
                failures.append(f"{title}: expected 2 drawn figures")
            if found := axe_violations(page):     # the file a curator sends out, as its reader opens it
                failures.append(f"{title} report: accessibility\n{describe(found)}")
            page.screenshot(path=str(ARTIFACTS / f"report_{path.stem}.png"))
            page.close()
        browser.close()
    assert not failures, "\n".join(failures)


def test_one_click_html_report_downloads_and_opens_offline(tmp_path, session_server):
    from playwright.sync_api import sync_playwright

    url = session_server[0]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        page, outside_app = open_page(browser, curator_of=url)
        page.goto(f"{url}/district-maps")
        wait_until_idle(page, timeout_ms=300_000)
        page.get_by_role("tab", name="Export").click()         # the page keeps its exports in a tab
        button = page.get_by_role("button", name="Report for stakeholders (HTML)").first
        button.scroll_into_view_if_needed(timeout=60_000)
        with page.expect_download(timeout=120_000) as info:
            button.click()
        saved = tmp_path / "downloaded.html"
        info.value.save_as(saved)
        text = saved.read_text(encoding="utf-8")
        assert "<h2>Headline numbers</h2>" in text and "python -m core reproduce" in text
        report_page, outside = _open_offline(browser, saved)
        assert "Where the data came from" in report_page.inner_text("body")
        report_page.locator(".js-plotly-plot .main-svg").first.wait_for(state="attached", timeout=30_000)
        assert not outside, sorted(set(outside))[:3]
        pdf_button = page.get_by_role("button", name="Report for stakeholders (PDF)").first
        with page.expect_download(timeout=180_000) as pdf_info:
            pdf_button.click()
        pdf = tmp_path / "downloaded.pdf"
        pdf_info.value.save_as(pdf)
        assert pdf.read_bytes().startswith(b"%PDF")
        assert not outside_app, sorted(set(outside_app))[:3]
        browser.close()
