"""A differentially private synthetic copy of the people pair cards show (spec 4.4).

Instead of real COMPAS records, a session may show people drawn from a synthetic copy of its
population, made with the project's MST synthesizer under (epsilon, delta)-DP. The copy holds the
eight learner features (age and the four counts cut into bins whose edges are fixed here from the
schema, never from the data; sex, race and charge degree on their declared categories) plus the
age group, which follows from the age bin. Its size is a public constant, not the private row
count, so nothing about the number of real people is published.

Two views come back: ``cards`` (what stakeholders read: bins as ranges such as "25-29") and
``people`` (bin midpoints as numbers, for simulated judges and the learner). ``ledger`` holds the
spend in rho, converted from (epsilon, delta) only through ``core.privacy.accounting``.

A copy stakeholders see is a release: ``release_synthetic_people`` fits MST with OpenDP's sampler
(``SecureNoise``) and draws its people with a fresh operating-system seed, so nothing in a plan or
report can regenerate it. It gets a random copy id; the copy itself (the DP output) is stored in the
sessions database and every later use loads it by that id (``synthetic_people(plan, store)``), never
refits. A run that shows a copy takes it as its data; nothing here opens a database by itself.
``simulated_synthetic_people`` takes an explicit generator: a reproducible simulation for tests,
never shown to stakeholders.
"""
from __future__ import annotations

import math
import re
import secrets
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from core.cache import data_fingerprint
from core.contracts import DataRef, Plan, Progress, Result, digest_of
from core.datasets import COMPAS_POPULATIONS, compas_population, load_compas
from core.privacy.accounting import rho_for_epsilon, rho_to_epsilon
from core.privacy.ledger import BudgetLedger
from core.privacy.project_ledger import LedgerRelease, data_key, release_key, spends_of
from core.synthesis import encoding
from core.synthesis.noise import SecureNoise, SeededNoise
from core.synthesis.registry import make_synthesizer
from core.uncertainty_words import LEDGER_TOTAL, SET_BY_PLAN

PAIR_SOURCES = {"real": "real records", "dp_synthetic": "a private synthetic copy"}
#: The delta of every synthetic copy: fixed and stated, far below one over any plausible row count.
PAIR_DELTA = 1e-6
MAX_PAIR_EPSILON = 10.0
#: People in every synthetic copy: public and the same for every population and budget.
SYNTHETIC_PEOPLE = 2000
SYNTHETIC_NOTE = ("These people are synthetic: drawn from a differentially private copy of the data, "
                  "not real records.")
SAMPLING_NOTE = ("Constraint people are synthetic; the guarantee's sampling assumption does not hold "
                 "(the pairs were not drawn from the people the model is trained on).")

# Public bin edges, from the schema (adults from 18; counts are whole numbers from 0). Each bin is
# [lo, hi); values at or above the last edge are clipped into the top bin.
BIN_EDGES: dict[str, tuple[int, ...]] = {
    "age": (18, 21, 25, 30, 35, 40, 46, 55, 65, 100),
    "priors_count": (0, 1, 2, 3, 5, 8, 12, 20, 40),
    "juv_fel_count": (0, 1, 2, 4, 20),
    "juv_misd_count": (0, 1, 2, 4, 20),
    "juv_other_count": (0, 1, 2, 4, 20),
}
#: Declared categories of the categorical card features (the schema's, whatever the data holds).
CATEGORIES: dict[str, tuple[str, ...]] = {
    "sex": ("Female", "Male"),
    "race": ("African-American", "Asian", "Caucasian", "Hispanic", "Native American", "Other"),
    "c_charge_degree": ("F", "M"),
}
#: The project-ledger action of a copy's release (its key adds the plan digest, which holds the copy id).
COPY_ACTION = "synthetic pair people"
COPY_PAGE = "Fairness elicitation"
#: Copy ids: random lowercase hex tokens (a simulated copy's start with "sim").
_COPY_ID = re.compile(r"^(sim)?[0-9a-f]{16,32}$")
SYNTH_COLUMNS = ("age", "priors_count", "juv_fel_count", "juv_misd_count", "juv_other_count",
                 "sex", "race", "c_charge_degree")
