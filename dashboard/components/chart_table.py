"""The text equivalent of a chart: the table it was drawn from, one click away under the chart, so a screen
reader, a colour-blind reader or anyone who wants the exact values reads the same numbers."""
from __future__ import annotations

import pandas as pd
import streamlit as st

EXPANDER_PREFIX = "The numbers behind"


def chart_numbers(table: pd.DataFrame, *, key: str, what: str = "this chart", container=None) -> None:
    """An expander holding ``table`` (the rows the chart above was drawn from), in ``container`` if given."""
    where = container if container is not None else st
    with where.expander(f"{EXPANDER_PREFIX} {what}", expanded=False):
        st.dataframe(table, hide_index=True, key=key)
