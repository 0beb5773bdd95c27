"""The end-to-end report's second table (``lab.e2e_report``): what ours
adds is its total less nova's phases and the claim, plus the CPU time of
the reads it ran on worker threads."""

import warnings

from scheduler_ext.lab import e2e_report


def _sample(total, nova, prep, claim, bg=None, **rest):
    """nova's phases: ``nova`` split 1:2:1 into states, filters, weighers."""
    x = dict(total=total, states=nova / 4, filters=nova / 2, weighers=nova / 4,
             prep=prep, claim=claim, refresh=0.0, engine=0.002, reads=0.0,
             other=0.0, gc=0.0)
    x.update(rest)
    if bg is not None:
        x["bg"] = bg
    return x


def _result(samples):
    return {"compute_hosts": 990, "samples": samples,
            "outcomes": {k: {"no_valid_host": 0, "same_host": 0} for k in samples}}


def test_ours_adds_counts_its_background_reads():
    ours = [_sample(0.100, 0.060, 0.010, 0.020, bg=0.003) for _ in range(3)]
    old = [_sample(0.100, 0.060, 0.010, 0.020) for _ in range(3)]
    r = _result({"ours/boot": ours, "ours/resize": old})
    rows = {line.split(" | ")[1]: line.split(" | ")
            for line in e2e_report._ratio_lines([r])[2:]}
    assert rows["boot"][3] == "13.0"        # 100 - 60 - 10 - 20 + 3
    assert rows["boot"][4] == "5.0"         # engine 2 + background 3
    assert rows["resize"][3] == "10.0"      # a run without the field


def test_plot_of_a_run_without_throughput_warns_nothing(tmp_path):
    samples = {f"{s}/{k}": [_sample(0.100, 0.060, 0.010, 0.020, bg=0.003)]
               for s in ("ours", "ours-limit") for k in ("boot", "resize")}
    path = tmp_path / "e2e.png"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        e2e_report.plot([dict(_result(samples), providers=1000)], str(path))
    assert path.stat().st_size > 0


def test_a_run_with_another_split_of_the_decision_is_not_loaded(tmp_path):
    import json
    current = _result({"ours/boot": [_sample(0.1, 0.06, 0.01, 0.02)]})
    older = _result({"ours/boot": [dict(total=0.1, nova=0.06, prep=0.01, claim=0.02,
                                        refresh=0.0, engine=0.0, reads=0.0,
                                        other=0.0, gc=0.0)]})
    older["compute_hosts"] = 9900
    (tmp_path / "e2e.json").write_text(json.dumps([older, current]))
    assert [r["compute_hosts"] for r in e2e_report.load(str(tmp_path))] == [990]
