"""Shared set-up for the move tests: an embedded placement, a driver with a
chosen strategy and nova's modelled conductor/compute."""

from __future__ import annotations

import random
import uuid

from scheduler_ext import driver as se_driver
from scheduler_ext.lab import invariants
from scheduler_ext.lab.fleet import SHARING_TRAIT, add_host
from scheduler_ext.lab.nova_model import NovaModel
from scheduler_ext.placement import Inventory

FLAVOR1 = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 1028}
FLAVOR2 = {"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 1028}
MAX12 = {"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 1028}


def uuid_factory(seed: int = 0):
    rng = random.Random(seed)
    return lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4))


#: options every test driver gets (functional tests switch the engine)
DEFAULTS: dict = {}


def start(client, strategy: str = "same_host", **opts):
    """(driver, nova model) over ``client`` with the named move strategy."""
    drv = se_driver.SchedulerDriver(
        client, se_driver.make_conf(move_strategy=strategy,
                                    **{**DEFAULTS, **opts}))
    return drv, NovaModel(client, drv.select_destinations,
                          uuid_factory=uuid_factory())


def small_host(client, name="host1", disk=True, aggregates=()):
    """nova's SmallFakeDriver host: VCPU 2, MEMORY_MB 8192, DISK_GB 1028."""
    invs = {"VCPU": Inventory(2), "MEMORY_MB": Inventory(8192)}
    if disk:
        invs["DISK_GB"] = Inventory(1028)
    return add_host(client, name, invs, tuple(aggregates))


def shared_storage(client, aggregate, disk_gb=1028, name="ss1"):
    return add_host(client, name, {"DISK_GB": Inventory(disk_gb)},
                    (aggregate,), (SHARING_TRAIT,))


def usage(client, rp):
    return {rc: n for rc, n in client.get_usages(rp).items() if n}


def dump(client):
    """Every provider's usage and every consumer's allocations."""
    return invariants.state(client)
