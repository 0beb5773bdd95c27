"""``ColumnRanking`` against nova's own code on the same hosts: nova's
``HostManager.get_filtered_hosts`` (ignore hosts, then nova's
``HostFilterHandler``) and nova's ``HostWeightHandler`` over host states
as nova's host manager hands them to a request (the built state, with the
aggregates of its host name and its instances), in the order the columns
give them. The hosts kept must be the same in the same order, each weight
within 1e-9, and the order by weight the same. The weights a ranking hands
on with only its first hosts placed (``ColumnWeights``) must read as the
whole order's, in any sequence of reads.

A case draws the fleet of the filtering and weighing differentials (1 to
5,000 hosts; services, capabilities, supported instances, CPU info, stats,
aggregates with metadata and multipliers, resource counts, PCI pools, 1 to
3 cells), a request (flavor extra specs, image properties, project, an
affinity group with hosts, ignored hosts in any letter case, a cell to
stay in or a cross-cell move), the filters (nova's default list, or a
shuffled subset of the ones computed on columns) and the weighers (nova's
all, or a subset), nova's options (multipliers, negative ones included),
and for a later instance of a multi-create a few hosts' states consumed.
A case the columns do not take (a text heartbeat, a filter that reads
instances) must be refused, never answered differently.

``COLUMN_RANKING_CASES`` (default 1,000) sets the number of cases;
``COLUMN_RANKING_SEED`` the first seed.
"""

from __future__ import annotations

import copy
import datetime
import os
import random
import uuid
from types import SimpleNamespace

import nova.conf
import numpy as np
import pytest
from nova import objects
from nova.scheduler import filters as nova_filters
from nova.scheduler import host_manager
from nova.scheduler import weights as host_weights
from oslo_utils import timeutils

from scheduler_ext.nova import ranking as ranking_module
from scheduler_ext.nova.column_ranking import FILTERS, ColumnRanking, NotOnColumns
from scheduler_ext.nova.host_columns import HostColumns
from scheduler_ext.sources.base import IndexRows, LazyCandidates, Weights
from tests.unit.nova import test_vector_filtering as filtering
from tests.unit.nova import test_vector_weighing as weighing
from tests.unit.nova.generators import fleet_size, quiet

CONF = nova.conf.CONF

CASES = int(os.environ.get("COLUMN_RANKING_CASES", "1000"))
FIRST_SEED = int(os.environ.get("COLUMN_RANKING_SEED", "0"))
TOLERANCE = 1e-9


@pytest.fixture
def quiet_kernels():
    with quiet("nova.scheduler.utils", "nova.scheduler.filters",
               "scheduler_ext.nova.vector_weighing", "scheduler_ext.nova.vector_filtering",
               "nova.scheduler.host_manager"):
        yield


class View:
    """The one thing ``ColumnRanking`` asks of a ``HostStateView``."""

    def __init__(self, columns: HostColumns, cells: list[int]):
        self.columns = columns
        self.cells = cells

    def refreshed_columns(self, context, cells, since=None):
        return self.columns, self.cells


class Manager:
    """What ``ColumnRanking`` reads of a mirrored host manager."""

    _get_aggregates_info = host_manager.HostManager._get_aggregates_info
    get_filtered_hosts = host_manager.HostManager.get_filtered_hosts

    def __init__(self, filters, weighers, aggregates: list, hosts_aggregates: dict, view):
        self.enabled_filters = filters
        self.weighers = weighers
        self.filter_handler = nova_filters.HostFilterHandler()
        self.aggs_by_id = {agg.id: agg for agg in aggregates}
        self.host_aggregates_map = hosts_aggregates
        self.aggregates_version = 0
        self.aggregate_groups = None
        self.view = view


