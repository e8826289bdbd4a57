"""District maps: draw or load a plan, noise the census under an allocation, and see what happens to districts."""
from __future__ import annotations

import hashlib
import io
import sys
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import streamlit as st  # noqa: E402

from core.cache import config_digest  # noqa: E402
from core.census.allocation import Allocation  # noqa: E402
from core.census.analytic import PRESETS  # noqa: E402
from core.districts.ecological import ecological_study  # noqa: E402
from core.geography.blocks import load_georgia_blocks  # noqa: E402
from core.geography.grid import synthetic_grid  # noqa: E402
from core.districts.noise import ALGORITHMS, NoiseConfig, ensemble_study  # noqa: E402
from core.geography.assignments import plan_from_csv, plan_to_frame  # noqa: E402
from core.districts.study import (EXACT_MAX_PLANS, EXACT_MAX_UNITS, GENERATORS, UNIT_LABELS,  # noqa: E402
                                  PlanConfig, display_values, district_shapes, district_table,
                                  ensemble_generators, ensemble_metrics, make_plans)
from core.districts.uploads import load_uploaded_blocks  # noqa: E402
from dashboard.components.budget_input import budget_input  # noqa: E402
from dashboard.components.export import export_panel  # noqa: E402
from dashboard.components.progress import progress_bar, session_memo  # noqa: E402
from dashboard.figures import districts as figs  # noqa: E402

SIM = "Simulation, not a release: seeded floating-point noise for illustration only."
GRIDS = {"(64, 4, 16)": (64, 4, 16), "(16, 4, 16)": (16, 4, 16), "(484, 4, 25) Dallas-like": (484, 4, 25)}
GEO_LABELS = {"georgia": "Georgia (real counties, synthetic tracts and blocks)",
              "grid": "Synthetic square-grid county (paper §6)", "upload": "My TIGER/Line + PL 94-171 files"}



@st.cache_resource(show_spinner="Loading the Georgia block geography")
def _georgia(seed: int):
    return load_georgia_blocks(seed=seed)


@st.cache_resource(show_spinner="Building the grid county")
def _grid(fanouts: tuple[int, ...], seed: int):
    return synthetic_grid(fanouts, seed=seed)


@st.cache_resource(show_spinner="Reading your block files", max_entries=4)
def _uploaded(digest: str, _zip: bytes, _csv: bytes):
    return load_uploaded_blocks(io.BytesIO(_zip), io.BytesIO(_csv))


@st.cache_resource(max_entries=24)
def _unit_geojson(geo_key: str, level: str, county: str | None, _units, tolerance: float) -> dict:
    return figs.map_geojson(_units, "unit_id", tolerance)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


st.title("District maps")
st.caption("How does a privacy-protected census change each district's population, its balance, and the "
           "racial-polarisation analyses built on it? Pick a geography, a plan and a budget allocation.")

