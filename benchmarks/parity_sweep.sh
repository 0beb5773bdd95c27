#!/usr/bin/env bash
# The full parity sweeps against a real placement 16.0.0 (started by the
# tests on 127.0.0.1), larger than what the README's test command runs:
#   - the embedded placement against the real one: 200 random sequences;
#   - the engine on flat fleets: 50 fleets x 8 queries, before and after a release;
#   - the engine on nested fleets: 50 fleets x 22 queries, before and after
#     a release (2,200 comparisons).
# Sizes can be raised with the same variables. About 15 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
export SCHEDULER_EXT_DIFF_SEQUENCES="${SCHEDULER_EXT_DIFF_SEQUENCES:-200}"
export SCHEDULER_EXT_PARITY_FLEETS="${SCHEDULER_EXT_PARITY_FLEETS:-50}"
export SCHEDULER_EXT_NESTED_FLEETS="${SCHEDULER_EXT_NESTED_FLEETS:-50}"
for var in SCHEDULER_EXT_DIFF_SEQUENCES SCHEDULER_EXT_PARITY_FLEETS SCHEDULER_EXT_NESTED_FLEETS; do
    if ! [[ "${!var}" =~ ^[1-9][0-9]*$ ]]; then
        echo "parity_sweep.sh: $var must be a positive integer, got '${!var}'" >&2
        exit 2
    fi
done
exec .venv/bin/python -m pytest -q -p no:cacheprovider -rA \
    tests/functional/test_placement_differential.py \
    tests/functional/test_engine_parity.py \
    tests/functional/test_nested_parity.py "$@"
