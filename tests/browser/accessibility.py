"""axe-core in the browser test: injected from the npm package under tests/browser/node_modules (installed
by `make axe`), so a page is checked offline, and only critical and serious findings fail a test."""
from __future__ import annotations

from pathlib import Path

AXE_JS = Path(__file__).resolve().parent / "node_modules" / "axe-core" / "axe.min.js"
FAILING_IMPACTS = ("critical", "serious")
# Findings in Streamlit's own sidebar navigation, which no page can change: it wraps each <li> in a <div>
# inside its <ul>. Only these rules, and only when every element they name is in that navigation, pass.
FRAMEWORK_RULES = ("list", "listitem")
MISSING_AXE = (f"axe-core is not installed at {AXE_JS}: run `make axe` (npm ci --prefix tests/browser) "
               "before the browser test")

# The page's own document; each finding with the elements it names, shortened for a test message.
_RUN = """async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => {
      const el = n.target.length === 1 ? document.querySelector(n.target[0]) : null;
      return {target: n.target.join(' '), html: n.html.slice(0, 160),
              summary: (n.failureSummary || '').slice(0, 300),
              sidebar_nav: !!(el && el.closest("[data-testid='stSidebarNav']"))};
    })}));
}"""


def axe_violations(page, impacts: tuple[str, ...] = FAILING_IMPACTS) -> list[dict]:
    """The axe-core violations of the page as drawn now, those of the given impacts only."""
    if not AXE_JS.exists():
        raise FileNotFoundError(MISSING_AXE)
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE_JS))
    found = [v for v in page.evaluate(_RUN) if v["impact"] in impacts]
    return [v for v in found if not _framework_only(v)]


def _framework_only(violation: dict) -> bool:
    """True when a finding is one of FRAMEWORK_RULES and every element it names is in the sidebar navigation."""
    return violation["id"] in FRAMEWORK_RULES and all(n["sidebar_nav"] for n in violation["nodes"])


def describe(violations: list[dict], limit: int = 3) -> str:
    """One line per violation: its rule, impact, help text and the first elements it names."""
    lines = []
    for v in violations:
        where = "; ".join(f"{n['target']} ({n['html']})" for n in v["nodes"][:limit])
        lines.append(f"{v['id']} [{v['impact']}] {v['help']}: {len(v['nodes'])} element(s): {where}")
    return "\n".join(lines)


TAB = "[role='tab']"


def tab_findings(page, where: str) -> list[str]:
    """axe-core's serious findings on every tab of the page as it is now (each opened in turn and left to
    finish), one entry per tab that has any: a board member clicks past the first tab too."""
    from tests.browser.dashboard_server import wait_until_idle

    failures = []
    tabs = page.locator(TAB)
    names = [tabs.nth(i).inner_text().strip() for i in range(tabs.count())]
    for i, name in enumerate(names):
        tab = page.locator(TAB).nth(i)
        if not tab.is_visible():            # a tab list inside a tab not open now is checked with its parent
            continue
        tab.click()
        wait_until_idle(page, timeout_ms=120_000, settle_ms=500)
        if found := axe_violations(page):
            failures.append(f"{where}, tab {name!r}:\n{describe(found)}")
    return failures
