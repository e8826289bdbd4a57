"""Demographic coherence audit: releases and adversaries (registries), W1, theory, the audit.

Plan -> run -> result: build an :class:`AuditPlan`, call :func:`run`, read the
:class:`CoherenceResult`'s tables.
"""
from core.coherence.adversaries import ADVERSARIES, make_adversary
from core.coherence.calculator import GUARANTEES, TheoryPlan, calculate
from core.coherence.plan import (BUNDLED, DEFAULT_LENS, AdversaryChoice, AuditPlan, ReleaseChoice, RowSample,
                                 SweepPlan)
from core.coherence.publish import PublishPlan, publish
from core.coherence.releases import RELEASES, NEIGHBOURS, is_private, make_release
from core.coherence.run import CoherenceResult, load_frame, run, sample_rows, usable_columns
from core.coherence.subgroups import Condition, CustomSubgroup
from core.coherence.verdicts import NOT_PRIVATE_PASS, VERDICT_MEANING, min_trials_for_pass, verdict_label

# the area's descriptor, registered for the shared machinery (core.areas); last, as it reads the above
from core.coherence.area import AREA  # noqa: E402

__all__ = ["AREA", 
    "ADVERSARIES", "RELEASES", "NEIGHBOURS", "GUARANTEES", "BUNDLED", "DEFAULT_LENS",
    "AuditPlan", "RowSample", "ReleaseChoice", "AdversaryChoice", "SweepPlan", "TheoryPlan",
    "Condition", "CustomSubgroup", "CoherenceResult", "run", "calculate", "load_frame", "sample_rows",
    "usable_columns", "make_release", "make_adversary", "is_private", "min_trials_for_pass",
    "verdict_label", "VERDICT_MEANING", "NOT_PRIVATE_PASS", "PublishPlan", "publish",
]
