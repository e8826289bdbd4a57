"""Noise mechanisms, privacy accounting and the budget ledger."""
