"""nova 34's own same-host resize tests with PCI devices tracked in
placement (``[pci] report_in_placement``: a child provider per device,
with the trait COMPUTE_MANAGED_PCI_DEVICE), run with scheduler-ext's
manager in place of nova's. Run by ``test_nova_functional.py``, which
selects two tests of these classes (``PCI_SELECTED``); the rest of them,
SR-IOV and vDPA ports among them, are in the sweep (``tests/nova/sweep.py``).

Every test method is nova's, unchanged: a resize on the same host from
one device to two, a revert, a resize again and a confirm, with nova's
assertions of the devices and of placement after each step, and, in the
second, nova's PCI allocation healing running meanwhile. They pin the
rule of doc/source/differences.rst "Move allocations": the old and new
flavors never share a device.
"""

from nova.tests.functional.libvirt import test_pci_in_placement as pci_healing
from nova.tests.functional.libvirt import test_pci_sriov_servers as pci

from tests.nova.harness import SchedulerExtMixin


class PCISameHostSchedulerExt(SchedulerExtMixin, pci.PCIServersTest):
    """nova's PCI server tests with scheduler-ext's manager."""


class PCIHealingSameHostSchedulerExt(SchedulerExtMixin,
                                     pci_healing.PlacementPCIAllocationHealingTests):
    """nova's PCI allocation healing tests with scheduler-ext's manager."""