AGE_GROUPS = ("Less than 25", "25 - 45", "Greater than 45")


def bin_labels(feature: str) -> list[str]:
    """Readable labels of a feature's bins: "3", "5-7", and "65+" for the open top bin."""
    edges = BIN_EDGES[feature]
    out = []
    for k, (lo, hi) in enumerate(zip(edges[:-1], edges[1:])):
        top = k == len(edges) - 2
        out.append(f"{lo}+" if top else (str(lo) if hi - lo == 1 else f"{lo}-{hi - 1}"))
    return out


def bin_midpoints(feature: str) -> np.ndarray:
    """A number per bin for the learner: the middle of the whole numbers the bin holds."""
    edges = np.asarray(BIN_EDGES[feature], dtype=float)
    return (edges[:-1] + edges[1:] - 1.0) / 2.0


def check_pair_epsilon(epsilon) -> float:
    """The epsilon of a synthetic copy as a float, or a ValueError saying what to change."""
    if isinstance(epsilon, bool):
        raise ValueError("The synthetic copy's epsilon must be a number.")
    try:
        value = float(epsilon)
    except (TypeError, ValueError):
        raise ValueError(f"The synthetic copy's epsilon must be a number, got {epsilon!r}.") from None
    if not math.isfinite(value) or value <= 0 or value > MAX_PAIR_EPSILON:
        raise ValueError(f"The synthetic copy's epsilon must be a number above 0 and at most "
                         f"{MAX_PAIR_EPSILON:g}; got {epsilon!r}.")
    return value


def check_copy_id(copy_id) -> str:
    """A copy id as stored ("" for a copy not made yet), or a ValueError."""
    if copy_id == "":
        return ""
    if not isinstance(copy_id, str) or not _COPY_ID.match(copy_id):
        raise ValueError(f"A synthetic copy id is a token of 16 to 32 lowercase hex characters; got {copy_id!r}.")
    return copy_id


def new_copy_id() -> str:
    """A fresh random copy id (operating-system randomness)."""
    return secrets.token_hex(8)


@dataclass(frozen=True)
class PrivatePairsPlan(Plan):
    """What names a synthetic copy: the data, the population copied, the budget and the copy's id.

    ``copy_id`` is empty for a copy not made yet; once made, the id (not a seed) is what finds it."""

    data: DataRef = field(default_factory=lambda: DataRef("compas"))
    population: str = "paper"
    epsilon: float = 1.0
    copy_id: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.data, DataRef) or self.data.source != "compas":
            raise ValueError("The synthetic copy is made from the bundled COMPAS data (DataRef('compas')).")
        if self.population not in COMPAS_POPULATIONS:
            raise ValueError(f"Unknown population {self.population!r}; choose one of {list(COMPAS_POPULATIONS)}.")
        object.__setattr__(self, "epsilon", check_pair_epsilon(self.epsilon))
        object.__setattr__(self, "copy_id", check_copy_id(self.copy_id))

    @property
    def delta(self) -> float:
        return PAIR_DELTA

    @property
    def rho(self) -> float:
        """The zCDP budget whose (epsilon, delta) conversion stays within the plan's epsilon."""
        return rho_for_epsilon(self.epsilon, PAIR_DELTA)

    @property
    def simulated(self) -> bool:
        return self.copy_id.startswith("sim")

    def label(self) -> str:
        name = f", copy {self.copy_id}" if self.copy_id else ""
        return f"synthetic pair people (MST, epsilon {self.epsilon:g}, delta {PAIR_DELTA:g}{name})"


def planned_ledger(plan: PrivatePairsPlan) -> BudgetLedger:
    """The spends of the plan's copy, known before any data is read (for the cap check)."""
    ledger = BudgetLedger()
    ledger.spend("MST synthetic copy of the card features", plan.rho, "rho",
                 measured="one-way and tree two-way marginals of the population's card features")
    return ledger


