"""Reproduce openstack-placement's overcommit under concurrent claims.

One resource provider with ``--capacity`` VCPU (default 8). Each round
fires ``--concurrency`` (16) ``PUT /allocations/<new consumer>`` of 1 VCPU
at it at once, counts the claims placement accepted, reads the provider's
usage back and deletes the allocations. A correct placement accepts
exactly ``--capacity`` claims per round. The run is repeated for each
``[placement] allocation_conflict_retry_count`` in ``--retry-count``:
placement's default 10 (the defect), then 1 (the mitigation: placement
never retries inside its transaction and the client re-sends the write
after ``409 placement.concurrent_update``, as a new request, up to
``--client-resends`` times).

By default the script starts its own throw-away database (PostgreSQL, or
MariaDB with ``--database mariadb``) and placement (gunicorn,
``--workers`` processes of ``--worker-class`` with ``--threads`` each) on
127.0.0.1, which needs scheduler-ext's ``test`` extra. With ``--url`` it
races an already running placement (``auth_strategy = noauth2``) using the
standard library only; it then runs once, with that service's settings.

    .venv/bin/python benchmarks/placement_race.py
    .venv/bin/python benchmarks/placement_race.py --worker-class gthread --workers 1 --threads 4
    .venv/bin/python benchmarks/placement_race.py --database mariadb --rounds 20
    python3 placement_race.py --url http://127.0.0.1:8778 --rounds 20
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid

MICROVERSION = "placement 1.28"   # consumer generations: null = new consumer
#: what placement 16.0.0 logs when the over-capacity exemption admits a write
EXEMPTION_LOG = "reduces existing overage"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:   # one line, no usage dump
        print(f"placement_race: error: {message}", file=sys.stderr)
        sys.exit(2)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _counts(text: str) -> list[int]:
    return [_positive(part) for part in text.split(",")]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Every flag is checked here, before any service starts (exit 2)."""
    p = _Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--database", choices=("postgresql", "mariadb"),
                   default="postgresql")
    p.add_argument("--workers", type=_positive, default=4,
                   help="gunicorn worker processes (default 4)")
    p.add_argument("--worker-class", choices=("sync", "gthread"), default="sync")
    p.add_argument("--threads", type=_positive, default=None,
                   help="threads per gthread worker (default 4; 1 for sync)")
    p.add_argument("--retry-count", type=_counts, default=[10, 1],
                   help="comma list of [placement] allocation_conflict_retry_"
                        "count values, one run each (default 10,1)")
    p.add_argument("--client-resends", type=int, default=3,
                   help="re-sends after 409 placement.concurrent_update "
                        "(default 3, as scheduler-ext's client; 0: none)")
    p.add_argument("--rounds", type=_positive, default=20)
    p.add_argument("--concurrency", type=_positive, default=16,
                   help="claims fired at once per round (default 16)")
    p.add_argument("--capacity", type=_positive, default=8,
                   help="the provider's VCPU total (default 8)")
    p.add_argument("--url", help="race this running placement (noauth2) "
                                 "instead of starting one")
    args = p.parse_args(argv)
    if args.client_resends < 0:
        p.error(f"argument --client-resends: must be >= 0, got {args.client_resends}")
    if args.threads is None:
        args.threads = 4 if args.worker_class == "gthread" else 1
    elif args.worker_class == "sync" and args.threads != 1:
        p.error("argument --threads: must be 1 with --worker-class sync")
    if args.url and not args.url.startswith(("http://", "https://")):
        p.error(f"argument --url: not an http(s) URL: {args.url!r}")
    return args


# ------------------------------------------------------------ HTTP, stdlib
def _call(url: str, method: str, path: str, body: object = None
          ) -> tuple[int, dict]:
    req = urllib.request.Request(
        url.rstrip("/") + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"x-auth-token": "admin", "content-type": "application/json",
                 "openstack-api-version": MICROVERSION})
    try:
        with urllib.request.urlopen(req, timeout=300) as resp:
            raw, status = resp.read(), resp.status
    except urllib.error.HTTPError as err:
        raw, status = err.read(), err.code
    return status, (json.loads(raw) if raw else {})


