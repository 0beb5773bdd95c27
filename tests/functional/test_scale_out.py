"""Four scheduler processes booting and resizing concurrently against one
placement on PostgreSQL with several WSGI workers, deployed for several
schedulers (``[placement] allocation_conflict_retry_count = 1``, the
client re-sends on ``409 placement.concurrent_update``): nothing lost,
usage equal to the allocations, nothing left over, and no provider over
capacity, with process-based (sync) and thread-based (gthread) workers.
The run is sized so that the schedulers do race on two cores (four
schedulers, four hosts, 16 decisions each): placement refuses claims
made stale by another scheduler's write (conflicts) or writes lost to a
provider-generation race that the client re-sends, and the test asserts
that some did.
"""

import pytest

from scheduler_ext.lab import scaleout


@pytest.mark.parametrize("wsgi_workers, worker_class, threads", [
    (3, "sync", 1), (2, "gthread", 4)], ids=["sync-3", "gthread-2x4"])
def test_four_schedulers_several_placement_workers_never_overcommit(
        wsgi_workers, worker_class, threads):
    result = scaleout.run_once(
        4, hosts=4, ops=16, wsgi_workers=wsgi_workers,
        wsgi_worker_class=worker_class, wsgi_threads=threads,
        placement_conf={"placement": {"allocation_conflict_retry_count": 1}})
    assert result["problems"] == []
    assert result["overcommit"] == []
    assert result["decisions"] >= 20
    assert result["servers"] > 0
    print({k: result[k] for k in ("decisions", "claims", "conflicts",
                                  "write_retries", "no_valid_host", "wall_s")})
    assert result["conflicts"] + result["write_retries"] > 0, result
