"""Vectorized host weighing, after nova's RAM/CPU/Disk weighers.

nova gives each host ``sum(multiplier * normalize(value))`` where
``normalize`` maps the values of the hosts being weighed linearly onto
[0, 1] (all equal: all 0), and the values are the free RAM, vCPUs and disk.
A positive multiplier spreads (prefers the most free), a negative one packs.

Here the value of a class is the free units ``floor((total - reserved) *
ratio) - used`` of the provider that supplies that class in the root's
chosen allocation, or of the root for a class the request does not name.
The chosen allocation takes a class from the host's own tree where it can
(so a host with its own disk is weighed by it, as nova's DiskWeigher reads
the compute node's free disk), else from the sharing provider with the
most free units (a host with only shared disk, or too little of its own,
is weighed by the pool). The order is weight descending, then provider
uuid ascending (deterministic); ``host_subset_size`` > 1 draws the first
host at random among the best ones, like nova's
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
        # sum(m * (x - lo) / (hi - lo)) as sum(a * x) - sum(a * lo): one
        # fused pass per class instead of normalize()'s four
        out = np.zeros(count)
        tmp = np.empty(count)
        shift = 0.0
        for rc, mult in self.multipliers.items():
            if not mult or not count:
                continue
            x = free(rc)
            lo, hi = x.min(), x.max()
            if hi == lo:
                continue
            a = mult / float(hi - lo)
            np.multiply(x, a, out=tmp)
            out += tmp
            shift += a * float(lo)
        if shift:
            out -= shift
        return out


@dataclasses.dataclass(frozen=True)
class Weighing:
    """How the engine orders the hosts that fit: ``weigher`` (the
    multipliers) and ``host_subset_size`` (>= 1: the first host is drawn
    among that many best). Under nova both are nova's ``[filter_scheduler]``
    options, read by the nova layer; elsewhere nova's defaults."""

    weigher: Weigher = dataclasses.field(default_factory=Weigher)
    host_subset_size: int = 1

    def __post_init__(self) -> None:
        if self.host_subset_size < 1:
            raise ValueError(f"host_subset_size={self.host_subset_size}: "
                             "must be at least 1")


#: nova's defaults: every multiplier 1.0, host_subset_size 1.
DEFAULT_WEIGHING = Weighing()


def top_k(weights: np.ndarray, hi: np.ndarray, lo: np.ndarray, k: int,
          rows: np.ndarray | None = None) -> np.ndarray:
    """Positions of the ``k`` best hosts, best first: weight descending,
    then the uuid key ``(hi, lo)`` ascending. ``hi``/``lo`` are indexed by
    ``rows[position]`` when ``rows`` is given (only the few compared are
    read). O(n) plus O(k log k)."""
    n = len(weights)
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, np.int64)
    key = (lambda p: p) if rows is None else (lambda p: rows[p])  # noqa: E731
    if k < n:
        kth = kth_largest(weights, k)
        better = np.flatnonzero(weights > kth)
        ties = np.flatnonzero(weights == kth)
        need = k - len(better)
        if need < len(ties):
            # among equal weights the smallest uuids win (exact: every tie
            # whose high half reaches the need-th smallest is sorted)
            t_hi = hi[key(ties)]
            edge = np.partition(t_hi, need - 1)[need - 1]
            ties = ties[t_hi <= edge]
            ties = ties[np.lexsort((lo[key(ties)], hi[key(ties)]))[:need]]
        pick = np.concatenate([better, ties])
    else:
        pick = np.arange(n)
    keys = key(pick)
    # equal weights by the uuid key (hi, lo), smallest first
    return pick[best_first(weights[pick], lambda sub: (lo[keys[sub]], hi[keys[sub]]))]


def best_first(weights: np.ndarray,
               tie_keys: Callable[[np.ndarray], tuple[np.ndarray, ...]]) -> np.ndarray:
    """Positions of ``weights`` by weight descending; each run of equal
    weights keeps its places, ordered within by ``tie_keys(positions)`` (the
    positions of every tied weight; ``np.lexsort`` keys, the last one first).
    Sorted by weight alone, then only the tied runs (a sort on three keys
    costs about 2.5 times one)."""
    order = np.argsort(-weights, kind="stable")
    ordered = weights[order]
    same = ordered[1:] == ordered[:-1]
    if not same.any():
        return order
    tied = np.zeros(len(order), dtype=bool)
    tied[1:] |= same
    tied[:-1] |= same
    sub = order[tied]
    order[tied] = sub[np.lexsort((*tie_keys(sub), -weights[sub]))]
    return order


def kth_largest(values: np.ndarray, k: int, block: int = 1024) -> float:
    """The ``k``-th largest of ``values`` (1 <= k <= len). For long arrays
    the k-th largest of the block maxima bounds it from below, so only the
    few values above that bound are partitioned."""
    n = len(values)
    nb = n // block
    if nb >= 4 * k:
        maxima = np.concatenate([values[:nb * block].reshape(nb, block).max(axis=1),
                                 values[nb * block:]])
        bound = np.partition(maxima, len(maxima) - k)[len(maxima) - k]
        values = values[values >= bound]  # at least k values, usually few
    return np.partition(values, len(values) - k)[len(values) - k]


def subset_first(order: np.ndarray, host_subset_size: int,
                 rng: random.Random | None = None) -> np.ndarray:
    """Move one host drawn from the first ``host_subset_size`` to the front
    (nova's host_subset_size); the rest keep their order."""
    if host_subset_size <= 1 or len(order) <= 1:
        return order
    rng = rng or random.Random()
    i = rng.randrange(min(host_subset_size, len(order)))
    return np.concatenate([order[i:i + 1], order[:i], order[i + 1:]])
