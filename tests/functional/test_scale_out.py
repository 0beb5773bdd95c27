"""Four scheduler processes booting and resizing concurrently against one
placement (several WSGI workers, PostgreSQL): no overcommit, nothing lost,
nothing left over."""

from scheduler_ext import scaleout


def test_four_schedulers_on_one_placement():
    result = scaleout.run_once(4, hosts=8, ops=12, wsgi_workers=3)
    assert result["problems"] == []
    assert result["decisions"] >= 20
    assert result["servers"] > 0
