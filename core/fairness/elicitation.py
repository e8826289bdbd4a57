"""Pair sampling, pair cards, answers -> ordered constraints, aggregation and agreement diagnostics.

Individuals are the positional rows of ``core.datasets.load_compas()``; a session draws its pairs
only from its population (``core.datasets.COMPAS_POPULATIONS``, the learner's "paper" people by
default), so every pair it elicits reaches the learner. A stakeholder's answer
about the pair (A, B) becomes ordered pairs (x, x') meaning "x' is treated at least as well as
x", i.e. p(x) - p(x') <= gamma on the probability of the positive label (Jung et al. 2021, 2.1).
"""
from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from core.contracts import DataRef, Plan, make_rng, param, plan_from_dict
from core.datasets import COMPAS_POPULATIONS, compas_population
from core.fairness.private_pairs import (MAX_PAIR_EPSILON, PAIR_DELTA, PAIR_SOURCES, SYNTHETIC_PEOPLE,
                                         PrivatePairsPlan, check_copy_id, check_pair_epsilon)

# The eight study features shown on pair cards by default (spec 4.1); labels never appear.
DEFAULT_FEATURES: tuple[str, ...] = ("age", "sex", "race", "priors_count", "juv_fel_count",
                                     "juv_misd_count", "juv_other_count", "c_charge_degree")
# Columns that may be shown: outcomes and risk scores are never offered, so cards cannot leak them.
DISPLAYABLE_FEATURES: tuple[str, ...] = DEFAULT_FEATURES + ("age_cat",)

BINARY_RESPONSES: tuple[str, ...] = ("same", "differ")
FOUR_RESPONSES: tuple[str, ...] = ("same", "a_at_least_b", "b_at_least_a", "none")
SKIP, RETRACT = "skip", "retract"
RESPONSE_MODES = {"binary": BINARY_RESPONSES, "four_option": FOUR_RESPONSES}
RESPONSE_LABELS = {
    "same": "Treat them the same",
    "differ": "They may be treated differently",
    "a_at_least_b": "Person A at least as well as B",
    "b_at_least_a": "Person B at least as well as A",
    "none": "No constraint",
}
WEIGHTINGS = ("panel", "judged")
# Sessions stored before populations existed drew their pairs from every row of the file.
LEGACY_POPULATION = "full"

FEATURE_LABELS = {
    "age": "Age", "age_cat": "Age group", "sex": "Sex", "race": "Race",
    "priors_count": "Prior offences", "juv_fel_count": "Juvenile felonies",
    "juv_misd_count": "Juvenile misdemeanours", "juv_other_count": "Other juvenile offences",
    "c_charge_degree": "Current charge",
}


DEMO_KINDS = ("metric", "score")
DEMO_KIND_LABELS = {"metric": "similarity on record features", "score": "similar risk score"}
RESPONSE_MODE_LABELS = {"binary": "same / may differ", "four_option": "four options"}
#: The largest seed the design page offers (a plan takes any non-negative whole number).
MAX_PAGE_SEED = 2 ** 31 - 1
MAX_DEMO_STAKEHOLDERS = 60
DEFAULT_INSTRUCTIONS = ("For each pair, say whether, as a matter of fairness, the two people "
                        "should receive the same risk prediction.")
#: The fields a live session stores (its settings); the simulated panel's fields are the plan's only.
DESIGN_FIELDS: tuple[str, ...] = ("population", "features", "n_core", "n_random", "n_repeat", "response_mode",
                                  "favourable_label", "seed", "instructions", "pair_source", "pair_epsilon",
                                  "pair_copy")


