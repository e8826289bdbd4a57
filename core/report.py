"""Export bundles: a page's configuration, its result tables and the versions that made them."""
from __future__ import annotations

import dataclasses
import io
import json
import platform
import zipfile
from datetime import datetime, timezone
from importlib import metadata
from typing import Any, Mapping

import pandas as pd

from core.cache import _jsonable, config_digest

_VERSIONED = ("numpy", "pandas", "scipy", "scikit-learn", "opendp", "gerrychain", "geopandas",
              "streamlit", "plotly")


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that shape results."""
    out = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def build_report(page: str, config: Any, tables: Mapping[str, pd.DataFrame],
                 extra: Mapping[str, Any] | None = None) -> dict:
    """A JSON-able record of one result: config, its digest, tables (records), versions."""
    return {
        "page": page,
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "config": _jsonable(config),
        "config_digest": config_digest(config),
        "versions": package_versions(),
        "tables": {name: json.loads(df.to_json(orient="records")) for name, df in tables.items()},
        **({"extra": _jsonable(dict(extra))} if extra else {}),
    }


def report_json(report: dict) -> str:
    return json.dumps(report, indent=2, default=str)


def tables_zip(tables: Mapping[str, pd.DataFrame], report: dict | None = None) -> bytes:
    """A zip of one CSV per table (plus the JSON report when given)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, df in tables.items():
            archive.writestr(f"{name}.csv", df.to_csv(index=False))
        if report is not None:
            archive.writestr("report.json", report_json(report))
    return buffer.getvalue()


def config_from_dict(cls: type, data: Mapping[str, Any]):
    """Rebuild a (flat) config dataclass from an exported dict, rejecting unknown fields."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names - {"__type__"}
    if unknown:
        raise ValueError(f"Unknown fields in the configuration: {sorted(unknown)}.")
    return cls(**{k: v for k, v in data.items() if k in names})
