"""Home page: what each tool answers, the bundled data sets, a Georgia map and a glossary."""
from __future__ import annotations

import json

import streamlit as st

from core.datasets import DATASETS, datasets_summary, load_dataset, load_georgia_counties
from dashboard.components.chart_table import chart_numbers
from core.figures.home import MAP_METRICS, georgia_choropleth
from dashboard.page_registry import PAGES

GLOSSARY = {
    "Epsilon (ε)": "The privacy-loss parameter of differential privacy. Smaller means stronger "
                   "privacy and noisier results; it bounds how much any one person's data can "
                   "change the probability of any output (by a factor of at most e^ε).",
    "Rho (ρ)": "The budget unit of zero-concentrated DP (zCDP), natural for Gaussian noise. Budgets "
               "in ρ add up across releases and convert to an (ε, δ) guarantee.",
    "Delta (δ)": "A small probability with which the ε guarantee is allowed to fail. Used with "
                 "Gaussian noise and when converting ρ to ε; it should be far below 1 / population.",
    "zCDP": "Zero-concentrated differential privacy: a variant of DP measured by ρ that composes "
            "tightly, which is why the 2020 US Census used it.",
    "Sensitivity": "The most a statistic can change when one person's record is added, removed or "
                   "changed. Noise is scaled to sensitivity divided by the budget.",
    "Privacy budget and composition": "Every release spends part of a total budget. Releases about "
                                      "the same people add up (sequential composition); releases "
                                      "about disjoint groups or areas cost only the largest share "
                                      "(parallel composition).",
    "Stratum (strata)": "One group in a partition of the population, such as one sex x race "
                        "combination. Each person belongs to exactly one stratum.",
    "Invariant": "A statistic published exactly, without noise (for example a state's total "
                 "population). Invariants are public information: they help accuracy but weaken "
                 "what the privacy guarantee covers.",
    "District": "A group of geographic units (here counties) that elects one representative. "
                "Districts must have nearly equal populations and be contiguous.",
    "Population deviation": "How far a district's population is from the ideal (state total / "
                            "number of districts), usually in percent.",
    "TopDown": "The Census Bureau's 2020 disclosure-avoidance algorithm: noisy counts at every "
               "level of the geography, then adjusted so that children add up to their parents.",
    "ToyDown": "A simplified, open re-implementation of TopDown used in research to study the "
               "effect of the budget split on redistricting data.",
    "Post-processing": "Anything computed from a private release alone (rounding, making counts "
                       "non-negative, fitting a model). It never weakens the privacy guarantee.",
    "Synthetic data": "Artificial records generated from a privately fitted model, meant to "
                      "reproduce the statistics of the real data without copying real people.",
    "Demographic coherence": "A release is coherent when what can be learned from it about groups "
                             "is close to what the real data would say; the audit measures this.",
    "Simulation, not a release": "Results computed with seeded random noise to show what a "
                                 "mechanism would do. They illustrate; they are not a private "
                                 "release of the data.",
}


@st.cache_data(show_spinner=False)
def georgia_geojson() -> dict:
    """County boundaries as a GeoJSON dict keyed by GEOID (parsed once per server)."""
    return json.loads(load_georgia_counties()[["GEOID", "geometry"]].to_json(drop_id=True))


st.title("Private & fair release workbench")
st.markdown(
    "Tools for people who hold sensitive population data and must decide **how to release it "
    "with differential privacy without treating some groups worse than others**. Each tool "
    "answers one question with real data and shows the trade-offs as charts you can export."
)

st.header("The tools")
for page in PAGES:
    with st.container(border=True):
        st.page_link(page.file, label=page.title, icon=page.icon)
        st.markdown(page.question)

st.header("Bundled data sets")
st.markdown("All data ship with the app and load offline. Sources, licences and checksums are in "
            "`data/README.md`.")
st.dataframe(datasets_summary().drop(columns=["key"]), hide_index=True, key="home_datasets",
             width="stretch")
preview_key = st.selectbox("Preview", list(DATASETS), format_func=lambda k: DATASETS[k].label,
                           key="home_preview")
preview = load_dataset(preview_key)
if "geometry" in preview.columns:
    preview = preview.drop(columns="geometry")
st.caption(f"First 100 of {len(preview):,} rows. {DATASETS[preview_key].description}")
st.dataframe(preview.head(100), hide_index=True, key="home_preview_table", width="stretch")

st.header("Georgia counties, 1990 census")
metric = st.radio("Colour by", list(MAP_METRICS), format_func=lambda m: MAP_METRICS[m][0],
                  horizontal=True, key="home_map_metric")
counties = load_georgia_counties().drop(columns="geometry")
st.plotly_chart(georgia_choropleth(counties, georgia_geojson(), metric), key="home_map",
                width="stretch")
st.caption(f"{len(counties)} counties, {int(counties['TotPop90'].sum()):,} people. Used as the "
           "geography of the budget-allocation and district-map tools.")
chart_numbers(counties[["NAME", "GEOID", "TotPop90", "PctBlack", "PctRural"]], key="home_map_numbers", what="the map")

st.header("Glossary")
left, right = st.columns(2)
for i, (term, meaning) in enumerate(GLOSSARY.items()):
    (left if i % 2 == 0 else right).markdown(f"**{term}.** {meaning}")
