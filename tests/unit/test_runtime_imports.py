"""What a nova-scheduler process loads: the runtime only.

A fresh interpreter imports what ``scheduler-ext-nova-scheduler`` imports
(its command module and ``scheduler_ext.nova.manager``) and then the
plugins the default configuration names, as the service does at start
(``service.preload``). Its ``sys.modules`` must hold none of the lab, the
CLI, the storage tools or the embedded placement, and no library that only
they use. The import-linter contract ``runtime-loads-only-the-runtime``
checks the same statically; this checks what Python really loads (a
package's ``__init__`` runs with any of its modules, which import-linter
does not follow).
"""

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

#: Packages of scheduler-ext a nova scheduler never needs.
NOT_RUNTIME = ("scheduler_ext.lab", "scheduler_ext.cmd", "scheduler_ext.storage")
#: The embedded placement and the modules only it uses.
EMBEDDED_PLACEMENT = ("scheduler_ext.placement.embedded",
                      "scheduler_ext.placement.ledger",
                      "scheduler_ext.placement.write_capacity")
#: Libraries of the CLI (cliff, openstacksdk), of simulate's progress bar
#: and of its plots.
CLI_LIBRARIES = {"cliff", "openstack", "tqdm", "matplotlib"}

SCHEDULER_PROCESS = """
import json, sys
import nova.conf
import scheduler_ext.nova.cmd
import scheduler_ext.nova.manager
from scheduler_ext.nova import service
service.register_opts(nova.conf.CONF)
nova.conf.CONF([], project="nova", default_config_files=[])
service.preload(nova.conf.CONF)
print(json.dumps(sorted(sys.modules)))
"""

NOVA_ALONE = """
import json, sys
import nova.scheduler.manager
print(json.dumps(sorted(sys.modules)))
"""


def _modules_loaded(script: str) -> list[str]:
    """``sys.modules`` after running ``script`` in a fresh interpreter on
    this checkout."""
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def _within(name: str, packages) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def test_nova_scheduler_loads_no_lab_cli_storage_or_embedded_placement():
    loaded = _modules_loaded(SCHEDULER_PROCESS)
    ours = [m for m in loaded if _within(m, ("scheduler_ext",))]
    # the listing is the real process's: the driver, the engine source and
    # the HTTP placement client it runs are there
    for needed in ("scheduler_ext.nova.manager", "scheduler_ext.driver",
                   "scheduler_ext.sources.engine", "scheduler_ext.moves.strategy",
                   "scheduler_ext.placement.client"):
        assert needed in ours, f"{needed} not loaded: {ours}"
    outside = [m for m in ours if _within(m, NOT_RUNTIME + EMBEDDED_PLACEMENT)]
    assert outside == [], f"a nova scheduler loads {outside}"


def test_nova_scheduler_loads_no_cli_library_nova_does_not_load_itself():
    # nova itself loads openstacksdk (nova.utils) and cliff (through
    # neutronclient): what is checked is what scheduler-ext adds to that
    with_ours = {m.split(".")[0] for m in _modules_loaded(SCHEDULER_PROCESS)}
    nova_alone = {m.split(".")[0] for m in _modules_loaded(NOVA_ALONE)}
    added = (with_ours - nova_alone) & CLI_LIBRARIES
    assert added == set(), f"scheduler-ext adds {sorted(added)} to nova's scheduler"
