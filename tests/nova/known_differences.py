"""nova's own move tests that pass with nova's scheduler and fail with
scheduler-ext's, each with the reason (doc/source/differences.rst, "nova's own tests",
states the same) and the failure nova reports (``signature``: what the
traceback must show, the assertion and its values). ``test_nova_functional``
fails if a test differs that is not listed here, if a listed one fails in
another way, or if a listed one no longer differs (``WINDOW_ONLY``
excepted, under its own condition); and if a test fails with ours that is
neither listed here nor in ``FAIL_WITH_BOTH``."""

from __future__ import annotations

import dataclasses
import re


@dataclasses.dataclass(frozen=True)
class KnownDifference:
    """Why ours differs, and how nova's test reports it: every regular
    expression of ``signature`` is found in the failure's traceback."""

    reason: str
    signature: tuple[str, ...]

    def matches(self, traceback: str) -> bool:
        return all(re.search(s, traceback, re.MULTILINE | re.DOTALL)
                   for s in self.signature)


def _usage_mismatch(expected: int, held: int) -> str:
    """nova's assertion on a provider tree's usage: the amount nova expects,
    then the one placement holds."""
    return (rf"^testtools\.matchers\._impl\.MismatchError: {expected} != {held}: "
            r"The requested resource amount does not match with the total "
            r"resource usage of the RP tree$")


_SAME_HOST_MAX = (
    "during VERIFY_RESIZE of a same-host resize nova asserts old + new on "
    "the source (bug 1790204 itself); ours holds max(old, new) and the "
    "migration nothing")
_FAILED_SAME_HOST = (
    "after a failed same-host resize nova restores the old flavor through "
    "the migration consumer, which ours leaves empty; placement holds "
    "max(old, new) until the reconcile loop trims it seconds later, and "
    "nova asserts at once")

_OWN_CLAIM = (
    "the test mocks nova.scheduler.utils.claim_resources with a list of "
    "outcomes in call order, the first for nova's scheduler's own claim; "
    "ours claims through its own one-write POST, so the conductor's "
    "reschedule claim receives the first outcome (a success) and the "
    "server boots on the alternate instead of going to ERROR")

#: flavor1 (1 VCPU, 512 MB) resized to flavor2 (1 VCPU, 2048 MB) on its host:
#: at VERIFY_RESIZE nova asserts old + new (2 VCPU), ours holds the max (1)
_HELD_MAX = KnownDifference(_SAME_HOST_MAX, (
    r"in _resize_to_same_host_and_check_allocations\n"
    r"\s+self\.assertFlavorMatchesUsage\(rp_uuid, old_flavor, new_flavor\)",
    _usage_mismatch(2, 1)))
#: after the failed same-host resize nova asserts flavor1's 512 MB; ours
#: still holds the max (2048) until the reconcile trims it
_NOT_YET_TRIMMED = KnownDifference(_FAILED_SAME_HOST, (
    r"in _test_resize_to_same_host_instance_fails\n"
    r"\s+self\.assertFlavorMatchesUsage\(source_rp_uuid, self\.flavor1\)",
    _usage_mismatch(512, 2048)))

KNOWN_DIFFERENCES: dict[str, KnownDifference] = {
    "test_servers__ServerRescheduleTests.test_allocation_fails_during_reschedule":
        KnownDifference(_OWN_CLAIM, (
            r"in test_allocation_fails_during_reschedule\n"
            r"\s+server = self\._wait_for_state_change\(server, 'ERROR'\)",
            r"^AssertionError: Wait for state change failed, "
            r"expected_params=\{'status': 'ERROR'\}, server=\{[^\n]*"
            r"'status': 'ACTIVE'")),
    "test_servers__ServerMovingTests.test_resize_revert_same_host": _HELD_MAX,
    "test_servers__ServerMovingTests.test_resize_confirm_same_host": _HELD_MAX,
    "test_servers__ServerMovingTests.test_resize_to_same_host_prep_resize_fails":
        _NOT_YET_TRIMMED,
    "test_servers__ServerMovingTests.test_resize_instance_fails_allocation_cleanup":
        _NOT_YET_TRIMMED,
    "test_bug_1790204__ResizeSameHostDoubledAllocations."
    "test_resize_same_host_full_allocations": KnownDifference(
        "nova's regression test asserts the bug (NoValidHost); with ours "
        "the resize succeeds", (
            r"in test_resize_same_host_full_allocations\n"
            r"\s+self\._assert_resize_migrate_action_fail\(",
            r"^AssertionError: Timed out waiting for conductor_migrate_server "
            r"instance action event\.",
            r"'event': 'compute_finish_resize', [^}]*'result': 'Success'")),
}

