"""nova's side of the end-to-end benchmark: nova.conf, nova's API and cell
databases (PostgreSQL or sqlite) holding a compute node and a nova-compute service row
for every compute host of the fleet, request specs, and the conductor's
part of a resize (a pre-migrating Migration, the instance's allocations
moved to the migration consumer).

Outside the package on purpose: only ``scheduler_ext.nova`` may import
nova inside it.
"""

from __future__ import annotations

import datetime
import os
import uuid as uuidlib

import sqlalchemy as sa
from keystoneauth1 import loading as ks_loading

import nova.conf
from nova import config as nova_config
from nova import context as nova_context
from nova import objects
from nova import rpc
from nova.db.api import api as api_db_api
from nova.db.api import models as api_models
from nova.db.main import api as main_db_api
from nova.db.main import models as main_models
from nova.objects import service as service_obj

from scheduler_ext.engine.fleet.columnar import ColumnarFleet
from scheduler_ext.placement import AllocationWrite
from scheduler_ext.placement.model import SHARING_TRAIT
from scheduler_ext.placement.http import HttpPlacement

CONF = nova.conf.CONF
FLAVORS = {"small": (1, 2048, 20), "medium": (2, 4096, 40), "large": (4, 8192, 80)}


def server_databases(server_url: str) -> tuple[str, str]:
    """Empty ``nova_api`` and ``nova_cell1`` databases on the PostgreSQL
    server of ``server_url`` (an SQLAlchemy URL of one of its databases,
    placement's here): nova on a server database, as deployed. Returns
    (api db url, cell db url)."""
    url = sa.engine.make_url(server_url)
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        for name in ("nova_api", "nova_cell1"):
            conn.execute(sa.text(f"CREATE DATABASE {name}"))
    engine.dispose()
    return (url.set(database="nova_api").render_as_string(hide_password=False),
            url.set(database="nova_cell1").render_as_string(hide_password=False))


def configure(workdir: str, placement_url: str,
              databases: tuple[str, str] | None = None) -> tuple[str, str]:
    """nova.conf for the benchmark (in this process): nova's API and cell
    databases at ``databases`` (default: sqlite files in ``workdir``),
    placement through keystoneauth's admin_token plugin (the noauth2
    placement's ``admin`` token), no message bus, services never reported
    down. Returns (api db url, cell db url)."""
    api_db, cell_db = databases or (
        f"sqlite:///{os.path.join(workdir, 'nova_api.sqlite')}",
        f"sqlite:///{os.path.join(workdir, 'nova_cell1.sqlite')}")
    objects.register_all()
    nova_config.parse_args(["bench"], default_config_files=[], configure_db=False,
                           init_rpc=False)
    opts = [o._to_oslo_opt() for o in
            ks_loading.get_plugin_loader("admin_token").get_options()]
    CONF.register_opts(opts, group="placement")
    for name, value, group in (
            ("connection", cell_db, "database"), ("connection", api_db, "api_database"),
            ("service_down_time", 10 ** 8, None), ("auth_type", "admin_token", "placement"),
            ("token", "admin", "placement"), ("endpoint", placement_url, "placement")):
        CONF.set_override(name, value, group)
    rpc.init(CONF)
    main_db_api.configure(CONF)
    api_db_api.configure(CONF)
    return api_db, cell_db


def create_databases(api_db: str, cell_db: str, fleet: ColumnarFleet,
                     disabled: set[int]) -> list[tuple[str, str]]:
    """Schemas, the cell mapping, and a service and compute node row per
    compute host (every fleet row with VCPU); returns (host, node uuid).
    A host without local disk reports its aggregate's shared pool, as
    nova-compute does for an instances path on a shared filesystem."""
    for url, base in ((api_db, api_models.BASE), (cell_db, main_models.BASE)):
        engine = sa.create_engine(url)
        base.metadata.create_all(engine)
        engine.dispose()
    ctx = nova_context.get_admin_context()
    objects.CellMapping(ctx, uuid=str(uuidlib.uuid4()), name="cell1",
                        transport_url="fake:/", database_connection=cell_db).create()
    vcpu = fleet.inventories["VCPU"]
    mem = fleet.inventories["MEMORY_MB"]
    disk = fleet.inventories["DISK_GB"]
    disk_of = dict(zip(disk.rows.tolist(), zip(disk.total.tolist(), disk.used.tolist())))
    # a compute node whose disk is a shared pool reports the pool (its
    # instances path is the pool's mount): size and space used
    pool_of_aggregates = {
        fleet.aggregate_set_of[row]: disk_of[row] for row in disk.rows.tolist()
        if SHARING_TRAIT in fleet.trait_sets[fleet.trait_set_of[row]]}
    now = datetime.datetime.utcnow()
    hosts, services, nodes = [], [], []
    for k, row in enumerate(vcpu.rows.tolist()):
        host, uuid = f"compute-{row}", fleet.uuids[row]
        hosts.append((host, uuid))
        services.append({"id": k + 1, "uuid": str(uuidlib.uuid4()), "host": host,
                         "binary": "nova-compute", "topic": "compute", "report_count": 1,
                         "disabled": row in disabled, "last_seen_up": now,
                         "forced_down": False, "version": service_obj.SERVICE_VERSION,
                         "created_at": now, "deleted": 0})
        # what nova-compute's resource tracker reports: placement's usage
        # (memory used includes the reserved host memory)
        nodes.append(_compute_node(
            k + 1, host, uuid, (int(vcpu.total[k]), int(vcpu.used[k])),
            (int(mem.total[k]), int(mem.used[k] + mem.reserved[k])),
            disk_of.get(row) or pool_of_aggregates.get(
                fleet.aggregate_set_of[row], (0, 0)), now))
    engine = sa.create_engine(cell_db)
    with engine.begin() as conn:
        conn.execute(main_models.Service.__table__.insert(), services)
        conn.execute(main_models.ComputeNode.__table__.insert(), nodes)
    engine.dispose()
    return hosts


