"""Batches for each rank: plans, buckets, the global split and the step agreement."""
