"""Time boxes: a call that does not answer is abandoned with the caller's
error, in a thread or in a forked child; answers and errors come back."""

import os
import time

import pytest

from scheduler_ext.storage import timebox
from scheduler_ext.storage.errors import PathNotFound, ProbeTimeout
from scheduler_ext.storage.probe import FsOps, Probe

BOXES = [timebox.in_thread, timebox.in_child]


class Late(Exception):
    pass


@pytest.mark.parametrize("box", BOXES)
def test_an_answer_comes_back(box, tmp_path):
    result = box(lambda: os.statvfs(tmp_path), 10, Late)
    assert result.f_blocks > 0


@pytest.mark.parametrize("box", BOXES)
def test_an_error_comes_back_as_itself(box, tmp_path):
    with pytest.raises(FileNotFoundError) as exc:
        box(lambda: os.stat(tmp_path / "nope"), 10, Late)
    assert exc.value.filename == str(tmp_path / "nope")


@pytest.mark.parametrize("box", BOXES)
def test_a_call_that_does_not_return_is_abandoned(box):
    with pytest.raises(Late):
        box(lambda: time.sleep(30), 0.2, Late)


def test_a_child_that_cannot_pickle_its_error_still_reports_one():
    class Odd(Exception):
        def __reduce__(self):
            raise TypeError("no pickling")
    def boom():
        raise Odd("x")
    with pytest.raises(OSError, match="Odd"):
        timebox.in_child(boom, 10, Late)


def test_the_real_probe_isolates_calls_in_a_child(tmp_path):
    probe = Probe("cn1", 5.0)
    assert probe.isolate is True
    assert probe.size(str(tmp_path)).total > 0
    with pytest.raises(PathNotFound, match=f"host cn1, path {tmp_path}/x"):
        probe.device(str(tmp_path / "x"))
    hung = Probe("cn1", 0.2, FsOps(statvfs=lambda p: time.sleep(30)), isolate=True)
    with pytest.raises(ProbeTimeout, match="statfs did not answer within 0.2 s"):
        hung.size(str(tmp_path))
    assert Probe("cn1", 1.0, FsOps()).isolate is False
