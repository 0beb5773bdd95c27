"""The mitigation of placement's overcommit under concurrent claims (see
docs/placement-overcommit.rst): placement with
``[placement] allocation_conflict_retry_count = 1`` never retries a write
inside its transaction, and scheduler-ext's HTTP client re-sends the write
after ``409 placement.concurrent_update`` as a new request. Over the same
rounds that overcommit with the default setting, no round goes over
capacity, with thread-based and with process-based placement workers.
"""

import pytest

from tests.functional.claim_race import (
    EXEMPTION_LOG, placement_on_postgres, race_rounds)

CAPACITY = 8
ROUNDS = 8
MITIGATED = {"placement": {"allocation_conflict_retry_count": 1}}


@pytest.mark.parametrize("workers, worker_class, threads", [
    (2, "gthread", 4), (4, "sync", 1)], ids=["gthread-2x4", "sync-4"])
def test_retry_count_one_and_client_resends_never_overcommit(
        workers, worker_class, threads):
    with placement_on_postgres(workers=workers, worker_class=worker_class,
                               threads=threads,
                               placement_conf=MITIGATED) as server:
        rounds = race_rounds(server.url, rounds=ROUNDS, capacity=CAPACITY)
        log = server.log_text()
    summary = [(r.accepted, r.over_capacity, r.gave_up, r.resends, r.used)
               for r in rounds]
    assert all(r.used <= CAPACITY for r in rounds), summary
    assert all(r.accepted == r.used for r in rounds), summary
    # a round where no claim gave up on a generation race is exactly full:
    # the re-sends lose no claim that fits
    assert all(r.used == CAPACITY for r in rounds if not r.gave_up), summary
    # the claims did race: placement answered 409 concurrent_update and the
    # client re-sent (with the default setting placement would have retried
    # inside its transaction instead)
    assert sum(r.resends for r in rounds) > 0, summary
    assert EXEMPTION_LOG not in log
