"""Batches for each rank: plans, buckets, the global split and the step agreement.

Inside the package the calls run one way: ``schedule`` uses ``plan``; ``plan`` uses ``buckets``
and ``split``; those two use nothing here.
"""

from hvdscale.core.batching.buckets import (
    bucket_batches,
    bucket_groups,
    bucket_ids,
    geometric_boundaries,
)
from hvdscale.core.batching.plan import (
    BatchPlan,
    GlobalPlan,
    make_plan,
    per_rank_batch_size,
    per_rank_token_budget,
)
from hvdscale.core.batching.schedule import (
    Schedule,
    aligned_sequence,
    build_schedule,
    local_summary,
    make_schedule,
)
from hvdscale.core.batching.split import split_by_slots

__all__ = ["BatchPlan", "GlobalPlan", "Schedule", "aligned_sequence", "bucket_batches",
           "bucket_groups", "bucket_ids", "build_schedule", "geometric_boundaries",
           "local_summary", "make_plan", "make_schedule", "per_rank_batch_size",
           "per_rank_token_budget", "split_by_slots"]
