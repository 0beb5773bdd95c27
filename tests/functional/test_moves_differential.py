"""The same seeded random lifecycle (boots, resizes, migrations, confirms,
reverts, failures with reschedules, deletes, reconciles) on the embedded and
on a real placement ends with the same counts and the same allocations,
and keeps every invariant on the real one."""

import pytest

from scheduler_ext.lab import simulation


@pytest.mark.parametrize("strategy", ["same_host", "stock"])
def test_random_lifecycle_same_on_both_backends(real_client, strategy):
    args = dict(hosts=5, sharing=2, steps=50, seed=3)
    embedded = simulation.run_random(strategy, **args)
    real = simulation.run_random(strategy, **args, client=real_client)
    assert real.violations == []
    assert embedded.violations == []
    assert real.counts == embedded.counts
    # the fill claims its servers directly; the steps' operations then
    # run through the scheduler and nova's modelled conductor and compute
    assert real.counts["servers placed by the fill"] > 5
    assert sum(v for k, v in real.counts.items() if k.endswith(" ok")) > 15
    assert real.final == embedded.final
