"""The sql change source over placement's own schema (sqlite): the poll
costs the rows written since the last poll, sees every increase, and the
re-read brings decreases and provider changes."""

import uuid

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from scheduler_ext.engine.index import CapacityIndex
from scheduler_ext.placement.sql_snapshot import SqlSnapshot
from scheduler_ext.sources.sql_changes import SqlChanges
from tests.unit.sources.placement_tables import PlacementTables


def consumer(n):
    return str(uuid.UUID(int=10_000 + n))


@pytest.fixture
def db(tmp_path):
    tables = PlacementTables(str(tmp_path / "placement.sqlite"))
    hosts = [tables.add_provider(i + 1) for i in range(20)]
    for i, h in enumerate(hosts):
        tables.put(consumer(i), {h: {"VCPU": 1}})
    return tables, hosts


def _view(tables, tail_rows=512):
    source = SqlChanges(SqlSnapshot(tables.url), tail_rows=tail_rows)
    return source, CapacityIndex.from_snapshot(source.full_read())


def _apply(index, changes):
    changes.apply_to(index)


def test_poll_reads_only_rows_written_since_the_last_poll(db):
    tables, hosts = db
    source, index = _view(tables, tail_rows=4)
    source.poll(index)
    before = source.rows_read
    tables.put(consumer(100), {hosts[3]: {"VCPU": 5}})
    changes = source.poll(index)
    # the tail (4 ids) plus the one new row, not the 20 providers' rows
    assert source.rows_read - before <= 5
    # an indexed provider: its usage only (its set-up waits for the reread)
    assert changes.providers == set(changes.usage) == {hosts[3]}
    _apply(index, changes)
    assert index.usage(hosts[3])["VCPU"] == 6


def test_poll_with_nothing_written_reports_nothing(db):
    tables, _ = db
    source, index = _view(tables)
    assert source.poll(index).providers == set()


def test_poll_sees_a_consumer_moving_to_another_provider(db):
    tables, hosts = db
    source, index = _view(tables)
    tables.put(consumer(0), {hosts[5]: {"VCPU": 3}})   # was 1 VCPU on hosts[0]
    _apply(index, source.poll(index))
    assert index.usage(hosts[5])["VCPU"] == 4
    # the source's row was in the tail: its decrease is seen early too
    assert index.usage(hosts[0])["VCPU"] == 0


def test_poll_sees_sqlite_reusing_the_newest_ids(db):
    tables, hosts = db
    source, index = _view(tables)
    newest = source.high
    tables.delete(consumer(19))                          # frees id `newest`
    tables.put(consumer(200), {hosts[7]: {"VCPU": 4}})   # sqlite reuses it
    assert source.sql.max_allocation_id() == newest
    _apply(index, source.poll(index))
    assert index.usage(hosts[7])["VCPU"] == 5


def test_poll_sees_a_row_committed_late_below_the_newest_id(db):
    tables, hosts = db
    source, index = _view(tables)
    tables.put(consumer(300), {hosts[1]: {"VCPU": 1}})
    source.poll(index)
    late = source.high - 5
    tables.delete(consumer(15))            # frees id `late`: a hole below the newest
    _apply(index, source.poll(index))
    tables.put(consumer(301), {hosts[2]: {"VCPU": 6}}, alloc_id=late)
    _apply(index, source.poll(index))
    assert index.usage(hosts[2])["VCPU"] == 7


def test_decrease_below_the_tail_waits_for_the_reread(db):
    tables, hosts = db
    source, index = _view(tables, tail_rows=2)
    tables.delete(consumer(0))                # oldest row, far below the tail
    _apply(index, source.poll(index))
    assert index.usage(hosts[0])["VCPU"] == 1          # conservative
    _apply(index, source.reread(index))
    assert index.usage(hosts[0]).get("VCPU", 0) == 0


def test_reread_brings_inventory_changes_new_and_deleted_providers(db):
    tables, hosts = db
    source, index = _view(tables)
    tables.set_vcpu(hosts[4], 2)
    tables.delete(consumer(9))
    tables.delete_provider(hosts[9])
    new = tables.add_provider(99)
    # the poll sees the vanished allocation row, not the inventory or the
    # new provider (no allocation row was written for them)
    assert source.poll(index).providers == {hosts[9]}
    _apply(index, source.reread(index))
    fresh = CapacityIndex.from_snapshot(SqlSnapshot(tables.url).snapshot())
    assert sorted(index.live_uuids()) == sorted(fresh.live_uuids())
    assert new in index.live_uuids() and hosts[9] not in index.live_uuids()
    for u in fresh.live_uuids():
        assert index.usage(u) == fresh.usage(u)
        assert index.generation(u) == fresh.generation(u)


