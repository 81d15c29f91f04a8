"""VM VNF: a reproducible guest image (image.py) and the QEMU/KVM adapter (qemu.py)."""
