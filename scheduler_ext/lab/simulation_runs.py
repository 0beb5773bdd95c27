"""Run the random scenario under several move strategies, from one fill.

The fleet is built and filled once; each strategy then runs from that same
state. With ``jobs`` > 1 (and ``fork`` available) each strategy runs in its
own forked process, so stock and ours use both cores; the parent follows
their progress through shared counters. Results are identical either way
(every run is seeded).
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import time
import traceback
from typing import Callable, Iterator

from scheduler_ext.lab.simulation import FULL_CHECK_EVERY, RandomRun
from scheduler_ext.lab.tally import Tally

#: progress(strategy, steps done)
Progress = Callable[[str, int], None]


def _run_one(sim: RandomRun, strategy: str, steps: int,
             progress: Callable[[int], None] | None) -> Tally:
    sim.use_strategy(strategy)
    return sim.run(steps, progress)


def _child(sim: RandomRun, strategy: str, steps: int, counter, conn) -> None:
    def progress(n: int) -> None:
        counter.value = n
    try:
        conn.send(("ok", _run_one(sim, strategy, steps, progress)))
    except BaseException:   # report anything, the parent raises it
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


def run_strategies(strategies: tuple[str, ...], hosts: int, sharing: int,
                   steps: int, seed: int, *, jobs: int = 1,
                   full_check_every: int = FULL_CHECK_EVERY,
                   progress: Progress | None = None) -> tuple[dict[str, Tally], int]:
    """({strategy: Tally}, servers placed by the fill)."""
    def fresh() -> RandomRun:
        sim = RandomRun(hosts, sharing, seed, full_check_every=full_check_every)
        sim.fill()
        sim.start()     # the check after the fill, shared by forked runs
        return sim
    with _collector_for_a_big_heap():
        sim = fresh()
        servers = len(sim.model.servers)
        # the fill's objects live as long as the run: kept out of the
        # collector's passes (which would also copy forked children's pages)
        gc.freeze()
        if jobs > 1 and len(strategies) > 1 and \
                "fork" in multiprocessing.get_all_start_methods():
            return _in_processes(sim, strategies, steps, jobs, progress), servers
        tallies = {}
        for i, strategy in enumerate(strategies):
            one = sim if i == 0 else fresh()
            report = (None if progress is None else
                      (lambda n, s=strategy: progress(s, n)))
            tallies[strategy] = _run_one(one, strategy, steps, report)
        return tallies, servers


@contextlib.contextmanager
def _collector_for_a_big_heap() -> Iterator[None]:
    """Fewer young-generation collections (each step allocates thousands
    of short-lived objects; the defaults collect every 700), and whatever
    ``gc.freeze`` kept, released again on the way out."""
    threshold = gc.get_threshold()
    gc.set_threshold(max(threshold[0], 20_000), *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def _in_processes(sim: RandomRun, strategies: tuple[str, ...], steps: int,
                  jobs: int, progress: Progress | None) -> dict[str, Tally]:
    ctx = multiprocessing.get_context("fork")
    waiting = list(strategies)
    running: dict[str, tuple] = {}
    tallies: dict[str, Tally] = {}
    errors: list[str] = []
    while waiting or running:
        while waiting and len(running) < jobs:
            strategy = waiting.pop(0)
            counter = ctx.Value("q", 0, lock=False)
            parent, child = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, name=f"simulate-{strategy}",
                               args=(sim, strategy, steps, counter, child))
            proc.start()
            child.close()
            running[strategy] = (proc, counter, parent)
        for strategy, (proc, counter, conn) in list(running.items()):
            if progress is not None:
                progress(strategy, counter.value)
            if conn.poll():
                status, value = conn.recv()
                proc.join()
                del running[strategy]
                if status == "ok":
                    tallies[strategy] = value
                else:
                    errors.append(f"{strategy}: {value}")
            elif not proc.is_alive():
                proc.join()
                del running[strategy]
                errors.append(f"{strategy}: worker exited with {proc.exitcode}")
        time.sleep(0.05)
    if errors:
        raise RuntimeError("simulation worker failed:\n" + "\n".join(errors))
    return {s: tallies[s] for s in strategies}