@dataclass(frozen=True)
class ElicitationPlan(Plan):
    """A session design (spec 4.1): the data, the people pairs come from, the card features, how many
    core, random and repeated pairs each stakeholder gets, the answer options and the session seed,
    and optionally a simulated panel (how many judges, which kind, their seed).

    One class serves both as the plan a report reruns and as the settings a live session stores
    (``session_dict`` / ``from_dict``: the stored form names the data ``dataset`` and leaves the
    simulated panel out). Every default is declared here once.

    The fields a facilitator sets are declared with ``param(...)``: label, help and what the design
    page offers (its menus and ranges), from which the page draws and restores its widgets.
    ``validate_config`` holds the rules, which accept everything the page offers and more, so a
    session stored or imported with a larger design still loads.
    """

    data: DataRef = field(default_factory=lambda: DataRef("compas"))
    population: str = param(
        "paper", label="People pairs are drawn from", choices=COMPAS_POPULATIONS, kind="select",
        help="Keep the learner's population (the paper's, by default) so that every pair judged reaches the "
             "learner; pairs with someone the learner does not fit are left out.")
    features: tuple[str, ...] = param(
        DEFAULT_FEATURES, label="Features shown on each card (labels and scores are never shown)",
        choices={f: FEATURE_LABELS.get(f, f) for f in DISPLAYABLE_FEATURES}, kind="multiselect")
    n_core: int = param(10, label="Core pairs (everyone)", low=0, high=100)
    n_random: int = param(40, label="Random pairs", low=0, high=400)
    n_repeat: int = param(2, label="Repeated pairs", low=0, high=20)
    response_mode: str = param("binary", label="Answers", choices=RESPONSE_MODE_LABELS, kind="select")
    favourable_label: int = 0
    seed: int = param(0, label="Seed", low=0, high=MAX_PAGE_SEED)
    instructions: str = param(DEFAULT_INSTRUCTIONS, kind="text",
                              label="Instructions shown to stakeholders (keep them neutral: no fairness guidance)")
    demo_stakeholders: int = param(0, label="Simulated stakeholders", low=2, high=MAX_DEMO_STAKEHOLDERS)
    demo_kind: str = param("metric", label="Judges", choices=DEMO_KIND_LABELS, kind="select")
    demo_seed: int = param(0, label="Seed", low=0, high=MAX_PAGE_SEED)
    pair_source: str = param(      # "real" records, or "dp_synthetic": a private synthetic copy
        "real", label="People on the cards", choices=PAIR_SOURCES,
        help="A synthetic copy is drawn with differential privacy (MST on public bins), so no real record is "
             "shown; ages and counts then appear as ranges.")
    pair_epsilon: float = param(   # the copy's epsilon; its delta is PAIR_DELTA
        1.0, label="Epsilon of the synthetic copy", low=0.05, high=MAX_PAIR_EPSILON, step=0.25,
        help=f"Spent once per copy made; delta is fixed at {PAIR_DELTA:g}.")
    pair_copy: str = ""            # the released copy's id ("" before it is made)

    def __post_init__(self) -> None:
        object.__setattr__(self, "features", tuple(self.features))
        validate_config(self)

    @property
    def dataset(self) -> str:
        """The data set's key, as a stored session names it."""
        return self.data.source

    @property
    def n_items(self) -> int:
        """Cards per stakeholder: core, random and repeated pairs."""
        return self.n_core + self.n_random + self.n_repeat

    @property
    def synthetic(self) -> bool:
        """Whether the cards show people of a private synthetic copy instead of real records."""
        return self.pair_source == "dp_synthetic"

    def private_pairs_plan(self) -> PrivatePairsPlan | None:
        """The synthetic copy the cards show (None for real records): its population, budget and,
        once released, its copy id (designs that differ in anything else can share one copy)."""
        if not self.synthetic:
            return None
        return PrivatePairsPlan(population=self.population, epsilon=self.pair_epsilon, copy_id=self.pair_copy)

    def session_config(self) -> "ElicitationPlan":
        """The design a live session stores: this plan without its simulated panel."""
        return self.replace(demo_stakeholders=0, demo_kind="metric", demo_seed=0)

    @classmethod
    def from_session_config(cls, config: "ElicitationPlan", **demo) -> "ElicitationPlan":
        """A stored session's design, with a simulated panel when ``demo`` names one."""
        return config.replace(**demo)

    def session_dict(self) -> dict:
        """The settings as a session stores and exports them (real-record sessions store exactly what
        they always stored: no pair-source fields)."""
        return {"dataset": self.dataset, "population": self.population, "features": list(self.features),
                "n_core": self.n_core, "n_random": self.n_random, "n_repeat": self.n_repeat,
                "response_mode": self.response_mode, "favourable_label": self.favourable_label,
                "seed": self.seed, "instructions": self.instructions,
                **({"pair_source": self.pair_source, "pair_epsilon": self.pair_epsilon}
                   if self.synthetic else {}),
                **({"pair_copy": self.pair_copy} if self.synthetic and self.pair_copy else {})}

    @classmethod
    def from_dict(cls, data: dict) -> "ElicitationPlan":
        """Settings as a session stored or exported them (without a population they are an older
        session's: "full"), or a plan saved by ``to_dict``."""
        if not isinstance(data, dict):
            raise ValueError("Session configuration must be a JSON object.")
        if "__type__" in data:
            plan = plan_from_dict(data)
            if not isinstance(plan, cls):
                raise ValueError(f"Expected a saved {cls.__name__}, got a {type(plan).__name__}.")
            return plan
        unknown = set(data) - set(DESIGN_FIELDS) - {"dataset"}
        if unknown:
            raise ValueError(f"Unknown session configuration fields: {sorted(unknown)}.")
        values = {"population": LEGACY_POPULATION, **data}
        dataset = values.pop("dataset", "compas")
        if not isinstance(dataset, str) or not dataset.strip():
            raise ValueError("A session's dataset must be named by its key, e.g. 'compas'.")
        return cls(data=DataRef(dataset), **values)


