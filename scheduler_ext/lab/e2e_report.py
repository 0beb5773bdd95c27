"""The end-to-end benchmark's report: ``e2e.json`` (every figure),
``e2e.md`` (tables) and ``e2e.png`` (latency split and throughput)."""

from __future__ import annotations

import json
import os

from scheduler_ext.lab.e2e import NOVA_PHASES, PHASES, summarize

KINDS = ("boot", "resize")
#: the phases of what a scheduler adds to nova's own work and the claim
ADDED = ("refresh", "engine", "reads", "other")


def load(out: str) -> list[dict]:
    """The sizes already run in ``out`` with the current phases (a run
    with another split of the decision is not mixed into the tables)."""
    path = os.path.join(out, "e2e.json")
    results = json.load(open(path)) if os.path.exists(path) else []
    return [r for r in results
            if all(set(PHASES) <= set(xs[0]) for xs in r["samples"].values() if xs)]


def write(results: list[dict], out: str) -> None:
    with open(os.path.join(out, "e2e.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(out, "e2e.md"), "w") as f:
        f.write(table(results) + "\n")
    plot(results, os.path.join(out, "e2e.png"))


def _stats(result: dict, key: str) -> dict:
    return summarize(result["samples"][key])


def table(results: list[dict]) -> str:
    """Markdown: p50/p99 per decision with the split, and throughput."""
    head = ("| hosts | scheduler | kind | total p50 | total p99 | "
            + " | ".join(f"{p} p50" for p in PHASES) + " | gc p50 | no host | same host |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in results:
        for kind in KINDS:
            for sched in _scheds(r):
                key = f"{sched}/{kind}"
                st, oc = _stats(r, key), r["outcomes"][key]
                lines.append(
                    f"| {r['compute_hosts']:,} | {sched} | {kind} | "
                    f"{st['total']['p50']:.1f} | {st['total']['p99']:.1f} | "
                    + " | ".join(f"{st[p]['p50']:.1f}" for p in PHASES)
                    + f" | {st['gc']['p50']:.1f}"
                    + f" | {oc['no_valid_host']} | "
                    + (f"{oc['same_host']}" if kind == "resize" else "-") + " |")
    where = ", ".join(f"{r['compute_hosts']:,}: {r.get('nova_database', 'sqlite')}"
                      for r in results)
    lines += ["", "ms per decision; the claim (one placement write) is the floor. "
              "gc: time in Python's garbage collections during the decision, "
              "already inside the phases. "
              f"nova's databases per size: {where}. Ours' "
              "host_state_refresh_interval per size: "
              + ", ".join(f"{r['compute_hosts']:,}: "
                          f"{r.get('host_state_refresh_interval', 0.0):g} s"
                          for r in results) + ".", ""]
    lines += _ratio_lines(results) + [""] + _limit_lines(results) + [""] \
        + _throughput_lines(results)
    return "\n".join(lines)


def _scheds(result: dict) -> list[str]:
    return [s for s in ("stock", "ours", "ours-limit") if f"{s}/boot" in result["samples"]]


def _limit_lines(results: list[dict]) -> list[str]:
    """Per size: how often each pick was the host nova's own code picks
    over every host that fits (``choice_against_nova``)."""
    out = []
    for r in results:
        c = r.get("choice_against_nova")
        if not c:
            continue
        for name, matches in sorted(c["matches"].items()):
            ranks = sorted(c["ranks"][name])
            limit = f" (nova_host_limit = {c['limit']})" if name == "ours-limit" else ""
            out.append(f"{r['compute_hosts']:,} hosts: {name}{limit} picked the host nova's "
                       f"code picks over every host that fits on {matches} of "
                       f"{c['samples']} boots ({100.0 * matches / c['samples']:.0f}%); "
                       f"place of its pick in nova's order: median "
                       f"{ranks[len(ranks) // 2]}, worst {ranks[-1]} (1 = nova's pick)")
    return out


def _p50_of(samples: list[dict], value) -> float:
    """p50 over decisions of ``value(phases)``, in ms."""
    got = sorted(value(x) for x in samples)
    return 1e3 * got[len(got) // 2] if got else float("nan")


def _ratio_lines(results: list[dict]) -> list[str]:
    """What each scheduler adds to nova's own work (its filters and
    weighers, its request preparation) and the claim, per decision."""
    out = ["| hosts | kind | stock p50 / ours p50 "
           "| ours adds: total minus (states + filters + weighers + prep + claim), "
           "plus the CPU time "
           "of its reads on worker threads, p50 ms "
           "| of which refresh + engine + reads (waited for, and on workers), p50 ms "
           "| of which garbage collections, p50 ms "
           "| stock adds besides its placement GET: total minus (states + filters "
           "+ weighers + prep + claim + GET), p50 ms "
           "| stock p50 / ours-limit p50 | ours-limit adds, p50 ms "
           "| ours-limit p50 / its claim p50 |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    # work ours starts on worker threads (``nova.early_reads``) slows the
    # decision's thread wherever it holds the GIL: counted in full
    added = lambda x: (x["total"] - sum(x[p] for p in NOVA_PHASES)  # noqa: E731
                       - x.get("prep", 0.0) - x["claim"]
                       + x.get("bg", 0.0))
    own = lambda x: x["refresh"] + x["engine"] + x["reads"] + x.get("bg", 0.0)  # noqa: E731
    collections = lambda x: sum(x.get(f"gc:{p}", 0.0) for p in ADDED)  # noqa: E731
    stock_rest = lambda x: added(x) - x["engine"]  # noqa: E731
    for r in results:
        for kind in KINDS:
            samples = r["samples"]
            o = _stats(r, f"ours/{kind}")
            s = _stats(r, f"stock/{kind}") if f"stock/{kind}" in samples else None
            cells = [f"{r['compute_hosts']:,}", kind,
                     f"{s['total']['p50'] / max(o['total']['p50'], 1e-9):.1f}" if s else "-",
                     f"{_p50_of(samples[f'ours/{kind}'], added):.1f}",
                     f"{_p50_of(samples[f'ours/{kind}'], own):.1f}",
                     f"{_p50_of(samples[f'ours/{kind}'], collections):.1f}"
                     if "gc:other" in samples[f"ours/{kind}"][0] else "-",
                     f"{_p50_of(samples[f'stock/{kind}'], stock_rest):.1f}" if s else "-"]
            if f"ours-limit/{kind}" in samples:
                lim = _stats(r, f"ours-limit/{kind}")
                cells += [f"{s['total']['p50'] / max(lim['total']['p50'], 1e-9):.1f}"
                          if s else "-",
                          f"{_p50_of(samples[f'ours-limit/{kind}'], added):.1f}",
                          f"{lim['total']['p50'] / max(lim['claim']['p50'], 1e-9):.1f}"]
            else:
                cells += ["-", "-", "-"]
            out.append("| " + " | ".join(cells) + " |")
    return out


def _throughput_lines(results: list[dict]) -> list[str]:
    rows = [r for r in results if r.get("throughput")]
    if not rows:
        return []
    ks = sorted({int(k.split("/")[1]) for r in rows for k in r["throughput"]})
    out = ["| hosts | scheduler | " + " | ".join(f"{k} worker(s)" for k in ks) + " |",
           "|---|---|" + "---|" * len(ks)]
    for r in rows:
        for sched in ("stock", "ours", "ours-limit"):
            if not any(k.startswith(sched + "/") for k in r["throughput"]):
                continue
            out.append(f"| {r['compute_hosts']:,} | {sched} | " + " | ".join(
                f"{r['throughput'].get(f'{sched}/{k}', float('nan')):.2f}" for k in ks) + " |")
    out.append("\nboots per second, all workers together")
    return out


def plot(results: list[dict], path: str) -> None:
    """Stacked p50 split per size, scheduler and kind; throughput lines."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(18, 6.5),
                                  gridspec_kw={"width_ratios": [2.2, 1]})
    labels, bottoms = [], []
    colors = dict(zip(PHASES, ("#4c72b0", "#55a868", "#c44e52", "#e17c7e", "#f2b8b9",
                               "#dd8452", "#8172b2", "#ccb974", "#aaaaaa")))
    x = 0.0
    for r in results:
        for kind in KINDS:
            for sched in _scheds(r):
                st = _stats(r, f"{sched}/{kind}")
                base = 0.0
                for p in PHASES:
                    ax.bar(x, st[p]["p50"], bottom=base, color=colors[p],
                           label=p if x == 0 else None)
                    base += st[p]["p50"]
                ax.plot([x - 0.4, x + 0.4], [st["total"]["p99"]] * 2, color="black")
                labels.append(f"{r['compute_hosts'] / 1000:g}k {sched} {kind}")
                bottoms.append(x)
                x += 1
            x += 0.5
    ax.set_xticks(bottoms, labels, fontsize=7, rotation=90)
    ax.set_yscale("symlog", linthresh=100)   # stock's seconds beside ours' ms
    ax.set_ylabel("ms per decision (bars: p50 split; line: p99 total; "
                  "linear below 100 ms, log above)")
    ax.set_title("select_destinations, stock nova vs scheduler-ext")
    ax.legend()
    for sched, style in (("stock", "o--"), ("ours", "s-"), ("ours-limit", "^-")):
        for r in results:
            tp = r.get("throughput") or {}
            ks = sorted(int(k.split("/")[1]) for k in tp if k.startswith(sched + "/"))
            if ks:
                ax2.plot(ks, [tp[f"{sched}/{k}"] for k in ks], style,
                         label=f"{sched}, {r['compute_hosts']:,} hosts")
    ax2.set_xlabel("scheduler processes")
    ax2.set_ylabel("boots per second")
    ax2.set_title("throughput")
    if ax2.lines:   # a run without the throughput part has none
        ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
