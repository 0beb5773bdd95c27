"""The nova-free half of the end-to-end benchmark (``benchmarks/nova_e2e.py``):
a real placement on PostgreSQL holding a synthetic fleet, other writers
changing allocations at a set rate, per-decision phase timers, and the
report (table and plot).

The nova half (nova's cell database, nova's ``SchedulerManager`` and ours)
lives in ``benchmarks/`` because only ``scheduler_ext.nova`` may import
nova inside the package.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import random
import threading
import time
import uuid as uuidlib
from typing import Any, Callable, Iterator

from scheduler_ext import errors
from scheduler_ext.lab.bench_refresh import loaded_placement
from scheduler_ext.placement import AllocationWrite
from scheduler_ext.placement.http import HttpPlacement

#: the phases a decision is split into (see ``PhaseTimer``): "states" is
#: nova's host states of the candidates (read and built, or ours from the
#: mirror), "filters" and "weighers" nova's host filters and weighers,
#: "prep" nova's request preparation both schedulers run (request filters,
#: the placement query, notifications), "reads" the look-up of a move's
#: records
PHASES = ("refresh", "engine", "states", "filters", "weighers", "prep", "claim",
          "reads", "other")
#: nova's own work per decision: host states, filters, weighers
NOVA_PHASES = ("states", "filters", "weighers")


class PhaseTimer:
    """Wall time per phase of the current decision, summed over nested
    calls of instrumented functions (the outermost phase wins), and the
    time the process spent in garbage collections during it (``gc``: it
    falls inside whichever phase triggered it; ``gc:<phase>`` says which)."""

    def __init__(self) -> None:
        self.current: dict[str, float] = {}
        self._depth = threading.local()
        self._gc: dict[str, float] = {}
        self._gc_started: float | None = None
        #: the thread running the decision, and the phase it is in
        self._thread: int | None = None
        self._phase: str | None = None
        #: CPU seconds of the decision's work on other threads, per phase
        self._background: dict[str, float] = {}
        self._background_lock = threading.Lock()
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self._gc_started is not None:
            # whichever thread triggered it, the collection held up the
            # decision's thread in the phase that thread is in
            where = self._phase or "other"
            self._gc[where] = self._gc.get(where, 0.0) + \
                time.perf_counter() - self._gc_started
            self._gc_started = None

    def wrap(self, owner: Any, name: str, phase: str) -> None:
        """Time ``owner.name`` (a class or module attribute) as ``phase``."""
        original = getattr(owner, name)
        timer = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(timer._depth, "n", 0)
            timer._depth.n = depth + 1
            outer = depth == 0 and threading.get_ident() == timer._thread
            if outer:
                timer._phase = phase
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                timer._depth.n = depth
                if outer:
                    timer._phase = None
                    timer.current[phase] = timer.current.get(phase, 0.0) + \
                        time.perf_counter() - started

        setattr(owner, name, timed)

    def carve(self, owner: Any, name: str, phase: str) -> None:
        """Time ``owner.name`` as ``phase`` even when it runs inside another
        phase's call, whose time it is taken from (ours waiting for its own
        read inside nova's code)."""
        original = getattr(owner, name)
        timer = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != timer._thread:
                return original(*args, **kwargs)
            depth, outer = getattr(timer._depth, "n", 0), timer._phase
            timer._depth.n, timer._phase = depth + 1, phase
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent = time.perf_counter() - started
                timer._depth.n, timer._phase = depth, outer
                timer.current[phase] = timer.current.get(phase, 0.0) + spent
                if outer is not None:
                    timer.current[outer] = timer.current.get(outer, 0.0) - spent

        setattr(owner, name, timed)

    def wrap_background(self, owner: Any, name: str, phase: str) -> None:
        """Count the CPU time ``owner.name`` takes on any thread but the
        decision's as ``bg:<phase>``. With the GIL, Python work on another
        thread is, at most, time the decision's thread could not run; it
        lands in whichever phase that thread was in (mostly *prep*), so the
        report counts it against the scheduler that started it."""
        original = getattr(owner, name)
        timer = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == timer._thread:
                return original(*args, **kwargs)
            started = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent = time.thread_time() - started
                with timer._background_lock:
                    timer._background[phase] = \
                        timer._background.get(phase, 0.0) + spent

        setattr(owner, name, timed)

    def decision(self, fn: Callable[[], Any]) -> tuple[dict[str, float], Any]:
        """Run one decision; returns (seconds per phase incl. ``total`` and
        ``other``, its result or the exception it raised)."""
        self.current = {}
        self._depth.n = 0
        self._thread = threading.get_ident()
        self._phase = None
        self._gc = {}
        with self._background_lock:
            self._background = {}
        started = time.perf_counter()
        try:
            out: Any = fn()
        except Exception as exc:   # NoValidHost counts as a decision too
            out = exc
        total = time.perf_counter() - started
        phases = {p: self.current.get(p, 0.0) for p in PHASES[:-1]}
        phases["other"] = max(0.0, total - sum(phases.values()))
        phases["total"] = total
        phases["gc"] = sum(self._gc.values())
        phases.update((f"gc:{p}", self._gc.get(p, 0.0)) for p in PHASES)
        with self._background_lock:
            phases.update((f"bg:{p}", t) for p, t in self._background.items())
            phases["bg"] = sum(self._background.values())
        return phases, out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summarize(samples: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """p50 and p99 in ms per phase (and total) over ``samples``."""
    keys = list(PHASES) + ["total", "gc"]
    return {k: {"p50": 1e3 * percentile([s.get(k, 0.0) for s in samples], 0.5),
                "p99": 1e3 * percentile([s.get(k, 0.0) for s in samples], 0.99)}
            for k in keys}


# ------------------------------------------------------------ other writers
def _writer(url: str, hosts: list[str], rate: float, stop: Any, seed: int,
            counter: Any) -> None:
    rng = random.Random(seed)
    client = HttpPlacement.from_url(url, timeout=60)
    mine: list[str] = []
    period = 1.0 / rate
    next_at = time.monotonic()
    while not stop.is_set():
        next_at += period
        try:
            if mine and (len(mine) > 50 or rng.random() < 0.5):
                client.delete_allocations(mine.pop(rng.randrange(len(mine))))
            else:
                consumer = str(uuidlib.UUID(int=rng.getrandbits(128), version=4))
                client.put_allocations(consumer, AllocationWrite(
                    {rng.choice(hosts): {"VCPU": 1, "MEMORY_MB": 512}},
                    "other-writer", "other-writer", None))
                mine.append(consumer)
            counter.value += 1
        except errors.PlacementError:
            pass
        time.sleep(max(0.0, next_at - time.monotonic()))


@contextlib.contextmanager
def other_writers(url: str, hosts: list[str], rate: float,
                  seed: int = 7) -> Iterator[Any]:
    """A process writing ``rate`` allocations per second (new one-VCPU
    consumers on random hosts, and deletes of its earlier ones) until the
    block ends; yields the shared write counter."""
    ctx = multiprocessing.get_context("spawn")
    stop, counter = ctx.Event(), ctx.Value("i", 0)
    proc = ctx.Process(target=_writer, args=(url, hosts, rate, stop, seed, counter),
                       daemon=True)
    if rate > 0:
        proc.start()
    try:
        yield counter
    finally:
        stop.set()
        if rate > 0:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()


__all__ = ["NOVA_PHASES", "PHASES", "PhaseTimer", "loaded_placement", "other_writers",
           "percentile", "summarize"]
