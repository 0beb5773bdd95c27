"""What the engine imports when the service starts, so that its first
scheduling request does not."""

import subprocess
import sys


def test_numpy_ma_is_loaded_with_the_engine_not_by_its_first_query():
    """Regression: numpy's unique() imports numpy.ma on its first call,
    which fell in the service's first request (about 14 ms)."""
    probe = ("import sys; import scheduler_ext.engine; "
             "print('numpy.ma' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == "True"
