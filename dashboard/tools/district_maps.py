"""District maps: draw or load a plan, noise the census under an allocation, and see what happens to districts.

The page turns its widgets into one ``DistrictPlan``, calls ``core.districts.run`` (cached on the plan), and
draws the result. Display choices (plan of the ensemble, what to draw, colour) live in fragments and redraw
from the cached result without recomputing anything.
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from core.census.allocation import Allocation  # noqa: E402
from core.contracts import Cancelled, DataRef, bytes_fingerprint  # noqa: E402
from core.districts import (ALGORITHMS, GENERATORS, DistrictPlan, EnsemblePlan, ERPlan, NoiseConfig,  # noqa: E402
                            run)
from core.districts.checks import check_warning  # noqa: E402
from core.districts.display import DISPLAY_LEVELS, display_values, district_shapes  # noqa: E402
from core.districts.standards import balance_sentence  # noqa: E402
from core.uncertainty_words import rounded, with_interval  # noqa: E402
from core.districts.scorecard import (SCORECARD_HELP, SCORECARD_LABELS, compare_plans,  # noqa: E402
                                      comparison_words, error_sd_words, scorecard)
from core.districts.generators import GRID_ONLY  # noqa: E402
from core.districts.workflow import GENERATOR_CHOICES, GEOGRAPHIES, build_geography  # noqa: E402
from core.geography.assignments import plan_to_frame  # noqa: E402
from core.releases import ledger_ref, release_entry  # noqa: E402
from core.report import guarded_csv  # noqa: E402
from core.sharing import CONFIDENTIAL_MARK, confidential_geojson, is_private  # noqa: E402
from dashboard.components.budget_input import budget_input  # noqa: E402
from dashboard.components.chart_table import chart_numbers  # noqa: E402
from dashboard.components.ledger_badge import record_release  # noqa: E402
from dashboard.components.params_form import field_key, field_widget, params_widgets, plan_widget_values  # noqa: E402
from dashboard.components.progress import run_with_progress  # noqa: E402
from dashboard.components.run_estimate import run_estimate_notice  # noqa: E402
from dashboard.components.report_panel import report_panel, saved_report_loader  # noqa: E402
from dashboard.components.uploads_kept import upload_kept  # noqa: E402
from dashboard.components.wide_table import wide_table  # noqa: E402
from core.figures import districts as figs  # noqa: E402

S = "session"
SIM = "Simulation, not a release: seeded floating-point noise for illustration only."
P = "dm"                      # widget keys of the plan's own fields: dm_<field>
NOISE = field_key(P, "noise")  # ... of its noise settings: dm_noise_<field>
ENS, ER = "dm_ens", "dm_er"   # ... of the ensemble and ecological-regression sub-plans
# stable column names -> what a reader sees (units in brackets)
COLUMNS = {
    "plan": "Plan", "district": "District", "population": "True population (people)",
    "deviation_pct": "Deviation from ideal (%)", "pieces": "Pieces", "contiguous": "Contiguous",
    "balanced": "Within tolerance", "passes": "Passes checks", "mean_noisy_population": "Mean noisy population (people)",
    "mean_abs_error": "Mean absolute error (people)", "p95_abs_error": "95th percentile absolute error (people)",
    "empirical_sd": "Observed error sd (people)", "empirical_sd_low": "Observed sd, 95% low (people)",
    "empirical_sd_high": "Observed sd, 95% high (people)", "analytic_toydown_sd": "Closed-form ToyDown sd (people)",
    "balanced_on_noisy_mean_abs_dev_pct": "If balanced on noisy counts: mean true deviation (%)",
    "balanced_on_noisy_max_abs_dev_pct": "If balanced on noisy counts: worst true deviation (%)",
    "black_share_pct": "Black share (%)", "fragmentation": "Fragmentation (Def. 5)", "cut_edges": "Cut block edges",
    "polsby_popper": "Polsby-Popper compactness (0-1)", "split_counties": "Counties shared with another district",
    "districts": "Districts", "max_abs_deviation_pct": "Largest deviation from ideal (%)",
    "mean_polsby_popper": "Mean Polsby-Popper (0-1)", "mean_fragmentation": "Mean fragmentation",
    "balance_tolerance_pct": "Balance tolerance (%)", "generator": "Generator", "split": "Split",
    "mean_empirical_variance": "Mean observed error variance (people²)",
    "mean_analytic_variance": "Mean closed-form variance (people²)", "mode": "Mode", "source": "Counts used",
    "group_support": "Black voters' support (share)", "group_sd": "Black voters' support, sd over runs",
    "complement_support": "Other voters' support (share)", "complement_sd": "Other voters' support, sd over runs",
    "precincts_used": "Precincts used (mean)", "dropped_nonpositive_vap": "Precincts dropped, noisy VAP <= 0 (mean)",
}


def human(df):
    """The table with reader-facing column names."""
    return df.rename(columns={c: COLUMNS.get(c, c) for c in df.columns})


def plan_to_widgets(plan: DistrictPlan) -> dict:
    """Widget values that rebuild ``plan`` (for "Open a saved report"): the declared fields from the plans
    themselves, plus the geography, the allocation (as in the report), the switches of the sub-studies and
    the generator's Params."""
    values = plan_widget_values(plan, P)
    values.update({"dm_geo": plan.data.source, field_key(P, "grid_fanouts"): plan.grid_fanouts,  # a menu of tuples
                   "dm_alloc_src": "report", "dm_report_noise": plan.noise, "dm_er_on": plan.er is not None,
                   "dm_ens_on": plan.ensemble is not None})
    if plan.params is not None:
        for name, value in plan.params.__dict__.items():
            values[f"dm_{plan.generator}_{name}"] = value
    if plan.er is not None:
        values.update(plan_widget_values(plan.er, ER))
    if plan.ensemble is not None:
        values.update(plan_widget_values(plan.ensemble, ENS))
    return values


