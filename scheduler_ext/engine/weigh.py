"""Vectorized host weighing, after nova's RAM/CPU/Disk weighers.

nova gives each host ``sum(multiplier * normalize(value))`` where
``normalize`` maps the values of the hosts being weighed linearly onto
[0, 1] (all equal: all 0), and the values are the free RAM, vCPUs and disk.
A positive multiplier spreads (prefers the most free), a negative one packs.

Here the value of a class is the free units ``floor((total - reserved) *
ratio) - used`` of the provider that supplies that class in the root's
chosen allocation (a sharing provider for shared disk), or of the root for
a class the request does not name. The order is weight descending, then
provider uuid ascending (deterministic); ``host_subset_size`` > 1 draws the
first host at random among the best ones, like nova's
``[filter_scheduler]host_subset_size``.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Callable, Mapping

import numpy as np

#: nova's default multipliers (ram/cpu/disk_weight_multiplier = 1.0).
NOVA_DEFAULTS = {"MEMORY_MB": 1.0, "VCPU": 1.0, "DISK_GB": 1.0}


def normalize(values: np.ndarray) -> np.ndarray:
    """nova's ``weights.normalize``: ``(x - min) / (max - min)``; zeros
    when every value is equal (or there are none)."""
    values = np.asarray(values, np.float64)
    if not len(values):
        return values
    lo, hi = values.min(), values.max()
    if hi == lo:
        return np.zeros(len(values))
    return (values - lo) / (hi - lo)


@dataclasses.dataclass(frozen=True)
class Weigher:
    """``multipliers``: resource class -> multiplier (0 disables)."""

    multipliers: Mapping[str, float] = dataclasses.field(
        default_factory=lambda: dict(NOVA_DEFAULTS))

    @classmethod
    def nova(cls, ram: float = 1.0, cpu: float = 1.0, disk: float = 1.0) -> "Weigher":
        """nova's ram/cpu/disk_weight_multiplier."""
        return cls({"MEMORY_MB": ram, "VCPU": cpu, "DISK_GB": disk})

    def weigh(self, free: Callable[[str], np.ndarray], count: int) -> np.ndarray:
        """Weights of ``count`` hosts; ``free(rc)`` gives their free units."""
        out = np.zeros(count)
        for rc, mult in self.multipliers.items():
            if mult:
                out += mult * normalize(free(rc))
        return out


def top_k(weights: np.ndarray, hi: np.ndarray, lo: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` best hosts, best first: weight descending,
    then the uuid key ``(hi, lo)`` ascending. O(n) plus O(k log k)."""
    n = len(weights)
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, np.int64)
    if k < n:
        kth = np.partition(-weights, k - 1)[k - 1]
        better = np.flatnonzero(-weights < kth)
        ties = np.flatnonzero(-weights == kth)
        need = k - len(better)
        if need < len(ties):
            # among equal weights the smallest uuids win (exact: every tie
            # whose high half reaches the need-th smallest is sorted)
            edge = np.partition(hi[ties], need - 1)[need - 1]
            ties = ties[hi[ties] <= edge]
            ties = ties[np.lexsort((lo[ties], hi[ties]))[:need]]
        pick = np.concatenate([better, ties])
    else:
        pick = np.arange(n)
    order = np.lexsort((lo[pick], hi[pick], -weights[pick]))
    return pick[order]


def subset_first(order: np.ndarray, host_subset_size: int,
                 rng: random.Random | None = None) -> np.ndarray:
    """Move one host drawn from the first ``host_subset_size`` to the front
    (nova's host_subset_size); the rest keep their order."""
    if host_subset_size <= 1 or len(order) <= 1:
        return order
    rng = rng or random.Random()
    i = rng.randrange(min(host_subset_size, len(order)))
    return np.concatenate([order[i:i + 1], order[:i], order[i + 1:]])
