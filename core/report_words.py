"""A plan in sentences, for people who never saw the page: each setting named by its own label.

A plan field declared with :func:`core.contracts.param` carries the label (and choice labels) the page
shows beside its widget; the sentence uses them, so the report and the page speak the same words.
Fields declared without a label get one from :data:`FIELD_WORDS` (never the Python name), plugin
keys are read as their registry's label, nested plugin Params are written out with their own labels,
and parts the plan leaves unset (None: a tab that was not asked for) are left out.

A plan type may have a lead (its area's ``PlanParts.lead``, ``core.areas``): a few sentences that say
what several fields mean together (the Budget allocation's geography, split and targets); the fields it
covers are not repeated below it. A plan type's own words for a field whose generic words would
mislead come from its area too (``PlanParts.words``, ``AreaSpec.sub_words``).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from core.areas import AREAS, parts_for
from core.contracts import DataRef, Plan

__all__ = ["plan_sentences", "plan_sections", "value_words", "field_label", "FIELD_WORDS", "join_words",
           "number_text", "number_words", "plural"]

#: Words for plan fields declared without a label (the field name is never shown).
FIELD_WORDS: dict[str, str] = {
    "data": "Data", "seed": "Seed", "rows": "Rows sampled from the data", "size": "Rows in the sample",
    "fanouts": "Geography fan-outs", "custom_shares": "Custom share of each level",
    "targets": "Targets whose accuracy is judged", "target_weights": "Importance of each target",
    "fig2_fanouts": "Fan-outs of the small tree in the paper's Figure 2",
    "mechanism_params": "Settings of the mechanism", "params": "Settings of the method",
    "root_total": "Publish the total population exactly", "weights": "Weighting",
    "epsilons": "Epsilon values compared", "mechanisms": "Noise mechanisms compared",
    "positive": "Outcome counted as positive", "custom_subgroups": "Subgroups defined by hand",
    "releases": "Release methods audited", "adversaries": "Adversaries simulated",
    "confidence": "Confidence level", "compare": "Compare the release methods",
    "release": "Release", "count_share": "Share of the budget spent on counts",
    "budgets": "Budget of each level", "sensitivity": "Sensitivity", "mechanism": "Mechanism",
    "election_seed": "Seed of the simulated election", "resolving_for": "Resolved for",
    "groups": "Groups compared", "at": "Operating point", "share_low": "Smallest group share",
    "penalty_fpr": "Weight on unequal false-positive rates", "penalty_tpr": "Weight on unequal true-positive rates",
    "favourable_label": "Outcome treated as favourable", "pair_copy": "Synthetic copy the cards show",
    "gammas": "Slack values (gamma) traced", "etas": "Slack values (eta) traced",
    "eta_gamma": "Gamma held while eta is traced", "C_lambda": "Bound on the Lagrange multipliers",
    "individual_holdout": "Hold out individuals as well", "tol": "Convergence tolerance",
    "max_rows": "Most rows used", "test_share": "Share of rows held out for testing",
    "lexifair": "Lexicographic fairness", "ranking": "Counterfactual ranking",
    "companion": "Calibrated scores with equal error rates", "top_values": "Largest values of each column kept as groups",
    "bootstrap": "Bootstrap resamples", "mediators": "Mediating attributes", "baseline": "Attributes held fixed",
    "constraints": "Fairness constraints", "frontier": "Accuracy-fairness frontier", "population": "Population",
    "epsilon": "Epsilon", "copy_id": "Synthetic copy", "column": "Column", "strata": "Groups (strata)",
    "delta": "delta", "category": "Category", "value_range": "Range of the values",
    "size_policy": "Stratum sizes", "sizes_declared_public": "Stratum sizes declared public",
    "numeric_bounds": "Bounds of the numeric columns", "domain_declared_public": "Category lists declared public",
    "coinpress_runs": "CoinPress runs", "seeds": "Seeds", "test_fraction": "Share of rows held out for testing",
    "split_seed": "Seed of the train and test split", "n_trees": "Trees in the evaluation forest",
    "columns": "Columns", "target": "Target", "synth_params": "Settings of the synthesizer",
    "numeric_bins": "Bins of the numeric columns", "sweep": "Sweep over epsilon", "marginals": "Marginals",
    "means": "Private means", "ensemble": "Ensemble of plans", "er": "Ecological regression",
    "noise": "Noise", "algorithms": "ToyDown against TopDown-lite", "public": "Published information",
    "theory": "Theory calculator", "lens": "Columns the predictor sees", "key": "Method",
    "name": "Name", "conditions": "Conditions", "values": "Values", "low": "From", "high": "To",
    "source": "Source", "people": "People", "runs": "Runs", "k": "k",
}

#: Plan fields whose value is a key of a plugin registry: field name -> (module, registry name).
REGISTRY_FIELDS: dict[str, tuple[str, str]] = {
    "mechanism": ("core.privacy.mechanisms", "MECHANISMS"), "generator": ("core.districts.generators", "GENERATORS"),
    "algorithm": ("core.districts.noise", "ALGORITHMS"), "synthesizer": ("core.synthesis.registry", "SYNTHESIZERS"),
    "oracle": ("core.fairness.learner", "ORACLES"), "learner": ("core.fairness.lexifair", "LEARNERS"),
}
#: Choice classes whose ``key`` names a plugin: class name -> (module, registry name).
REGISTRY_CHOICES: dict[str, tuple[str, str]] = {
    "ReleaseChoice": ("core.coherence.releases", "RELEASES"),
    "AdversaryChoice": ("core.coherence.adversaries", "ADVERSARIES"),
}
MAX_LISTED = 12
NUMBER_NAMES = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def number_words(n: int) -> str:
    """Small counts in words (``4`` -> ``four``), larger ones with thousands separators."""
    return NUMBER_NAMES[n] if 0 <= n < len(NUMBER_NAMES) else f"{n:,}"


def plural(noun: str) -> str:
    """English plural of a level name (county -> counties, block group -> block groups)."""
    if noun.endswith("y") and noun[-2:-1] not in tuple("aeiou"):
        return noun[:-1] + "ies"
    return noun + ("es" if noun.endswith(("s", "x", "ch", "sh")) else "s")


def _registry(module: str, name: str):
    import importlib
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


def field_label(owner: Any, f: dataclasses.Field) -> str:
    """The words that name a field: its declared label, else the class's or the generic words, else its
    help's first clause; the Python name only with its underscores turned into spaces."""
    label = (f.metadata or {}).get("label") or ""
    if label:
        return label
    cls = owner if isinstance(owner, type) else type(owner)
    words = AREAS.field_words(cls, f.name) or FIELD_WORDS.get(f.name)
    if words:
        return words
    help_text = (f.metadata or {}).get("help") or ""
    if help_text:
        return help_text.split(".")[0].split(":")[0][:80]
    return f.name.replace("_", " ").strip().capitalize()