def sub_plan(cls, prefix: str, **fixed):
    """A sub-plan from its widgets' values in the session (drawn further down the page, in its tab), each
    field not drawn yet at its declared default; ``fixed`` overrides."""
    values = {f.name: st.session_state[field_key(prefix, f.name)] for f in dataclasses.fields(cls)
              if "label" in f.metadata and field_key(prefix, f.name) in st.session_state}
    values = {name: tuple(v) if isinstance(v, list) else v for name, v in values.items()}
    return cls(**{**values, **fixed})


st.title("District maps")
st.caption("How does a privacy-protected census change each district's population, its balance, and the "
           "racial-polarisation analyses built on it? Pick a geography, a plan and a budget allocation.")
saved_report_loader("dm", accepts=(DistrictPlan,), to_widgets=plan_to_widgets)

# ------------------------------------------------------------------------------- geography
with st.container(border=True):
    st.subheader("1. Geography")
    g1, g2 = st.columns([2, 1])
    kind = g1.radio("Geography", list(GEOGRAPHIES), format_func=GEOGRAPHIES.get, key="dm_geo", horizontal=True,
                    persist_state=S)
    geo_seed = field_widget(DistrictPlan, "geo_seed", P, container=g2, persist_state=S)
    fanouts = DistrictPlan.grid_fanouts
    geo_files: list[bytes] = []
    if kind == "grid":
        fanouts = field_widget(DistrictPlan, "grid_fanouts", P, persist_state=S)
    elif kind == "upload":
        u1, u2 = st.columns(2)
        zipped = upload_kept("Block shapefile (zipped TIGER/Line: .shp, .shx, .dbf, .prj)", "dm_tiger_zip",
                             type=["zip"], container=u1)
        counts = upload_kept("Block counts CSV (GEOID, total, vap, optional black, bvap)", "dm_pl_csv",
                             type=["csv"], container=u2)
        if zipped is None or counts is None:
            st.info("Upload both files to use your own blocks. GEOIDs must be 15-character block ids; "
                    "counties, tracts and block groups are read from their prefixes.")
            st.stop()
        geo_files = [zipped.raw, counts.raw]
        st.caption("Using your uploaded files (kept for this session; upload again to replace them).")