def test_provider_deleted_before_its_read_is_reported_removed(db):
    tables, hosts = db
    source, index = _view(tables)
    tables.delete(consumer(6))
    tables.delete_provider(hosts[6])
    changes = source.read([hosts[6], hosts[7]])
    assert changes.removed == [hosts[6]]
    assert [r.provider.uuid for r in changes.records] == [hosts[7]]


def test_poll_takes_usage_only_and_the_reread_the_rest(db):
    tables, hosts = db
    source, index = _view(tables)
    generation = index.generation(hosts[2])
    tables.set_vcpu(hosts[2], 32)                        # set-up change ...
    tables.put(consumer(400), {hosts[2]: {"VCPU": 3}})   # ... and a claim
    changes = source.poll(index)
    assert changes.usage == {hosts[2]: {"VCPU": 4}} and not changes.records
    _apply(index, changes)
    # the usage now; the generation stays, so the reread finds it moved
    assert index.usage(hosts[2])["VCPU"] == 4
    assert index.generation(hosts[2]) == generation
    _apply(index, source.reread(index))
    fresh = CapacityIndex.from_snapshot(SqlSnapshot(tables.url).snapshot())
    assert index.generation(hosts[2]) == fresh.generation(hosts[2])
    assert index.columns["VCPU"].summary(index.row_of[hosts[2]]) == \
        fresh.columns["VCPU"].summary(fresh.row_of[hosts[2]]) == (32, 4)


def test_poll_reads_a_provider_new_to_the_index_whole(db):
    tables, _ = db
    source, index = _view(tables)
    new = tables.add_provider(77)
    tables.put(consumer(500), {new: {"VCPU": 2}})
    changes = source.poll(index)
    assert [r.provider.uuid for r in changes.records] == [new]
    _apply(index, changes)
    assert index.usage(new) == {"VCPU": 2, "MEMORY_MB": 0}


def test_polls_after_the_full_read_read_no_name_table(db, monkeypatch):
    """Regression: the first poll that saw a class's usage read the whole
    resource_classes table inside the request (about 3 ms, once)."""
    tables, hosts = db
    source, index = _view(tables)
    statements = []
    real = source.sql._rows
    monkeypatch.setattr(source.sql, "_rows",
                        lambda sql, *a, **k: statements.append(sql) or real(sql, *a, **k))
    tables.put(consumer(700), {hosts[2]: {"VCPU": 2}})
    new = tables.add_provider(78)
    tables.put(consumer(701), {new: {"VCPU": 1}})
    changes = source.poll(index)
    assert changes.providers == {hosts[2], new}
    assert statements == []
    _apply(index, changes)
    assert index.usage(hosts[2])["VCPU"] == 3


def test_poll_reads_no_tail_row_while_its_checksum_holds(db):
    tables, hosts = db
    source, index = _view(tables, tail_rows=8)
    before = source.rows_read
    tables.put(consumer(600), {hosts[4]: {"VCPU": 1}})
    source.poll(index)
    assert source.rows_read - before == 1            # the new row only
    assert source.tail_sums == SqlSnapshot(tables.url).poll_after(
        source.high, source.high - 8, source.bucket)[1]


def test_a_vanished_tail_row_brings_its_provider_usage_not_its_record(db):
    """A recent consumer deleted (a failed boot, a confirmed resize): the
    tail compare marks its provider, which takes its usage only, read in
    one statement; nothing is read whole."""
    tables, hosts = db
    source, index = _view(tables)
    tables.delete(consumer(12))
    whole = []
    records = source.sql.records
    source.sql.records = lambda ids: whole.append(list(ids)) or records(ids)
    changes = source.poll(index)
    assert changes.usage == {hosts[12]: {}} and not changes.records
    assert whole == []
    _apply(index, changes)
    assert index.usage(hosts[12]).get("VCPU", 0) == 0


def test_a_vanished_tail_row_of_a_deleted_provider_removes_it(db):
    """Its usage read finds no provider: read whole, reported removed, never
    taken as an empty provider."""
    tables, hosts = db
    source, index = _view(tables)
    tables.delete(consumer(13))
    tables.delete_provider(hosts[13])
    changes = source.poll(index)
    assert changes.removed == [hosts[13]] and hosts[13] not in changes.usage
    _apply(index, changes)
    assert hosts[13] not in index.live_uuids()