# ------------------------------------------------------------------------------- geography
with st.container(border=True):
    st.subheader("1. Geography")
    g1, g2 = st.columns([2, 1])
    kind = g1.radio("Geography", list(GEO_LABELS), format_func=GEO_LABELS.get, key="dm_geo", horizontal=True)
    geo_seed = int(g2.number_input("Geography seed", 0, 10_000, 0, key="dm_geo_seed",
                                   help="Seed of the synthetic units below the county (or of the grid)."))
    try:
        if kind == "georgia":
            geo = _georgia(geo_seed)
            geo_key = f"georgia:{geo_seed}"
            st.caption("Counties (boundaries, 1990 population and % Black) are real. **Tracts, block groups, blocks "
                       "and precincts are synthetic**: Voronoi cells in each county with spatially correlated "
                       f"populations that add up exactly to the county's. {len(geo.blocks):,} blocks, "
                       f"{len(geo.units('tract')):,} tracts, {len(geo.counties)} counties.")
        elif kind == "grid":
            gname = st.selectbox("Fan-outs (tracts, block groups per tract, blocks per block group)", list(GRIDS),
                                 key="dm_grid")
            geo = _grid(GRIDS[gname], geo_seed)
            geo_key = f"grid:{GRIDS[gname]}:{geo_seed}"
            side = int(geo.blocks["row"].max()) + 1
            st.caption(f"Synthetic county on a {side} x {side} block grid (Cohen et al. 2021, §6): every unit is a "
                       f"square split into smaller squares; populations and the group share are smooth random "
                       f"fields (synthetic). {len(geo.blocks):,} blocks, total {int(geo.blocks['total'].sum()):,}.")
        else:
            u1, u2 = st.columns(2)
            zfile = u1.file_uploader("Block shapefile (zipped TIGER/Line: .shp, .shx, .dbf, .prj)", type=["zip"],
                                     key="dm_tiger_zip")
            cfile = u2.file_uploader("Block counts CSV (GEOID, total, vap, optional black, bvap)", type=["csv"],
                                     key="dm_pl_csv")
            if zfile is None or cfile is None:
                st.info("Upload both files to use your own blocks. GEOIDs must be 15-character block ids; "
                        "counties, tracts and block groups are read from their prefixes.")
                st.stop()
            zb, cb = zfile.getvalue(), cfile.getvalue()
            geo_key = f"upload:{_sha(zb)}:{_sha(cb)}"
            geo = _uploaded(geo_key, zb, cb)
            n_cty = geo.blocks["county"].nunique()
            st.caption(f"Your blocks: {len(geo.blocks):,} blocks in {n_cty} {'county' if n_cty == 1 else 'counties'}, "
                       f"total population {int(geo.blocks['total'].sum()):,}. Precincts are taken as block groups.")
    except ValueError as exc:
        st.error(str(exc))
        st.stop()
    h = geo.hierarchy

# ------------------------------------------------------------------------------- plan
with st.container(border=True):
    st.subheader("2. Plan")
    gens = ["recom", "csv"] if kind != "grid" else ["greedy", "square", "recom", "exact", "csv"]
    p1, p2, p3 = st.columns(3)
    generator = p1.selectbox("Plan generator", gens, format_func=GENERATORS.get, key=f"dm_gen_{kind}")
    k = int(p2.number_input("Districts (k)", 2, 400, 14 if kind == "georgia" else 4, key=f"dm_k_{kind}",
                            help="Georgia: 14 congressional-size districts. Grid and uploads: 4, like the "
                                 "county-commission districts of the paper."))
    plan_seed = int(p3.number_input("Plan seed", 0, 1_000_000, 0, key="dm_plan_seed"))
    unit_options = ["tract", "county", "block group"] if kind != "grid" else ["tract", "block group", "block"]
    unit, tol, steps, thin = "tract", 0.05, 40, 10
    if generator in ("recom", "exact"):
        r1, r2, r3, r4 = st.columns(4)
        unit = r1.selectbox("Building unit", unit_options, format_func=UNIT_LABELS.get, key=f"dm_unit_{kind}")
        tol = r2.number_input("Population tolerance (%)", 0.5, 40.0, 20.0 if generator == "exact" else 5.0, 0.5,
                              key=f"dm_tol_{generator}") / 100
    if generator == "exact":
        st.caption(f"Every contiguous plan of the building units within the tolerance, listed exactly (up to "
                   f"{EXACT_MAX_PLANS:,} plans, {EXACT_MAX_UNITS} units): the whole plan space of a tiny map, "
                   "for example the 16 tracts of the (16, 4, 16) grid.")
    elif generator == "recom":
        steps = int(r3.number_input("ReCom steps", 1, 20_000, 40, 10, key="dm_steps",
                                    help="Chains are cached on disk; 1,000 steps on Georgia's tracts take about 10 s."))
        thin = int(r4.number_input("Keep one plan every (steps)", 1, 10_000, 10, key="dm_thin"))
    elif generator == "greedy":
        steps = 10 * int(st.number_input("Greedy plans (random label offsets; the first starts at label 0)",
                                         1, 50, 4, key="dm_greedy_n"))
    if generator in ("greedy", "square"):
        st.caption("Greedy and Square balance the number of blocks, not people (as in the paper's §6), so their "
                   "population deviations are large; they are here to compare fragmentation and error.")
    plan_cfg = PlanConfig(generator, unit, k, float(tol), steps, thin, plan_seed)
    try:
        if generator == "csv":
            pfile = st.file_uploader("Block-assignment CSV (columns GEOID, district)", type=["csv"], key="dm_plan_csv")
            if pfile is None:
                st.info("Upload a plan: one row per block with its GEOID and district. The export below writes "
                        "this format.")
                st.stop()
            plans = plan_from_csv(io.BytesIO(pfile.getvalue()), geo.blocks["GEOID"].to_numpy())[None, :]
            plan_key = f"{geo_key}:csv:{_sha(pfile.getvalue())}"
        else:
            plan_key = f"{geo_key}:{config_digest(plan_cfg)}"
            plans = session_memo("dm_plans", plan_key, lambda progress: make_plans(geo, plan_cfg, progress),
                          "Drawing plans")
    except ValueError as exc:
        st.error(str(exc))
        st.stop()
    if plans.shape[0] > 1:
        plan_idx = int(st.slider("Plan of the ensemble shown", 1, plans.shape[0], plans.shape[0],
                                 key="dm_plan_idx")) - 1
    else:
        plan_idx = 0
    labels = plans[min(plan_idx, plans.shape[0] - 1)]
    st.caption(f"{plans.shape[0]} plan(s) of {int(labels.max()) + 1} districts; showing plan {plan_idx + 1}.")

