#!/usr/bin/env python3
"""A deliberately bad 'DUT' for impair_check.sh: forwards tgen test frames from one interface to
another over AF_PACKET and, by sequence number, drops seq%100==50, duplicates seq%100==10 and swaps
seq%100==20/21.   impair_dut.py IN_IFACE OUT_IFACE SECONDS"""
import socket, struct, sys, time
a, b, dur = sys.argv[1], sys.argv[2], float(sys.argv[3])
ri = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)); ri.bind((a, 0))
ro = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)); ro.bind((b, 0))
ri.settimeout(0.5)
held = None
end = time.time() + dur
n = 0
while time.time() < end:
    try:
        f = ri.recv(2048)
    except socket.timeout:
        continue
    if len(f) < 60 or f[12:14] != b"\x08\x00" or f[42:46] != b"NFPG":
        continue
    seq = struct.unpack("!Q", b"\0\0" + f[48:54])[0]
    n += 1
    r = seq % 100
    if r == 50:
        continue                      # drop
    if r == 20:
        held = f                      # swap 20 and 21
        continue
    ro.send(f)
    if r == 10:
        ro.send(f)                    # duplicate
    if r == 21 and held is not None:
        ro.send(held); held = None
print("dut saw", n, file=sys.stderr)
