#!/usr/bin/env bash
# Installs everything nfvperf needs on Debian 12 (apt + pip). Idempotent: skips what is present.
set -euo pipefail
cd "$(dirname "$0")/.."

# Every program the code, tests and scripts run comes from one of these (or the base system):
# tests/unit/test_install_deps.py scans the tree and fails when one is missing here.
APT_PKGS=(dpdk dpdk-dev libdpdk-dev dpdk-doc openvswitch-common openvswitch-switch openvswitch-switch-dpdk kmod
          iperf3 meson ninja-build pkgconf tshark libjansson-dev libbpf-dev libxdp-dev iproute2 procps
          ethtool qemu-system-x86 gcc make python3 postgresql
          openssh-server openssh-client chromium chromium-driver
          socat python3-venv patch)  # socat: the RPC relay in the emulated-PCI guest (vm/pci_guest.py);
# python3-venv: README's non-root quick start; patch: build B of l3fwd (scripts/build-l3fwd.sh)

missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing Debian packages: ${missing[*]}; run as root (or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "install-deps: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # tshark asks whether non-root users may capture; answer no.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections || true
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

PY=${PY:-python3}
PIPFLAGS=(-q)
if "$PY" -c 'import sys, sysconfig, os; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["stdlib"], "EXTERNALLY-MANAGED")) else 1)'; then
  PIPFLAGS+=(--break-system-packages)
fi
if ! "$PY" -c 'import nfvperf, pydantic, sqlalchemy, pyroute2, matplotlib, rich, paramiko, ansible, hypothesis, MLRsearch, mypy, ruff, selenium' 2>/dev/null \
   || [ pyproject.toml -nt .nfvperf-deps.stamp ]; then
  echo "install-deps: pip install -e .[dev]"
  "$PY" -m pip install "${PIPFLAGS[@]}" -e '.[dev]'
  touch .nfvperf-deps.stamp
fi

# DPDK's l3fwd example (dut: l3fwd), built from dpdk-doc's sources into build/l3fwd/ (skipped
# when up to date)
bash scripts/build-l3fwd.sh
