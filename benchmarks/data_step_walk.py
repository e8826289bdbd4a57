"""The curator's walk, timed and counted: one person-level county file in four forms its office exports
(Latin-1 CSV, semicolon CSV with decimal commas, a workbook with a title row and a second sheet, CR-only
line endings), each taken through the Data step in Chromium with no edit outside the tool: upload, fix
what blocks a run on the page (the units "yrs" and "hrs", the missing codes "refused" and 999), name,
save, then reload the page and find the data set offered again.

It prints every form's actions (clicks, uploads, typed fields, reloads: what a person does) and wall time,
and the totals. Run: ``.venv/bin/python benchmarks/data_step_walk.py`` (needs Debian's Chromium).
"""
from __future__ import annotations

import io
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import dashboard_process  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
SOURCE = ROOT / "tests" / "fixtures" / "county_export.csv"
RUNNING = ("[data-testid='stStatusWidget'], [data-testid='stSpinner'], [data-stale='true'], "
           "[data-testid='stSkeleton']")


def exports(folder: Path) -> list[Path]:
    """The county file in four forms, written under ``folder``."""
    import openpyxl

    frame = pd.read_csv(SOURCE, dtype=str, keep_default_na=False)
    out = []
    latin = folder / "county_latin1.csv"
    latin.write_bytes(frame.to_csv(index=False).encode("latin-1"))
    semicolon = folder / "county_semicolon.csv"
    comma = frame.assign(risk_score=frame["risk_score"].str.replace(".", ",", regex=False))
    semicolon.write_bytes(comma.to_csv(index=False, sep=";", lineterminator="\r\n").encode("cp1252"))
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "People"
    sheet.append(["County health office: person-level export"])
    sheet.append([])
    sheet.append(list(frame.columns))
    for row in frame.itertuples(index=False):
        sheet.append(list(row))
    notes = book.create_sheet("Notes")
    notes.append(["999 and refused mean no answer"])
    buffer = io.BytesIO()
    book.save(buffer)
    workbook = folder / "county_titled.xlsx"
    workbook.write_bytes(buffer.getvalue())
    cr = folder / "county_cr.csv"
    cr.write_bytes(frame.to_csv(index=False, lineterminator="\r").encode("cp1252"))
    out += [latin, semicolon, workbook, cr]
    return out


