"""Noise mechanisms (one registry: calibration, sampler, moments, spend), accounting, the budget
ledger and the secure release path."""
from core.privacy.mechanisms import MECHANISMS, NoiseMechanism, get_mechanism, mechanism_id

__all__ = ["MECHANISMS", "NoiseMechanism", "get_mechanism", "mechanism_id"]
