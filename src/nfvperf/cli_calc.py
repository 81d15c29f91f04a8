"""``nfvperf calc rate | socket-mem | pmd-mask | buffer``: the arithmetic of the seed reports."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from nfvperf import units
from nfvperf.cli_base import EXIT_OK, CliError
from nfvperf.host.cpu import SYS_CPU, CoreRequestError, CpuTopology, format_cpulist, resolve_cores


def _calc_pmd_mask(args: argparse.Namespace) -> int:
    """``calc pmd-mask``: a CPU list, a mask (--mask) or a core count (--cores N [--ht],
    resolved from this host's or --sysfs's sibling map) -> the mask, the CPUs and their siblings."""
    given = [x for x in (args.cpus, args.mask, args.cores) if x is not None]
    if len(given) != 1:
        raise CliError("calc pmd-mask: give one of a CPU list (2,20), --mask HEX or --cores N [--ht]")
    if args.ht and args.cores is None:
        raise CliError("calc pmd-mask: --ht goes with --cores N (both hyper-threads of N cores)")
    topo = CpuTopology.read(Path(args.sysfs) if args.sysfs else SYS_CPU)
    how = ""
    try:
        if args.cores is not None:
            res = resolve_cores(args.cores, args.ht, field="--cores", ht_field="--ht", topo=topo)
            cpus = res.cpus
            how = (f"{args.cores} physical core{'s' if args.cores != 1 else ''} × "
                   f"{2 if args.ht else 1} thread{'s' if args.ht else ''} = {len(cpus)} PMD thread"
                   f"{'s' if len(cpus) != 1 else ''}")
            for w in res.warnings:
                print(f"warning: {w}")
        elif args.mask is not None:
            cpus = units.cores_from_mask(args.mask.lower().removeprefix("0x"))
            if not cpus:
                raise ValueError("empty mask")
        else:
            cpus = units.parse_core_list(args.cpus)
        mask = units.pmd_cpu_mask(cpus)
    except CoreRequestError as e:
        raise CliError(str(e)) from None
    except ValueError as e:
        raise CliError(f"pmd-mask {args.mask or args.cpus!r}: {e}") from None
    print(f"pmd-cpu-mask=0x{mask}" + (f"   ({how})" if how else ""))
    print(f"CPUs {format_cpulist(cpus)}" + (f" -> pmd-cpu-mask={mask}" if args.cpus else ""))
    for line in topo.describe(cpus):
        print(f"  {line}")
    print(f"ovs-vsctl set Open_vSwitch . other_config:pmd-cpu-mask={mask}")
    return EXIT_OK


def cmd_calc(args: argparse.Namespace) -> int:
    from nfvperf.config import parse_link_speed
    if args.calc == "rate":
        try:
            link = parse_link_speed(args.speed)
        except ValueError as e:
            raise CliError(f"--speed: {e}") from None
        sizes = args.size or list(units.RFC2544_FRAME_SIZES_B)
        print(f"Line rate at {args.speed} per port (METHODOLOGY A1: fps = link / ((S + 20) × 8)); "
              f"L1 counts preamble+SFD+IFG, L2 the frame incl. FCS" + ("; VXLAN +50 B outer" if args.vxlan else ""))
        print(f"{'Frame B':>8} {'wire B':>7} {'max fps':>16} {'L1 Mbps':>11} {'L2 Mbps':>11}" +
              (f" {'at load fps':>14} {'% L1':>7} {'L1 Mbps':>10} {'L2 Mbps':>10}" if args.fps or args.pct else ""))
        for s in sizes:
            wire = units.vxlan_outer_size_b(s, args.ip_version) if args.vxlan else s
            mx = units.max_fps(wire, link)
            line = (f"{s:>8} {wire:>7} {mx:>16,.2f} {units.l1_bps(mx, wire) / 1e6:>11,.1f} "
                    f"{units.l2_bps(mx, wire) / 1e6:>11,.1f}")
            if args.fps or args.pct:
                fps = args.fps if args.fps else units.fps_from_pct(args.pct, wire, link)
                line += (f" {fps:>14,.2f} {units.pct_line_rate(fps, wire, link):>7.2f} "
                         f"{units.l1_bps(fps, wire) / 1e6:>10,.1f} {units.l2_bps(fps, wire) / 1e6:>10,.1f}")
                if fps > mx * (1 + 1e-9):
                    line += "  (above line rate!)"
            print(line)
        return EXIT_OK
    if args.calc == "socket-mem":
        per_socket: list[list[int]] = []
        for spec in args.socket:
            mtus: list[int] = []
            for part in spec.split(","):
                part = part.strip()
                if not part or part == "-":
                    continue
                n, _, mtu = part.partition("x")
                try:
                    mtus += [int(mtu)] * int(n) if mtu else [int(n)]
                except ValueError:
                    raise CliError(f"--socket {spec!r}: use COUNTxMTU[,COUNTxMTU] (e.g. 4x9000) or '-'") from None
            per_socket.append(mtus)
        for i, mtus in enumerate(per_socket):
            mb = units.dpdk_socket_memory_mb(mtus)
            if not mtus:
                print(f"socket {i}: no DPDK ports -> {mb} MB")
                continue
            detail = " + ".join(f"{units.dpdk_port_mempool_bytes(m):,} B (MTU {m})" for m in mtus)
            print(f"socket {i}: {detail} + 512 MiB buffer, rounded up to 1024 MB -> {mb} MB")
        print(f"dpdk-socket-mem={units.dpdk_socket_mem(per_socket)}   (seed 003 App. C)")
        return EXIT_OK
    if args.calc == "pmd-mask":
        return _calc_pmd_mask(args)
    if args.calc == "buffer":
        mx = units.max_fps(args.size, parse_link_speed(args.speed))
        implied = units.implied_buffer_time_s(args.frames, mx)
        corrected = units.corrected_buffer_time_s(args.frames, mx, args.throughput)
        print(f"RFC 9004 K4: implied buffer time {implied * 1e3:.3f} ms, corrected {corrected * 1e3:.3f} ms")
        return EXIT_OK
    raise CliError("calc: choose rate, socket-mem, pmd-mask or buffer")


def _add_calc_parser(sub: Any) -> None:
    k = sub.add_parser("calc", help="line-rate arithmetic, DPDK socket memory, pmd-cpu-mask, RFC 9004 buffer")
    ksub = k.add_subparsers(dest="calc", metavar="WHAT")
    kr = ksub.add_parser("rate", help="max fps and L1/L2 Mbps per frame size and link speed")
    kr.add_argument("--speed", default="10G", help="link speed per port (10G, 25G, 100G, bit/s)")
    kr.add_argument("--size", type=int, action="append", help="frame size B (repeatable; default RFC 2544 sizes)")
    kr.add_argument("--fps", type=float, help="also show a given rate in fps")
    kr.add_argument("--pct", type=float, help="also show a given % of line rate (L1)")
    kr.add_argument("--vxlan", action="store_true", help="frames are VXLAN-encapsulated (+50 B, +70 B IPv6)")
    kr.add_argument("--ip-version", type=int, choices=(4, 6), default=4, help="VXLAN underlay IP version")
    ks = ksub.add_parser("socket-mem", help="DPDK socket memory from port MTUs (seed 003 App. C)")
    ks.add_argument("--socket", action="append", required=True, metavar="COUNTxMTU[,...]",
                    help="ports on one NUMA socket, e.g. 4x9000; repeat per socket; '-' for none")
    kp = ksub.add_parser("pmd-mask", help="OVS pmd-cpu-mask and CPU list (with siblings) from a "
                         "CPU list (2,20 or 2-5), a mask (--mask 0xc0c) or a core count (--cores 2 --ht)")
    kp.add_argument("cpus", nargs="?", help="CPU list, e.g. 2,20 or 2-5")
    kp.add_argument("--mask", help="a pmd-cpu-mask (hex), shown as CPUs with their siblings")
    kp.add_argument("--cores", type=int, help="physical cores, picked from the host's thread "
                    "siblings as a run with ovs.pmd_cores does")
    kp.add_argument("--ht", action="store_true", help="with --cores: both hyper-threads of each core")
    kp.add_argument("--sysfs", help="read the sibling map from this copy of /sys/devices/system/cpu")
    kb = ksub.add_parser("buffer", help="RFC 9004 implied/corrected buffer time")
    kb.add_argument("--frames", type=float, required=True, help="mean back-to-back frames")
    kb.add_argument("--throughput", type=float, required=True, help="throughput fps")
    kb.add_argument("--size", type=int, default=64)
    kb.add_argument("--speed", default="10G")
    k.set_defaults(func=cmd_calc)
