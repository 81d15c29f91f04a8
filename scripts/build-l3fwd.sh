#!/usr/bin/env bash
# Builds DPDK's l3fwd example (the `dut: l3fwd` adapter's program) into build/l3fwd/l3fwd from
# the sources Debian's dpdk-doc package ships (/usr/share/dpdk/examples/l3fwd): meson and
# pkg-config against the installed libdpdk, as tgen; l3fwd/meson.build says what it adds.
# Idempotent: does nothing when the binary is newer than its sources and build files.
#   DPDK_EXAMPLES=/path/to/examples  another copy of DPDK's examples
#   L3FWD_BUILD=dir                  another build directory
set -euo pipefail
cd "$(dirname "$0")/.."
EXAMPLES=${DPDK_EXAMPLES:-/usr/share/dpdk/examples}
OUT=${L3FWD_BUILD:-build/l3fwd}
if [ ! -f "$EXAMPLES/l3fwd/main.c" ]; then
  echo "build-l3fwd: no l3fwd sources in $EXAMPLES/l3fwd: apt-get install dpdk-doc" >&2
  exit 1
fi
fresh=1
for src in "$EXAMPLES"/l3fwd/*.[ch] l3fwd/meson.build l3fwd/meson_options.txt l3fwd/offloads.c; do
  if [ ! -x "$OUT/l3fwd" ] || [ "$src" -nt "$OUT/l3fwd" ]; then
    fresh=0
    break
  fi
done
if [ "$fresh" -eq 1 ]; then
  echo "build-l3fwd: $OUT/l3fwd is up to date"
  exit 0
fi
if [ ! -f "$OUT/build.ninja" ]; then
  meson setup "$OUT" l3fwd --buildtype=release -Dexamples_dir="$EXAMPLES"
fi
ninja -C "$OUT"
echo "build-l3fwd: built $OUT/l3fwd"