#: The name stored sessions and older code use for the same class.
SessionConfig = ElicitationPlan


def validate_config(config: ElicitationPlan) -> None:
    """Raise ValueError naming the field to change when a design is unusable."""
    if not isinstance(config.data, DataRef) or config.data.source != "compas":
        source = config.data.source if isinstance(config.data, DataRef) else config.data
        raise ValueError(f"Only the bundled COMPAS data can be used for elicitation (DataRef('compas')), "
                         f"not {source!r}.")
    if config.population not in COMPAS_POPULATIONS:
        raise ValueError(f"Unknown population {config.population!r}; choose one of {list(COMPAS_POPULATIONS)}.")
    if config.pair_source not in PAIR_SOURCES:
        raise ValueError(f"Pairs come from {list(PAIR_SOURCES)}, not {config.pair_source!r}.")
    object.__setattr__(config, "pair_epsilon", check_pair_epsilon(config.pair_epsilon))
    object.__setattr__(config, "pair_copy", check_copy_id(config.pair_copy))
    if config.pair_copy and not config.synthetic:
        raise ValueError("Only a session showing a synthetic copy names a copy id.")
    if not config.features:
        raise ValueError("Choose at least one feature to show on the pair cards.")
    bad = [f for f in config.features if f not in DISPLAYABLE_FEATURES]
    if bad:
        raise ValueError(f"Features {bad} cannot be shown; choose from {list(DISPLAYABLE_FEATURES)}.")
    if len(set(config.features)) != len(config.features):
        raise ValueError("Each feature may be shown only once.")
    for name in ("n_core", "n_random", "n_repeat", "seed"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{name} must be a non-negative whole number, got {value!r}.")
    if config.n_core + config.n_random < 1:
        raise ValueError("A session needs at least one core or random pair.")
    if config.n_core + config.n_random > 500:
        raise ValueError("At most 500 pairs per stakeholder; lower the core or random pair count.")
    if config.n_repeat > config.n_core + config.n_random:
        raise ValueError("There cannot be more repeated pairs than core and random pairs.")
    if config.response_mode not in RESPONSE_MODES:
        raise ValueError(f"Response mode must be one of {list(RESPONSE_MODES)}, got {config.response_mode!r}.")
    if config.favourable_label not in (0, 1):
        raise ValueError("The favourable label must be 0 or 1.")
    if not isinstance(config.instructions, str) or len(config.instructions) > 2000:
        raise ValueError("Instructions must be text of at most 2,000 characters.")
    hidden = [c for c in config.instructions if c not in "\n\t" and unicodedata.category(c) in ("Cc", "Cf")]
    if hidden:
        raise ValueError(f"The instructions contain an invisible character (U+{ord(hidden[0]):04X}); "
                         "remove it so every stakeholder reads the same text.")
    n = config.demo_stakeholders
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 <= n <= MAX_DEMO_STAKEHOLDERS:
        raise ValueError(f"Simulated stakeholders must be a whole number from 0 to {MAX_DEMO_STAKEHOLDERS}.")
    if config.demo_kind not in DEMO_KINDS:
        raise ValueError(f"Simulated judges are {list(DEMO_KINDS)}, not {config.demo_kind!r}.")
    seed = config.demo_seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError("The demo seed must be a non-negative whole number.")


# ----------------------------------------------------------------------------- sampling

def population_rows(config: ElicitationPlan) -> np.ndarray:
    """Row positions of the people a session's pairs are drawn from: rows of load_compas(), or for a
    synthetic-copy session the positions 0.. of its synthetic people (a public count)."""
    if config.synthetic:
        return np.arange(SYNTHETIC_PEOPLE, dtype=np.int64)
    return compas_population(config.population)


def outside_population(pairs: np.ndarray, population: str) -> np.ndarray:
    """The row numbers in `pairs` that are not people of `population` (sorted, unique)."""
    people = np.asarray(pairs, dtype=np.int64).ravel()
    return np.setdiff1d(people, compas_population(population))


def outside_session_people(pairs: np.ndarray, config: ElicitationPlan) -> np.ndarray:
    """The person numbers in `pairs` that are not people a session's cards can show: rows outside
    its population, or for a synthetic-copy session numbers beyond its synthetic people."""
    people = np.asarray(pairs, dtype=np.int64).ravel()
    return np.setdiff1d(people, population_rows(config))


def _random_pairs(rows: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k ordered pairs drawn uniformly from S x S with i != j, S the given rows (the paper's
    Theorem 2 sampling over the population); returned as row numbers."""
    n = len(rows)
    i = rng.integers(0, n, size=k)
    j = rng.integers(0, n - 1, size=k)
    j = j + (j >= i)
    return np.column_stack([rows[i], rows[j]]).astype(np.int64)


def core_pairs(config: ElicitationPlan, rows: np.ndarray | None = None) -> np.ndarray:
    """The session's shared core pairs, fixed by the session seed (spec 4.1: shown to everyone),
    drawn from `rows` (default: the session's population)."""
    rows = population_rows(config) if rows is None else np.asarray(rows, dtype=np.int64)
    if len(rows) < 2:
        raise ValueError("Pairs need at least two individuals.")
    rng = make_rng([config.seed, 0xC0DE])
    return _random_pairs(rows, config.n_core, rng)


def stakeholder_seed(session_seed: int, stakeholder_id: str) -> list[int]:
    """Deterministic seed material for one stakeholder's assignment (session seed, stakeholder name).

    The store passes the pseudonym, unique within a session, so a session is reproducible from its
    seed and roster; the drawn cards are also stored, so later changes cannot alter them.
    """
    digest = hashlib.sha256(str(stakeholder_id).encode()).digest()
    return [int(session_seed), int.from_bytes(digest[:8], "little")]


def sample_assignment(config: ElicitationPlan, core: np.ndarray, rows: np.ndarray,
                      rng: np.random.Generator) -> pd.DataFrame:
    """One stakeholder's cards: core + random pairs in random order, then repeats shown later.

    Sides (who is Person A) are randomised per card; a repeat shows its pair with sides swapped
    and is placed after the original, so it measures self-consistency (spec 4.1, step 2). Random
    pairs come from `rows` (the session's population).
    """
    core = np.asarray(core, dtype=np.int64).reshape(-1, 2)
    base = np.vstack([core, _random_pairs(np.asarray(rows, dtype=np.int64), config.n_random, rng)])
    kinds = np.array(["core"] * len(core) + ["random"] * config.n_random, dtype=object)
    order = rng.permutation(len(base))
    base, kinds = base[order], kinds[order]
    flip = rng.random(len(base)) < 0.5
    a = np.where(flip, base[:, 1], base[:, 0])
    b = np.where(flip, base[:, 0], base[:, 1])
    frame = pd.DataFrame({"a": a, "b": b, "kind": kinds, "repeat_of": -1})
    n_base, n_rep = len(frame), int(config.n_repeat)
    if n_rep:
        # Originals from the first half; each repeat goes before base card `slot` (> original).
        half = max(1, n_base // 2)
        originals = np.sort(rng.choice(max(half, n_rep), size=n_rep, replace=False))
        slots = rng.integers(np.maximum(originals + 1, half), n_base + 1)
        repeats = pd.DataFrame({"a": frame["b"].to_numpy()[originals],
                                "b": frame["a"].to_numpy()[originals],
                                "kind": "repeat", "repeat_of": originals})
        sort_key = np.concatenate([np.arange(n_base, dtype=float), slots - 0.5])
        frame = pd.concat([frame, repeats], ignore_index=True)
        order = np.argsort(sort_key, kind="stable")
        frame = frame.iloc[order].reset_index(drop=True)
        # Translate base indices of originals into final card positions.
        final_of_base = np.empty(n_base, dtype=np.int64)
        is_base = (frame["kind"] != "repeat").to_numpy()
        final_of_base[order[is_base]] = np.flatnonzero(is_base)
        rep = ~is_base
        frame.loc[rep, "repeat_of"] = final_of_base[frame.loc[rep, "repeat_of"].to_numpy(dtype=np.int64)]
    frame.insert(0, "position", np.arange(len(frame), dtype=np.int64))
    return frame.astype({"a": "int64", "b": "int64", "repeat_of": "int64"})


# ----------------------------------------------------------------------------- pair cards

def _plain(feature: str, value) -> str:
    """One value in plain words for a pair card (a synthetic person's binned values are ranges)."""
    if isinstance(value, str) and (feature == "age" or feature.endswith("_count")):
        return _plain_range(feature, value)
    if feature == "age":
        return f"{int(value)} years old"
    if feature == "c_charge_degree":
        return {"F": "Felony", "M": "Misdemeanour"}.get(str(value), str(value))
    if feature.endswith("_count"):
        n = int(value)
        noun = {"priors_count": "prior offence", "juv_fel_count": "juvenile felony",
                "juv_misd_count": "juvenile misdemeanour", "juv_other_count": "other juvenile offence"}[feature]
        if n == 0:
            return "None"
        plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
        return f"{n} {noun if n == 1 else plural}"
    return str(value)


def _plain_range(feature: str, text: str) -> str:
    """A binned value ("25-29", "3", "12+") in plain words."""
    if feature == "age":
        return f"{text} years old"
    if text == "0":
        return "None"
    noun = {"priors_count": "prior offence", "juv_fel_count": "juvenile felony",
            "juv_misd_count": "juvenile misdemeanour", "juv_other_count": "other juvenile offence"}[feature]
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{text} {noun if text == '1' else plural}"


def pair_card(frame: pd.DataFrame, a: int, b: int, features: Sequence[str]) -> pd.DataFrame:
    """Person A and Person B side by side, one row per chosen feature, values in plain words."""
    n = len(frame)
    for idx in (a, b):
        if not 0 <= int(idx) < n:
            raise ValueError(f"Individual {idx} is outside the data (0..{n - 1}).")
    rows = []
    for f in features:
        if f not in frame.columns:
            raise ValueError(f"Feature {f!r} is not a column of the data.")
        rows.append({"Feature": FEATURE_LABELS.get(f, f),
                     "Person A": _plain(f, frame[f].iloc[int(a)]),
                     "Person B": _plain(f, frame[f].iloc[int(b)])})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- constraints

def judgment_to_ordered_constraints(response: str, a: int, b: int,
                                    favourable_label: int = 0) -> list[tuple[int, int]]:
    """Ordered pairs (x, x') asserted by one answer: p(x) - p(x') <= gamma (spec 1.2 table, 4.2).

    "A at least as well as B" is (B, A) when the favourable label is 1 and (A, B) when it is 0;
    "same" asserts both orientations; "differ", "none" and skips assert nothing.
    """
    if favourable_label not in (0, 1):
        raise ValueError("The favourable label must be 0 or 1.")
    a, b = int(a), int(b)
    if response == "same":
        return [(a, b), (b, a)]
    if response in ("differ", "none", SKIP, RETRACT):
        return []
    if response == "a_at_least_b":
        return [(b, a)] if favourable_label == 1 else [(a, b)]
    if response == "b_at_least_a":
        return [(a, b)] if favourable_label == 1 else [(b, a)]
    raise ValueError(f"Unknown response {response!r}; expected one of {list(RESPONSE_LABELS)}.")


def _canonical(judgments: pd.DataFrame, favourable_label: int) -> pd.DataFrame:
    """Answers on the unordered pair (i < j) with flags for the two orientations asserted."""
    required = {"stakeholder", "a", "b", "response"}
    missing = required - set(judgments.columns)
    if missing:
        raise ValueError(f"Judgments need columns {sorted(required)}; missing {sorted(missing)}.")
    j = judgments.copy()
    if "kind" not in j.columns:
        j["kind"] = "random"
    if "position" not in j.columns:
        j["position"] = j.groupby("stakeholder").cumcount()
    known = set(RESPONSE_LABELS) | {SKIP, RETRACT}
    bad = sorted(set(j["response"].astype(str)) - known)
    if bad:
        raise ValueError(f"Unknown responses {bad}; expected one of {sorted(known)}.")
    a = j["a"].to_numpy(dtype=np.int64)
    b = j["b"].to_numpy(dtype=np.int64)
    if (a == b).any():
        raise ValueError("A pair must show two different individuals.")
    j["i"], j["j"] = np.minimum(a, b), np.maximum(a, b)
    swapped = a > b  # Person A is the larger index
    r = j["response"].astype(str).to_numpy()
    same = r == "same"
    fav1 = favourable_label == 1
    # (A, B) means p_A - p_B <= gamma; "A at least as well as B" is that when favourable is 0.
    ab = same | ((r == "a_at_least_b") & (not fav1)) | ((r == "b_at_least_a") & fav1)
    ba = same | ((r == "b_at_least_a") & (not fav1)) | ((r == "a_at_least_b") & fav1)
    ij = np.where(swapped, ba, ab)
    ji = np.where(swapped, ab, ba)
    directional = np.isin(r, ("a_at_least_b", "b_at_least_a"))
    j["asserts_ij"], j["asserts_ji"] = ij, ji
    j["answered"] = ~np.isin(r, (SKIP, RETRACT))
    # Canonical answer on (i, j): flip directional answers when Person A was j.
    canon = r.copy()
    flip = swapped & directional
    canon[flip] = np.where(r[flip] == "a_at_least_b", "b_at_least_a", "a_at_least_b")
    j["canonical"] = canon
    return j


def _first_presentations(canon: pd.DataFrame) -> pd.DataFrame:
    """Each stakeholder counts once per pair: repeats dropped, first answered presentation kept."""
    live = canon[(canon["kind"] != "repeat") & canon["answered"]]
    live = live.sort_values(["stakeholder", "position"], kind="stable")
    return live.drop_duplicates(["stakeholder", "i", "j"], keep="first")


def aggregate_constraints(judgments: pd.DataFrame, mode: str = "panel", *,
                          n_stakeholders: int | None = None, favourable_label: int = 0,
                          min_support: float = 0.0) -> pd.DataFrame:
    """Pool answers into one row per unordered pair (i < j): the constraint frame.

    `weight` is the share of stakeholders asking that i and j be treated alike ("same");
    `w_ij` / `w_ji` are the ordered weights of p_i - p_j <= gamma and p_j - p_i <= gamma, which
    also count directional answers. mode "panel" divides by |U| (Jung et al. 2021, 2.1); "judged"
    divides by the stakeholders who answered the pair (skips excluded). `agreement` is the share
    of judges giving the pair's most common answer. Pairs below `min_support` are dropped.
    """
    if mode not in WEIGHTINGS:
        raise ValueError(f"Weighting must be one of {list(WEIGHTINGS)}, got {mode!r}.")
    if not 0.0 <= float(min_support) <= 1.0:
        raise ValueError("Minimum support must lie between 0 and 1.")
    if favourable_label not in (0, 1):
        raise ValueError("The favourable label must be 0 or 1.")
    columns = ["i", "j", "weight", "n_judges", "agreement", "w_ij", "w_ji", "n_same"]
    if judgments is None or len(judgments) == 0:
        return pd.DataFrame({c: pd.Series(dtype="int64" if c in ("i", "j", "n_judges", "n_same") else "float64")
                             for c in columns})
    canon = _canonical(judgments, favourable_label)
    panel_size = canon["stakeholder"].nunique() if n_stakeholders is None else int(n_stakeholders)
    if panel_size < canon["stakeholder"].nunique():
        raise ValueError("n_stakeholders is smaller than the number of stakeholders who answered.")
    first = _first_presentations(canon)
    if first.empty:
        return aggregate_constraints(judgments.iloc[:0], mode)
    first = first.assign(is_same=first["response"].eq("same"))
    grouped = first.groupby(["i", "j"], sort=True)
    out = grouped.agg(n_judges=("stakeholder", "size"), n_same=("is_same", "sum"),
                      c_ij=("asserts_ij", "sum"), c_ji=("asserts_ji", "sum")).reset_index()
    top = first.groupby(["i", "j", "canonical"]).size().groupby(level=[0, 1]).max()
    out["agreement"] = (top.to_numpy() / out["n_judges"].to_numpy()).astype(float)
    denom = float(panel_size) if mode == "panel" else out["n_judges"].to_numpy(dtype=float)
    out["weight"] = out["n_same"].to_numpy(dtype=float) / denom
    out["w_ij"] = out["c_ij"].to_numpy(dtype=float) / denom
    out["w_ji"] = out["c_ji"].to_numpy(dtype=float) / denom
    if min_support > 0:
        out = out[np.maximum(out["w_ij"], out["w_ji"]) >= min_support]
    out = out.astype({"i": "int64", "j": "int64", "n_judges": "int64", "n_same": "int64"})
    return out[columns].reset_index(drop=True)


def ordered_constraints(constraints: pd.DataFrame) -> pd.DataFrame:
    """Expand the constraint frame into ordered pairs (i, j, w) with w > 0 (spec 1.3 reduction)."""
    fwd = constraints[["i", "j", "w_ij"]].rename(columns={"w_ij": "w"})
    bwd = constraints[["j", "i", "w_ji"]].rename(columns={"j": "i", "i": "j", "w_ji": "w"})
    both = pd.concat([fwd, bwd], ignore_index=True)
    return both[both["w"] > 0].reset_index(drop=True)


# ----------------------------------------------------------------------------- diagnostics

def self_agreement(judgments: pd.DataFrame, favourable_label: int = 0) -> pd.DataFrame:
    """Per stakeholder: repeated cards answered, and the share answered as the first time."""
    canon = _canonical(judgments, favourable_label)
    if "repeat_of" not in canon.columns:
        return pd.DataFrame(columns=["stakeholder", "n_repeats", "self_agreement"])
    rep = canon[(canon["kind"] == "repeat") & canon["answered"]]
    orig = canon[canon["answered"]][["stakeholder", "position", "canonical"]]
    merged = rep.merge(orig, left_on=["stakeholder", "repeat_of"], right_on=["stakeholder", "position"],
                       suffixes=("", "_first"))
    merged["match"] = merged["canonical"] == merged["canonical_first"]
    res = merged.groupby("stakeholder").agg(n_repeats=("match", "size"), self_agreement=("match", "mean"))
    return res.reset_index()


def fleiss_kappa(counts: np.ndarray) -> float:
    """Fleiss' kappa from an items x categories count matrix with equal raters per item."""
    counts = np.asarray(counts, dtype=float)
    if counts.ndim != 2 or counts.shape[0] == 0:
        return float("nan")
    n = counts.sum(axis=1)
    if np.any(n != n[0]) or n[0] < 2:
        raise ValueError("Fleiss' kappa needs the same number (at least two) of raters on every item.")
    r = n[0]
    p_j = counts.sum(axis=0) / counts.sum()
    p_i = (np.square(counts).sum(axis=1) - r) / (r * (r - 1))
    p_bar, p_e = p_i.mean(), np.square(p_j).sum()
    if np.isclose(p_e, 1.0):
        return 1.0 if np.isclose(p_bar, 1.0) else float("nan")
    return float((p_bar - p_e) / (1 - p_e))


def inter_rater_agreement(judgments: pd.DataFrame, favourable_label: int = 0) -> dict:
    """Fleiss' kappa on the core pairs answered by every stakeholder, plus mean pairwise agreement."""
    canon = _canonical(judgments, favourable_label)
    first = _first_presentations(canon)
    core = first[first["kind"] == "core"]
    result = {"core_pairs_used": 0, "raters": 0, "fleiss_kappa": float("nan"),
              "pairwise_agreement": float("nan")}
    if core.empty:
        return result
    raters = core.groupby(["i", "j"])["stakeholder"].nunique()
    r = int(raters.max())
    full = raters[raters == r].index
    if r < 2 or len(full) == 0:
        return result
    sub = core.set_index(["i", "j"]).loc[full].reset_index()
    counts = pd.crosstab([sub["i"], sub["j"]], sub["canonical"]).to_numpy()
    pairwise = ((np.square(counts).sum(axis=1) - r) / (r * (r - 1))).mean()
    result.update(core_pairs_used=int(len(full)), raters=r, fleiss_kappa=fleiss_kappa(counts),
                  pairwise_agreement=float(pairwise))
    return result


def contested_pairs(judgments: pd.DataFrame, favourable_label: int = 0,
                    threshold: float = 2 / 3) -> pd.DataFrame:
    """Pairs where judges disagree: opposite orientations asserted, or a majority below threshold."""
    agg = aggregate_constraints(judgments, "judged", favourable_label=favourable_label)
    canon = _first_presentations(_canonical(judgments, favourable_label))
    directional = canon[canon["canonical"].isin(["a_at_least_b", "b_at_least_a"])]
    opposite = directional.groupby(["i", "j"])["canonical"].nunique()
    opposite = set(opposite[opposite > 1].index)
    agg["opposite_orientations"] = [(i, j) in opposite for i, j in zip(agg["i"], agg["j"])]
    mask = (agg["n_judges"] >= 2) & ((agg["agreement"] < threshold) | agg["opposite_orientations"])
    return agg.loc[mask, ["i", "j", "n_judges", "n_same", "agreement", "opposite_orientations"]] \
        .sort_values(["agreement", "n_judges"], ascending=[True, False]).reset_index(drop=True)


# ----------------------------------------------------------------------------- simulation

SIMULATION_LABEL = "Simulated stakeholders, not real judgments"


def _judge_space(frame: pd.DataFrame) -> pd.DataFrame:
    """Features on which simulated judges measure similarity (spec 2: log-priors, age/10, ...)."""
    return pd.DataFrame({
        "log_priors": np.log1p(frame["priors_count"].to_numpy(dtype=float)),
        "age10": frame["age"].to_numpy(dtype=float) / 10.0,
        "juvenile": np.log1p((frame["juv_fel_count"] + frame["juv_misd_count"]
                              + frame["juv_other_count"]).to_numpy(dtype=float)),
        "felony": (frame["c_charge_degree"].astype(str) == "F").to_numpy(dtype=float),
        "male": (frame["sex"].astype(str) == "Male").to_numpy(dtype=float),
        "black": (frame["race"].astype(str) == "African-American").to_numpy(dtype=float),
    })


def simulate_judgments(frame: pd.DataFrame, assignments: pd.DataFrame, rng: np.random.Generator,
                       kind: str = "metric", response_mode: str = "binary",
                       flip_noise: float = 0.05) -> pd.DataFrame:
    """Answer assigned cards with simulated stakeholders (spec section 2; labelled as simulated).

    "metric" judges weigh log-priors, age/10, juvenile counts and charge degree (40% also race
    and sex) and call the closest q ~ U(0.1, 0.7) share of their pairs "same", with flip noise.
    "score" judges call a pair "same" when a fixed logistic risk score differs by little.
    """
    if kind not in ("metric", "score"):
        raise ValueError("Simulated judges are 'metric' or 'score'.")
    if response_mode not in RESPONSE_MODES:
        raise ValueError(f"Response mode must be one of {list(RESPONSE_MODES)}.")
    if not {"stakeholder", "a", "b"} <= set(assignments.columns):
        raise ValueError("Assignments need columns stakeholder, a and b.")
    space = _judge_space(frame).to_numpy()
    a = assignments["a"].to_numpy(dtype=np.int64)
    b = assignments["b"].to_numpy(dtype=np.int64)
    diff = np.abs(space[a] - space[b])
    codes, uniques = pd.factorize(assignments["stakeholder"], sort=False)
    k = len(uniques)
    if kind == "metric":
        weights = rng.exponential(1.0, size=(k, space.shape[1]))
        ignores_demographics = rng.random(k) < 0.6
        weights[ignores_demographics, 4:] = 0.0
        q = rng.uniform(0.1, 0.7, size=k)
        dist = np.einsum("nd,nd->n", diff, weights[codes])
    else:
        coef = np.array([0.9, -0.35, 0.4, 0.2, 0.1, 0.0])
        dist = np.abs((space[a] - space[b]) @ coef)
        q = rng.uniform(0.2, 0.5, size=k)
    # Each judge's threshold is the q-quantile of its own distances; ties (repeats) agree.
    order = np.lexsort((dist, codes))
    counts = np.bincount(codes, minlength=k)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    cut = starts + np.clip(np.ceil(q * counts).astype(np.int64) - 1, 0, None)
    threshold = dist[order][cut]
    same = dist <= threshold[codes]
    same ^= rng.random(len(same)) < flip_noise
    out = assignments.copy()
    other = "differ" if response_mode == "binary" else "none"
    out["response"] = np.where(same, "same", other)
    out["simulated"] = True
    return out


def simulated_roster(n_stakeholders: int) -> list[str]:
    """Pseudonyms of a simulated panel; with the session seed they fix every simulated card."""
    return [f"simulated-{k + 1:02d}" for k in range(n_stakeholders)]


def simulated_answer_stream(seed: int) -> np.random.Generator:
    """The one random stream a simulated panel answers from (a store demo session uses it too)."""
    return make_rng([seed, 11])


def demo_panel(n_stakeholders: int = 12, config: ElicitationPlan | None = None, seed: int = 0,
               kind: str = "metric", frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """A whole simulated panel (assignments and answers) without a database.

    The same cards and answers as a demo session filled in the store with this roster and seed.
    """
    if n_stakeholders < 1:
        raise ValueError("A panel needs at least one stakeholder.")
    config = config or ElicitationPlan()
    if frame is None:
        from core.datasets import load_compas
        frame = load_compas()
    rows = population_rows(config)
    core = core_pairs(config, rows)
    parts = []
    for sid in simulated_roster(n_stakeholders):
        part = sample_assignment(config, core, rows, make_rng(stakeholder_seed(config.seed, sid)))
        part.insert(0, "stakeholder", sid)
        parts.append(part)
    assignments = pd.concat(parts, ignore_index=True)
    return simulate_judgments(frame, assignments, simulated_answer_stream(seed), kind=kind,
                              response_mode=config.response_mode)
