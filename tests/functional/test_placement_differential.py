"""Differential test: EmbeddedPlacement against a real placement 16.0.0.

Each test runs one randomized sequence of placement calls, seeded with
``random.Random(seed)``, against a fresh ``EmbeddedPlacement`` and against the
session's real placement (through ``HttpPlacement``), and after every step
asserts that both gave the same outcome (the same return value, or the same
exception class, ``status`` and ``code``) and that both now show the same
state for what the step touched: inventories with the provider generation,
usages, traits, aggregates, and every named consumer's allocations with its
generation, project, user and type. At the end of a sequence everything the
sequence created is compared once more, including each provider's
allocations.

A sequence sets up a small fleet (compute nodes, sometimes a nested child
and a MISC_SHARES_VIA_AGGREGATE sharing provider in an aggregate with them,
custom resource classes and traits, inventories with reserved amounts,
awkward allocation ratios and min_unit/max_unit/step_size), then mixes
claims, nova-style moves (POST), resizes, deletes, emptied consumers, stale
or null consumer generations, stale provider generations, near-capacity
writes, constraint violations, inventory removal in use, lowered inventory
and over-capacity writes, writes naming missing providers or uncreated
classes, and provider deletes.

``test_scripted_corner_case`` runs a few fixed scenarios the random
sequences reach rarely (a parent with children and allocations, a provider
parented to itself, unchanged traits and aggregates, consumer records left
behind at generation 0, float capacity edges, over-capacity POSTs, identity
changes) through the same lockstep harness.

The real placement's database is shared by all sequences of a session, so
every name and UUID is fresh: UUIDs come from the seeded generator mixed with
a per-run salt, names carry the salt and the seed. A failing test names its
seed; ``SCHEDULER_EXT_DIFF_SALT`` only changes the names.

Knobs (environment): ``SCHEDULER_EXT_DIFF_SEQUENCES`` (default 60, what
the test command runs; ``benchmarks/parity_sweep.sh`` runs 200 and more),
``SCHEDULER_EXT_DIFF_FIRST_SEED`` (0), ``SCHEDULER_EXT_DIFF_STEPS`` (mixed
steps after set-up, default 12), ``SCHEDULER_EXT_DIFF_SALT`` (hex).
"""

from __future__ import annotations

import math
import os
import random
import secrets
import uuid as uuidlib
import zlib
from typing import Any, Callable, Iterable

import pytest

from scheduler_ext import errors
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.model import (
    MAX_INT, AllocationWrite, ConsumerAllocations, Inventory, Provider)

SEQUENCES = int(os.environ.get("SCHEDULER_EXT_DIFF_SEQUENCES", "60"))
FIRST_SEED = int(os.environ.get("SCHEDULER_EXT_DIFF_FIRST_SEED", "0"))
MIXED_STEPS = int(os.environ.get("SCHEDULER_EXT_DIFF_STEPS", "12"))
SALT = int(os.environ.get("SCHEDULER_EXT_DIFF_SALT") or secrets.token_hex(16), 16)
SALT_NAME = f"{SALT:032X}"[:10]

SHARES = "MISC_SHARES_VIA_AGGREGATE"
RATIOS = (1.0, 1.0, 0.57, 1.5, 16.0, 0.7, 4.0, 1.1, 0.9, 2.5, 0.1)
PROJECTS = ("proj-a", "proj-b")
USERS = ("user-a", "user-b")


def outcome(call: Callable[[], Any]) -> tuple:
    """("ok", value) or (exception class name, status, code)."""
    try:
        return ("ok", normalize(call()))
    except errors.PlacementError as exc:
        return (type(exc).__name__, exc.status, exc.code)


def normalize(value: Any) -> Any:
    if isinstance(value, Provider):
        return ("provider", value.uuid, value.name, value.generation,
                value.root_provider_uuid, value.parent_provider_uuid)
    if isinstance(value, ConsumerAllocations):
        return ("consumer", value.allocations, value.generation,
                value.project_id, value.user_id, value.consumer_type)
    if isinstance(value, tuple):
        return tuple(normalize(v) for v in value)
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    return value


class Divergence(AssertionError):
    pass