def _compute_node(service_id: int, host: str, uuid: str, vcpus: tuple[int, int],
                  memory_mb: tuple[int, int], local_gb: tuple[int, int], now) -> dict:
    """(total, used) per resource."""
    return {"service_id": service_id, "host": host, "uuid": uuid, "vcpus": vcpus[0],
            "memory_mb": memory_mb[0], "local_gb": local_gb[0], "vcpus_used": vcpus[1],
            "memory_mb_used": memory_mb[1], "local_gb_used": local_gb[1],
            "hypervisor_type": "QEMU", "hypervisor_version": 8002000,
            "hypervisor_hostname": host, "free_ram_mb": memory_mb[0] - memory_mb[1],
            "free_disk_gb": local_gb[0] - local_gb[1], "current_workload": 0,
            "running_vms": 0, "cpu_info": "{}",
            "disk_available_least": local_gb[0] - local_gb[1],
            "host_ip": "127.0.0.1",
            "supported_instances": '[["x86_64", "qemu", "hvm"]]',
            "metrics": "[]", "stats": "{}", "cpu_allocation_ratio": 4.0,
            "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
            "mapped": 1, "created_at": now, "deleted": 0}


def flavor(name: str) -> objects.Flavor:
    vcpus, ram, disk = FLAVORS[name]
    return objects.Flavor(id=list(FLAVORS).index(name) + 1, flavorid=name, name=name,
                          vcpus=vcpus, memory_mb=ram, root_gb=disk, ephemeral_gb=0,
                          swap=0, extra_specs={}, rxtx_factor=1.0, vcpu_weight=0,
                          disabled=False, is_public=True, description=None)


def request_spec(ctx, instance_uuid: str, flavor_name: str,
                 resize: bool = False) -> objects.RequestSpec:
    """What nova's conductor hands the scheduler for a boot (or, with the
    new flavor, the same host allowed and the instance's cell as the
    requested destination, a resize)."""
    spec = objects.RequestSpec.from_components(
        ctx, instance_uuid, objects.ImageMeta.from_dict({"properties": {}}),
        flavor(flavor_name), None, None, {}, None, None,
        project_id="bench", user_id="bench")
    spec.ignore_hosts = []
    spec.is_bfv = False
    if resize:   # as nova's MigrationTask sets it
        spec.requested_destination = objects.Destination(
            cell=objects.CellMappingList.get_all(ctx)[0])
    return spec


def flavor_resources(name: str) -> dict[str, int]:
    vcpus, ram, disk = FLAVORS[name]
    return {"VCPU": vcpus, "MEMORY_MB": ram, "DISK_GB": disk}


def start_resize(ctx, client: HttpPlacement, cell_db: str, host: tuple[str, str],
                 old: str, new: str) -> str | None:
    """The conductor's part of a resize of a new instance on ``host``:
    the instance's old flavor allocations moved to a pre-migrating
    migration consumer. Returns the instance uuid (None if ``host`` has no
    room for the old flavor)."""
    name, node = host
    inst, mig = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    old_allocs = {node: flavor_resources(old)}
    try:
        client.put_allocations(inst, AllocationWrite(old_allocs, "bench", "bench", None))
    except Exception:
        return None
    gen = client.get_consumer(inst).generation
    client.post_allocations({
        inst: AllocationWrite({}, "bench", "bench", gen),
        mig: AllocationWrite(old_allocs, "bench", "bench", None, "MIGRATION")})
    cell = objects.CellMappingList.get_all(ctx)[0]
    objects.InstanceMapping(ctx, instance_uuid=inst, cell_mapping=cell,
                            project_id="bench", user_id="bench").create()
    engine = _cell_engine(cell_db)
    with engine.begin() as conn:
        # the migration's instance (a server database checks the foreign key)
        conn.execute(main_models.Instance.__table__.insert(), [{
            "uuid": inst, "project_id": "bench", "user_id": "bench",
            "created_at": datetime.datetime.utcnow(), "deleted": 0}])
        conn.execute(main_models.Migration.__table__.insert(), [{
            "uuid": mig, "instance_uuid": inst, "source_compute": name,
            "source_node": name, "dest_compute": name, "dest_node": name,
            "status": "pre-migrating", "migration_type": "resize",
            "old_instance_type_id": list(FLAVORS).index(old) + 1,
            "new_instance_type_id": list(FLAVORS).index(new) + 1,
            "hidden": False, "created_at": datetime.datetime.utcnow(), "deleted": 0}])
    return inst


def finish_resize(client: HttpPlacement, cell_db: str, inst: str) -> None:
    """Forget a benchmarked resize: its allocations and its migration."""
    engine = _cell_engine(cell_db)
    table = main_models.Migration.__table__
    with engine.begin() as conn:
        migs = [r[0] for r in conn.execute(sa.select(table.c.uuid).where(
            table.c.instance_uuid == inst)).all()]
        conn.execute(table.update().where(table.c.instance_uuid == inst).values(
            status="finished"))
    for consumer in [inst] + migs:
        try:
            client.delete_allocations(consumer)
        except Exception:
            pass


_ENGINES: dict[str, sa.engine.Engine] = {}


def _cell_engine(url: str) -> sa.engine.Engine:
    if url not in _ENGINES:
        _ENGINES[url] = sa.create_engine(url)
    return _ENGINES[url]