# ------------------------------------------------------------------------------- plan
with st.container(border=True):
    st.subheader("2. Plan")
    p1, p2, p3, p4 = st.columns(4)
    # the page starts from ReCom, which runs on every geography (a plan in a script starts from Greedy)
    generator = field_widget(DistrictPlan, "generator", P, container=p1, default="recom", persist_state=S,
                             options=[g for g in GENERATOR_CHOICES if kind == "grid" or g not in GRID_ONLY])
    k = field_widget(DistrictPlan, "k", P, container=p2, persist_state=S)
    plan_seed = field_widget(DistrictPlan, "plan_seed", P, container=p3, persist_state=S)
    tolerance = field_widget(DistrictPlan, "balance_tolerance_pct", P, container=p4, persist_state=S)
    params = None
    plan_raw = None
    if generator == "upload":
        kept_plan = upload_kept("Block-assignment CSV (columns GEOID, district)", "dm_plan_csv", type=["csv"])
        if kept_plan is None:
            st.info("Upload a plan: one row per block with its GEOID and district. The export below writes "
                    "this format.")
            st.stop()
        plan_raw = kept_plan.raw
    else:
        spec = GENERATORS[generator]
        st.caption(spec.help)
        if generator in GRID_ONLY:
            st.caption("Greedy and Square balance the number of blocks, not people (as in the paper's §6), so "
                       "they usually fail the balance check; they are here to compare fragmentation and error.")
        try:
            params = params_widgets(spec, "dm", container=st, persist_state=S)
        except ValueError as exc:
            st.error(str(exc))
            st.stop()

# ------------------------------------------------------------------------------- allocation and noise
data = tuple(geo_files + ([plan_raw] if plan_raw else [])) or None
ref = DataRef(kind, bytes_fingerprint(*data)) if data else DataRef(kind)
try:
    with st.spinner("Loading the geography (built once, then cached)"):
        geo = build_geography(kind, fanouts, geo_seed, tuple(geo_files))
except ValueError as exc:
    st.error(str(exc))
    st.stop()
levels = geo.hierarchy.level_names
n_cty = geo.blocks["county"].nunique()
st.caption(f"{'Your blocks' if kind == 'upload' else geo.name}: {len(geo.blocks):,} blocks in {n_cty} {'county' if n_cty == 1 else 'counties'}, total "
           f"population {int(geo.blocks['total'].sum()):,}."
           + (" Counties are real; **tracts, block groups, blocks and precincts are synthetic**."
              if kind == "georgia" else " Populations and group shares are synthetic." if kind == "grid" else ""))

with st.container(border=True):
    st.subheader("3. Allocation and noise")
    sources = {"choose": "Choose here", "file": "Load a Budget page export (JSON)"}
    if st.session_state.get("census_allocation_json"):
        sources["session"] = "Use the Budget page's allocation from this session"
    if st.session_state.get("dm_report_noise") is not None:
        sources["report"] = "As in the opened report"
    src = st.radio("Allocation", list(sources), format_func=sources.get, key="dm_alloc_src", horizontal=True,
                   persist_state=S)
    try:
        if src == "choose":
            alloc = budget_input("dm_budget", levels, allow_optimise=False).allocation(levels)
        elif src == "file":
            alloc_file = upload_kept("Allocation JSON from the Budget allocation page", "dm_alloc_json",
                                     type=["json"])
            if alloc_file is None:
                st.info("Load the JSON the Budget allocation page downloads; until then the equal split of "
                        "epsilon 1 is used.")
                alloc = Allocation(levels, tuple([1.0 / len(levels)] * len(levels)), "epsilon", "laplace")
            else:
                alloc = Allocation.from_json(alloc_file.raw, levels)
        elif src == "session":
            alloc = Allocation.from_json(st.session_state["census_allocation_json"], levels)
        else:
            saved = st.session_state["dm_report_noise"]
            alloc = Allocation(levels, saved.budgets, "epsilon", saved.mechanism, saved.sensitivity)
    except ValueError as exc:
        st.error(str(exc))
        st.stop()
    st.caption("Budgets per level: " + ", ".join(f"{n} {b:.4g}" for n, b in zip(alloc.level_names, alloc.budgets))
               + f" ({alloc.unit}, {alloc.mechanism}, sensitivity {alloc.sensitivity:g}; total {alloc.total:.4g}).")
    n1, n2, n3, n4 = st.columns(4)
    algorithm = field_widget(NoiseConfig, "algorithm", NOISE, container=n1, persist_state=S)
    runs = field_widget(NoiseConfig, "runs", NOISE, container=n2, persist_state=S)
    noise_seed = field_widget(NoiseConfig, "seed", NOISE, container=n3, persist_state=S)
    er_on = n4.toggle("Ecological regression", False, key="dm_er_on", persist_state=S,
                      help="A synthetic election on synthetic precincts, regressed on true and noisy counts.")