# ------------------------------------------------------------------------------- allocation and noise
with st.container(border=True):
    st.subheader("3. Allocation and noise")
    sources = {"choose": "Choose here", "file": "Load a Budget page export (JSON)"}
    if st.session_state.get("census_allocation_json"):
        sources["session"] = "Use the Budget page's allocation from this session"
    src = st.radio("Allocation", list(sources), format_func=sources.get, key="dm_alloc_src", horizontal=True)
    try:
        if src == "choose":
            alloc = budget_input("dm_budget", h.level_names, allow_optimise=False).allocation(h.level_names)
        elif src == "file":
            afile = st.file_uploader("Allocation JSON from the Budget allocation page", type=["json"],
                                     key="dm_alloc_json")
            if afile is None:
                st.info("Load the JSON the Budget allocation page downloads; until then the equal split of "
                        "epsilon 1 is used.")
                alloc = Allocation(h.level_names, tuple(np.full(h.depth, 1.0 / h.depth)), "epsilon", "laplace")
            else:
                alloc = Allocation.from_json(afile.getvalue(), h.level_names)
        else:
            alloc = Allocation.from_json(st.session_state["census_allocation_json"], h.level_names)
    except ValueError as exc:
        st.error(str(exc))
        st.stop()
    st.caption("Budgets per level: " + ", ".join(f"{n} {b:.4g}" for n, b in zip(alloc.level_names, alloc.budgets))
               + f" ({alloc.unit}, {alloc.mechanism}, sensitivity {alloc.sensitivity:g}; total {alloc.total:.4g}).")
    n1, n2, n3 = st.columns(3)
    algorithm = n1.selectbox("Noising algorithm", list(ALGORITHMS), format_func=ALGORITHMS.get, key="dm_algo")
    runs = int(n2.number_input("Runs", 2, 1000, 16, key="dm_runs", help="The paper uses 16 runs."))
    noise_seed = int(n3.number_input("Noise seed", 0, 1_000_000, 0, key="dm_noise_seed"))
    try:
        noise_cfg = NoiseConfig(alloc.budgets, alloc.mechanism, alloc.sensitivity, algorithm, runs, noise_seed)
        run_key = f"{plan_key}:{plan_idx}:{config_digest(noise_cfg)}"
        result = session_memo("dm_results", run_key, lambda progress: district_table(geo, labels, noise_cfg, progress),
                       "Noisy runs")
    except ValueError as exc:
        st.error(str(exc))
        st.stop()

