"""Shared pieces of the differential tests against nova (weighing,
filtering): nova's configuration as a fixture, quiet loggers, and the
draws of a generated fleet (its size, the pool a field's values come
from)."""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Iterator

import nova.conf
from oslo_config import fixture as config_fixture

from scheduler_ext.nova import service

CONF = nova.conf.CONF


@contextlib.contextmanager
def nova_conf_overrides() -> Iterator[config_fixture.Config]:
    """nova's global configuration (with our options), overrides undone
    on leaving."""
    service.register_opts(CONF)
    fixture = config_fixture.Config(CONF)
    fixture.setUp()
    try:
        yield fixture
    finally:
        fixture.cleanUp()


@contextlib.contextmanager
def quiet(*names: str) -> Iterator[None]:
    """The named loggers answer errors only, inside the block (warnings a
    test provokes on purpose stay out of the log)."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [log.level for log in loggers]
    for log in loggers:
        log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for log, level in zip(loggers, levels):
            log.setLevel(level)


def fleet_size(rng: random.Random, largest: int = 2000) -> int:
    """A fleet's host count: mostly a few dozen, some hundreds, one in a
    hundred between 500 and ``largest``; 0 to 2 one in twenty."""
    roll = rng.random()
    if roll < 0.05:
        return rng.randint(0, 2)
    if roll < 0.6:
        return rng.randint(2, 60)
    if roll < 0.99:
        return rng.randint(60, 300)
    return rng.randint(500, largest)


def pool(rng: random.Random, wide: list, narrow: list) -> list:
    """Values to draw a field from: a few (ties), many, or one (all equal)."""
    roll = rng.random()
    if roll < 0.1:
        return [rng.choice(wide)]
    return narrow if roll < 0.55 else wide
