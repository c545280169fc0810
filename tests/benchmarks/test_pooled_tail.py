"""The retention row's p99 pools the tails of several loads: it must be the p99 of all their
answers taken together, not a mean or median of each load's p99.

These are the benchmarks' own helpers (``benchmarks._shared``, ``benchmarks._receiver_bench``), not
the package's: there is no public name to test them through, hence the private import.
"""

from __future__ import annotations

import random

from benchmarks._env import percentile
from benchmarks._receiver_bench import TAIL_FROM, TAIL_STEP, tail_of
from benchmarks._shared import pooled_percentile


def test_the_pooled_p99_is_that_of_every_answer_taken_together() -> None:
    rng = random.Random(7)
    # Five loads of 5,000 answers; one of them stalls and is three times slower.
    loads = [
        [rng.expovariate(1 / 1000) * (3 if n == 2 else 1) for _ in range(5_000)] for n in range(5)
    ]
    pooled = pooled_percentile([tail_of(load) for load in loads], 99.0, TAIL_FROM, TAIL_STEP)
    together = percentile([value for load in loads for value in load], 99.0)
    each = sorted(percentile(load, 99.0) for load in loads)
    assert abs(pooled - together) <= 0.01 * together
    # The median of the loads' own p99s would hide the stalled load's tail.
    assert pooled > 1.5 * each[2]


def test_one_load_pools_to_its_own_p99() -> None:
    rng = random.Random(8)
    load = [rng.uniform(100, 5_000) for _ in range(3_000)]
    pooled = pooled_percentile([tail_of(load)], 99.0, TAIL_FROM, TAIL_STEP)
    assert abs(pooled - percentile(load, 99.0)) <= 1.0