# the sub-studies' widgets sit in their tabs below the result; their plans come from the session
ens_on = st.session_state.get("dm_ens_on", False)
ensemble = None
if ens_on:
    try:
        ensemble = sub_plan(EnsemblePlan, ENS, **({} if kind == "grid" else {"n_square": 0}))
    except ValueError as exc:
        st.error(str(exc))
er = sub_plan(ERPlan, ER) if er_on else None
try:
    plan = DistrictPlan(data=ref, grid_fanouts=tuple(fanouts), geo_seed=geo_seed, generator=generator, params=params,
                        k=k, plan_seed=plan_seed, balance_tolerance_pct=tolerance,
                        noise=NoiseConfig(alloc.budgets, alloc.mechanism, alloc.sensitivity, algorithm, runs,
                                          noise_seed),
                        ensemble=ensemble, er=er)
    st.session_state["dm_plan"] = plan
    if not run_estimate_notice(plan, data, key="dm_estimate", run=run):
        st.stop()
    result = run_with_progress(run, plan, data, label="Drawing plans and noisy runs", cancel_key="dm_cancel")
    if ledger_ref(plan) is not None:   # the seeded noisy runs: listed apart in the project ledger, never counted
        record_release(release_entry(plan, "District maps", "seeded noisy runs",
                                     f"{ALGORITHMS[plan.noise.algorithm].label}, {plan.noise.runs} seeded noisy runs, "
                                     f"{alloc.mechanism} at {alloc.unit} {alloc.total:g} (simulation)",
                                     alloc.ledger(), kind="simulation"))
except Cancelled:
    st.info("Drawing the plans was cancelled; your settings are kept. Change one, or rerun to start again.")
    st.stop()
except ValueError as exc:
    st.error(str(exc))
    st.stop()

# ------------------------------------------------------------------------------- results
head = result.headline()
n_plans, n_passing = int(head["plans"]), int(head["plans_passing_checks"])
if n_passing < n_plans:
    st.warning(f"{n_plans - n_passing} of {n_plans} plan(s) fail the checks (contiguity, and balance within "
               f"{tolerance:g}%). Look at the verdict per district below before using them.")
st.caption(SIM)
# at most three metrics a row and two for the longest labels, so no label is cut short
m = st.columns(3) + st.columns(2)
m[0].metric("Districts", int(head["districts"]))
m[1].metric("Largest true deviation (plan 1)", f"{head['largest_true_deviation_pct']:.2f}%",
            help="Largest gap between a district's true population and the ideal, in percent of the ideal.")
m[2].metric("Plans passing the checks", f"{n_passing} of {n_plans}",
            help="Plans whose districts are each one piece and within the balance tolerance.")
err_low, err_high = result.mean_abs_error_interval(1)
m[3].metric("Mean absolute district error (people)", rounded(head["mean_abs_district_error"], err_low, err_high),
            help="Mean over plan 1's districts and the noisy runs of |noisy population - true population|, rounded "
                 f"to what its 95% interval over the runs supports: {with_interval(head['mean_abs_district_error'], err_low, err_high, 'people')}.")
