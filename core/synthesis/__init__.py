"""Stratified private estimation and synthesis: mean estimators, synthesizers, the stratification
wrapper, utility and disparity metrics, and the sweep behind the Stratified synthesis page."""
from core.synthesis.encoding import decode_categories, encode_categories
from core.synthesis.synthesizers import MST, IndependentMarginals

__all__ = ["MST", "IndependentMarginals", "encode_categories", "decode_categories"]
