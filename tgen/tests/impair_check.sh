#!/bin/bash
# End-to-end check of tgen's receive analysis through an impairing "DUT" (impair_dut.py) between two
# veth pairs in a private netns: 10,000 frames at 2 kpps must give exactly 100 lost, 100 duplicates,
# 100 reordered (extent 1), first loss ~25 ms (seq 50), last loss ~4.975 s (seq 9950).  Root needed.
set -u
BIN=${1:-$(dirname "$0")/../build/tgen}
DIR=$(cd "$(dirname "$0")" && pwd)
NS=tgenimp$$
OUT=/tmp/$NS.json
cleanup() { ip netns del "$NS" 2>/dev/null; rm -f "$OUT"; }
trap cleanup EXIT INT TERM
ip netns add "$NS" || exit 1
for p in a b; do
    ip netns exec "$NS" ip link add tg${p}0 type veth peer name tg${p}1
    ip netns exec "$NS" ip link set tg${p}0 up
    ip netns exec "$NS" ip link set tg${p}1 up
done
ip netns exec "$NS" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
ip netns exec "$NS" python3 "$DIR/impair_dut.py" tga1 tgb0 9 &
DUT=$!
sleep 0.5
ip netns exec "$NS" timeout 60 "$BIN" --no-huge -m 512 --no-pci --file-prefix=$NS --lcores 0@0,1@0 \
    --vdev net_af_packet0,iface=tga0 --vdev net_af_packet1,iface=tgb1 --log-level 1 -- \
    --port 0:speed=10G --port 1:speed=10G --oneshot --stream 'port=0,rx_port=1,size=64,pps=2000' \
    --duration 5 --drain 0.5 > "$OUT"
# tgen's trial and drain are over: stop the DUT instead of waiting out its 9 s (its upper bound)
kill $DUT 2>/dev/null
wait $DUT 2>/dev/null
python3 - "$OUT" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["streams"][0]
print({k: s[k] for k in ("sent", "received", "lost", "duplicates", "reordered", "reorder_extent_max",
                         "seq_gaps", "first_loss_ns", "last_loss_ns")})
ok = (s["sent"] == 10000 and s["received"] == 9900 and s["lost"] == 100 and s["duplicates"] == 100
      and s["reordered"] == 100 and s["reorder_extent_max"] == 1
      and 20e6 < s["first_loss_ns"] < 60e6 and 4.95e9 < s["last_loss_ns"] < 5.05e9)
print("impair check:", "1 passed, 0 failed" if ok else "0 passed, 1 failed")
sys.exit(0 if ok else 1)
PY
