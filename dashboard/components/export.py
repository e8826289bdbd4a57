"""Export buttons shared by every page: JSON report and a zip of CSV tables."""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd
import streamlit as st

from core.report import build_report, report_json, tables_zip


def export_panel(page: str, config: Any, tables: Mapping[str, pd.DataFrame],
                 extra: Mapping[str, Any] | None = None, key: str | None = None) -> dict:
    """Render download buttons for the configuration and results; returns the report."""
    report = build_report(page, config, tables, extra)
    key = key or page.replace(" ", "_").lower()
    left, right = st.columns(2)
    left.download_button("Download report (JSON)", report_json(report), file_name=f"{key}.json",
                         mime="application/json", key=f"{key}_json", icon=":material/download:")
    right.download_button("Download tables (CSV, zipped)", tables_zip(tables, report),
                          file_name=f"{key}.zip", mime="application/zip", key=f"{key}_zip",
                          icon=":material/table_view:")
    return report