class Walk:
    """A tab that counts the person's actions."""

    def __init__(self, page):
        self.page, self.actions = page, 0

    def idle(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        quiet = 0
        while quiet < 2:
            if time.monotonic() > deadline:
                raise TimeoutError("the page was still running")
            self.page.wait_for_timeout(300)
            quiet = quiet + 1 if self.page.locator(RUNNING).count() == 0 else 0

    def act(self, what, *args, **kwargs):
        self.actions += 1
        out = what(*args, **kwargs)
        self.idle()
        return out

    def pick(self, expander, label: str, option: str) -> None:
        """Choose ``option`` in the multiselect labelled ``label`` inside ``expander`` (two actions: open the
        menu, click the option); a value not offered is typed, then Enter."""
        box = expander.locator("[data-testid='stMultiSelect']").filter(has_text=label).first
        self.act(box.click)
        offered = self.page.get_by_role("option", name=option, exact=False)
        if offered.count():
            self.act(offered.first.click)
        else:
            self.actions += 1
            self.page.keyboard.type(option)
            self.act(self.page.keyboard.press, "Enter")
        self.page.keyboard.press("Escape")

    def choose(self, expander, label: str, option: str) -> None:
        """Choose ``option`` in the selectbox labelled ``label`` inside ``expander`` (open, click)."""
        box = expander.locator("[data-testid='stSelectbox']").filter(has_text=label).first
        self.act(box.click)
        self.act(self.page.get_by_role("option", name=option, exact=False).first.click)


def column(walk: Walk, name: str):
    expander = walk.page.locator("[data-testid='stExpander']").filter(
        has=walk.page.locator("summary", has_text=f"{name}:")).first
    walk.act(expander.locator("summary").click)
    return expander


def walk_one(walk: Walk, url: str, path: Path, name: str) -> None:
    page = walk.page
    walk.act(page.goto, f"{url}/data-step")
    walk.act(page.locator(".st-key-ds_file input[type='file']").set_input_files, str(path))
    page.get_by_text("Problems (every one, at once)").wait_for(timeout=180_000)
    walk.idle()
    age = column(walk, "age")
    walk.pick(age, "Units written around", "yrs")
    walk.pick(age, "Missing codes of this column", "refused")
    walk.pick(age, "Missing codes of this column", "999")
    walk.choose(age, "A missing value becomes", "Drop the row")
    hours = column(walk, "hours_per_week")
    walk.pick(hours, "Units written around", "hrs")
    field = page.locator(".st-key-ds_name input").first
    walk.act(field.fill, name)
    walk.act(field.press, "Enter")
    if page.get_by_text("block a run", exact=False).count():
        page.screenshot(path=str(Path(tempfile.gettempdir()) / "data_step_walk.png"), full_page=True)
        raise RuntimeError(f"{path.name}: a problem still blocks a run after the fixes")
    walk.act(page.get_by_role("button", name="Save the declaration").click)
    filed = name
    same = page.locator("[data-testid='stRadio'] label", has_text="the same population as")
    if same.count():                       # the same rows in another form: filed under the first data set
        walk.act(same.first.click)
        walk.act(page.locator("button:not([disabled])", has_text="Record the answer").first.click)
        filed = "County people"
    page.get_by_text("Saved", exact=False).first.wait_for(timeout=120_000)
    walk.act(page.reload)                  # a new browser session: the data set must come back from the server
    walk.act(page.goto, f"{url}/coherence-audit")
    picker = page.locator("[data-testid='stSelectbox']").filter(has_text="Microdata").first
    walk.act(picker.click)
    offered = page.get_by_role("option", name=filed, exact=False).count()
    page.keyboard.press("Escape")
    if not offered:
        page.screenshot(path=str(Path(tempfile.gettempdir()) / "data_step_walk.png"), full_page=True)
        raise RuntimeError(f"{path.name}: the declared data set is not offered after a reload")


def main() -> int:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = exports(folder)
        db = f"sqlite:///{folder / 'project.sqlite'}"
        with dashboard_process.dashboard(folder, DASHBOARD_DB_URL=db, DASHBOARD_DATA_DIR=str(folder / "data"),
                                         DASHBOARD_CACHE_DIR=str(folder / "cache")) as url:
            token = dashboard_process.curator_token(db, "walk")
            rows = []
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                     args=["--no-sandbox", "--disable-gpu"])
                page = browser.new_page(viewport={"width": 1400, "height": 1400})
                page.context.add_cookies([{"name": "dashboard_curator", "value": token, "url": url}])
                walk = Walk(page)
                for i, path in enumerate(files):
                    before, start = walk.actions, time.perf_counter()
                    try:
                        walk_one(walk, url, path, "County people" if i == 0 else f"County people {path.suffix[1:]} {i}")
                    except Exception:
                        page.screenshot(path=str(Path(tempfile.gettempdir()) / "data_step_walk.png"), full_page=True)
                        (Path(tempfile.gettempdir()) / "data_step_walk.txt").write_text(
                            page.locator("[data-testid='stMain']").inner_text())
                        raise
                    rows.append((path.name, walk.actions - before, time.perf_counter() - start))
                browser.close()
    print(f"{'export':28} {'actions':>8} {'seconds':>8}")
    for name, actions, seconds in rows:
        print(f"{name:28} {actions:8d} {seconds:8.1f}")
    print(f"{'all four':28} {sum(r[1] for r in rows):8d} {sum(r[2] for r in rows):8.1f}  (target: under 300 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
