"""Reusable widget: choose bundled microdata (CPS extract, UCI Adult) or upload a CSV.

Uploads are kept in the session by fingerprint (``uploads_kept``) and reused when the user comes back.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from core.contracts import DataRef
from core.datasets import DATASETS, load_dataset
from core.uploads import read_upload
from dashboard.components.uploads_kept import upload_kept

UPLOAD = "upload"
MICRODATA_CHOICES = ("cps", "adult", UPLOAD)
CHOICE_LABELS = {"cps": "CPS 1994-95 extract", "adult": "UCI Adult", UPLOAD: "Upload CSV"}


@dataclass(frozen=True)
class PickedData:
    """What the user chose: a reference a plan can hold, a name, the table, and (uploads) the bytes."""

    ref: DataRef
    name: str
    frame: pd.DataFrame
    raw: bytes | None = None

    def __iter__(self):  # (name, frame), the shape callers unpack
        return iter((self.name, self.frame))

    def __getitem__(self, i):
        return (self.name, self.frame)[i]


@st.cache_data(show_spinner="Checking the uploaded file...", max_entries=4)
def _parse_microdata(data: bytes) -> pd.DataFrame:
    """Validated microdata from uploaded bytes (cached on the content, errors are not cached)."""
    return read_upload(data, "microdata_csv")


def pick_microdata(key: str, default: str = "cps") -> PickedData | None:
    """Selectbox of bundled microdata plus CSV upload; None when nothing usable is chosen yet."""
    if default not in MICRODATA_CHOICES:
        raise ValueError(f"default must be one of {MICRODATA_CHOICES}, not {default!r}")
    choice = st.selectbox(
        "Microdata", MICRODATA_CHOICES, index=MICRODATA_CHOICES.index(default),
        format_func=CHOICE_LABELS.__getitem__, key=f"{key}_dataset", persist_state="session",
        help="A bundled real data set, or your own comma-separated file with a header row.",
    )
    if choice != UPLOAD:
        info = DATASETS[choice]
        frame = load_dataset(choice)
        st.caption(f"{info.label}: {len(frame):,} rows x {frame.shape[1]} columns. "
                   f"Source: {info.provenance}. Licence: {info.licence}.")
        return PickedData(DataRef(choice), info.label, frame)

    kept = upload_kept("CSV file (UTF-8, comma-separated, header row, at least 10 rows and 2 columns)",
                       f"{key}_upload", type=["csv"], keep=3)
    if kept is None:
        st.info("Upload a CSV file to continue, or choose a bundled data set.")
        return None
    try:
        frame = _parse_microdata(kept.raw)
    except ValueError as err:
        st.error(f"{kept.name}: {err}")
        return None
    again = "" if kept.fresh else " Kept from earlier in this session."
    st.caption(f"{kept.name}: {len(frame):,} rows x {frame.shape[1]} columns (your upload; "
               f"text columns read as categories).{again}")
    return PickedData(DataRef(DataRef.UPLOAD, kept.fingerprint), kept.name, frame.copy(), kept.raw)
