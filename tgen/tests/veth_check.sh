#!/bin/bash
# Hand-run check over a veth pair in a private netns (root needed):
#  - tgen one-shot with net_af_packet and net_af_xdp on both ends, its per-stream counts checked,
#  - tshark capture on the receiving veth, IPv4/UDP checksums validated, VLAN/IPv6/VXLAN decoded;
#  - net_af_packet twice more with tx_reuse=1 on port 0 and streams both ways: port 0 builds its
#    frames above 128 B in mbufs its RX loop has tagged (worker.c): ones that brought back port 1's
#    frames (VXLAN: a longer header) and, in the first run, its own; checked the same way (a byte
#    left over = a bad checksum).  In the second run port 1 does not poll, so port 0's mbufs go
#    round through port 0's RX alone: with the RX loop's tagging of main-pool mbufs removed, about
#    6 % of the captured frames had bad checksums.
# Usage: tgen/tests/veth_check.sh [path/to/tgen]
set -u
BIN=${1:-$(dirname "$0")/../build/tgen}
NS=tgenchk$$
CAP=/tmp/$NS.pcap
cleanup() { ip netns del "$NS" 2>/dev/null; rm -f "$CAP" "$CAP.json" "$CAP.err"; }
trap cleanup EXIT INT TERM
ip netns add "$NS" || exit 1
ip netns exec "$NS" ip link add tgva type veth peer name tgvb
ip netns exec "$NS" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
ip netns exec "$NS" ip link set tgva up
ip netns exec "$NS" ip link set tgvb up
EAL="--no-huge -m 512 --no-pci --file-prefix=$NS --lcores 0@0,1@0 --log-level 1"
STREAMS=(--stream 'port=0,rx_port=1,size=64,flows=100,pps=20000'
         --stream 'port=0,rx_port=1,size=128,vlan=7,vary=src_port+dst_port,flows=10,pps=20000'
         --stream 'port=0,rx_port=1,size=200,ipv6=1,pps=20000'
         --stream 'port=0,rx_port=1,size=64,vlan=9,pps=20000'
         --stream 'port=0,rx_port=1,size=80,ipv6=1,pps=20000'
         --stream 'port=0,rx_port=1,size=300,vxlan=99,pps=20000')
# the tx_reuse run: port 1's VXLAN frames land in the mbufs port 0 has just sent from (af_packet
# frees them at once), and port 0 builds its next frames in them
STREAMS_REUSE=(--stream 'port=0,rx_port=1,size=200,ipv6=1,pps=20000'
               --stream 'port=0,rx_port=1,size=1000,pps=20000'
               --stream 'port=1,rx_port=0,size=300,vxlan=99,pps=20000'
               --stream 'port=1,rx_port=0,size=64,vlan=9,pps=20000')
fail=0
for run in net_af_packet net_af_xdp net_af_packet:reuse_back net_af_packet:reuse_other; do
    pmd=${run%%:*}
    reuse=""; p1=""
    streams=("${STREAMS[@]}")
    [ "$run" != "$pmd" ] && reuse=",tx_reuse=1" && streams=("${STREAMS_REUSE[@]}")
    [ "$run" = net_af_packet:reuse_other ] && p1=",rx=0"
    # a run whose streams sent less than intended (the generator fell behind: both lcores and
    # tshark share CPU 0) is run once more, and says so; a second short run fails
    for attempt in 1 2; do
        rm -f "$CAP"
        ip netns exec "$NS" timeout 20 tshark -q -i tgvb -c 3000 -w "$CAP" 2>"$CAP.err" &
        TS=$!
        # tshark says "Capturing on 'tgvb'" once the capture is open (at most 10 s)
        for _ in $(seq 100); do grep -q "Capturing on" "$CAP.err" 2>/dev/null && break; sleep 0.1; done
        sleep 0.3
        ip netns exec "$NS" timeout 60 "$BIN" $EAL --vdev ${pmd}0,iface=tgva --vdev ${pmd}1,iface=tgvb -- \
            --port 0:speed=10G$reuse --port 1:speed=10G$p1 --oneshot "${streams[@]}" --duration 1 --drain 0.3 \
            --learning 1 --learning-wait 0.1 > "$CAP.json" 2>/dev/null
        rc=$?
        # tshark stops by itself after 3000 frames; when fewer came (AF_XDP takes them before the
        # kernel), stop it once tgen is done (the trial and its drain are over) instead of waiting
        # for its 20 s timeout
        for _ in $(seq 10); do kill -0 $TS 2>/dev/null || break; sleep 0.1; done
        kill -INT $TS 2>/dev/null
        wait $TS 2>/dev/null
        # both PMDs load here (DPDK's net_af_xdp is installed, the kernel has AF_XDP): a failing tgen
        # is a failure on either
        if [ $rc -ne 0 ]; then echo "$run: tgen exit $rc: FAIL"; fail=1; continue 2; fi
        # tgen's own counts, per stream: every stream sent its 20 kpps for 1 s, what it sent is
        # received or lost (nothing duplicated or reordered on one veth), and a stream into a port
        # that polls (all but port 1 in reuse_other, which does not poll: nothing may be counted
        # there) got frames back with latency.  Loss itself is not asserted: both lcores share CPU 0
        # with tshark, and on a loaded host af_packet's ring drops frames.
        python3 - "$CAP.json" "$run" "$attempt" "${streams[@]}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
