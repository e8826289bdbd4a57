"""Reusable widget: choose bundled microdata (CPS extract, UCI Adult) or upload a CSV."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.datasets import DATASETS, load_dataset, read_upload

UPLOAD = "upload"
MICRODATA_CHOICES = ("cps", "adult", UPLOAD)
CHOICE_LABELS = {"cps": "CPS 1994-95 extract", "adult": "UCI Adult", UPLOAD: "Upload CSV"}


@st.cache_data(show_spinner="Checking the uploaded file...", max_entries=4)
def _parse_microdata(data: bytes) -> pd.DataFrame:
    """Validated microdata from uploaded bytes (cached on the content, errors are not cached)."""
    return read_upload(data, "microdata_csv")


def pick_microdata(key: str, default: str = "cps") -> tuple[str, pd.DataFrame] | None:
    """Selectbox of bundled microdata plus CSV upload; returns (name, frame) or None if nothing usable."""
    if default not in MICRODATA_CHOICES:
        raise ValueError(f"default must be one of {MICRODATA_CHOICES}, not {default!r}")
    choice = st.selectbox(
        "Microdata", MICRODATA_CHOICES, index=MICRODATA_CHOICES.index(default),
        format_func=CHOICE_LABELS.__getitem__, key=f"{key}_dataset",
        help="A bundled real data set, or your own comma-separated file with a header row.",
    )
    if choice != UPLOAD:
        info = DATASETS[choice]
        frame = load_dataset(choice)
        st.caption(f"{info.title}: {len(frame):,} rows x {frame.shape[1]} columns. "
                   f"Source: {info.provenance}. Licence: {info.licence}.")
        return info.title, frame

    uploaded = st.file_uploader(
        "CSV file (UTF-8, comma-separated, header row, at least 10 rows and 2 columns)",
        type=["csv"], key=f"{key}_upload",
    )
    if uploaded is None:
        st.info("Upload a CSV file to continue, or choose a bundled data set.")
        return None
    try:
        frame = _parse_microdata(uploaded.getvalue())
    except ValueError as err:
        st.error(f"{uploaded.name}: {err}")
        return None
    st.caption(f"{uploaded.name}: {len(frame):,} rows x {frame.shape[1]} columns (your upload; "
               "text columns read as categories).")
    return uploaded.name, frame.copy()