m[4].metric("Worst deviation if balanced on noisy counts", f"{head['worst_deviation_if_balanced_on_noisy_pct']:.3f}%",
            help="Had plan 1 been balanced exactly on the noisy counts: its largest true deviation over the runs.")
if ALGORITHMS[algorithm].closed_form_note:
    st.caption(ALGORITHMS[algorithm].closed_form_note)


# Map views stay cached on the page: core caches the run, not these drawings of its result (GeoJSON of
# the units, the units' view of one plan, district outlines), which a display change would redo.
@st.cache_resource(max_entries=32, show_spinner=False)
def unit_geojson(geo_key: str, level: str, county: str | None, _units, tolerance_m: float) -> dict:
    return figs.map_geojson(_units, "unit_id", tolerance_m)


@st.cache_resource(max_entries=32, show_spinner=False)
def units_view(plan_digest: str, plan_no: int, display: str, county: str | None, _geo, _labels, _table, _error):
    return display_values(_geo, display, _labels, _table, _error, county)


@st.cache_resource(max_entries=32, show_spinner=False)
def outlines(plan_digest: str, plan_no: int, _geo, _labels, _table):
    shapes = district_shapes(_geo, _labels, _table)
    return shapes, figs.map_geojson(shapes, "district", 150.0)


def scorecard_table(card, key: str, narrow: bool = True) -> None:
    """A scorecard with its labels, a help text on each column (no cut labels) and numbers to the precision
    they carry: the error sd, measured over a few noisy runs, rounded to its 95% interval and shown with it;
    in a side column it says that it scrolls sideways."""
    fmt = {"deviation": "%.0f", "deviation_pct": "%.2f", "polsby_popper": "%.3f", "minority_share_pct": "%.1f"}
    card = card.drop(columns=["error_sd_low", "error_sd_high"]).assign(error_sd=error_sd_words(card))
    config = {SCORECARD_LABELS[c]: st.column_config.NumberColumn(SCORECARD_LABELS[c], format=fmt.get(c),
                                                                 help=SCORECARD_HELP.get(c))
              for c in card.columns if c not in ("district", "error_sd")}
    config[SCORECARD_LABELS["error_sd"]] = st.column_config.TextColumn(
        SCORECARD_LABELS["error_sd"] + ", 95% interval", help=SCORECARD_HELP["error_sd"] + " In brackets: its "
        "chi-square 95% interval (few runs give a wide one).")
    wide_table(card.rename(columns=SCORECARD_LABELS), key=key, narrow=narrow, column_config=config)


tab_map, tab_ens, tab_er, tab_exp = st.tabs(["Map and districts", "Ensemble error", "Ecological regression",
                                             "Export"])