class Roots(LazyCandidates):
    """Candidates known by their roots and, when given, as rows of a uuid
    list (as the engine's are)."""

    __slots__ = ("roots", "_index")

    def __init__(self, roots: list[str], index: IndexRows | None = None):
        self.roots = roots
        self._index = index

    def __len__(self) -> int:
        return len(self.roots)

    def index_rows(self) -> IndexRows | None:
        return self._index


def _candidates(rng: random.Random, hosts: list) -> Roots:
    """Every host's root in a random order, one in ten twice (a move's
    source), and two unknown; in most cases also as rows of a uuid list
    (with other providers' uuids in it), some rows left to their roots."""
    roots = [h.uuid for h in hosts] + [str(uuid.UUID(int=rng.getrandbits(128)))
                                       for _ in range(2)]
    roots += rng.sample(roots, len(roots) // 10)
    rng.shuffle(roots)
    if rng.random() < 0.3:
        return Roots(roots)
    uuids = sorted(set(roots)) + [str(uuid.UUID(int=rng.getrandbits(128)))
                                  for _ in range(rng.randint(0, 20))]
    rng.shuffle(uuids)
    at = {u: i for i, u in enumerate(uuids)}
    rows = np.array([at[r] if rng.random() < 0.95 else -1 for r in roots], dtype=np.int64)
    return Roots(roots, IndexRows(uuids, rows))


def _datetime_beats(rng: random.Random, hosts: list) -> None:
    """Text heartbeats (a service over RPC) made datetimes, but in a few
    cases: such a row is not read on columns."""
    keep_text = rng.random() < 0.03
    for state in hosts:
        service = dict(state.service)
        if isinstance(service["last_seen_up"], str) and not keep_text:
            service["last_seen_up"] = datetime.datetime.strptime(
                service["last_seen_up"], "%Y-%m-%dT%H:%M:%S.%f")
        state.service = host_manager.ReadOnlyDict(service)


def _fleet(rng: random.Random, cells: list[str]) -> tuple[list, list, dict]:
    """(built host states, aggregates, host name -> aggregate ids)."""
    hosts = filtering._hosts(rng, fleet_size(rng, largest=5000))
    fields = weighing._fields(rng)
    pcis = [weighing._pci(rng) for _ in range(4)]
    aggregates = list({id(a): a for h in hosts for a in h.aggregates}.values())
    hosts_aggregates: dict = {}
    for state in hosts:
        for name, values in fields.items():
            setattr(state, name, rng.choice(values))
        state.pci_stats = rng.choice(pcis)
        state.cell_uuid = rng.choice(cells)
        if rng.random() < 0.1:
            state.host = state.host.upper()
        hosts_aggregates.setdefault(state.host, {a.id for a in state.aggregates})
        state.aggregates = []       # per request: the host manager's maps
    _datetime_beats(rng, hosts)
    return hosts, aggregates, hosts_aggregates


def _spec(rng: random.Random, hosts: list, cells: list[str]):
    spec = filtering._spec(rng, len(hosts))
    group = spec.instance_group
    if group is not None and rng.random() < 0.7:
        spec.instance_group = objects.InstanceGroup(
            uuid=group.uuid, policy="affinity", policies=["affinity"],
            members=group.members, hosts=group.hosts, rules=group.rules)
    if rng.random() < 0.5:
        spec.scheduler_hints = {}
    names = sorted({h.host for h in hosts})
    spec.ignore_hosts = [rng.choice([n, n.lower(), n.upper()])
                         for n in rng.sample(names, min(len(names), rng.randint(0, 3)))] \
        if rng.random() < 0.3 else None
    spec.force_hosts = [rng.choice(names)] if names and rng.random() < 0.02 else []
    spec.force_nodes = []
    roll = rng.random()
    spec.requested_destination = objects.Destination(
        cell=objects.CellMapping(uuid=rng.choice(cells)),
        allow_cross_cell_move=rng.random() < 0.5) if roll < 0.3 else None
    return spec


def _filters(rng: random.Random) -> list:
    if rng.random() < 0.3:
        classes = filtering._filter_classes()
        return [classes[name]() for name in CONF.filter_scheduler.enabled_filters]
    chosen = rng.sample(list(FILTERS), rng.randint(1, len(FILTERS)))
    return [cls() for cls in chosen]


def _weighers(rng: random.Random) -> list:
    """nova's configured weighers, or a shuffled subset, and in a few cases
    one the columns do not compute."""
    weighers = [cls() for cls in host_weights.HostWeightHandler().get_matching_classes(
        CONF.filter_scheduler.weight_classes)]
    if rng.random() < 0.5:
        weighers = rng.sample(weighers, rng.randint(1, len(weighers)))
    if rng.random() < 0.05:
        weighers.append(weighing.PlainRAMWeigher())
    return weighers


def _request_states(manager: Manager, columns: HostColumns, rows: list[int],
                    consumed: dict[int, object]) -> dict[int, object]:
    """Per row, the host state nova's host manager gives a request: the
    built one's copy with its host's aggregates (or the consumed one)."""
    out = {}
    for row in rows:
        state = consumed.get(row)
        if state is None:
            state = copy.copy(columns.states[row])
            state.aggregates = manager._get_aggregates_info(state.host)
        out[row] = state
    return out


def _consume(rng: random.Random, manager: Manager, columns: HostColumns) -> dict[int, object]:
    """A few hosts' states as a multi-create's earlier claims left them."""
    consumed = {}
    for row in rng.sample(range(columns.size), min(columns.size, rng.randint(0, 3))):
        state = copy.copy(columns.states[row])
        state.aggregates = manager._get_aggregates_info(state.host)
        state.free_ram_mb -= 2048
        state.free_disk_mb -= 20480
        state.vcpus_used += 2
        state.num_instances += 1
        state.num_io_ops += 1
        consumed[row] = state
    return consumed


def run_case(seed: int, conf) -> tuple[int, bool]:
    """One generated case: (hosts, whether the columns took it). Fails
    the test when the columns answer differently from nova."""
    rng = random.Random(seed)
    filtering._configure(rng, conf)
    weighing._configure(rng, conf)
    if rng.random() < 0.8:
        conf.config(group="metrics", weight_setting=[])
    cells = [str(uuid.UUID(int=(seed << 8) + c)) for c in range(rng.randint(1, 3))]
    hosts, aggregates, hosts_aggregates = _fleet(rng, cells)
    columns = HostColumns(capacity=4)
    for state in hosts:
        columns.write(state.uuid, state)
    answered = sorted(columns.cell_numbers.values())
    if len(answered) > 1 and rng.random() < 0.3:     # a cell that did not answer
        answered.remove(rng.choice(answered))
    spec = _spec(rng, hosts, cells)
    manager = Manager(_filters(rng), _weighers(rng), aggregates, hosts_aggregates,
                      View(columns, answered))
    index = 0 if rng.random() < 0.7 else rng.randint(1, 3)
    consumed = _consume(rng, manager, columns) if index else {}
    ranking = ColumnRanking.planned(manager, spec)
    if ranking is None:
        return len(hosts), False
    cands = _candidates(rng, hosts)
    try:
        rows = ranking.candidate_rows(None, cands, [])
        ours = ranking.hosts(None, rows, [], consumed)
    except NotOnColumns:
        assert any(isinstance(h.service["last_seen_up"], str) for h in hosts), seed
        return len(hosts), False
    read = [columns.row_by_uuid[r] for r in cands.roots if r in columns.row_by_uuid
            and columns.column("cell")[columns.row_by_uuid[r]] in answered]
    assert sorted(ours.rows.tolist()) == sorted(set(read)), "seed %d: hosts read" % seed
    # nova's order: its host manager's set, filled one (host, node) at a
    # time, here in the order the columns read the nodes
    seen = set()
    for r in sorted(set(read)):
        seen.add(columns.keys[r])
    in_nova = [columns.row_by_key[key] for key in seen]
    assert ours.rows[ours.in_nova_order()].tolist() == in_nova, "seed %d: order" % seed
    states = _request_states(manager, columns, ours.rows.tolist(), consumed)
    try:
        novas = list(manager.get_filtered_hosts(
            [states[r] for r in in_nova], spec, index) or [])
    except Exception as exc:
        with pytest.raises(NotOnColumns):
            ranking.filtered(ours, index)
        return len(hosts), False
    passed = ranking.filtered(ours, index)
    kept = [states[r] for r in passed.rows.tolist()]
    assert [id(kept[k]) for k in passed.in_nova_order()] == list(map(id, novas)), \
        "seed %d: filters" % seed
    weighed = host_weights.HostWeightHandler().get_weighed_objects(
        manager.weighers, novas, spec)
    totals = ranking.weights(passed)
    order = ranking.best_first(passed, totals)
    assert [id(kept[k]) for k in order] == [id(w.obj) for w in weighed], \
        "seed %d: order" % seed
    for k, w in zip(order, weighed):
        a, b = float(totals[k]), w.weight
        assert a == b or (np.isnan(a) and np.isnan(b)) or abs(a - b) <= TOLERANCE, \
            "seed %d: weight %r != %r" % (seed, a, b)
    if len(passed) and not np.isnan(totals).any():
        _check_placed_when_read(rng, seed, ranking, passed, totals, rows, order)
    return len(hosts), True


def _whole_weights(rows: np.ndarray, best_first: list[int]) -> Weights:
    """The weights a ranking hands on, from the whole order: per candidate
    (its host's row in ``rows``, -1 for none) its host's weight (the n
    hosts of ``best_first``, rows, weigh n down to 1) or None, and the
    candidates kept by place, a host's in position order."""
    place = {row: k for k, row in enumerate(best_first)}
    of = rows.tolist()
    values = [None if r not in place else float(len(best_first) - place[r]) for r in of]
    kept = sorted((i for i, r in enumerate(of) if r in place), key=lambda i: (place[of[i]], i))
    return Weights(values, kept)


def _check_placed_when_read(rng, seed, ranking, passed, totals, rows, order):
    """The weights that place the first hosts and the rest when read
    (``ColumnWeights``) read as the whole order's, whatever is read first,
    and so do the first ``n`` candidates'."""
    whole = _whole_weights(rows, passed.rows[order].tolist())
    count = rng.randint(1, len(passed))
    first = ranking.head_first(passed, totals, count).tolist()
    assert first == order[:len(first)] and len(first) >= count, "seed %d: head" % seed
    n = rng.randint(0, len(rows))
    for got, want in ((ranking_module.ColumnWeights(
            ranking_module.NovaPlaces(ranking, passed, totals, first), rows), whole),
            (ranking_module.ColumnWeights(ranking_module.NovaPlaces(
                ranking, passed, totals, first), rows).first(n), whole.first(n))):
        assert len(got.best_first) == len(want.best_first), "seed %d: kept" % seed
        reads = [("weight", i) for i in range(len(want))] + \
            [("order", k) for k in range(len(want.best_first))]
        rng.shuffle(reads)
        for what, i in reads:
            if what == "weight":
                assert got[i] == want[i], "seed %d: weight of %d" % (seed, i)
            else:
                assert got.best_first[i] == want.best_first[i], "seed %d: place %d" % (seed, i)


def test_column_ranking_is_novas_filtering_and_weighing(
        nova_conf, quiet_kernels, frozen_time):
    hosts = taken = 0
    for seed in range(FIRST_SEED, FIRST_SEED + CASES):
        n, on_columns = run_case(seed, nova_conf)
        hosts += n * on_columns
        taken += on_columns
        nova_conf.reset()
    print("column ranking: %d cases, %d on columns, %d hosts" % (CASES, taken, hosts))
    assert taken >= CASES // 2


@pytest.fixture
def frozen_time():
    """nova's clock reads the filtering fleet's NOW."""
    timeutils.set_time_override(filtering.NOW)
    yield
    timeutils.clear_time_override()


class _Kept:
    """The hosts a ranking kept, as ``NovaPlaces`` reads them."""

    def __init__(self, rows: list[int], size: int):
        self.rows = np.array(rows)
        self.columns = SimpleNamespace(size=size)

    def __len__(self) -> int:
        return len(self.rows)


def test_a_moves_source_keeps_both_its_candidates_in_position_order():
    # candidates: the source (row 5) twice, row 2 (filtered out), one with
    # no host state (-1), row 7; nova's order: row 7, then row 5
    places = ranking_module.NovaPlaces(None, _Kept([5, 7], size=8), np.zeros(2), [1, 0])
    weights = ranking_module.ColumnWeights(places, np.array([5, 2, -1, 5, 7]))
    assert list(weights) == [1.0, None, None, 1.0, 2.0]
    assert list(weights.best_first) == [4, 0, 3]
    assert list(weights.first(3).best_first) == [0]


def _state(host: str, node: str, disabled: bool = False):
    state = host_manager.HostState(host, node, "cell1")
    state.uuid = node
    state.service = host_manager.ReadOnlyDict({
        "disabled": disabled, "forced_down": False, "last_seen_up": filtering.NOW,
        "created_at": filtering.NOW})
    return state


def test_a_compute_node_gone_and_back_takes_its_row_again():
    columns = HostColumns(capacity=1)
    for node in ("n1", "n2", "n3"):
        columns.write(node, _state("h" + node, node))
    columns.drop("n2")
    assert columns.rows(["n3", "n2", "nx", "n1"]).tolist() == [2, -1, -1, 0]
    columns.write("n2", _state("moved", "n2", disabled=True))
    assert columns.rows(["n2"]).tolist() == [1]
    assert columns.keys[1] == ("moved", "n2") and columns.row_by_key[("moved", "n2")] == 1
    assert ("hn2", "n2") not in columns.row_by_key
    assert columns.column("disabled").tolist() == [False, True, False]


def test_a_host_state_that_is_not_all_numbers_is_ranked_on_objects(nova_conf):
    columns = HostColumns()
    state = _state("h1", "n1")
    state.free_ram_mb = None
    columns.write("n1", state)
    manager = Manager([], [], [], {}, View(columns, [0]))
    spec = objects.RequestSpec(flavor=objects.Flavor(extra_specs={}), image=None,
                               instance_group=None, scheduler_hints={}, ignore_hosts=None,
                               force_hosts=None, force_nodes=None, requested_destination=None)
    ranking = ColumnRanking.planned(manager, spec)
    with pytest.raises(NotOnColumns):
        ranking.hosts(None, ranking.candidate_rows(None, Roots(["n1"]), []), [], {})


def test_index_rows_are_mapped_once_and_follow_the_rows_added_and_dropped():
    columns = HostColumns()
    for node in ("n1", "n2"):
        columns.write(node, _state("h" + node, node))
    uuids = ["x", "n2", "n1"]       # a list that only grows, as the engine's
    every = np.array([2, 1, 0, -1])
    assert columns.rows_of_index(uuids, every).tolist() == [0, 1, -1, -1]
    uuids.append("n3")
    columns.write("n3", _state("hn3", "n3"))
    columns.write("x", _state("hx", "x"))       # known to the list before
    assert columns.rows_of_index(uuids, np.array([3, 0])).tolist() == [2, 3]
    columns.drop("n1")
    assert columns.rows_of_index(uuids, every).tolist() == [-1, 1, 3, -1]
    columns.write("n1", _state("hn1", "n1"))
    assert columns.rows_of_index(uuids, every).tolist() == [0, 1, 3, -1]
    assert columns.rows_of_index(list(uuids), every).tolist() == [0, 1, 3, -1]
