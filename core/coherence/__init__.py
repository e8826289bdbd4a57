"""Demographic coherence: release algorithms, adversaries, the audit and the theory calculator."""