def test_a_vanished_tail_row_re_reads_its_bucket_only(db):
    """The tail's checksum is kept per bucket of ids: a recent consumer
    deleted costs the rows of its bucket, not the whole tail."""
    tables, hosts = db
    source, index = _view(tables)
    source.bucket = 4
    source._sum_tail()
    before = source.rows_read
    tables.delete(consumer(12))
    changes = source.poll(index)
    assert changes.usage == {hosts[12]: {}}
    assert source.rows_read - before == 3        # its bucket's other rows
    assert source.tail_sums == source.sql.poll_after(source.high, 0, 4)[1]


# Operations on placement's tables for the property below: a new consumer
# on a host, a consumer deleted, or a consumer written at an id freed
# inside the tail (a late commit, sqlite's id reuse).
_op = st.one_of(
    st.tuples(st.just("put"), st.integers(0, 19), st.integers(1, 4)),
    st.tuples(st.just("delete"), st.integers(0, 10 ** 6)),
    st.tuples(st.just("late"), st.integers(0, 19), st.integers(1, 4),
              st.integers(0, 10 ** 6)))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.lists(_op, min_size=1, max_size=4), min_size=1, max_size=8))
def test_bucketed_tail_sees_what_the_whole_tail_compare_sees(tmp_path_factory, steps):
    """Per provider and class, after every poll: the view with a bucketed
    tail checksum equals the one whose single bucket covers the whole
    tail (the compare of every tail row), and neither counts less than
    placement holds (no write went below the tail)."""
    tables = PlacementTables(str(tmp_path_factory.mktemp("p") / "placement.sqlite"))
    hosts = [tables.add_provider(i + 1) for i in range(20)]
    live, n = [], 0
    for i, h in enumerate(hosts):
        tables.put(consumer(i), {h: {"VCPU": 1}})
        live.append(consumer(i))
    views = [_view(tables, tail_rows=16), _view(tables, tail_rows=16)]
    views[0][0].bucket = 4
    views[1][0].bucket = 1024
    for source, _ in views:
        source._sum_tail()
    for batch in steps:
        for op in batch:
            n += 1
            if op[0] == "put":
                tables.put(consumer(1000 + n), {hosts[op[1]]: {"VCPU": op[2]}})
                live.append(consumer(1000 + n))
            elif op[0] == "delete" and live:
                tables.delete(live.pop(op[1] % len(live)))
            elif op[0] == "late":
                source = views[0][0]
                used = set(source.sql.allocations_after(source.high - 16))
                free = [i for i in range(source.high - 15, source.high + 1)
                        if i not in {r[0] for r in used}]
                if free:
                    tables.put(consumer(1000 + n), {hosts[op[1]]: {"VCPU": op[2]}},
                               alloc_id=free[op[3] % len(free)])
                    live.append(consumer(1000 + n))
        for source, index in views:
            _apply(index, source.poll(index))
        for h in hosts:
            got = [views[0][1].usage(h), views[1][1].usage(h)]
            assert got[0] == got[1], h
            assert got[0].get("VCPU", 0) >= tables.usage(h).get("VCPU", 0), h


def test_mysql_text_of_the_poll_reads_what_the_default_text_reads(db, monkeypatch):
    """MySQL and MariaDB have no ``CAST(... AS BIGINT)``: their text casts
    AS SIGNED. sqlite takes both, so both texts run here and must read the
    same rows and checksums."""
    from scheduler_ext.placement import sql_statements
    tables, hosts = db
    sql = SqlSnapshot(tables.url)
    tables.delete(consumer(3))
    tables.put(consumer(400), {hosts[2]: {"VCPU": 2}})

    def reads():
        return (sql.poll_after(5, 0, 4), sql.allocations_after(0),
                sql.allocations_in(0, 30, [0, 4, 8], 4), sql.usage_of([1, 2]),
                sql.consumer(consumer(400)))

    default = reads()
    texts = []
    as_sqlite = sql_statements.for_dialect
    monkeypatch.setattr(sql_statements, "for_dialect", lambda text, _: texts.append(
        as_sqlite(text, "mysql")) or texts[-1])
    assert reads() == default
    assert any("AS SIGNED)" in t for t in texts)
    assert not any("BIGINT" in t for t in texts)