def _ok(answer: tuple[int, dict], what: str) -> dict:
    status, body = answer
    if status >= 300:
        raise RuntimeError(f"{what}: HTTP {status}: {body}")
    return body


def make_provider(url: str, capacity: int) -> str:
    """A new provider with ``capacity`` VCPU; returns its UUID."""
    rp = str(uuid.uuid4())
    _ok(_call(url, "POST", "/resource_providers",
              {"name": f"race-{rp}", "uuid": rp}), "create provider")
    _ok(_call(url, "PUT", f"/resource_providers/{rp}/inventories",
              {"resource_provider_generation": 0,
               "inventories": {"VCPU": {"total": capacity}}}), "set inventory")
    return rp


def claim(url: str, rp: str, resends: int) -> tuple[str, int]:
    """PUT 1 VCPU for a new consumer; re-send after 409
    placement.concurrent_update (not for a consumer generation conflict).
    Returns (outcome, re-sends) with outcome 'accepted', 'capacity' (409
    over capacity) or 'concurrent_update' (still 409 after the re-sends)."""
    consumer = str(uuid.uuid4())
    body = {"allocations": {rp: {"resources": {"VCPU": 1}}},
            "project_id": "race", "user_id": "race", "consumer_generation": None}
    for attempt in range(resends + 1):
        status, answer = _call(url, "PUT", f"/allocations/{consumer}", body)
        if status == 204:
            return "accepted", attempt
        error = (answer.get("errors") or [{}])[0]
        if status != 409:
            raise RuntimeError(f"claim: HTTP {status}: {answer}")
        if error.get("code") != "placement.concurrent_update":
            return "capacity", attempt
        if "consumer generation conflict" in error.get("detail", ""):
            raise RuntimeError(f"claim of a new consumer: {error}")
        if attempt < resends:
            time.sleep(0.05 * 2 ** attempt)   # as scheduler-ext's client
    return "concurrent_update", resends


def race_round(url: str, rp: str, concurrency: int, resends: int) -> dict:
    """One round: ``concurrency`` claims released together by a barrier;
    returns the outcomes, the re-sends and the usage read back afterwards,
    then deletes the round's allocations."""
    start = threading.Barrier(concurrency)

    def one(_: int) -> tuple[str, int]:
        start.wait()
        return claim(url, rp, resends)

    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(one, range(concurrency)))
    usages = _ok(_call(url, "GET", f"/resource_providers/{rp}/usages"), "usages")
    held = _ok(_call(url, "GET", f"/resource_providers/{rp}/allocations"),
               "allocations")["allocations"]
    for consumer in held:
        _ok(_call(url, "DELETE", f"/allocations/{consumer}"), "delete")
    outcomes = [o for o, _ in results]
    return {"accepted": outcomes.count("accepted"),
            "capacity": outcomes.count("capacity"),
            "concurrent_update": outcomes.count("concurrent_update"),
            "resends": sum(n for _, n in results),
            "used": usages["usages"].get("VCPU", 0)}


def run_rounds(url: str, args: argparse.Namespace, label: str) -> list[dict]:
    """All rounds against one provider; prints one line per round."""
    rp = make_provider(url, args.capacity)
    rounds = []
    for n in range(args.rounds):
        r = race_round(url, rp, args.concurrency, args.client_resends)
        rounds.append(r)
        flag = "  OVER CAPACITY" if r["used"] > args.capacity else ""
        print(f"{label} round {n + 1:2d}: accepted {r['accepted']:2d} of "
              f"{args.concurrency}, VCPU used {r['used']} of {args.capacity}; "
              f"refused: over capacity {r['capacity']}, concurrent_update "
              f"{r['concurrent_update']}; re-sends {r['resends']}{flag}",
              flush=True)
    return rounds


