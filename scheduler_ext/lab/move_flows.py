"""The generated move flows of the oracle (``move_oracle``): what a flow
is (``Flow``: a fleet shape, servers booted around one mover, one move,
its failures, its end, a scheduler death) and how one is drawn
(``draw_flow``: every choice through one ``choose``, so the same code
serves a seeded random sweep and a hypothesis draw that shrinks)."""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Callable, Sequence

from scheduler_ext.lab import move_fleet, move_reconcile
from scheduler_ext.lab.move_fleet import Shape
from scheduler_ext.placement.query import RequestGroup

MOVES = ("resize", "migrate", "live", "evacuate")
#: where a resize or cold migration fails: the conductor dying right after
#: moving the allocations to the migration, or compute after scheduling
FAILURES = ("", "resize_instance", "finish_resize", "conductor_dies")
#: forbidden by a flavor: a query only placement answers (the numpy
#: engine hands it to the placement source)
FORBIDDEN_TRAIT = move_fleet.FORBIDDEN
ENDS = ("confirm", "revert", "revert_fails", "delete")
#: where the scheduler process dies during the move's scheduling call:
#: before its claim (its one write) reaches placement, or after it
CLAIM_KILL_POINTS = ("before_claim", "after_claim")
#: where ours' reconcile process dies: right before or right after its
#: ``reconcile_write``-th placement write (``move_reconcile``)
RECONCILE_KILL_POINTS = move_reconcile.KILL_POINTS
KILL_POINTS = ("",) + CLAIM_KILL_POINTS + RECONCILE_KILL_POINTS


@dataclasses.dataclass(frozen=True)
class ServerSpec:
    vcpu: int
    disk: int           # 0: boot from volume
    vgpu: int = 0
    port: bool = False
    pci: bool = False


@dataclasses.dataclass(frozen=True)
class Flow:
    """One generated flow; ``servers[mover]`` is the server moved."""

    shape: Shape
    vcpus: tuple[int, ...]
    servers: tuple[ServerSpec, ...]
    mover: int
    move: str
    new: ServerSpec          # the new flavor of a resize
    prep_failures: int = 0   # prep_resize fails on this many hosts in turn
    failure: str = ""
    end: str = "confirm"
    verify_reconcile: bool = True
    kill: str = ""
    #: the reconcile write (from 1, over ours' passes) a reconcile kill
    #: point dies at
    reconcile_write: int = 1
    #: another server (its index) whose cold migration lost its conductor
    #: before the mover's move: the final reconcile pass writes for it too
    #: (drawn with a reconcile kill point, so a pass dies between writes)
    stranded: int | None = None
    engine: str = "numpy"
    #: nova's weighers rank the source last for the move
    source_last: bool = False
    #: the mover's flavor forbids FORBIDDEN_TRAIT (needs a placement with
    #: the allocation-candidates endpoint)
    forbid: bool = False

    @property
    def kill_point(self) -> str:
        """The kill point with the write it dies at, if a reconcile's."""
        if self.kill in RECONCILE_KILL_POINTS:
            return f"{self.kill} {self.reconcile_write}"
        return self.kill

    @property
    def label(self) -> str:
        """The flow's row in the table: move x failure/restart point."""
        point = ["source last"] * self.source_last + ["forbids a trait"] * self.forbid
        point += [f"prep_resize x{self.prep_failures}"] * bool(self.prep_failures)
        point += [f"s{self.stranded} stranded"] * (self.stranded is not None)
        point += [self.failure] * bool(self.failure) + [f"kill {self.kill_point}"] * bool(self.kill)
        end = self.end if self.move in ("resize", "migrate") else \
            "fails" if self.move == "live" and self.end == "revert" else ""
        return " ".join([self.move] + point + [end]).strip()


def flavor_of(spec: ServerSpec, shape: Shape) -> tuple[dict[str, int], tuple[str, ...],
                                                      tuple[RequestGroup, ...]]:
    """(flavor, granular classes, extra groups) of a server."""
    flavor = {"VCPU": spec.vcpu, "MEMORY_MB": 1024}
    if spec.disk:
        flavor["DISK_GB"] = spec.disk
    if shape.vgpu and spec.vgpu:
        flavor["VGPU"] = spec.vgpu
    granular = ("VGPU",) if shape.vgpu == "granular" and spec.vgpu else ()
    extra = tuple(g for g, on in ((move_fleet.port_group(), shape.qos and spec.port),
                                  (move_fleet.pci_group(), shape.pci and spec.pci)) if on)
    return flavor, granular, extra


#: ``choose(name, options)``: one of ``options`` (the first is the
#: simplest: hypothesis shrinks towards it)
Choose = Callable[[str, Sequence[Any]], Any]


def draw_flow(choose: Choose, engines: Sequence[str] = ("numpy",)) -> Flow:
    """One flow, every choice made by ``choose`` (a seeded random choice
    for the sweeps, a hypothesis draw for the tests)."""
    sharing = choose("sharing", (0, 1, 2))
    vgpu = choose("vgpu", move_fleet.VGPU_MODES)
    shape = Shape(hosts=choose("hosts", (1, 2, 3)), sharing=sharing,
                  local_disk=choose("local_disk", (True, False)),
                  qos=choose("qos", (False, True)), vgpu=vgpu,
                  pci=choose("pci", (False, True)))

    def spec(name: str) -> ServerSpec:
        return ServerSpec(choose(name + ".vcpu", (1, 2, 4)),
                          choose(name + ".disk", (10, 0, 20, 40)),
                          choose(name + ".vgpu", (1, 2)) if vgpu else 0,
                          choose(name + ".port", (True, False)) if shape.qos else False,
                          choose(name + ".pci", (True, False)) if shape.pci else False)

    servers = tuple(spec(f"server{i}") for i in range(choose("servers", (1, 2, 3))))
    move = choose("move", MOVES)
    cold = move in ("resize", "migrate")
    failure = choose("failure", FAILURES) if cold else ""
    scheduled = failure != "conductor_dies"     # else no scheduling call
    claims = CLAIM_KILL_POINTS if move != "evacuate" and scheduled else ()
    kill = choose("kill", ("",) + claims + RECONCILE_KILL_POINTS)
    mover = choose("mover", range(len(servers)))
    return Flow(
        shape, tuple(choose(f"vcpus{h}", (4, 2, 8)) for h in range(shape.hosts)),
        servers, mover, move,
        spec("new") if move == "resize" else servers[0],
        prep_failures=choose("prep_failures", (0, 1, 2, 3)) if cold and scheduled else 0,
        failure=failure,
        end=choose("end", ENDS) if cold else choose("end", ("confirm", "revert")),
        verify_reconcile=choose("verify_reconcile", (True, False)),
        kill=kill,
        reconcile_write=choose("reconcile_write", (1, 2, 3))
        if kill in RECONCILE_KILL_POINTS else 1,
        stranded=choose("stranded", (None,) + tuple(i for i in range(len(servers))
                                                     if i != mover))
        if kill in RECONCILE_KILL_POINTS else None,
        engine=choose("engine", tuple(engines)),
        source_last=choose("source_last", (False, True)),
        forbid=choose("forbid", (False, True)) if "placement" in engines else False)


def random_flow(rng: random.Random, engines: Sequence[str] = ("numpy",)) -> Flow:
    """A flow of seeded random choices."""
    return draw_flow(lambda _name, options: rng.choice(list(options)), engines)

