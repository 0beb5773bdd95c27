"""The end-to-end benchmark's per-decision timer (``lab.e2e.PhaseTimer``)."""

import gc
import threading
import types

from scheduler_ext.lab import e2e


class Clock:
    """A perf_counter the test advances by hand."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_nested_calls_count_to_the_outermost_phase(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(e2e.time, "perf_counter", clock)

    def inner():
        clock.now += 1.0

    def outer():
        clock.now += 2.0
        owner.inner()

    owner = types.SimpleNamespace(inner=inner, outer=outer)
    timer = e2e.PhaseTimer()
    timer.wrap(owner, "inner", "engine")
    timer.wrap(owner, "outer", "filters")

    def decide():
        owner.outer()
        owner.inner()
        clock.now += 0.5            # unwrapped work

    phases, out = timer.decision(decide)
    assert out is None
    assert phases["filters"] == 3.0     # outer, its inner call included
    assert phases["engine"] == 1.0      # the direct call only
    assert phases["other"] == 0.5
    assert phases["total"] == 4.5


def test_a_carved_call_is_taken_out_of_the_phase_it_runs_in(monkeypatch):
    """``carve``: ours waiting inside nova's code counts as ours' phase;
    the phase around it keeps only the rest, and a call wrapped inside the
    carved one counts to the carved phase."""
    clock = Clock()
    monkeypatch.setattr(e2e.time, "perf_counter", clock)

    def read():
        clock.now += 0.25

    def wait():
        clock.now += 1.0
        owner.read()

    def prep():
        clock.now += 2.0
        owner.wait()

    owner = types.SimpleNamespace(read=read, wait=wait, prep=prep)
    timer = e2e.PhaseTimer()
    timer.wrap(owner, "read", "engine")
    timer.carve(owner, "wait", "refresh")
    timer.wrap(owner, "prep", "prep")
    phases, _ = timer.decision(owner.prep)
    assert phases["prep"] == 2.0
    assert phases["refresh"] == 1.25
    assert phases["engine"] == 0.0
    assert phases["total"] == 3.25 and phases["other"] == 0.0
    phases, _ = timer.decision(owner.wait)     # outside any phase
    assert phases["refresh"] == 1.25 and phases["prep"] == 0.0


def _collect_cycles():
    """A function that drops 20,000 reference cycles and collects them."""
    garbage = []
    for _ in range(20000):
        node: dict = {}
        node["self"] = node
        garbage.append(node)

    def collect():
        garbage.clear()
        gc.collect()
    return collect


def test_garbage_collections_during_a_decision_are_timed():
    timer = e2e.PhaseTimer()
    phases, _ = timer.decision(_collect_cycles())
    assert 0.0 < phases["gc"] <= phases["total"]
    quiet, _ = timer.decision(lambda: None)
    assert quiet["gc"] < phases["gc"]     # counted per decision, not summed


def test_a_collection_counts_to_the_phase_that_triggered_it():
    timer = e2e.PhaseTimer()
    collect = _collect_cycles()
    owner = types.SimpleNamespace(collect=collect)
    timer.wrap(owner, "collect", "engine")
    phases, _ = timer.decision(owner.collect)
    assert phases["gc:engine"] > 0.0
    assert phases["gc:filters"] == 0.0
    assert phases["gc"] >= phases["gc:engine"]
    unwrapped, _ = timer.decision(collect)   # outside any phase: "other"
    assert unwrapped["gc:other"] > 0.0 and unwrapped["gc:engine"] == 0.0


def test_a_collection_in_another_thread_counts_to_the_decision_s_phase():
    timer = e2e.PhaseTimer()

    def nova_waits_on_a_collection():
        worker = threading.Thread(target=gc.collect)
        worker.start()
        worker.join()

    owner = types.SimpleNamespace(work=nova_waits_on_a_collection)
    timer.wrap(owner, "work", "filters")
    phases, _ = timer.decision(owner.work)
    assert phases["gc:filters"] > 0.0 and phases["gc:other"] == 0.0


def test_an_exception_is_the_decision_outcome():
    timer = e2e.PhaseTimer()

    def fails():
        raise RuntimeError("no host")

    phases, out = timer.decision(fails)
    assert isinstance(out, RuntimeError)
    assert phases["total"] >= 0.0
    assert set(e2e.summarize([phases])) == set(e2e.PHASES) | {"total", "gc"}


def test_work_on_another_thread_counts_its_cpu_time_as_background(monkeypatch):
    """``wrap_background``: a call on a worker thread adds its CPU time (a
    fake thread clock here) as ``bg:<phase>``; the same call on the
    decision's thread is not background."""
    cpu = Clock()
    monkeypatch.setattr(e2e.time, "thread_time", cpu)

    def read():
        cpu.now += 0.25

    owner = types.SimpleNamespace(read=read)
    timer = e2e.PhaseTimer()
    timer.wrap_background(owner, "read", "reads")

    def decide():
        worker = threading.Thread(target=owner.read)
        worker.start()
        worker.join()
        owner.read()        # on the decision's thread: not background

    phases, _ = timer.decision(decide)
    assert phases["bg:reads"] == 0.25
    assert phases["bg"] == 0.25
    phases, _ = timer.decision(lambda: None)     # a new decision starts at 0
    assert phases["bg"] == 0.0 and "bg:reads" not in phases
