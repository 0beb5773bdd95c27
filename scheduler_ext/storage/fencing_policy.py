"""The fencing policy of the evacuation planner: the action ladder, its
timeouts, the mass-failure brake and the batches (``[storage]`` options)."""

from __future__ import annotations

import dataclasses
from typing import Any

from scheduler_ext.errors import ConfigError

LADDER_STEPS = ("log-only", "restart-agent", "graceful-reboot", "hard-reboot")
FENCES = ("graceful-reboot", "hard-reboot")
DEFAULT_LADDER = ("restart-agent", "graceful-reboot")


@dataclasses.dataclass(frozen=True)
class Policy:
    """Seconds for the timeouts; ``brake_fraction`` of a cluster's hosts."""

    ladder: tuple[str, ...] = DEFAULT_LADDER
    step_timeout: float = 300.0
    brake_fraction: float = 0.5
    fence_batch: int = 1
    evacuation_batch: int = 10
    fence_timeout: float = 600.0
    evacuation_attempts: int = 3      # per server, the first one included

    def __post_init__(self) -> None:
        bad = [s for s in self.ladder if s not in LADDER_STEPS]
        if not self.ladder or bad:
            raise ValueError(f"ladder {self.ladder!r}: steps are "
                             f"{', '.join(LADDER_STEPS)}")
        if "log-only" in self.ladder and len(self.ladder) > 1:
            raise ValueError("log-only is a ladder of its own")
        if list(self.ladder) != sorted(set(self.ladder),
                                       key=LADDER_STEPS.index):
            raise ValueError(f"ladder {self.ladder!r} must climb in the order "
                             f"{', '.join(LADDER_STEPS)}")
        if not 0 < self.brake_fraction <= 1 or self.step_timeout <= 0 or \
                self.fence_timeout <= 0 or self.fence_batch < 1 or \
                self.evacuation_batch < 1 or self.evacuation_attempts < 1:
            raise ValueError("brake_fraction in (0, 1], step_timeout > 0, "
                             "fence_timeout > 0, batches >= 1, "
                             "evacuation_attempts >= 1")


def policy_from_conf(conf: Any) -> Policy:
    """The policy of ``[storage]`` (a ConfigOpts with our options)."""
    opts = conf.storage
    try:
        return Policy(tuple(opts.fence_ladder), opts.fence_step_timeout,
                      opts.brake_fraction, opts.fence_batch,
                      opts.evacuation_batch, opts.fence_timeout,
                      opts.evacuation_attempts)
    except ValueError as exc:   # the other options' ranges are oslo's checks
        raise ConfigError(f"[storage] fence_ladder "
                          f"{','.join(opts.fence_ladder)}: {exc}",
                          option="fence_ladder",
                          value=list(opts.fence_ladder)) from None
