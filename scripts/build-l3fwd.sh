#!/usr/bin/env bash
# Builds DPDK's l3fwd example (the `dut: l3fwd` adapter's program) into build/l3fwd/l3fwd from
# the sources Debian's dpdk-doc package ships (/usr/share/dpdk/examples/l3fwd): meson and
# pkg-config against the installed libdpdk, as tgen; l3fwd/meson.build says what it adds.
# Idempotent: does nothing when the binary is newer than its sources and build files.
#   DPDK_EXAMPLES=/path/to/examples  another copy of DPDK's examples
#   L3FWD_BUILD=dir                  another build directory
#   L3FWD_PATCH=file                 a patched build: the examples' l3fwd and common dirs are
#                                    copied to <build dir>/examples, the patch applied there
#                                    (patch -p1, paths a/l3fwd/...) and built from the copy, e.g.
#                                    build B of the CI gate (docs/ci-gate.md):
#                                    L3FWD_PATCH=l3fwd/patches/urpf-flowstats.patch L3FWD_BUILD=build/l3fwd-b
set -euo pipefail
cd "$(dirname "$0")/.."
EXAMPLES=${DPDK_EXAMPLES:-/usr/share/dpdk/examples}
OUT=${L3FWD_BUILD:-build/l3fwd}
PATCH=${L3FWD_PATCH:-}
if [ ! -f "$EXAMPLES/l3fwd/main.c" ]; then
  echo "build-l3fwd: no l3fwd sources in $EXAMPLES/l3fwd: apt-get install dpdk-doc" >&2
  exit 1
fi
if [ -n "$PATCH" ] && [ ! -f "$PATCH" ]; then
  echo "build-l3fwd: L3FWD_PATCH=$PATCH: no such file" >&2
  exit 1
fi
fresh=1
for src in "$EXAMPLES"/l3fwd/*.[ch] l3fwd/meson.build l3fwd/meson_options.txt l3fwd/offloads.c $PATCH; do
  if [ ! -x "$OUT/l3fwd" ] || [ "$src" -nt "$OUT/l3fwd" ]; then
    fresh=0
    break
  fi
done
if [ "$fresh" -eq 1 ]; then
  echo "build-l3fwd: $OUT/l3fwd is up to date"
  exit 0
fi
SRC=$EXAMPLES
if [ -n "$PATCH" ]; then
  SRC=$(realpath -m "$OUT/examples")
  rm -rf "$SRC"
  mkdir -p "$SRC"
  cp -r "$EXAMPLES/l3fwd" "$EXAMPLES/common" "$SRC/"
  patch -p1 -d "$SRC" --quiet --forward < "$PATCH"
  echo "build-l3fwd: $PATCH applied to a copy of $EXAMPLES in $SRC"
  rm -rf "$OUT/build.ninja" "$OUT/meson-private"
fi
if [ ! -f "$OUT/build.ninja" ]; then
  meson setup "$OUT" l3fwd --buildtype=release -Dexamples_dir="$SRC"
fi
ninja -C "$OUT"
echo "build-l3fwd: built $OUT/l3fwd"