#: Differences that last only until the reconcile loop's next poll: nova
#: asserts at once, and almost always before the poll, but a poll that
#: lands in between trims placement first and the test passes with ours.
#: A pass counts only when the test's log shows that trim (``TRIMMED``).
WINDOW_ONLY = frozenset({
    "test_servers__ServerMovingTests.test_resize_to_same_host_prep_resize_fails",
    "test_servers__ServerMovingTests.test_resize_instance_fails_allocation_cleanup",
})
#: what the reconcile logs when it trims an instance (``moves.reconcile``)
TRIMMED = "reconciled instance "

#: Tests of the move suite that fail with nova's scheduler as well as with
#: ours, each with the reason it fails with both (reviewed; none today).
FAIL_WITH_BOTH: dict[str, str] = {}

_MOCKED_PUT = (
    "the test mocks keystoneauth1's Adapter.put to answer 409 (consumer "
    "generation conflict) to nova's scheduler's claim, a PUT "
    "/allocations/{consumer}; ours claims with one POST /allocations, which "
    "the mock does not catch, so the claim succeeds and the operation the "
    "test expects to fail goes on")
_MOCKED_ENSURE = (
    "the test mocks nova's SchedulerManager._ensure_sufficient_hosts to "
    "raise after the claim (standing in for a conductor restart); ours does "
    "not call it, so the build goes on, and the allocations the test looks "
    "for right after deleting the server are still held by its build")
_RECONCILE_AT_START = (
    "the test asserts that nova's cell cache is empty right after the "
    "scheduler service starts; our reconcile loop's first run starts with "
    "the service and reads the cells' migrations through nova's "
    "target_cell, which fills the cache again (in the process that serves: "
    "a forked worker runs its start after the fork); with reconcile_interval "
    "= 0 the test passes")

#: Differences found by ``sweep.py`` in nova's tests outside the CI's move
#: suite (subclasses of its classes, and tests that mock nova's own claim).
SWEEP_DIFFERENCES: dict[str, str] = {
    **{f"test_servers__{cls}.{test}": _SAME_HOST_MAX
       for cls in ("ServerMovingTestsWithNestedComputes",
                   "ServerMovingTestsWithNestedResourceRequests")
       for test in ("test_resize_revert_same_host",
                    "test_resize_confirm_same_host")},
    **{f"test_servers__{cls}.{test}": _FAILED_SAME_HOST
       for cls in ("ServerMovingTestsWithNestedComputes",
                   "ServerMovingTestsWithNestedResourceRequests")
       for test in ("test_resize_to_same_host_prep_resize_fails",
                    "test_resize_instance_fails_allocation_cleanup")},
    "test_servers__ConsumerGenerationConflictTest."
    "test_revert_resize_same_host_delete_dest_fails_due_to_conflict":
        _SAME_HOST_MAX,
    "test_servers__ServerRescheduleTestsWithNestedResourcesRequest."
    "test_allocation_fails_during_reschedule": _OWN_CLAIM,
    "test_servers__ConsumerGenerationConflictTest."
    "test_create_server_fails_as_placement_reports_consumer_conflict":
        _MOCKED_PUT,
    "test_servers__ConsumerGenerationConflictTest."
    "test_migrate_claim_on_dest_fails": _MOCKED_PUT,
    "test_servers__ServerDeleteBuildTests."
    "test_delete_stuck_build_instance_after_claim": _MOCKED_ENSURE,
    "test_service__ServiceTestCase.test_service_start_resets_cell_cache":
        _RECONCILE_AT_START,
}