@st.fragment
def map_panel(result, geo, kind: str) -> None:
    """Plan of the ensemble, what to draw and the colour: display-only choices, redrawn from the cached result."""
    n = result.labels.shape[0]
    c0, c1, c2, c3 = st.columns(4)
    plan_no = int(c0.number_input("Plan of the ensemble shown", 1, n, 1, key="dm_plan_no", persist_state=S,
                                  disabled=n == 1)) if n > 1 else 1
    if kind != "grid":
        displays = ["tract", "county", "block"]
    else:  # tens of thousands of blocks are too many polygons for the browser
        displays = ["block group", "block", "tract"]
    names = {**DISPLAY_LEVELS, "block": "blocks of one county" if kind != "grid" else "blocks"}
    display = c1.selectbox("Draw", displays, format_func=names.get, key=f"dm_display_{kind}", persist_state=S)
    colour = c2.selectbox("Colour by", list(figs.COLOUR_BY), key="dm_colour", persist_state=S,
                          format_func=lambda c: figs.COLOUR_BY[c][1])
    county = None
    if display == "block" and kind != "grid":
        cty_ids = sorted(geo.blocks["county"].unique())
        names_by_id = geo.counties.set_index("GEOID")["NAME"] if "NAME" in geo.counties else {}
        biggest = geo.blocks.groupby("county")["total"].sum().idxmax()
        county = c3.selectbox("County", cty_ids, index=cty_ids.index(biggest), key="dm_county", persist_state=S,
                              format_func=lambda c: f"{names_by_id.get(c, c)} ({c})")
    labels = result.labels[plan_no - 1]
    table = result.plan_districts(plan_no)
    verdict = result.verdict(plan_no)
    tolerance = result.plan.balance_tolerance_pct
    standard = balance_sentence(tolerance, float(table["population"].sum()) / max(len(table), 1))
    warning = check_warning(verdict, tolerance)
    if warning:
        st.warning(f"{warning} The balance check: {standard}. Use the plan only if that is what you intend.")
    else:
        st.success(f"Plan {plan_no} passes: every district is one piece and {standard}.")
    shapes, outline_gj = outlines(result.plan.digest(), plan_no, geo, labels, table)
    units = units_view(result.plan.digest(), plan_no, display, county, geo, labels, table, result.block_mean_error)
    tol_m = {"county": 400.0, "tract": 400.0, "block group": 40.0, "block": 5.0}[display]
    # unit outlines depend on the geography alone, so every plan and colour reuses them
    gj = unit_geojson(f"{result.plan.data}:{result.plan.grid_fanouts}:{result.plan.geo_seed}", display, county,
                      units, tol_m)
    shown = shapes if county is None else shapes[shapes["district"].isin(units["district"].unique())]
    title = f"Plan {plan_no}: {len(table)} districts over {len(units):,} {DISPLAY_LEVELS[display]}"
    map_col, card_col = st.columns([3, 2])
    map_col.plotly_chart(figs.plan_map(units, gj, shown, outline_gj, colour, title), key="dm_map")
    chart_numbers(units.drop(columns="geometry")[["unit_id", "district", figs.COLOUR_BY[colour][0]]]
                  .rename(columns={"unit_id": "Unit", "district": "District",
                                   figs.COLOUR_BY[colour][0]: figs.COLOUR_BY[colour][1]}),
                  key="dm_map_numbers", what="the map", container=map_col)
    if display != "block":
        map_col.caption(f"Each unit is drawn with the district holding most of its population; "
                        f"{int(units['split'].sum())} of {len(units)} {DISPLAY_LEVELS[display]} are split between "
                        "districts. Each district's number is drawn inside it; choose blocks for exact lines.")
    with card_col:
        st.markdown(f"**Scorecard of plan {plan_no}**")
        scorecard_table(scorecard(table), f"dm_scorecard_{plan_no}")
    if n > 1:
        other = int(st.number_input("Compare side by side with plan", 1, n, 2 if plan_no == 1 else 1,
                                    key="dm_compare_no", persist_state=S))
        if other != plan_no:
            card_a, card_b = scorecard(table), scorecard(result.plan_districts(other))
            names = (f"plan {plan_no}", f"plan {other}")
            both = compare_plans(result.districts, result.runs, plan_no, other, result.plan.noise.seed, names)
            st.dataframe(comparison_words(both, names), hide_index=True, key="dm_scorecard_compare",
                         column_config={"measure": st.column_config.TextColumn("Measure", width="medium")})
            other_table = result.plan_districts(other)
            other_shapes, other_gj = outlines(result.plan.digest(), other, geo, result.labels[other - 1], other_table)
            other_units = units_view(result.plan.digest(), other, display, county, geo, result.labels[other - 1],
                                     other_table, result.block_mean_error)
            if county is not None:
                other_shapes = other_shapes[other_shapes["district"].isin(other_units["district"].unique())]
            shared = figs.colour_range([units, other_units], colour)
            left, right = st.columns(2)
            for col, no, shp, sgj, unt, card in ((left, plan_no, shown, outline_gj, units, card_a),
                                                 (right, other, other_shapes, other_gj, other_units, card_b)):
                with col:
                    st.plotly_chart(figs.plan_map(unt, gj, shp, sgj, colour, f"Plan {no}", fit_px=(400, 400),
                                                  height=520, zrange=shared), key=f"dm_map_side_{'ab'[col is right]}")
                    scorecard_table(card, f"dm_scorecard_{'ab'[col is right]}")
            st.caption("Both maps use one colour scale, so a colour means the same value on each. The noisy-count "
                       f"error is measured over {int(result.runs['run'].nunique())} seeded runs: it is rounded to "
                       "what its 95% interval supports, the interval in brackets (a paired bootstrap over the runs, which "
                       "serve both plans; chi-square per district). "
                       "District numbers of two plans name different areas, so the plans compare as wholes "
                       "(the first table); each plan's own districts are below it.")
    cols = ["district", "population", "deviation_pct", "pieces", "contiguous", "balanced", "passes",
            "mean_noisy_population", "mean_abs_error", "p95_abs_error", "empirical_sd", "empirical_sd_low",
            "empirical_sd_high", "analytic_toydown_sd", "balanced_on_noisy_mean_abs_dev_pct",
            "balanced_on_noisy_max_abs_dev_pct", "black_share_pct", "fragmentation", "cut_edges", "polsby_popper",
            "split_counties"]
    st.markdown("**Every district's numbers**")
    # people to the person (the errors come from a few runs: their spread is the sd's interval beside them),
    # shares to two decimals, compactness to three
    formats = {**dict.fromkeys(("mean_noisy_population", "mean_abs_error", "p95_abs_error", "empirical_sd",
                                "empirical_sd_low", "empirical_sd_high", "analytic_toydown_sd"), "%.0f"),
               **dict.fromkeys(("deviation_pct", "black_share_pct", "balanced_on_noisy_mean_abs_dev_pct",
                                "balanced_on_noisy_max_abs_dev_pct"), "%.2f"), "polsby_popper": "%.3f"}
    wide_table(human(table[cols]), key="dm_table",
               column_config={COLUMNS[c]: st.column_config.NumberColumn(format=f) for c, f in formats.items()})
    st.caption("If balanced on noisy counts: had the plan been drawn so that every district's noisy count were "
               "exactly the noisy ideal, its true population would differ from the true ideal by this much "
               "(mean and worst over the runs).")
    st.plotly_chart(figs.district_error_figure(table), key="dm_error_fig")
    if n > 1:
        st.markdown("**Every plan of the ensemble**")
        wide_table(human(result.plans), key="dm_plans_table")