class Sequence:
    """One seeded sequence run in lockstep on both placements.

    Parameters of a step are chosen from the embedded placement's state
    (which the previous steps proved equal to the real one) before the step
    runs on either side.
    """

    def __init__(self, seed: int, emb: EmbeddedPlacement, real) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.emb, self.real = emb, real
        self.tag = f"{SALT_NAME}_{seed}"
        self.providers: list[str] = []      # every uuid created, in order
        self.computes: list[str] = []
        self.sharing: list[str] = []
        self.children: list[str] = []
        self.phantom = self.new_uuid()      # never created
        self.consumers: list[str] = []      # every consumer uuid used
        self.aggregate = self.new_uuid()
        self.custom_rc = f"CUSTOM_DIFF_{self.tag}"
        self.uncreated_rc = f"CUSTOM_DIFF_NONE_{self.tag}"
        self.custom_trait = f"CUSTOM_DIFF_T_{self.tag}"
        self.uncreated_trait = f"CUSTOM_DIFF_TNONE_{self.tag}"
        self.have_custom = False
        self.log: list[str] = []

    # ----------------------------------------------------------- utilities
    def new_uuid(self) -> str:
        bits = self.rng.getrandbits(128) ^ SALT
        return str(uuidlib.UUID(int=bits, version=4))

    def new_consumer(self) -> str:
        c = self.new_uuid()
        self.consumers.append(c)
        return c

    def fail(self, what: str, emb: Any, real: Any) -> None:
        history = "\n".join(f"  {line}" for line in self.log[-40:])
        raise Divergence(
            f"seed={self.seed} (salt {SALT:032x}) step {len(self.log)}: "
            f"{what}\n  embedded: {emb!r}\n  real:     {real!r}\n"
            f"steps so far:\n{history}")

    def do(self, desc: str, fn: Callable[[Any], Any], *,
           providers: Iterable[str] = (), consumers: Iterable[str] = (),
           reads: tuple[str, ...] = ("inv", "usage")) -> tuple:
        """Run ``fn`` on both sides, compare outcomes, then compare what the
        step touched."""
        got_emb = outcome(lambda: fn(self.emb))
        got_real = outcome(lambda: fn(self.real))
        self.log.append(f"{desc} -> {got_real}")
        if got_emb != got_real:
            self.fail(f"outcome of {desc}", got_emb, got_real)
        self.compare(providers, consumers, reads)
        return got_emb

    def compare(self, providers: Iterable[str], consumers: Iterable[str],
                reads: tuple[str, ...]) -> None:
        readers = {
            "inv": lambda p, rp: p.get_inventories(rp),
            "usage": lambda p, rp: p.get_usages(rp),
            "gen": lambda p, rp: p.get_provider(rp),
            "traits": lambda p, rp: p.get_traits(rp),
            "aggs": lambda p, rp: p.get_aggregates(rp),
            "allocs": lambda p, rp: p.get_provider_allocations(rp),
        }
        for rp in dict.fromkeys(providers):
            for kind in reads:
                a = outcome(lambda: readers[kind](self.emb, rp))
                b = outcome(lambda: readers[kind](self.real, rp))
                if a != b:
                    self.fail(f"{kind} of provider {rp}", a, b)
        for c in dict.fromkeys(consumers):
            a = outcome(lambda: self.emb.get_consumer(c))
            b = outcome(lambda: self.real.get_consumer(c))
            if a != b:
                self.fail(f"allocations of consumer {c}", a, b)

    def compare_all(self) -> None:
        self.compare(self.providers + [self.phantom], self.consumers,
                     ("inv", "usage", "traits", "aggs", "allocs"))

    # ------------------------------------------------------ emb state views
    def exists(self, rp: str) -> bool:
        try:
            self.emb.get_provider(rp)
            return True
        except errors.NotFound:
            return False

    def live(self, among: list[str] | None = None) -> list[str]:
        return [rp for rp in (self.providers if among is None else among)
                if self.exists(rp)]

    def generation(self, rp: str) -> int:
        return self.emb.get_provider(rp).generation

    def inventories(self, rp: str) -> dict[str, Inventory]:
        return self.emb.get_inventories(rp)[1] if self.exists(rp) else {}

    def holders(self) -> list[str]:
        """Consumers holding allocations, in first-use order."""
        return [c for c in self.consumers
                if self.emb.get_consumer(c).allocations]

    def pick_generation(self, current: int | None) -> tuple[int | None, str]:
        """Usually the generation last read; sometimes a stale, wrong or
        null one (or 0, which a consumer left behind without allocations
        still has)."""
        r = self.rng.random()
        if r < 0.82:
            return current, "gen"
        if r < 0.88:
            return None, "null gen"
        if r < 0.93:
            return (0 if current is None else current + 1), "wrong gen"
        if r < 0.97 and current:
            return current - 1, "stale gen"
        return 0, "gen 0"

    def pick_provider_generation(self, rp: str) -> tuple[int, str]:
        gen = self.generation(rp) if self.exists(rp) else 0
        r = self.rng.random()
        if r < 0.85:
            return gen, ""
        if r < 0.95 and gen:
            return gen - 1, " (stale gen)"
        return gen + 1, " (wrong gen)"

    # ---------------------------------------------------------- amounts
    FIT_MODES = ("best", "smallest", "random", "random")
    EDGE_MODES = ("boundary", "boundary", "over_step", "off_step",
                  "below_min", "above_max", "wild")

    def amount(self, rp: str, rc: str, mode: str) -> int:
        """An amount of ``rc`` on ``rp``. Fitting modes: the largest amount
        that fits (drains the provider), the smallest valid one, a random
        valid one. Edge modes: one more than the float capacity allows
        (e.g. 57 of total 100 at ratio 0.57), one step over the largest
        fit, off the step grid, below min_unit, above max_unit, anything."""
        inv = self.inventories(rp).get(rc)
        if inv is None:
            return self.rng.choice([1, 2, 8, 256])
        used = self.emb.get_usages(rp).get(rc, 0)
        step, lo, hi = inv.step_size, inv.min_unit, inv.max_unit
        room = math.floor(inv.capacity) - used      # used + n <= floor(cap)
        best = (min(room, hi) // step) * step
        smallest = -(-lo // step) * step
        if mode == "best":
            n = best if best >= lo else smallest
        elif mode == "smallest":
            n = smallest
        elif mode == "random":
            top = max(smallest, best)
            n = self.rng.randint(smallest // step, top // step) * step
        elif mode == "boundary":
            n = room + 1
        elif mode == "over_step":
            n = max(smallest, best + step)
        elif mode == "off_step" and step > 1:
            n = smallest + 1
        elif mode == "below_min" and lo > 1:
            n = lo - 1
        elif mode == "above_max" and hi < MAX_INT:
            n = hi + step
        else:
            n = self.rng.randint(1, max(2, int(inv.capacity) + 2))
        return max(1, min(n, MAX_INT))

    def claim_allocations(self, rp: str | None = None,
                          edge: float = 0.35) -> dict:
        """Allocations for one consumer: some classes of one compute node
        (or child), maybe DISK_GB from a sharing provider; with probability
        ``edge`` one of the amounts is an edge case."""
        targets = self.live(self.computes + self.children)
        if rp is None:
            rp = self.rng.choice(targets) if targets else self.phantom
        invs = self.inventories(rp)
        rcs = sorted(invs) or ["VCPU"]
        chosen = self.rng.sample(rcs, self.rng.randint(1, min(3, len(rcs))))
        cells = [(rp, rc) for rc in chosen]
        shared = self.live(self.sharing)
        if shared and self.rng.random() < 0.4:
            ss = self.rng.choice(shared)
            if "DISK_GB" in self.inventories(ss):
                cells.append((ss, "DISK_GB"))
        odd = self.rng.randrange(len(cells)) \
            if self.rng.random() < edge else None
        allocs: dict = {}
        for i, (r, rc) in enumerate(cells):
            mode = self.rng.choice(self.EDGE_MODES if i == odd
                                   else self.FIT_MODES)
            allocs.setdefault(r, {})[rc] = self.amount(r, rc, mode)
        return allocs

    def write(self, allocs: dict, generation: int | None,
              consumer_type: str = "INSTANCE") -> AllocationWrite:
        return AllocationWrite(
            allocations=allocs,
            project_id=self.rng.choice(PROJECTS), user_id=self.rng.choice(USERS),
            consumer_generation=generation, consumer_type=consumer_type)

    # -------------------------------------------------------------- set-up
    def random_inventory(self, rc: str) -> Inventory:
        rng = self.rng
        ratio = rng.choice(RATIOS)
        if rc == "VCPU":
            total = rng.choice([1, 2, 4, 7, 8, 10, 16, 100])
            reserved = rng.choice([0, 0, 0, 1, total // 4, total])
            return Inventory(total, min(reserved, total), 1,
                             rng.choice([total, MAX_INT, max(1, total // 2)]),
                             1, ratio)
        if rc == "MEMORY_MB":
            step = rng.choice([1, 256, 512])
            total = rng.choice([1024, 2048, 4096, 8192])
            min_unit = rng.choice([1, step, 2 * step])
            return Inventory(total, rng.choice([0, 0, 512]), min_unit,
                             max(min_unit, rng.choice([total, MAX_INT, total // 2])),
                             step, rng.choice([1.0, 1.5, 0.57, 0.9]))
        if rc == "DISK_GB":
            step = rng.choice([1, 1, 10])
            total = rng.choice([10, 20, 100, 500])
            return Inventory(total, rng.choice([0, 0, 5]), rng.choice([1, step]),
                             rng.choice([total, MAX_INT]), step,
                             rng.choice([1.0, 1.5, 0.9, 0.57]))
        total = rng.randint(1, 8)
        return Inventory(total, 0, 1, rng.choice([1, 2, total]), 1,
                         rng.choice([1.0, 1.0, 0.57, 2.0]))

    def create(self, name_kind: str, parent: str | None = None) -> str:
        rp = self.new_uuid()
        name = f"diff-{self.tag}-{name_kind}-{len(self.providers)}"
        self.do(f"create {name_kind} {rp}",
                lambda p: p.create_provider(name, uuid=rp,
                                            parent_provider_uuid=parent),
                providers=[rp], reads=())
        self.providers.append(rp)
        return rp

    def set_inventories(self, rp: str, invs: dict, note: str = "",
                        generation: int | None = None) -> None:
        gen = self.generation(rp) if generation is None else generation
        self.do(f"set inventories {rp} gen {gen} {note}"
                f"{ {rc: tuple(i.as_dict().values()) for rc, i in invs.items()} }",
                lambda p: p.set_inventories(rp, gen, invs),
                providers=[rp], reads=("inv", "usage"))

    def set_up(self) -> None:
        rng = self.rng
        if rng.random() < 0.6:
            self.have_custom = True
            self.do(f"create class {self.custom_rc}",
                    lambda p: p.create_resource_class(self.custom_rc))
            self.do(f"create trait {self.custom_trait}",
                    lambda p: p.create_trait(self.custom_trait))
        for _ in range(rng.choice([1, 2, 2, 3])):
            rp = self.create("cn")
            self.computes.append(rp)
            rcs = ["VCPU"] + [rc for rc in ("MEMORY_MB", "DISK_GB")
                              if rng.random() < 0.6]
            if self.have_custom and rng.random() < 0.3:
                rcs.append(self.custom_rc)
            self.set_inventories(rp, {rc: self.random_inventory(rc) for rc in rcs})
        if rng.random() < 0.2:
            parent = rng.choice(self.computes)
            child = self.create("child", parent=parent)
            self.children.append(child)
            self.set_inventories(child, {"VGPU": self.random_inventory("VGPU")})
        if rng.random() < 0.55:
            ss = self.create("ss")
            self.sharing.append(ss)
            self.set_inventories(ss, {"DISK_GB": self.random_inventory("DISK_GB")})
            traits = [SHARES] + ([self.custom_trait] if self.have_custom else [])
            gen = self.generation(ss)
            self.do(f"set traits {ss} {traits}",
                    lambda p: p.set_traits(ss, gen, traits),
                    providers=[ss], reads=("traits",))
            for rp in [ss] + [c for c in self.computes if rng.random() < 0.7]:
                gen = self.generation(rp)
                self.do(f"set aggregates {rp}",
                        lambda p: p.set_aggregates(rp, gen, [self.aggregate]),
                        providers=[rp], reads=("aggs",))

    # ------------------------------------------------------------ the steps
    def step_claim(self) -> None:
        """PUT a new consumer (nova's claim), generation normally null."""
        c = self.new_consumer()
        allocs = self.claim_allocations()
        gen, how = (None, "null gen") if self.rng.random() < 0.9 else \
            self.pick_generation(None)
        w = self.write(allocs, gen)
        self.do(f"claim {c} {allocs} {how}", lambda p: p.put_allocations(c, w),
                providers=allocs, consumers=[c])

    def step_rewrite(self) -> None:
        """PUT an existing consumer (resize in place, or a new placement)."""
        holders = self.holders()
        if not holders:
            return self.step_claim()
        c = self.rng.choice(holders)
        old = self.emb.get_consumer(c)
        if self.rng.random() < 0.6:
            rp = next(iter(old.allocations))
            if rp not in self.computes + self.children:
                rp = None
            allocs = self.claim_allocations(rp)
        else:
            allocs = self.claim_allocations()
        gen, how = self.pick_generation(old.generation)
        w = self.write(allocs, gen)
        self.do(f"rewrite {c} {allocs} {how}", lambda p: p.put_allocations(c, w),
                providers=list(old.allocations) + list(allocs), consumers=[c])

    def over_capacity(self) -> list[tuple[str, str]]:
        over = []
        for rp in self.live():
            invs, usage = self.inventories(rp), self.emb.get_usages(rp)
            over += [(rp, rc) for rc, inv in invs.items()
                     if usage.get(rc, 0) > inv.capacity]
        return over

    def step_over_capacity(self) -> None:
        """Lower an inventory below its usage, then write to a provider that
        is over capacity: accepted only while its usage does not grow (the
        sum over all consumers of a POST counts)."""
        over = self.over_capacity()
        if not over:
            in_use = [(rp, rc) for rp in self.live()
                      for rc, n in self.emb.get_usages(rp).items() if n]
            if not in_use:
                return self.step_claim()
            rp, rc = self.rng.choice(in_use)
            invs = dict(self.inventories(rp))
            inv, used = invs[rc], self.emb.get_usages(rp)[rc]
            total = max(1, self.rng.choice([used - 1, used // 2, 1]))
            invs[rc] = Inventory(total, 0, inv.min_unit, inv.max_unit,
                                 inv.step_size, self.rng.choice([1.0, 0.57]))
            self.set_inventories(rp, invs, "lower below usage")
            over = self.over_capacity()
        for _ in range(self.rng.randint(1, 3)):
            if over:
                self.over_capacity_write(*self.rng.choice(over))
            over = self.over_capacity()

    def over_capacity_write(self, rp: str, rc: str) -> None:
        on_it = [c for c, res in self.emb.get_provider_allocations(rp).items()
                 if rc in res]
        c = self.rng.choice(on_it)
        old = self.emb.get_consumer(c)
        step = self.inventories(rp)[rc].step_size
        allocs = {r: dict(res) for r, res in old.allocations.items()}
        r = self.rng.random()
        if r < 0.2:
            return self.step_move(c)
        if r < 0.35:     # a new consumer on it: always grows the usage
            new = self.new_consumer()
            w = self.write({rp: {rc: self.amount(rp, rc, "smallest")}}, None)
            self.do(f"over-capacity claim {new} {rp} {rc}",
                    lambda p: p.put_allocations(new, w),
                    providers=[rp], consumers=[new])
            return
        shrink = self.rng.choice([0, 1, 1, 2])
        allocs[rp][rc] = max(1, allocs[rp][rc] - shrink * step)
        if r < 0.6:      # one consumer shrinks, a new one takes some
            new = self.new_consumer()
            take = self.rng.choice([1, 1, 2, 3]) * step
            w = {c: self.write(allocs, old.generation),
                 new: self.write({rp: {rc: take}}, None)}
            self.do(f"over-capacity post {c} -{shrink} steps + {new} {take} "
                    f"{rp} {rc}", lambda p: p.post_allocations(w),
                    providers=allocs, consumers=list(w))
            return
        delta = self.rng.choice([-shrink, -shrink, 0, 1, 2])
        allocs[rp][rc] = max(1, old.allocations[rp][rc] + delta * step)
        w = self.write(allocs, old.generation)
        self.do(f"over-capacity rewrite {c} {rp} {rc} delta {delta} steps",
                lambda p: p.put_allocations(c, w),
                providers=allocs, consumers=[c])

    def step_lower_inventory(self) -> None:
        """Lower totals (possibly below usage), or change ratios/reserved."""
        candidates = [rp for rp in self.live() if self.inventories(rp)]
        if not candidates:
            return self.step_claim()
        rp = self.rng.choice(candidates)
        invs = dict(self.inventories(rp))
        usage = self.emb.get_usages(rp)
        rc = self.rng.choice(sorted(invs))
        inv = invs[rc]
        choice = self.rng.random()
        if choice < 0.5 and usage.get(rc):
            total = max(1, usage[rc] // self.rng.choice([2, 3]) or 1)
            invs[rc] = Inventory(total, 0, inv.min_unit,
                                 max(inv.min_unit, min(inv.max_unit, MAX_INT)),
                                 inv.step_size, inv.allocation_ratio)
            note = "lower below usage"
        elif choice < 0.75:
            invs[rc] = Inventory(inv.total, inv.reserved, inv.min_unit,
                                 inv.max_unit, inv.step_size,
                                 self.rng.choice(RATIOS))
            note = "new ratio"
        else:
            invs[rc] = Inventory(inv.total + self.rng.choice([-1, 1, 5]) or 1,
                                 0, inv.min_unit, inv.max_unit, inv.step_size,
                                 inv.allocation_ratio)
            note = "nudge total"
        gen, how = self.pick_provider_generation(rp)
        self.set_inventories(rp, invs, note + how, generation=gen)

    def step_inventory_shape(self) -> None:
        """Remove a class (in use or not), add one, or name an uncreated
        custom class."""
        candidates = self.live()
        if not candidates:
            return self.step_claim()
        rp = self.rng.choice(candidates)
        invs = dict(self.inventories(rp))
        r = self.rng.random()
        if r < 0.45 and invs:
            used = [rc for rc, n in self.emb.get_usages(rp).items() if n]
            rc = self.rng.choice(used if used and self.rng.random() < 0.6
                                 else sorted(invs))
            del invs[rc]
            note = f"remove {rc}"
        elif r < 0.8:
            rc = self.rng.choice(
                ["VCPU", "MEMORY_MB", "DISK_GB", "VGPU"]
                + ([self.custom_rc] if self.have_custom else []))
            invs[rc] = self.random_inventory(rc)
            note = f"add/replace {rc}"
        else:
            invs[self.uncreated_rc] = self.random_inventory(self.uncreated_rc)
            note = "uncreated class"
        gen, how = self.pick_provider_generation(rp)
        self.set_inventories(rp, invs, note + how, generation=gen)

    def step_move(self, inst: str | None = None) -> None:
        """nova's move_allocations: instance -> migration in one POST."""
        holders = self.holders()
        if not holders:
            return self.step_claim()
        inst = inst or self.rng.choice(holders)
        old = self.emb.get_consumer(inst)
        if self.rng.random() < 0.8:
            mig = self.new_consumer()
            mig_gen, mhow = (None, "") if self.rng.random() < 0.85 else \
                self.pick_generation(None)
        else:   # onto a consumer that already exists (gen conflict likely)
            mig = self.rng.choice(self.consumers)
            cur = self.emb.get_consumer(mig).generation
            mig_gen, mhow = self.pick_generation(cur)
        inst_gen, ihow = self.pick_generation(old.generation)
        writes = {
            inst: AllocationWrite({}, old.project_id, old.user_id, inst_gen,
                                  "INSTANCE"),
            mig: AllocationWrite(old.allocations, old.project_id, old.user_id,
                                 mig_gen, "MIGRATION"),
        }
        self.do(f"move {inst} -> {mig} ({ihow}, {mhow or 'null gen'})",
                lambda p: p.post_allocations(writes),
                providers=old.allocations, consumers=[inst, mig])

    def step_resize(self) -> None:
        """POST: migration takes the source allocations, the instance gets
        new ones (same host or another); sums per provider across both."""
        holders = self.holders()
        if not holders:
            return self.step_claim()
        inst = self.rng.choice(holders)
        old = self.emb.get_consumer(inst)
        mig = self.new_consumer()
        same_host = self.rng.random() < 0.5
        src = next(iter(old.allocations))
        dest = src if same_host and src in self.computes + self.children else None
        new = self.claim_allocations(dest)
        inst_gen, how = self.pick_generation(old.generation)
        writes = {
            mig: AllocationWrite(old.allocations, old.project_id, old.user_id,
                                 None, "MIGRATION"),
            inst: AllocationWrite(new, old.project_id, old.user_id, inst_gen,
                                  "INSTANCE"),
        }
        if self.rng.random() < 0.5:   # the other key order
            writes = dict(reversed(list(writes.items())))
        self.do(f"resize {inst} {'same host' if dest else 'move'} {new} "
                f"mig {mig} ({how})", lambda p: p.post_allocations(writes),
                providers=list(old.allocations) + list(new),
                consumers=[inst, mig])

    def step_empty(self) -> None:
        """PUT {} (deletes everything and the consumer), or POST {} for one
        consumer with another's write, or {} for an unknown consumer."""
        holders = self.holders()
        if holders and self.rng.random() < 0.75:
            c = self.rng.choice(holders)
            old = self.emb.get_consumer(c)
            gen, how = self.pick_generation(old.generation)
            providers = list(old.allocations)
        else:
            c = self.new_consumer() if self.rng.random() < 0.6 else \
                self.rng.choice(self.consumers or [self.new_consumer()])
            gen, how = self.pick_generation(self.emb.get_consumer(c).generation)
            providers = []
        w = self.write({}, gen)
        self.do(f"empty {c} ({how})", lambda p: p.put_allocations(c, w),
                providers=providers, consumers=[c])

    def step_delete(self) -> None:
        holders = self.holders()
        if holders and self.rng.random() < 0.7:
            c = self.rng.choice(holders)
            providers = list(self.emb.get_consumer(c).allocations)
        else:   # nothing there (maybe a consumer left behind without any)
            c = self.rng.choice(self.consumers) if self.consumers and \
                self.rng.random() < 0.5 else self.new_consumer()
            providers = []
        self.do(f"delete allocations {c}", lambda p: p.delete_allocations(c),
                providers=providers, consumers=[c])

    def step_bad_reference(self) -> None:
        """A write naming a missing provider, an uncreated custom class or a
        class the provider has no inventory of."""
        r = self.rng.random()
        allocs = self.claim_allocations()
        if r < 0.4:
            allocs[self.phantom] = {"VCPU": 1}
            note = "missing provider"
        elif r < 0.7:
            rp = next(iter(allocs))
            allocs[rp] = dict(allocs[rp], **{self.uncreated_rc: 1})
            note = "uncreated class"
        else:
            rp = next(iter(allocs))
            absent = [rc for rc in ("VCPU", "MEMORY_MB", "DISK_GB", "VGPU")
                      if rc not in self.inventories(rp)]
            rc = self.rng.choice(absent or ["VGPU"])
            allocs[rp] = dict(allocs[rp], **{rc: 1})
            note = f"no {rc} inventory"
        holders = self.holders()
        if holders and self.rng.random() < 0.4:
            c = self.rng.choice(holders)
            old = self.emb.get_consumer(c)
            gen, providers = old.generation, list(old.allocations)
        else:
            c = self.rng.choice(self.consumers) if self.consumers and \
                self.rng.random() < 0.3 else self.new_consumer()
            gen, providers = self.emb.get_consumer(c).generation, []
        if self.rng.random() < 0.3:
            other = self.new_consumer()
            w = {other: self.write(self.claim_allocations(), None),
                 c: self.write(allocs, gen)}
            self.do(f"post {other}+{c} {note}", lambda p: p.post_allocations(w),
                    providers=providers + list(allocs),
                    consumers=[c, other])
            return
        w = self.write(allocs, gen)
        self.do(f"write {c} {note} {allocs}", lambda p: p.put_allocations(c, w),
                providers=providers + list(allocs), consumers=[c])

    def step_traits(self) -> None:
        candidates = self.live()
        if not candidates:
            return self.step_claim()
        rp = self.rng.choice(candidates)
        _, current = self.emb.get_traits(rp)
        r = self.rng.random()
        if r < 0.35:
            traits = sorted(current)
            note = "same traits"
        elif r < 0.75:
            pool = ["HW_CPU_X86_AVX2", "COMPUTE_STATUS_DISABLED", SHARES] + \
                ([self.custom_trait] if self.have_custom else [])
            traits = sorted(self.rng.sample(pool, self.rng.randint(0, 2)))
            note = "new traits"
        else:
            traits = sorted(current | {self.uncreated_trait})
            note = "uncreated trait"
        gen, how = self.pick_provider_generation(rp)
        self.do(f"set traits {rp} {traits} {note}{how}",
                lambda p: p.set_traits(rp, gen, traits),
                providers=[rp], reads=("traits", "inv"))

    def step_aggregates(self) -> None:
        candidates = self.live()
        if not candidates:
            return self.step_claim()
        rp = self.rng.choice(candidates)
        _, current = self.emb.get_aggregates(rp)
        aggs = self.rng.choice([sorted(current), [self.aggregate], [],
                                [self.aggregate, self.new_uuid()]])
        gen, how = self.pick_provider_generation(rp)
        self.do(f"set aggregates {rp} {len(aggs)}{how}",
                lambda p: p.set_aggregates(rp, gen, aggs),
                providers=[rp], reads=("aggs", "inv"))

    def step_delete_provider(self) -> None:
        candidates = self.live()
        r = self.rng.random()
        if candidates and r < 0.85:
            rp = self.rng.choice(candidates)
        elif r < 0.93:
            rp = self.phantom
        else:   # a duplicate name instead
            if not candidates:
                return self.step_claim()
            name = self.emb.get_provider(self.rng.choice(candidates)).name
            new = self.new_uuid()
            self.do(f"create duplicate name {name}",
                    lambda p: p.create_provider(name, uuid=new),
                    providers=[new], reads=("gen",))
            return
        self.do(f"delete provider {rp}", lambda p: p.delete_provider(rp),
                providers=[rp], reads=("inv", "usage", "allocs"))

    STEPS = (
        (step_claim, 6), (step_rewrite, 3), (step_over_capacity, 3),
        (step_lower_inventory, 1), (step_inventory_shape, 2), (step_move, 3),
        (step_resize, 2), (step_empty, 2), (step_delete, 2),
        (step_bad_reference, 2), (step_traits, 1), (step_aggregates, 1),
        (step_delete_provider, 1),
    )

    def run(self, steps: int) -> None:
        self.set_up()
        funcs = [f for f, _ in self.STEPS]
        weights = [w for _, w in self.STEPS]
        for _ in range(steps):
            self.rng.choices(funcs, weights)[0](self)
        self.compare_all()


@pytest.mark.parametrize("seed", range(FIRST_SEED, FIRST_SEED + SEQUENCES),
                         ids=lambda s: f"seed={s}")
def test_embedded_matches_real_placement(real_placement, seed):
    Sequence(seed, EmbeddedPlacement(), real_placement).run(MIXED_STEPS)


# ------------------------------------------------------ scripted corner cases
# Corners the random sequences reach rarely, run through the same lockstep
# harness (same outcome, same state after every step).
def _node(s: Sequence, kind: str, invs: dict, parent: str | None = None) -> str:
    rp = s.create(kind, parent=parent)
    s.set_inventories(rp, invs)
    return rp


def _put(s: Sequence, c: str, allocs: dict, gen, desc: str = "put",
         **kw) -> tuple:
    w = AllocationWrite(allocs, kw.get("project_id", "proj-a"),
                        kw.get("user_id", "user-a"), gen,
                        kw.get("consumer_type", "INSTANCE"))
    return s.do(f"{desc} {c} {allocs} gen {gen}",
                lambda p: p.put_allocations(c, w),
                providers=list(allocs) + s.providers, consumers=[c])


def scenario_parent_with_children_and_allocations(s: Sequence) -> None:
    root = _node(s, "root", {"VCPU": Inventory(8)})
    child = _node(s, "child", {"VGPU": Inventory(2)}, parent=root)
    c = s.new_consumer()
    _put(s, c, {root: {"VCPU": 1}, child: {"VGPU": 1}}, None)
    for rp in (root, child, root):
        s.do(f"delete provider {rp}", lambda p: p.delete_provider(rp),
             providers=[root, child], reads=("inv", "usage", "allocs"))
    s.do(f"delete allocations {c}", lambda p: p.delete_allocations(c),
         providers=[root, child], consumers=[c])
    for rp in (child, root):
        s.do(f"delete provider {rp}", lambda p: p.delete_provider(rp),
             providers=[root, child])


def scenario_parent_is_itself(s: Sequence) -> None:
    rp = s.new_uuid()
    s.do("create provider parented to itself",
         lambda p: p.create_provider(f"diff-{s.tag}-self", uuid=rp,
                                     parent_provider_uuid=rp), providers=[rp])
    s.do("create provider with a missing parent",
         lambda p: p.create_provider(f"diff-{s.tag}-orphan",
                                     parent_provider_uuid=s.phantom),
         providers=[s.phantom])


def scenario_unchanged_traits_and_aggregates(s: Sequence) -> None:
    rp = _node(s, "cn", {"VCPU": Inventory(8)})
    for traits in (["HW_CPU_X86_AVX2"], ["HW_CPU_X86_AVX2"], [], []):
        gen = s.generation(rp)
        s.do(f"set traits {traits}", lambda p: p.set_traits(rp, gen, traits),
             providers=[rp], reads=("traits", "inv"))
    for aggs in ([s.aggregate], [s.aggregate], [], []):
        gen = s.generation(rp)
        s.do(f"set aggregates {aggs}", lambda p: p.set_aggregates(rp, gen, aggs),
             providers=[rp], reads=("aggs", "inv"))
    gen = s.generation(rp)
    s.do("same inventories", lambda p: p.set_inventories(
        rp, gen, {"VCPU": Inventory(8)}), providers=[rp])


def scenario_empty_write_for_unknown_consumer(s: Sequence) -> None:
    rp = _node(s, "cn", {"VCPU": Inventory(8)})
    c = s.new_consumer()
    _put(s, c, {}, None, "empty new")
    s.do(f"delete allocations {c}", lambda p: p.delete_allocations(c),
         consumers=[c])
    _put(s, c, {rp: {"VCPU": 1}}, None, "claim null gen")
    _put(s, c, {rp: {"VCPU": 1}}, 0, "claim gen 0")
    _put(s, c, {}, 1, "empty")
    _put(s, c, {rp: {"VCPU": 1}}, None, "claim null gen again")


def scenario_missing_provider_leaves_consumers(s: Sequence) -> None:
    rp = _node(s, "cn", {"VCPU": Inventory(8)})
    a, b, held = s.new_consumer(), s.new_consumer(), s.new_consumer()
    _put(s, held, {rp: {"VCPU": 2}}, None)
    writes = {
        a: AllocationWrite({rp: {"VCPU": 1}}, "proj-a", "user-a", None),
        held: AllocationWrite({rp: {"VCPU": 3}}, "proj-b", "user-b", 1),
        b: AllocationWrite({s.phantom: {"VCPU": 1}}, "proj-a", "user-a", None),
    }
    s.do("post naming a missing provider", lambda p: p.post_allocations(writes),
         providers=[rp], consumers=[a, b, held])
    for c in (a, b):
        _put(s, c, {rp: {"VCPU": 1}}, None, "claim left-behind null gen")
        _put(s, c, {rp: {"VCPU": 1}}, 0, "claim left-behind gen 0")
    # an uncreated class removes the new consumer again
    c = s.new_consumer()
    _put(s, c, {rp: {"VCPU": 1, s.uncreated_rc: 1}}, None, "uncreated class")
    _put(s, c, {rp: {"VCPU": 1}}, None, "claim after")


def scenario_float_capacity(s: Sequence) -> None:
    rp = _node(s, "cn", {"VCPU": Inventory(100, 0, 1, MAX_INT, 1, 0.57),
                         "MEMORY_MB": Inventory(1000, 1, 1, MAX_INT, 1, 0.7),
                         "DISK_GB": Inventory(10, 3, 1, MAX_INT, 1, 1.1)})
    # capacities 56.99999999999999, 699.3 and 7.700000000000001; a
    # consumer's own old allocations do not count against its rewrite
    c = s.new_consumer()
    for vcpu, mem, disk in ((57, 1, 1), (56, 699, 7), (57, 699, 7),
                            (56, 700, 7), (56, 699, 8), (56, 699, 7)):
        _put(s, c, {rp: {"VCPU": vcpu, "MEMORY_MB": mem, "DISK_GB": disk}},
             s.emb.get_consumer(c).generation)


def scenario_over_capacity_post(s: Sequence) -> None:
    rp = _node(s, "cn", {"VCPU": Inventory(10)})
    a, b = s.new_consumer(), s.new_consumer()
    _put(s, a, {rp: {"VCPU": 5}}, None)
    _put(s, b, {rp: {"VCPU": 5}}, None)
    s.set_inventories(rp, {"VCPU": Inventory(6)}, "lower below usage")
    for shrink, take in ((2, 3), (2, 2), (1, 2), (1, 0)):
        new = s.new_consumer()
        gen_a = s.emb.get_consumer(a).generation
        amount = s.emb.get_consumer(a).allocations[rp]["VCPU"] - shrink
        writes = {a: AllocationWrite({rp: {"VCPU": amount}}, "p", "u", gen_a)}
        if take:
            writes[new] = AllocationWrite({rp: {"VCPU": take}}, "p", "u", None)
        s.do(f"over capacity: a -{shrink}, new +{take}",
             lambda p: p.post_allocations(writes), providers=[rp],
             consumers=[a, b, new])
    # emptying b and moving it to a migration keeps the usage
    mig = s.new_consumer()
    old = s.emb.get_consumer(b)
    writes = {b: AllocationWrite({}, "p", "u", old.generation),
              mig: AllocationWrite(old.allocations, "p", "u", None, "MIGRATION")}
    s.do("move while over capacity", lambda p: p.post_allocations(writes),
         providers=[rp], consumers=[b, mig])


def scenario_rewrite_generations_and_identity(s: Sequence) -> None:
    rp1 = _node(s, "cn", {"VCPU": Inventory(8)})
    rp2 = _node(s, "cn", {"VCPU": Inventory(8)})
    c = s.new_consumer()
    _put(s, c, {rp1: {"VCPU": 2}}, None)
    _put(s, c, {rp2: {"VCPU": 2}}, 1, "move by put")
    _put(s, c, {rp2: {"VCPU": 2}}, 2, "same, new identity",
         project_id="proj-b", user_id="user-b", consumer_type="MIGRATION")
    s.do(f"delete allocations {c}", lambda p: p.delete_allocations(c),
         providers=[rp1, rp2], consumers=[c])


SCENARIOS = {name[len("scenario_"):]: fn for name, fn in sorted(globals().items())
             if name.startswith("scenario_")}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scripted_corner_case(real_placement, name):
    s = Sequence(zlib.crc32(name.encode()), EmbeddedPlacement(), real_placement)
    SCENARIOS[name](s)
    s.compare_all()