@dataclass
class SyntheticPeople(Result):
    """The synthetic people: card text, numeric features, and what making them spent."""

    plan: PrivatePairsPlan
    cards: pd.DataFrame
    people: pd.DataFrame
    spent: BudgetLedger
    secure: bool = False
    created_at: str = ""

    @property
    def copy_id(self) -> str:
        return self.plan.copy_id

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"synthetic_people": self.cards, "synthetic_ledger": self.spent.to_frame()}

    def headline(self) -> dict[str, float]:
        return {"synthetic people": float(len(self.cards)), "epsilon": self.plan.epsilon,
                "delta": PAIR_DELTA, "rho": self.spent.total("rho")}

    def headline_uncertainty(self) -> dict[str, str]:
        """Every number here is set by the plan or public by construction; the copy itself is one draw."""
        return {"synthetic people": "exact (a public constant, not the private row count)",
                "epsilon": SET_BY_PLAN, "delta": SET_BY_PLAN, "rho": LEDGER_TOTAL}

    def ledger(self) -> BudgetLedger:
        return self.spent

    def fingerprint(self) -> str:
        """What a cached run keys this copy on: its id, plan and card values (a copy never changes)."""
        return digest_of([self.plan, data_fingerprint(self.cards)])


def declared_categories(col: str, population: str = "full") -> tuple[str, ...]:
    """A categorical feature's public categories in a population: the paper's people exclude race
    'Other' by their definition, so their copy never shows it."""
    cats = CATEGORIES[col]
    return tuple(c for c in cats if c != "Other") if col == "race" and population == "paper" else cats


def card_categories(frame: pd.DataFrame, population: str = "full") -> pd.DataFrame:
    """The card features of real rows as categories on the public bins and declared categories."""
    out = {}
    for col in SYNTH_COLUMNS:
        if col in BIN_EDGES:
            edges = np.asarray(BIN_EDGES[col])
            values = frame[col].to_numpy(dtype=float)
            if np.isnan(values).any():
                raise ValueError(f"Column {col!r} has missing values; the synthetic copy needs complete rows.")
            code = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(edges) - 2)
            out[col] = pd.Categorical.from_codes(code, categories=bin_labels(col))
        else:
            cats = list(declared_categories(col, population))
            values = frame[col].astype(str)
            unknown = sorted(set(values) - set(cats))
            if unknown:
                raise ValueError(f"Column {col!r} holds values {unknown} outside its declared categories.")
            out[col] = pd.Categorical(values, categories=cats)
    return pd.DataFrame(out)


