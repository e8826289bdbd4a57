"""One table helper for every page: a table with more columns than fit its column says it scrolls sideways."""
from __future__ import annotations

import pandas as pd
import streamlit as st

WIDE_COLUMNS = 7      # from this many columns a full-width table may run past the right edge
NARROW_COLUMNS = 4    # in a side column (beside a map or chart) fewer columns already overflow


def scroll_hint(n_columns: int, *, narrow: bool = False) -> str | None:
    """The caption under a table of ``n_columns`` columns, or None when it fits without scrolling."""
    if n_columns >= (NARROW_COLUMNS if narrow else WIDE_COLUMNS):
        return f"{n_columns} columns: scroll the table sideways to see them all."
    return None


def wide_table(df: pd.DataFrame, *, key: str | None = None, narrow: bool = False, container=None,
               **kwargs) -> None:
    """``st.dataframe`` without the index, followed by a scroll hint when the table is wider than its column.

    ``narrow`` marks a table drawn in a side column; extra keyword arguments go to ``st.dataframe``."""
    where = container if container is not None else st
    kwargs.setdefault("hide_index", True)
    where.dataframe(df, key=key, **kwargs)
    hint = scroll_hint(len(df.columns), narrow=narrow)
    if hint:
        where.caption(hint)
