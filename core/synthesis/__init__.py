"""Stratified private estimation and synthesis: mean estimators, synthesizers (one registry), the
stratification wrapper, utility and disparity metrics, and the plan -> run -> result of the
Stratified synthesis page."""
from core.synthesis.encoding import decode_categories, encode_categories
from core.synthesis.mean_release import MeanReleasePlan, release_stratified_mean
from core.synthesis.plan import (NOISES, MarginalsPlan, MeansPlan, ReleasePlan, SweepPlan, SynthesisPlan,
                                 parse_epsilons)
from core.synthesis.registry import (SYNTHESIZERS, AIMParams, GEMParams, IndependentParams, MSTParams,
                                     make_synthesizer)
from core.synthesis.workflow import SynthesisResult, run, secure_release
from core.synthesis.stratified import StratifiedSynthesizer
from core.synthesis.synthesizers import MST, IndependentMarginals

# the area's descriptor, registered for the shared machinery (core.areas); last, as it reads the above
from core.synthesis.area import AREA  # noqa: E402

__all__ = ["AREA", "SynthesisPlan", "SweepPlan", "MarginalsPlan", "ReleasePlan", "MeansPlan", "SynthesisResult", "run",
           "secure_release", "MeanReleasePlan", "release_stratified_mean", "parse_epsilons", "SYNTHESIZERS", "NOISES", "IndependentParams", "MSTParams",
           "AIMParams", "GEMParams",
           "make_synthesizer", "StratifiedSynthesizer", "MST", "IndependentMarginals", "encode_categories",
           "decode_categories"]