def _views(codes: pd.DataFrame, population: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Card text and numeric people from sampled integer codes."""
    cards, people = {}, {}
    for col in SYNTH_COLUMNS:
        c = codes[col].to_numpy(dtype=np.int64)
        if col in BIN_EDGES:
            cards[col] = np.asarray(bin_labels(col), dtype=object)[c]
            people[col] = bin_midpoints(col)[c]
        else:
            cats = list(declared_categories(col, population))
            labels = np.asarray(cats, dtype=object)[c]
            cards[col] = people[col] = pd.Categorical(labels, categories=cats)
    lower = np.asarray(BIN_EDGES["age"])[codes["age"].to_numpy(dtype=np.int64)]
    group = np.where(lower < 25, 0, np.where(lower < 46, 1, 2))   # the age edges sit at 25 and 46
    cards["age_cat"] = people["age_cat"] = pd.Categorical.from_codes(group, categories=list(AGE_GROUPS))
    return pd.DataFrame(cards), pd.DataFrame(people)


def _fit_and_draw(plan: PrivatePairsPlan, noise, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    frame = load_compas().iloc[compas_population(plan.population)].reset_index(drop=True)
    codes, domain, _ = encoding.encode_categories(card_categories(frame, plan.population))
    model = make_synthesizer("mst").fit(codes, domain, plan.rho, rng, noise=noise)
    sampled = model.sample(SYNTHETIC_PEOPLE, rng)
    return _views(sampled[list(SYNTH_COLUMNS)], plan.population)


def _now() -> str:
    from datetime import datetime, timezone
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def release_synthetic_people(plan: PrivatePairsPlan, *, progress: Progress | None = None) -> SyntheticPeople:
    """A new synthetic copy under (epsilon, delta)-DP: MST's privacy noise from OpenDP's sampler, the
    people drawn with a fresh operating-system seed (post-processing), and a new random copy id.

    Every call is a new release that spends ``plan.rho``: record it in the project ledger
    (``copy_release``) and store it (the sessions database) before anyone sees it."""
    if not isinstance(plan, PrivatePairsPlan):
        raise ValueError("release_synthetic_people needs a PrivatePairsPlan.")
    if progress is not None:
        progress(0, 1, "Making the private synthetic copy")
    rng = np.random.default_rng(secrets.randbits(128))
    cards, people = _fit_and_draw(plan, SecureNoise(), rng)
    if progress is not None:
        progress(1, 1, "Synthetic copy ready")
    made = plan.replace(copy_id=new_copy_id())
    return SyntheticPeople(made, cards, people, planned_ledger(made), secure=True, created_at=_now())


def simulated_synthetic_people(plan: PrivatePairsPlan, rng: np.random.Generator) -> SyntheticPeople:
    """A simulation of a copy, reproducible from ``rng`` (seeded noise): for tests and studies only.

    Its id starts with "sim"; it is never recorded as a release nor shown on a session's cards."""
    if not isinstance(plan, PrivatePairsPlan):
        raise ValueError("simulated_synthetic_people needs a PrivatePairsPlan.")
    if not isinstance(rng, np.random.Generator):
        raise ValueError("A simulated copy needs an explicit numpy Generator.")
    # the same plan and rng, the same id; another plan on the same seed gets another id
    made = plan.replace(copy_id="sim" + digest_of([plan.digest(), int(rng.integers(2 ** 63))])[:16])
    cards, people = _fit_and_draw(plan, SeededNoise(rng), rng)
    return SyntheticPeople(made, cards, people, planned_ledger(made), secure=False, created_at=_now())


# ---------------------------------------------------------------- stored copies

#: Copies this process has made or loaded, by copy id (a copy never changes once made).
_COPIES: dict[str, SyntheticPeople] = {}


def copy_digest(copy: SyntheticPeople) -> str:
    """SHA-256 of what a copy is (its id, data, population, budget and people), not of when it was made."""
    data = copy_to_json(copy)
    return digest_of({k: data[k] for k in ("copy_id", "data_key", "population", "epsilon", "delta",
                                           "cards", "people")})


def same_copy(a: SyntheticPeople, b: SyntheticPeople) -> bool:
    return a is b or copy_digest(a) == copy_digest(b)


def copy_clash(copy_id: str) -> ValueError:
    """The refusal when other people arrive under a copy id already in use: copies are immutable."""
    return ValueError(f"Synthetic copy {copy_id} already exists here with other people, and a copy never "
                      "changes once made. Import the export made where this copy was released, unchanged, "
                      "or export the session again from that dashboard.")


def refuse_clash(copy: SyntheticPeople) -> None:
    """ValueError when this process already holds other people under ``copy``'s id."""
    known = _COPIES.get(copy.copy_id)
    if known is not None and not same_copy(known, copy):
        raise copy_clash(copy.copy_id)


def remember_copy(copy: SyntheticPeople) -> SyntheticPeople:
    """Keep a copy in this process's cache under its id (the store calls this on save and load) and
    return the cached one. Another copy under a cached id is refused (ValueError), never swapped in:
    live sessions in this process keep showing the people they showed."""
    if not copy.copy_id:
        raise ValueError("Only a made copy (with a copy id) can be cached.")
    known = _COPIES.setdefault(copy.copy_id, copy)
    if not same_copy(known, copy):
        raise copy_clash(copy.copy_id)
    return known


def copy_to_json(copy: SyntheticPeople) -> dict:
    """The stored or exported form of a copy: its metadata and people (cards and numeric views)."""
    return {"copy_id": copy.copy_id, "data_key": data_key(copy.plan.data), "population": copy.plan.population,
            "epsilon": copy.plan.epsilon, "delta": PAIR_DELTA, "created_at": copy.created_at,
            "secure": bool(copy.secure),
            "cards": {c: [str(v) for v in copy.cards[c]] for c in copy.cards.columns},
            "people": {c: (copy.people[c].astype(str).tolist() if isinstance(copy.people[c].dtype, pd.CategoricalDtype)
                           else copy.people[c].astype(float).tolist()) for c in copy.people.columns}}


def copy_from_json(data: dict) -> SyntheticPeople:
    """A copy from its stored or exported form, checked: the public size, every card value on the public
    bins and declared categories, and numeric views that agree with the cards (ValueError otherwise)."""
    if not isinstance(data, dict):
        raise ValueError("A stored synthetic copy must be a JSON object.")
    try:
        plan = PrivatePairsPlan(population=data["population"], epsilon=data["epsilon"], copy_id=data["copy_id"])
        cards_in = data["cards"]
        people_in = data["people"]
    except KeyError as err:
        raise ValueError(f"The stored synthetic copy lacks {err.args[0]!r}.") from None
    if not plan.copy_id:
        raise ValueError("A stored synthetic copy needs its copy id.")
    delta = data.get("delta", PAIR_DELTA)
    if data.get("data_key", "compas") != "compas" or isinstance(delta, bool) \
            or not isinstance(delta, (int, float)) or delta != PAIR_DELTA:
        raise ValueError(f"Synthetic copy {plan.copy_id} is not a COMPAS copy at delta {PAIR_DELTA:g}.")
    secure, created_at = data.get("secure", True), data.get("created_at", "")
    if not isinstance(secure, bool):
        raise ValueError(f"Synthetic copy {plan.copy_id}: 'secure' must be true or false, got {secure!r:.40}.")
    if created_at is not None and not isinstance(created_at, str):
        raise ValueError(f"Synthetic copy {plan.copy_id}: 'created_at' must be a date and time as text.")
    if not isinstance(cards_in, dict) or not isinstance(people_in, dict):
        raise ValueError(f"Synthetic copy {plan.copy_id}: cards and people must be JSON objects of columns.")
    codes = {}
    for col in SYNTH_COLUMNS:
        labels = bin_labels(col) if col in BIN_EDGES else list(declared_categories(col, plan.population))
        values = cards_in.get(col)
        if not isinstance(values, list) or len(values) != SYNTHETIC_PEOPLE:
            raise ValueError(f"Synthetic copy {plan.copy_id}: column {col!r} must list {SYNTHETIC_PEOPLE} people.")
        try:
            code = pd.Index(labels).get_indexer(values)  # -1 for anything outside the public categories
        except TypeError:                                 # lists or objects where a label belongs
            code = np.full(len(values), -1)
        if (code < 0).any():
            raise ValueError(f"Synthetic copy {plan.copy_id}: column {col!r} holds values outside its public categories.")
        codes[col] = code
    cards, people = _views(pd.DataFrame(codes), plan.population)
    for view, given in (("cards", cards_in), ("people", people_in)):
        frame = cards if view == "cards" else people
        if set(given) != set(frame.columns):
            raise ValueError(f"Synthetic copy {plan.copy_id}: its {view} need columns {sorted(frame.columns)}.")
    for col in people.columns:
        want = people[col]
        got = people_in[col]
        if not isinstance(got, list) or len(got) != SYNTHETIC_PEOPLE \
                or any(isinstance(v, (bool, list, dict)) for v in got):
            same = False            # a column of other length or of lists, objects or yes/no values
        elif isinstance(want.dtype, pd.CategoricalDtype):
            same = list(map(str, got)) == want.astype(str).tolist()
        else:
            try:
                same = bool(np.allclose(np.asarray(got, dtype=float), want.to_numpy(dtype=float)))
            except (TypeError, ValueError):
                same = False        # text where a number belongs
        if not same:
            raise ValueError(f"Synthetic copy {plan.copy_id}: its numeric column {col!r} does not match its cards.")
    if list(map(str, cards_in["age_cat"])) != cards["age_cat"].astype(str).tolist():
        raise ValueError(f"Synthetic copy {plan.copy_id}: its age groups do not match its ages.")
    return SyntheticPeople(plan, cards, people, planned_ledger(plan), secure=secure,
                           created_at=created_at or "")


def matching_copy(plan: PrivatePairsPlan, copy) -> SyntheticPeople:
    """``copy`` when it is the made copy ``plan`` names (its id, population and epsilon), else a ValueError
    saying what to pass: a run showing a synthetic copy takes that copy as its data."""
    if not plan.copy_id:
        raise ValueError("This synthetic copy has not been made yet: a copy is released (and stored) when a "
                         "session showing it is created.")
    if copy is None:
        raise ValueError(f"This run shows synthetic copy {plan.copy_id}: pass that copy as its data (load it "
                         "from the sessions database, e.g. with the session store's load_copy).")
    if not isinstance(copy, SyntheticPeople):
        raise ValueError(f"The data of a run showing a synthetic copy is the copy (SyntheticPeople), not a "
                         f"{type(copy).__name__}.")
    if copy.copy_id != plan.copy_id:
        raise ValueError(f"The copy passed is {copy.copy_id or 'unnamed'}, but the plan names copy {plan.copy_id}.")
    if (copy.plan.population, copy.plan.epsilon) != (plan.population, plan.epsilon):
        raise ValueError(f"Synthetic copy {plan.copy_id} copies population {copy.plan.population!r} at epsilon "
                         f"{copy.plan.epsilon:g}, not what this plan names.")
    return copy


def synthetic_people(plan: PrivatePairsPlan, store=None) -> SyntheticPeople:
    """The made copy ``plan.copy_id`` names: from this process's cache of made and loaded copies, else
    loaded from ``store`` (anything with ``load_copy(copy_id)``, e.g. the elicitation store). Never fits
    anything and never opens a database by itself; ValueError naming the id when it cannot be found."""
    if not isinstance(plan, PrivatePairsPlan):
        raise ValueError("synthetic_people needs a PrivatePairsPlan.")
    if not plan.copy_id:
        raise ValueError("This synthetic copy has not been made yet: a copy is released (and stored) when a "
                         "session showing it is created.")
    copy = _COPIES.get(plan.copy_id)
    if copy is None:
        if store is None:
            raise ValueError(f"Synthetic copy {plan.copy_id} is not loaded here; pass the sessions database's "
                             "store that holds it.")
        copy = store.load_copy(plan.copy_id)
    return matching_copy(plan, copy)


def load_copy_for(plan: PrivatePairsPlan | None, store=None) -> SyntheticPeople | None:
    """What a run showing ``plan``'s copy takes as data: None for real records (``plan`` None), else the
    copy, fetched by the caller through ``synthetic_people``."""
    return None if plan is None else synthetic_people(plan, store)


def copy_release(plan: PrivatePairsPlan, page: str = COPY_PAGE) -> LedgerRelease:
    """The project-ledger record of a copy: one release per copy id (the key ends with the id, after
    the digest of the plan that holds it), so recording it again, here or after an import elsewhere,
    adds nothing.
    Without an id it is the pending release, for the cap check before a copy is made.
    The digest it records is that of the copy without its id (what the release depends on), so a second
    copy of the same population and budget is recognised as a repeat."""
    key = data_key(plan.data)
    digest = plan.digest()
    return LedgerRelease(key, release_key(COPY_ACTION, digest, plan.copy_id), "release", page, COPY_ACTION, plan.label(),
                         plan.replace(copy_id="").digest(), spends_of(planned_ledger(plan)), key)


def stated_epsilon(plan: PrivatePairsPlan) -> float:
    """The (epsilon, delta) guarantee the ledger's rho converts back to (never above the plan's)."""
    return rho_to_epsilon(plan.rho, PAIR_DELTA)


__all__ = ["COPY_ACTION", "check_copy_id", "copy_clash", "copy_digest", "copy_from_json", "copy_release", "copy_to_json",
           "new_copy_id", "refuse_clash", "same_copy",
           "release_synthetic_people", "remember_copy", "simulated_synthetic_people",
           "BIN_EDGES", "CATEGORIES", "MAX_PAIR_EPSILON", "PAIR_DELTA", "PAIR_SOURCES", "PrivatePairsPlan",
           "SAMPLING_NOTE", "SYNTHETIC_NOTE", "SYNTHETIC_PEOPLE", "SyntheticPeople", "bin_labels", "bin_midpoints",
           "card_categories", "check_pair_epsilon", "declared_categories", "load_copy_for", "matching_copy",
           "planned_ledger", "stated_epsilon", "synthetic_people"]
