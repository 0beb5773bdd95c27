"""The sample configuration in etc/ is generated from the option definitions."""

import pathlib
import subprocess
import sys

from scheduler_ext import conf as se_conf
from scheduler_ext.driver import make_conf

ROOT = pathlib.Path(__file__).resolve().parents[3]
GENERATOR = ROOT / "etc/scheduler_ext/scheduler-ext-config-generator.conf"
SAMPLE = ROOT / "etc/scheduler_ext/scheduler-ext.conf.sample"


def test_sample_regenerates_identically(tmp_path):
    out = tmp_path / "sample.conf"
    subprocess.run(
        [sys.executable, "-m", "oslo_config.generator",
         "--config-file", str(GENERATOR), "--output-file", str(out)],
        check=True, cwd=ROOT)
    assert out.read_text() == SAMPLE.read_text(), (
        "etc/ sample is stale: regenerate it with oslo-config-generator "
        f"--config-file {GENERATOR.relative_to(ROOT)}")


def test_every_option_has_help_and_is_in_sample():
    text = SAMPLE.read_text()
    for group, opts in se_conf.list_opts():
        for opt in opts:
            assert opt.help, f"[{group}] {opt.name} has no help text"
            assert f"#{opt.dest} = " in text or f"#{opt.name} = " in text, \
                f"[{group}] {opt.name} missing from the sample"


def test_defaults_and_overrides():
    conf = make_conf()
    assert conf.scheduler_ext.move_strategy == "same_host"
    assert conf.scheduler_ext.max_claim_attempts == 3
    conf = make_conf(max_claim_attempts=5, prefer_same_host=True)
    assert conf.scheduler_ext.max_claim_attempts == 5
    assert conf.scheduler_ext.prefer_same_host is True