run = sys.argv[2]
specs = [dict(kv.split("=", 1) for kv in a.split(",")) for a in sys.argv[4:] if a != "--stream"]
bad, short = [], []
assert len(d["streams"]) == len(specs), (len(d["streams"]), specs)
for s, spec in zip(d["streams"], specs):
    p50 = s["latency"]["percentiles_ns"].get("50")
    print(f"{run}: stream {s['id']}: sent {s['sent']} received {s['received']} lost {s['lost']} "
          f"reordered {s['reordered']} dup {s['duplicates']} lat p50 {p50} ns")
    polls = not (run.endswith(":reuse_other") and spec["rx_port"] == "1")
    if s["sent"] != int(spec["pps"]):
        short.append(f"stream {s['id']} sent {s['sent']}, not {spec['pps']} (pps x 1 s)")
    if s["received"] + s["lost"] != s["sent"] or s["duplicates"] or s["reordered"]:
        bad.append(f"stream {s['id']}: received + lost != sent, or duplicates/reordered counted")
    if polls and not (s["received"] > 0 and p50 and p50 > 0):
        bad.append(f"stream {s['id']}: nothing received (or no latency) on a port that polls")
    if not polls and s["received"]:
        bad.append(f"stream {s['id']}: {s['received']} counted on port 1, which does not poll")
print(f"{run}: non_test_rx {d['non_test_rx']}")
again = short and not bad and sys.argv[3] == "1"
for b in bad + short:
    print(f"{run}: {'short' if again else 'FAIL'}: {b}")
sys.exit(2 if again else 1 if bad or short else 0)
PY
        prc=$?
        if [ $prc = 2 ]; then echo "$run: the generator fell behind (sent less than intended): once more"; continue; fi
        [ $prc = 0 ] || fail=1
        break
    done
    bad=$(tshark -r "$CAP" -o ip.check_checksum:TRUE -o udp.check_checksum:TRUE \
          -Y 'ip.checksum.status==0 || udp.checksum.status==0' 2>/dev/null | wc -l)
    tot=$(tshark -r "$CAP" -Y udp 2>/dev/null | wc -l)
    echo "$run: tshark: $tot UDP frames captured, $bad with bad IPv4/UDP checksums"
    tshark -r "$CAP" -o ip.check_checksum:TRUE -o udp.check_checksum:TRUE -T fields -e frame.len -e vlan.id \
        -e ipv6.src -e vxlan.vni -e ip.checksum.status -e udp.checksum.status -Y udp 2>/dev/null \
        | sed 's/,.*\t/\t/' | sort | uniq -c | sort -rn | head -6
    if [ $pmd = net_af_xdp ]; then
        echo "$pmd: (AF_XDP takes the frames before the kernel, so tshark on the rx veth sees none)"
    else
        [ "$bad" = 0 ] && [ "$tot" -gt 0 ] || fail=1
    fi
done
echo "veth check: $([ $fail = 0 ] && echo OK || echo FAILED)"
exit $fail