table = result.table
st.caption(SIM)
m = st.columns(5)
m[0].metric("Districts", len(table))
m[1].metric("Largest true deviation", f"{table['deviation_pct'].abs().max():.2f}%")
m[2].metric("Mean |E_D| (people)", f"{table['mean_abs_error'].mean():.1f}")
m[3].metric("Worst deviation if balanced on noisy counts", f"{table['balanced_on_noisy_max_abs_dev_pct'].max():.3f}%")
m[4].metric("Cut edges (blocks)", f"{int(table['cut_edges'].sum() // 2):,}")
if algorithm != "toydown":
    st.caption("The analytic sd is the closed form for plain ToyDown (Cor. 3); non-negativity, rounding and "
               "TopDown-lite's fitting move the observed errors away from it.")

tab_map, tab_ens, tab_er, tab_exp = st.tabs(["Map and districts", "Ensemble error", "Ecological regression",
                                             "Export"])

# ------------------------------------------------------------------------------- map
with tab_map:
    c1, c2, c3 = st.columns(3)
    if kind != "grid":
        displays = ["tract", "county", "block"]
    else:  # tens of thousands of blocks are too many polygons for the browser
        displays = ["block", "block group", "tract"] if len(geo.blocks) <= 10_000 else ["block group", "tract", "block"]
    disp_names = {"tract": "tracts (statewide)" if kind == "georgia" else "tracts", "county": "counties",
                  "block group": "block groups", "block": "blocks of one county" if kind != "grid" else "blocks"}
    display = c1.selectbox("Draw", displays, format_func=disp_names.get, key=f"dm_display_{kind}")
    colour = c2.selectbox("Colour by", list(figs.COLOUR_BY), key="dm_colour",
                          format_func=lambda c: figs.COLOUR_BY[c][1])
    county = None
    if display == "block" and kind != "grid":
        names = geo.counties.set_index("GEOID")["NAME"] if "NAME" in geo.counties else None
        cty_ids = sorted(geo.blocks["county"].unique())
        biggest = geo.blocks.groupby("county")["total"].sum().idxmax()
        county = c3.selectbox("County", cty_ids, index=cty_ids.index(biggest), key="dm_county",
                              format_func=lambda c: f"{names.get(c, c)} ({c})" if names is not None else c)
    shapes = session_memo("dm_shapes", f"{plan_key}:{plan_idx}", lambda progress: district_shapes(geo, labels, table),
                   "Outlining districts")
    shapes = shapes.drop(columns=[c for c in shapes.columns if c not in ("district", "geometry")]).merge(
        table, on="district")
    units = display_values(geo, display, labels, table, result.block_mean_error, county)
    tolerance = {"county": 400.0, "tract": 400.0, "block group": 40.0, "block": 5.0}[display]
    unit_gj = _unit_geojson(geo_key, display, county, units, tolerance)
    outline = shapes if county is None else shapes[shapes["district"].isin(units["district"].unique())]
    outline_gj = figs.map_geojson(outline, "district", 5.0 if display == "block" else 150.0)
    title = f"{len(table)} districts over {len(units):,} {UNIT_LABELS[display]}"
    st.plotly_chart(figs.plan_map(units, unit_gj, outline, outline_gj, colour, title), key="dm_map")
    if display != "block":
        n_split = int(units["split"].sum())
        st.caption(f"Each unit is drawn with the district holding most of its population; {n_split} of "
                   f"{len(units)} {UNIT_LABELS[display]} are split between districts. Choose blocks for exact lines.")
    show = table[["district", "true_population", "deviation_pct", "mean_noisy_population", "mean_abs_error",
                  "p95_abs_error", "empirical_sd", "empirical_sd_low", "empirical_sd_high", "analytic_toydown_sd",
                  "balanced_on_noisy_mean_abs_dev_pct", "balanced_on_noisy_max_abs_dev_pct", "black_share_pct",
                  "fragmentation", "cut_edges", "polsby_popper", "split_counties", "contiguous"]]
    st.dataframe(show, hide_index=True, key="dm_table",
                 column_config={"deviation_pct": st.column_config.NumberColumn("true deviation %", format="%.2f"),
                                "mean_noisy_population": st.column_config.NumberColumn(format="%.1f"),
                                "polsby_popper": st.column_config.NumberColumn(format="%.3f")})
    st.caption("Deviation if balanced on noisy counts: had the plan been drawn so that every district's noisy "
               "count were exactly the noisy ideal, its true population would differ from the true ideal by this "
               "much (mean and worst over the runs).")
    st.plotly_chart(figs.district_error_figure(table), key="dm_error_fig")