with tab_map:
    map_panel(result, geo, kind)

# ------------------------------------------------------------------------------- ensemble
with tab_ens:
    st.caption("Districts from several generators are noised together under several splits of the same total "
               "budget (Figures 4 and 6 analogues of Cohen et al. 2021). Every noisy run of the whole hierarchy "
               "serves every district at once.")
    e1, e2, e3 = st.columns(3)
    field_widget(EnsemblePlan, "splits", ENS, container=e1, persist_state=S)
    field_widget(EnsemblePlan, "runs", ENS, container=e2, persist_state=S)
    field_widget(EnsemblePlan, "n_square", ENS, container=e3, disabled=kind != "grid", persist_state=S)
    units_here = ["tract", "block group", "block"] if kind == "grid" else ["county", "tract", "block group"]
    field_widget(EnsemblePlan, "recom_units", ENS, options=units_here, persist_state=S)
    d1, d2 = st.columns([3, 1])
    field_widget(EnsemblePlan, "disconn_units", ENS, container=d1, persist_state=S)
    field_widget(EnsemblePlan, "n_disconn", ENS, container=d2, persist_state=S)
    st.toggle("Include the ensemble study in the plan", key="dm_ens_on", persist_state=S,
              help="Runs once for these settings, then comes from the cache.")
    if result.ensemble is None:
        st.info("Switch on **Include the ensemble study** to noise every district of the ensemble"
                + (" together with Greedy plans and random Square districts" if kind == "grid" else "") + ".")
    else:
        for name, why in result.skipped.items():
            st.warning(f"{name} left out: {why}")
        st.caption(SIM)
        study = result.ensemble
        st.plotly_chart(figs.ensemble_histogram(study), key="dm_ens_hist")
        f1, f2 = st.columns(2)
        f1.plotly_chart(figs.fragmentation_histogram(study), key="dm_frag_hist")
        f2.plotly_chart(figs.fragmentation_variance_figure(study, alloc.sensitivity, alloc.noise.fragmentation_line),
                        key="dm_frag_var")
        chart_numbers(human(study), key="dm_ens_numbers", what="the ensemble charts")
        st.dataframe(human(result.tables()["ensemble_summary"]), hide_index=True, key="dm_ens_table")

