"""The synthesizer registry: key -> Spec (label, factory, Params). One module plus one line here adds
a synthesizer (AIM and GEM are expected to arrive this way)."""
from __future__ import annotations

from dataclasses import dataclass

from core.contracts import Registry, Spec, check_params, param
from core.synthesis.aim import AIM
from core.synthesis.gem import GEM
from core.synthesis.synthesizers import MST, IndependentMarginals


@dataclass(frozen=True)
class IndependentParams:
    """The independent-marginals baseline has no settings."""

    def __post_init__(self) -> None:
        check_params(self)


@dataclass(frozen=True)
class MSTParams:
    compress: bool = param(True, label="Merge rare values",
                           help="Values whose noisy one-way count is below three noise standard deviations "
                                "share one bucket (MST, McKenna et al. 2021, Sec. 4).")

    def __post_init__(self) -> None:
        check_params(self)


@dataclass(frozen=True)
class AIMParams:
    degree: int = param(2, label="Workload", choices={2: "all two-way marginals", 3: "all three-way marginals"},
                        help="The marginals AIM tries to preserve (McKenna et al. 2022 use three-way).")
    max_cells: int = param(10_000, label="Largest workload table (cells)", low=4, high=1_000_000, step=1000,
                           help="Workload marginals with more cells than this are left out.")
    max_rounds: int = param(0, label="Rounds at most (0: 16 per column)", low=0, high=400, step=1,
                            help="Plans the per-round budget; 0 means the paper's 16 x the number of columns. "
                                 "Annealing ends the fit sooner when the model stops improving.")
    max_model_mb: float = param(80.0, label="Model size cap (MB)", low=1.0, high=1000.0, step=10.0,
                                help="Marginals that would make the junction tree larger are not selected.")

    def __post_init__(self) -> None:
        check_params(self)


@dataclass(frozen=True)
class GEMParams:
    rounds: int = param(100, label="Rounds", low=2, high=1000, step=10,
                        help="Selections and measurements; the budget is split evenly over them.")
    steps: int = param(12, label="Training steps per round", low=1, high=1000, step=1)
    batch: int = param(2000, label="Generator rows per step", low=16, high=10_000, step=100)
    scale_rounds: bool = param(True, label="Rounds in proportion to a stratum's size",
                               help="Stratified: a stratum runs the rounds times its share of the rows "
                                    "(at least 10), so small strata measure fewer marginals with less noise "
                                    "each. Shares come from the sizes used (public or noisy), never exact "
                                    "private counts. Every fit, pooled too, then runs only as many rounds as "
                                    "its noisy row count and budget carry (at least 3).")

    def __post_init__(self) -> None:
        check_params(self)


SYNTHESIZERS = Registry("synthesizer", (
    Spec("independent", "Independent marginals (baseline)", lambda p: IndependentMarginals(), IndependentParams,
         help="Noisy one-way marginals only; every column drawn independently."),
    Spec("mst", "MST (maximum spanning tree)", lambda p: MST(compress=p.compress), MSTParams,
         help="A third of the budget on all one-way marginals (rare values merged), a third to pick a "
              "spanning tree of column pairs with the exponential mechanism, a third on the tree's "
              "two-way marginals; the tree model is fitted by least squares and sampled parents first."),
    Spec("aim", "AIM (adaptive, workload-aware)",
         lambda p: AIM(p.degree, p.max_cells, p.max_model_mb, p.max_rounds or None), AIMParams,
         help="One-way marginals first, then rounds that pick the worst-fitted workload marginal with the "
              "exponential mechanism, measure it and re-fit a graphical model (Private-PGM)."),
    Spec("gem", "GEM (generator network)", lambda p: GEM(p.rounds, p.steps, p.batch, scale_rounds=p.scale_rounds), GEMParams,
         help="A small neural generator trained on adaptively selected noisy two-way marginals; the "
              "stated budget is the total over all rounds. A marginal picked again is averaged with its "
              "earlier measurements, weighted by their precision. Departs from the paper's setup: two-way "
              "rather than three-way marginals (the page scores two-way fidelity, and triples cost about "
              "90 times more per step on CPS), a 96-wide network trained 12 steps a round on 2,000 generator "
              "rows at learning rate 3e-3 rather than 512 wide at 1e-4 (on CPS at epsilon 1, the two-way "
              "fidelity of a 256-wide network at 40 steps on 1,000 rows in about a quarter of its time), "
              "100 rounds as in the paper, scaled by a stratum's share when stratified."),
))


def make_synthesizer(key: str, params=None):
    """A fresh synthesizer for a registry key (default Params when none are given)."""
    return SYNTHESIZERS[key].build(params)