# ------------------------------------------------------------------------------- ensemble
with tab_ens:
    st.caption("Districts from several generators are noised together under several splits of the same total "
               "budget (Figures 4 and 6 analogues of Cohen et al. 2021). Every noisy run of the whole hierarchy "
               "serves every district at once.")
    e1, e2, e3 = st.columns(3)
    splits = e1.multiselect("Splits", list(PRESETS), ["equal", "tract-heavy", "block-heavy"], key="dm_ens_splits")
    ens_runs = int(e2.number_input("Runs per split", 2, 400, 16, key="dm_ens_runs"))
    n_square = int(e3.number_input("Random Square districts", 0, 2000, 200, 50, key="dm_ens_squares",
                                   disabled=kind != "grid"))
    extra_units = [u for u in unit_options if not (generator == "recom" and u == unit)]
    also = st.multiselect("Also compare ReCom ensembles built from", extra_units, format_func=UNIT_LABELS.get,
                          key=f"dm_ens_units_{kind}",
                          help="Same k, tolerance, steps, thinning and seed as the plan above; larger building "
                               "units cut fewer units of the hierarchy (lower fragmentation).")
    d1, d2 = st.columns([3, 1])
    disconn = d1.multiselect("Also compare Disconn districts (random units up to the ideal population, not "
                             "connected) built from", ["county", "tract", "block group", "block"],
                             format_func=UNIT_LABELS.get, key=f"dm_ens_disconn_{kind}",
                             help="The paper's Disconn generator: ignores geography, so its fragmentation shows "
                                  "what cutting the hierarchy costs (blocks far more than tracts).")
    n_disconn = int(d2.number_input("Disconn districts each", 10, 1000, 100, 10, key="dm_ens_disconn_n"))
    run_ens = st.button("Run ensemble study", key="dm_run_ensemble", type="primary")
    ens_key = f"{plan_key}:{config_digest([splits, ens_runs, n_square, also, disconn, n_disconn, asdict(noise_cfg), asdict(plan_cfg)])}"
    store = st.session_state.setdefault("dm_ensembles", {})
    if run_ens:
        if not splits:
            st.error("Choose at least one split.")
        else:
            try:
                with progress_bar("Building the generators' districts") as progress:
                    gens_map, skipped = ensemble_generators(geo, plan_cfg, plans, n_square if kind == "grid" else 0,
                                                            tuple(also), progress, tuple(disconn), n_disconn)
                for name, why in skipped.items():
                    st.warning(f"{name} left out: {why}")
                pop = geo.blocks["total"].to_numpy()
                with progress_bar("Ensemble study") as progress:
                    store[ens_key] = ensemble_study(h, pop, gens_map, alloc.total, tuple(splits), ens_runs,
                                                    alloc.mechanism, alloc.sensitivity, algorithm, noise_seed,
                                                    progress)
            except ValueError as exc:
                st.error(str(exc))
    study = store.get(ens_key)
    if study is None:
        st.info("Press **Run ensemble study** to noise every district of the ensemble"
                + (" together with Greedy plans and random Square districts" if kind == "grid" else "")
                + f" ({ens_runs} runs per split).")
    else:
        st.caption(SIM)
        st.plotly_chart(figs.ensemble_histogram(study), key="dm_ens_hist")
        f1, f2 = st.columns(2)
        f1.plotly_chart(figs.fragmentation_histogram(study), key="dm_frag_hist")
        f2.plotly_chart(figs.fragmentation_variance_figure(study, alloc.sensitivity, alloc.mechanism == "laplace"),
                        key="dm_frag_var")
        if alloc.mechanism != "laplace":
            st.caption("The line 8 d²/ε² (w1² + Frag) holds for Laplace noise under the equal split; it is not "
                       "drawn for this mechanism.")
        summary = study.groupby(["generator", "split"], as_index=False).agg(
            districts=("district", "size"), mean_fragmentation=("fragmentation", "mean"),
            mean_abs_error=("mean_abs_error", "mean"), mean_empirical_variance=("empirical_variance", "mean"),
            mean_analytic_variance=("analytic_variance", "mean"))
        st.dataframe(summary, hide_index=True, key="dm_ens_table")
    if plans.shape[0] > 1:
        st.markdown("**Plans of the ensemble**")
        st.dataframe(session_memo("dm_plan_summaries", plan_key, lambda progress: ensemble_metrics(geo, plans),
                           "Summarising plans"), hide_index=True, key="dm_plans_table")

