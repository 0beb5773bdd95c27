"""Sort keys of provider uuids: two uint64 halves per uuid, so that numpy
can order and break ties between rows exactly as placement orders uuid
strings."""

from __future__ import annotations

from typing import Sequence

import numpy as np

_HEX = np.full(256, 0, np.uint64)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEX[_c] = 10 + _i
_NO_DASH = np.array([i for i in range(36) if i not in (8, 13, 18, 23)])
_SHIFTS = np.arange(60, -4, -4, dtype=np.uint64)



def uuid_keys(uuids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(high, low) 64-bit halves of each canonical uuid: comparing
    ``(high, low)`` orders rows as their lower-case uuid strings."""
    if not len(uuids):
        return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
    raw = np.frombuffer("".join(uuids).encode("ascii"), np.uint8)
    nib = _HEX[raw.reshape(len(uuids), 36)[:, _NO_DASH]]
    hi = np.bitwise_or.reduce(nib[:, :16] << _SHIFTS, axis=1)
    lo = np.bitwise_or.reduce(nib[:, 16:] << _SHIFTS, axis=1)
    return hi, lo