# ------------------------------------------------------------------------------- ecological regression
with tab_er:
    st.caption("**Synthetic election on synthetic precincts** (not real returns): a candidate gets a set share "
               "of Black and of other voters' votes. Ecological regression of vote share on Black share of the "
               "voting-age population, on true and on noisy (Black VAP, other VAP) counts; votes stay exact.")
    r1, r2, r3 = st.columns(3)
    field_widget(ERPlan, "group_support", ER, container=r1, persist_state=S)
    field_widget(ERPlan, "other_support", ER, container=r2, persist_state=S)

    @st.fragment
    def er_panel(er_result) -> None:
        mode = st.selectbox("Mode", ["all", "filtered", "weighted"], key="dm_er_mode", persist_state=S,
                            format_func={"all": "all precincts", "filtered": "filtered (fewer than 10 votes dropped)",
                                         "weighted": "weighted by votes"}.get)
        st.plotly_chart(figs.er_scatter(er_result.precincts, er_result.estimates, er_result.noisy_shares, mode),
                        key="dm_er_scatter")
        chart_numbers(er_result.precincts, key="dm_er_scatter_numbers", what="the scatter")
        st.plotly_chart(figs.er_histogram(er_result.estimates, er_result.true_support), key="dm_er_hist")
        chart_numbers(er_result.estimates, key="dm_er_hist_numbers", what="the histogram")
        st.dataframe(human(result.tables()["ecological_summary"]), hide_index=True, key="dm_er_table")
        small = int((er_result.precincts["votes"] < 10).sum())
        st.caption(f"{len(er_result.precincts):,} precincts, {small:,} with fewer than 10 votes. Naive Gaussian "
                   f"baseline: independent noise of sd {er_result.true_support['naive_sigma']:.2f} on each precinct "
                   f"count, matching the noisy runs' mean precinct L1 error "
                   f"({er_result.true_support['mean_l1_error']:,.0f}). {SIM}")

    if result.er is None:
        r3.caption("Switch on **Ecological regression** in section 3 to run it.")
    else:
        er_panel(result.er)

# ------------------------------------------------------------------------------- export
with tab_exp:
    report_panel(result, page="District maps", key="dm_report", extra={"simulation": SIM})
    x1, x2 = st.columns(2)
    x1.download_button("Plan 1 as block-assignment CSV",
                       guarded_csv(plan_to_frame(result.geoids, result.labels[0]), index=False),
                       file_name="plan.csv", mime="text/csv", key="dm_dl_plan")
    shapes, _ = outlines(result.plan.digest(), 1, geo, result.labels[0], result.plan_districts(1))
    if is_private(result.plan):    # head counts and errors of the curator's own blocks: confidential, marked
        x2.download_button("Confidential: plan 1 districts with results (GeoJSON)",
                           confidential_geojson(shapes.to_json(drop_id=True)), file_name="districts_confidential.geojson",
                           mime="application/geo+json", key="dm_dl_geojson", help=CONFIDENTIAL_MARK)
    else:
        x2.download_button("Plan 1 districts with results (GeoJSON)", shapes.to_json(drop_id=True),
                           file_name="districts.geojson", mime="application/geo+json", key="dm_dl_geojson")