# ------------------------------------------------------------------------------- ecological regression
with tab_er:
    st.caption("**Synthetic election on synthetic precincts** (not real returns): a candidate gets a set share "
               "of Black and of other voters' votes. Ecological regression of vote share on Black share of the "
               "voting-age population, on true and on noisy (Black VAP, other VAP) counts; votes stay exact.")
    r1, r2, r3 = st.columns(3)
    support = r1.slider("Black voters' support", 0.0, 1.0, 0.85, 0.01, key="dm_er_group")
    other = r2.slider("Other voters' support", 0.0, 1.0, 0.5, 0.01, key="dm_er_other")
    mode = r3.selectbox("Mode", ["all", "filtered", "weighted"], key="dm_er_mode",
                        format_func={"all": "all precincts", "filtered": "filtered (fewer than 10 votes dropped)",
                                     "weighted": "weighted by votes"}.get)
    try:
        er_key = f"{geo_key}:{config_digest([asdict(noise_cfg), support, other])}"
        er = session_memo("dm_er", er_key, lambda progress: ecological_study(h, geo.blocks, noise_cfg, noise_cfg.seed,
                                                                       support, other, progress=progress),
                   "Ecological regression runs")
        st.plotly_chart(figs.er_scatter(er.precincts, er.estimates, er.noisy_shares, mode), key="dm_er_scatter")
        st.plotly_chart(figs.er_histogram(er.estimates, er.true_support), key="dm_er_hist")
        est = er.estimates
        er_table = est.groupby(["mode", "source"], as_index=False).agg(
            group_support=("group_support", "mean"), group_sd=("group_support", "std"),
            complement_support=("complement_support", "mean"), complement_sd=("complement_support", "std"),
            precincts_used=("precincts_used", "mean"), dropped_nonpositive_vap=("dropped_nonpositive_vap", "mean"))
        st.dataframe(er_table, hide_index=True, key="dm_er_table")
        small = int((er.precincts["votes"] < 10).sum())
        st.caption(f"{len(er.precincts):,} precincts, {small:,} with fewer than 10 votes. Naive Gaussian "
                   f"baseline: i.i.d. noise of sd {er.true_support['naive_sigma']:.2f} on each precinct count, "
                   f"matching the noisy runs' mean precinct L1 error ({er.true_support['mean_l1_error']:,.0f}). "
                   f"{SIM}")
    except ValueError as exc:
        st.error(str(exc))
        er = None

# ------------------------------------------------------------------------------- export
with tab_exp:
    config = {"geography": geo_key, "geography_name": geo.name, "synthetic_below_county": geo.synthetic_below_county,
              "plan": asdict(plan_cfg), "plan_index": plan_idx + 1, "allocation": alloc.to_json(), "noise": asdict(noise_cfg)}
    tables = {"districts": table, "plan_assignment": plan_to_frame(geo.blocks["GEOID"].to_numpy(), labels),
              "runs": result.runs}
    if study is not None:
        tables["ensemble_study"] = study
    if er is not None:
        tables["ecological_regression"] = er.estimates
    export_panel("District maps", config, tables, extra={"summary": result.summary, "simulation": SIM},
                 key="dm_export")
    x1, x2 = st.columns(2)
    x1.download_button("Plan as block-assignment CSV", tables["plan_assignment"].to_csv(index=False),
                       file_name="plan.csv", mime="text/csv", key="dm_dl_plan")
    x2.download_button("Districts with results (GeoJSON)", shapes.to_json(drop_id=True), file_name="districts.geojson",
                       mime="application/geo+json", key="dm_dl_geojson")
