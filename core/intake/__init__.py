"""A curator's own data: declared once, cleaned openly.

The whole surface (UI-agnostic; the data-step page and ``python -m core data`` build on it)::

    frame = read_table("extract.csv")                  # CSV / Parquet / Excel, cells as written
    frame = read_table_bytes(data, "extract.xlsx")     # the same from bytes in memory, by the name's suffix
    prof = profile(frame)                              # CURATOR-ONLY: counts and examples, never exported
    schema = draft_schema(frame, "County extract")     # a DataSchema with the obvious cleaning proposed
    problems = check(frame, schema)                    # every problem at once (column, severity, what, todo)
    table = apply(frame, schema)                       # the cleaned table (clean() adds its report); contribution
                                                       # bounding keyed by schema.bounding_seed

A :class:`DataSchema` is public and frozen: it nests inside plans (``plan_to_dict`` /
``plan_from_dict`` round-trip it), has a versioned JSON form (``to_dict`` / ``from_dict``) and a
digest. Profiles, problems and cleaning reports hold exact counts of private data and stay on the
curator's screen. :func:`needs_public_info` lists the columns whose public categories or bounds are
still undeclared: the hook for private estimation.
"""
from core.intake.check import Cleaned, CleaningReport, Problem, apply, check, clean
from core.intake.profile import ColumnProfile, Profile, profile
from core.intake.read import read_table, read_table_bytes
from core.intake.schema import (BLOCKS, DEFAULT_MISSING_TOKENS, FILE_SUFFIXES, MISSING_LABEL, MISSING_POLICIES,
                                ROLES, SCHEMA_VERSION, WARNING, ColumnSchema, DataSchema)
from core.intake.suggest import draft_schema, needs_public_info

__all__ = [
    "BLOCKS", "Cleaned", "CleaningReport", "ColumnProfile", "ColumnSchema", "DataSchema", "DEFAULT_MISSING_TOKENS",
    "FILE_SUFFIXES", "MISSING_LABEL", "MISSING_POLICIES", "Problem", "Profile", "ROLES", "SCHEMA_VERSION", "WARNING",
    "apply", "check", "clean", "draft_schema", "needs_public_info", "profile", "read_table", "read_table_bytes",
]
