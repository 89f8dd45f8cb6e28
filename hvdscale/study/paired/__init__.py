"""Paired rounds: which interleaved round a record measured, and what the per-round ratios
recommend over a reference."""
