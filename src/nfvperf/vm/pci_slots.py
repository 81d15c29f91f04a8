"""Where a PCI guest's emulated NICs sit (:class:`nfvperf.vm.pci_guest.PciGuest`): QEMU's ``pc``
machine puts ``-device`` i at the fixed slot ``FIRST_SLOT + i``, so the addresses are known before
the guest boots (a testbed file names them, nfvperf.testbed.spec checks them)."""
from __future__ import annotations

#: the first NIC's slot (0000:00:04.0)
FIRST_SLOT = 4
#: the most emulated NICs a guest takes (slots 4..11)
MAX_NICS = 8


def pci_address(i: int) -> str:
    """The guest's NIC ``i`` (0-based)."""
    return f"0000:00:{FIRST_SLOT + i:02x}.0"


__all__ = ["FIRST_SLOT", "MAX_NICS", "pci_address"]
