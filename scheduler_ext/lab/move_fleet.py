"""The small fleets of the move oracle (``move_oracle``): one to three
compute nodes in one aggregate, with 0, 1 or 2 sharing disk providers,
local disk or not, a NIC child with bandwidth (QoS ports), two pGPU
children (vGPU, asked unnumbered or granular) and two whole PCI devices
(placement-managed PCI).

Provider uuids are derived from the names, so the same shape builds the
same fleet on any placement, and two runs compare provider by provider.
"""

from __future__ import annotations

import dataclasses
import uuid as uuidlib
from typing import Mapping

from scheduler_ext.lab import fleet
from scheduler_ext.placement import Inventory, PlacementClient
from scheduler_ext.placement.model import SHARING_TRAIT, WHOLE_DEVICE_TRAIT
from scheduler_ext.placement.query import RequestGroup

EGR = "NET_BW_EGR_KILOBIT_PER_SEC"
PCI = "CUSTOM_PCI_ORACLE_DEV"
PHYSNET = "CUSTOM_PHYSNET_ORACLE"
#: a trait no provider has (a flavor forbidding it needs placement's answer)
FORBIDDEN = "CUSTOM_ORACLE_FORBIDDEN"
#: kbps of one port's bandwidth; a NIC takes two
PORT_KBPS = 1000
VGPU_MODES = ("", "unnumbered", "granular")
_NS = uuidlib.UUID("6f1f3c52-52a4-4f0e-9d0a-0a0c1e5b7a11")


@dataclasses.dataclass(frozen=True)
class Shape:
    """What a fleet has. ``sharing``: sharing DISK_GB providers in the
    hosts' aggregate; ``local_disk``: the roots have DISK_GB (always, with
    no sharing provider); ``vgpu``: ``""`` (none), ``"unnumbered"`` or
    ``"granular"`` (how the flavor asks for it)."""

    hosts: int = 2
    sharing: int = 0
    local_disk: bool = True
    qos: bool = False
    vgpu: str = ""
    pci: bool = False

    def __post_init__(self) -> None:
        if self.sharing == 0 and not self.local_disk:
            object.__setattr__(self, "local_disk", True)

    @property
    def label(self) -> str:
        """``ss<N>[+local]`` and the device kinds, e.g. ``ss2+local,qos,vgpu-g``."""
        parts = [f"ss{self.sharing}" + ("+local" if self.sharing and self.local_disk else "")]
        parts += ["qos"] * self.qos + ["pci"] * self.pci
        if self.vgpu:
            parts.append("vgpu-" + self.vgpu[0])
        return ",".join(parts)


def provider_uuid(name: str) -> str:
    return str(uuidlib.uuid5(_NS, name))


def build(client: PlacementClient, shape: Shape,
          vcpus: tuple[int, ...]) -> dict[str, str]:
    """Create the fleet (``vcpus``: VCPU of each host, ``shape.hosts`` of
    them); returns provider uuid -> name."""
    client.create_resource_class(PCI)
    client.create_trait(PHYSNET)
    client.create_trait(FORBIDDEN)
    agg = provider_uuid("aggregate")
    aggs = (agg,) if shape.sharing else ()
    names: dict[str, str] = {}

    def add(name: str, invs: Mapping[str, Inventory], traits=(), parent=None,
            aggregates=()) -> str:
        uuid = provider_uuid(name)
        if parent is None:
            fleet.add_host(client, name, invs, tuple(aggregates), tuple(traits),
                           uuid=uuid)
        else:
            prov = client.create_provider(name, uuid=uuid, parent_provider_uuid=parent)
            gen = client.set_inventories(prov.uuid, prov.generation, invs)
            if traits:
                client.set_traits(prov.uuid, gen, tuple(traits))
        names[uuid] = name
        return uuid

    for i in range(shape.sharing):
        add(f"ss{i}", {"DISK_GB": Inventory(200)}, (SHARING_TRAIT,),
            aggregates=(agg,))
    for h in range(shape.hosts):
        invs = {"VCPU": Inventory(vcpus[h]), "MEMORY_MB": Inventory(8192)}
        if shape.local_disk:
            invs["DISK_GB"] = Inventory(100)
        root = add(f"h{h}", invs, aggregates=aggs)
        if shape.qos:
            add(f"h{h}-nic", {EGR: Inventory(2 * PORT_KBPS)}, (PHYSNET,), root)
        if shape.vgpu:
            for g in range(2):
                add(f"h{h}-pgpu{g}", {"VGPU": Inventory(2)}, (), root)
        if shape.pci:
            for d in range(2):
                add(f"h{h}-pci{d}", {PCI: Inventory(1)}, (WHOLE_DEVICE_TRAIT,), root)
    return names


def is_device(name: str) -> bool:
    """Whether provider ``name`` is a device (a pGPU or a whole PCI
    device): the old and new flavors of a move never share one."""
    return "-pgpu" in name or "-pci" in name


def port_group() -> RequestGroup:
    """A QoS port: its bandwidth from one NIC on the port's physnet."""
    return RequestGroup("port", {EGR: PORT_KBPS}, required=frozenset({PHYSNET}))


def pci_group() -> RequestGroup:
    """One placement-managed PCI device."""
    return RequestGroup("pci", {PCI: 1})