def _join(items: list[str]) -> str:
    if not items:
        return "none"
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


def _number(value: float) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    value = float(value)
    if not math.isfinite(value):
        return "unbounded" if value > 0 else "not set"
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e7):
        return f"{value:.3g}"
    return f"{value:,.6g}"


def _data_words(ref: DataRef) -> str:
    schema = getattr(ref, "schema", None)
    if ref.is_upload:
        name = getattr(schema, "name", "") if schema is not None else ""
        what = f"the declared data set '{name}'" if name else "an uploaded file"
        return f"{what} (fingerprint {ref.fingerprint[:12]}…)"
    from core.datasets import DATASETS
    info = DATASETS.get(ref.source)
    if info is not None:
        return f"the bundled data set '{info.label}'"
    return {"stylised": "a stylised geography", "georgia": "the Georgia census geography",
            "grid": "a grid county"}.get(ref.source, f"the bundled data '{ref.source}'")


def value_words(value: Any, meta: Mapping[str, Any] | None = None, name: str = "") -> str:
    """A plan value in words: choice and registry labels for keys, yes/no, numbers with separators,
    lists joined with "and" (long ones summarised), the data set by its label."""
    meta = meta or {}
    choices = meta.get("choices")
    if isinstance(value, DataRef):
        return _data_words(value)
    if isinstance(value, (list, tuple)):
        if len(value) > MAX_LISTED:
            nums = [v for v in value if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if len(nums) == len(value):
                return f"{len(value):,} values from {_number(min(nums))} to {_number(max(nums))}"
            return f"{len(value):,} items, starting with {_join([value_words(v, meta, name) for v in value[:3]])}"
        return _join([value_words(v, meta, name) for v in value])
    if isinstance(choices, Mapping) and value in choices:
        return str(choices[value])
    if name in REGISTRY_FIELDS and isinstance(value, str):
        registry = _registry(*REGISTRY_FIELDS[name])
        if registry is not None and value in registry:
            return registry[value].label
    if isinstance(value, (bool, int, float)):
        return _number(value)
    if value is None:
        return "not set"
    return str(value).replace("_", " ")


def _is_plan_like(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, (type, DataRef))


def _choice_sentence(value: Any) -> str:
    """A plugin choice (``ReleaseChoice``/``AdversaryChoice``): its label and its settings."""
    spec = REGISTRY_CHOICES.get(type(value).__name__)
    registry = _registry(*spec) if spec else None
    key = getattr(value, "key", "")
    label = registry[key].label if registry is not None and key in registry else str(key).replace("_", " ")
    params = getattr(value, "params", None)
    inner = _field_sentences(params) if params is not None and _is_plan_like(params) else []
    return label + (f" ({'; '.join(s.rstrip('.') for s in inner)})" if inner else "")


def _special_value(value: Any) -> str | None:
    """Words for plan parts that are data rather than settings (a table of judged pairs)."""
    kind = type(value).__name__
    if kind == "ConstraintTable":
        n = len(getattr(value, "i", ()))
        source = str(getattr(value, "source", "") or "").replace("_", " ")
        return f"{n:,} judged pairs" + (f" from {source}" if source else "")
    if kind in REGISTRY_CHOICES:
        return _choice_sentence(value)
    return None


def _field_sentences(obj: Any, skip: frozenset[str] = frozenset()) -> list[str]:
    """One sentence per set, flat field of ``obj``; nested dataclasses are left to :func:`plan_sections`
    except small ones (a row sample, a plugin's Params), which become one sentence each."""
    out = []
    for f in dataclasses.fields(obj):
        if f.name in skip:
            continue
        value = getattr(obj, f.name)
        if value is None or (isinstance(value, tuple) and not value and f.name not in ("targets",)):
            continue
        label = field_label(obj, f)
        special = _special_value(value)
        if special is not None:
            out.append(f"{label}: {special}.")
        elif isinstance(value, tuple) and value and all(_special_value(v) is not None for v in value):
            out.append(f"{label}: {'; '.join(_special_value(v) for v in value)}.")
        elif _is_plan_like(value):
            if _is_section(value):
                continue
            inner = _field_sentences(value)
            if inner:
                out.append(f"{label}: {'; '.join(s.rstrip('.') for s in inner)}.")
        elif isinstance(value, tuple) and value and all(_is_plan_like(v) for v in value):
            parts = ["; ".join(s.rstrip(".") for s in _field_sentences(v)) for v in value]
            out.append(f"{label}: {' | '.join(p for p in parts if p)}.")
        else:
            out.append(f"{label}: {value_words(value, f.metadata, f.name)}.")
    return out


def _is_section(value: Any) -> bool:
    """A sub-plan (a page tab) gets its own heading; small dataclasses stay inline."""
    return isinstance(value, Plan)


#: The helpers an area's own lead sentences use (``core/census/words.py``), by public names.
join_words, number_text = _join, _number


# ------------------------------------------------------------------------------------------- entry points

def plan_sections(plan: Any, title: str = "") -> list[tuple[str, list[str]]]:
    """``[(heading, sentences), ...]``: the plan's own settings first (heading ``title``), then one section
    per sub-plan that is set, headed by its label. Unset parts are left out."""
    if not _is_plan_like(plan):
        return [(title, [value_words(plan)])]
    parts = parts_for(plan)
    lead = parts.lead if parts is not None else None
    sentences, skip = lead(plan) if lead is not None else ([], frozenset())
    sections = [(title, sentences + _field_sentences(plan, skip))]
    for f in dataclasses.fields(plan):
        value = getattr(plan, f.name)
        if value is not None and _is_plan_like(value) and _is_section(value) and f.name not in skip:
            heading = field_label(plan, f)
            sections += [(heading if not h else f"{heading}: {h}", s) for h, s in plan_sections(value)
                         if s]
    return [(h, s) for h, s in sections if s]


def plan_sentences(plan: Any) -> list[str]:
    """Every sentence of :func:`plan_sections`, sub-plans' prefixed with their heading."""
    return [s if not h else f"{h}. {s}" for h, ss in plan_sections(plan) for s in ss]
