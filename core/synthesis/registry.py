"""The synthesizer registry: key -> Spec (label, factory, Params). One module plus one line here adds
a synthesizer (AIM and GEM are expected to arrive this way)."""
from __future__ import annotations

from dataclasses import dataclass

from core.contracts import Registry, Spec, check_params, param
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


SYNTHESIZERS = Registry("synthesizer", (
    Spec("independent", "Independent marginals (baseline)", lambda p: IndependentMarginals(), IndependentParams,
         help="Noisy one-way marginals only; every column drawn independently."),
    Spec("mst", "MST (maximum spanning tree)", lambda p: MST(compress=p.compress), MSTParams,
         help="A third of the budget on all one-way marginals (rare values merged), a third to pick a "
              "spanning tree of column pairs with the exponential mechanism, a third on the tree's "
              "two-way marginals; the tree model is fitted by least squares and sampled parents first."),
))


def make_synthesizer(key: str, params=None):
    """A fresh synthesizer for a registry key (default Params when none are given)."""
    return SYNTHESIZERS[key].build(params)