def summary(label: str, rounds: list[dict], capacity: int) -> str:
    used = [r["used"] for r in rounds]
    accepted = [r["accepted"] for r in rounds]
    return (f"{label}: rounds above capacity {sum(u > capacity for u in used)} "
            f"of {len(rounds)}, below capacity {sum(u < capacity for u in used)}; "
            f"accepted per round {min(accepted)}-{max(accepted)} "
            f"(capacity {capacity}); client re-sends "
            f"{sum(r['resends'] for r in rounds)}")


# ------------------------------------------------- throw-away services
class LocalMariaDB:
    """``with LocalMariaDB() as url:`` a scratch MariaDB server on 127.0.0.1
    (Debian: apt-get install mariadb-server; Python driver: PyMySQL) with
    an empty database ``placement``; grant tables are skipped."""

    def __enter__(self) -> str:
        from scheduler_ext.lab.placement_server import free_port
        import pymysql   # noqa: F401 (fail before starting the server)
        self._dir = tempfile.mkdtemp(prefix="placement-race-mariadb-")
        user = ["--user=mysql"] if os.geteuid() == 0 else []
        if user:
            shutil.chown(self._dir, "mysql", "mysql")
        data, port = os.path.join(self._dir, "data"), free_port()
        subprocess.run(["mariadb-install-db", "--no-defaults",
                        f"--datadir={data}", "--skip-test-db", *user],
                       check=True, capture_output=True)
        self._proc = subprocess.Popen(
            ["mariadbd", "--no-defaults", f"--datadir={data}", *user,
             f"--socket={self._dir}/sock", f"--port={port}",
             "--bind-address=127.0.0.1", "--skip-grant-tables",
             "--innodb-flush-log-at-trx-commit=0", "--max-connections=300"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = pymysql.connect(host="127.0.0.1", port=port, user="root")
                break
            except pymysql.err.OperationalError:
                if time.monotonic() > deadline or self._proc.poll() is not None:
                    self.__exit__()
                    raise RuntimeError("MariaDB did not start") from None
                time.sleep(0.3)
        with conn:
            conn.cursor().execute("CREATE DATABASE placement")
        return f"mysql+pymysql://root@127.0.0.1:{port}/placement"

    def __exit__(self, *exc: object) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=60)
        shutil.rmtree(self._dir, ignore_errors=True)


@contextlib.contextmanager
def local_placement(args: argparse.Namespace, retry_count: int):
    """A throw-away database and placement; yields the placement server."""
    from scheduler_ext.lab.placement_server import LocalPlacement
    from scheduler_ext.lab.postgres import LocalPostgres
    database = LocalMariaDB() if args.database == "mariadb" else LocalPostgres()
    server = LocalPlacement(
        workers=args.workers, worker_class=args.worker_class,
        threads=args.threads,
        placement_conf={"placement": {
            "allocation_conflict_retry_count": retry_count}})
    with database as db_url:
        server.database_url = db_url
        with server:
            yield server


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.url:
        rounds = run_rounds(args.url, args, "given placement")
        print(summary(f"{args.url}", rounds, args.capacity))
        return 0
    setup = (f"{args.database}, {args.workers} {args.worker_class} worker(s)"
             f" x {args.threads} thread(s), {args.concurrency} claims per round")
    lines = []
    for retry_count in args.retry_count:
        label = f"retry_count={retry_count}"
        with local_placement(args, retry_count) as server:
            rounds = run_rounds(server.url, args, label)
            exempted = server.log_text().count(EXEMPTION_LOG)
        lines.append(f"{summary(label, rounds, args.capacity)}; placement "
                     f"logged '{EXEMPTION_LOG}' {exempted} times")
    print(f"# {setup}, load average {os.getloadavg()[0]:.2f}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
