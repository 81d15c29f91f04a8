"""tgen's control protocol under bad input: every bad request gets a JSON-RPC error with a
message, and the server keeps serving; bad command-line arguments exit 2 naming the option.

Needs root and tgen/build/tgen; skipped otherwise.
"""
from __future__ import annotations

import sys
from pathlib import Path
import shutil
import subprocess

import pytest

from nfvperf.tg.tgen import PortSpec, TgenError

sys.path.insert(0, str(Path(__file__).resolve().parent))   # tgen_fixtures, whatever the import mode
from tgen_fixtures import start_tgen, tag, tgen_binary_or_skip

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def tg(tmp_path_factory):
    proc = start_tgen([PortSpec("net_ring0", speed_bps=10e9), PortSpec("net_null0")],
                      tmp_path_factory.mktemp("tgen-rpc"), tag())
    yield proc
    assert proc.stop() == 0, proc.log_tail()


def _err(proc, raw: bytes) -> dict:
    resp = proc.raw(raw)
    assert "error" in resp, resp
    err = resp["error"]
    assert isinstance(err["code"], int) and err["message"], err
    return err


def test_bad_json(tg):
    assert _err(tg, b'{"jsonrpc":"2.0","id":1,"method":\n')["code"] == -32700
    assert _err(tg, b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]\n')["code"] == -32600
    assert _err(tg, b'"just a string"\n')["code"] == -32600
    assert _err(tg, b'{"jsonrpc":"2.0","id":7}\n')["code"] == -32600     # no method
    assert tg.rpc("ping")["pong"] is True


@pytest.mark.parametrize("method,params,code,words", [
    ("no.such.method", {}, -32601, ["no.such.method"]),
    ("stream.add", {"port": "zero"}, -32602, ["port"]),                       # wrong type
    ("stream.add", {"port": 0, "size_b": "big"}, -32602, ["size_b"]),
    ("stream.add", {"port": 0, "size_b": 40}, -32602, ["size_b", "40"]),     # below minimum
    ("stream.add", {"port": 0, "size_b": 63}, -32602, ["size_b"]),
    ("stream.add", {"port": 0, "ipv6": True, "size_b": 79}, -32602, ["size_b"]),  # IPv6 min 80
    ("stream.add", {"port": 0, "flows": 0}, -32602, ["flows"]),              # zero flows
    ("stream.add", {"port": 0, "flows": 2_000_000}, -32602, ["flows"]),
    ("stream.add", {"port": 9}, -32001, ["port"]),                           # unknown port
    ("stream.add", {"port": 0, "rx_port": 5}, -32001, ["port"]),
    ("stream.add", {"port": 0, "rate": {"pps": 2e7}}, -32602, ["rate", "line rate"]),
    ("stream.add", {"port": 0, "rate": {"percent": 150}}, -32602, ["rate"]),
    ("stream.add", {"port": 0, "rate": {"pps": 1, "l1_bps": 1}}, -32602, ["rate"]),
    ("stream.add", {"port": 0, "vlan": 5000}, -32602, ["vlan"]),
    ("stream.add", {"port": 0, "src_ip": "300.1.1.1"}, -32602, ["src_ip"]),
    ("stream.add", {"port": 0, "dst_mac": "zz:00:00:00:00:00"}, -32602, ["dst_mac"]),
    ("stream.add", {"port": 0, "imix": [[64, 0]]}, -32602, ["imix"]),
    ("stream.modify", {"id": 424242, "size_b": 128}, -32001, []),
    ("stream.remove", {"id": 424242}, -32001, []),
    ("trial.start", {}, -32602, []),                                          # no length given
    ("trial.start", {"duration_s": -1}, -32602, ["duration_s"]),
    ("trial.result", {}, -32000, []),                                         # no trial done
    ("port.stats", {"port": 17}, -32001, ["port"]),
])
def test_bad_requests(tg, method, params, code, words):
    tg.rpc("stream.remove", all=True)
    if method == "trial.start":
        tg.rpc("stream.add", port=0, rx_port=0)
    with pytest.raises(TgenError) as ei:
        tg.call(method, params)
    e = ei.value
    assert e.code == code, (e.code, str(e))
    msg = str(e)
    for w in words:
        assert w in msg, msg
    assert tg.rpc("ping")["pong"] is True     # still alive and answering


def test_rate_above_line_rate_names_it(tg):
    tg.rpc("stream.remove", all=True)
    with pytest.raises(TgenError) as ei:
        tg.rpc("stream.add", port=0, size_b=64, rate={"pps": 15_000_000})   # 10G line = 14.88 M
    assert "rate" in str(ei.value) and ei.value.code == -32602
    assert tg.rpc("stream.list") == [], "the refused stream was added all the same"
    # just below the line: accepted, and stored with the asked rate and size (not clamped, not
    # replaced by a default)
    ok = tg.rpc("stream.add", port=0, size_b=64, rate={"pps": 14_000_000})
    (st,) = tg.rpc("stream.list")
    assert st["id"] == ok["stream_id"] and st["port"] == 0, st
    assert st["rate_pps"] == 14_000_000 and st["size_b"] == 64, st
    tg.rpc("stream.remove", all=True)


def test_state_errors(tg):
    tg.rpc("stream.remove", all=True)
    sid = tg.rpc("stream.add", port=0, rx_port=0, rate={"pps": 10000})["stream_id"]
    tg.rpc("trial.start", duration_s=1.0, drain_s=0.2)
    try:
        with pytest.raises(TgenError) as ei:
            tg.rpc("stream.add", port=0)
        assert ei.value.code == -32000
        with pytest.raises(TgenError) as ei:
            tg.rpc("trial.start", duration_s=1.0)
        assert ei.value.code == -32000
        with pytest.raises(TgenError):
            tg.rpc("trial.result")
    finally:
        tg.rpc("trial.stop")
    import time
    end = time.monotonic() + 10
    while tg.rpc("trial.status")["state"] != "done" and time.monotonic() < end:
        time.sleep(0.1)
    res = tg.rpc("trial.result")
    assert res["streams"][0]["id"] == sid
    assert res["streams"][0]["sent"] < 10000          # stopped early


@pytest.mark.parametrize("args,option", [
    (["--port", "0:speed=fast"], "--port"),
    (["--port", "7:rxq=1"], "--port"),
    (["--no-such-option"], "--no-such-option"),
    (["--oneshot", "--stream", "port=0,size_b=12", "--frames", "10"], "size_b"),
    (["--oneshot", "--stream", "port=0", "--duration", "abc"], "--duration"),
    (["--tcp", ":7777"], "--token"),
    (["--tsc-hz", "fast"], "--tsc-hz"),
    (["--tsc-hz", "1e3"], "--tsc-hz"),
])
def test_bad_cli_args(tmp_path, args, option):
    binary = tgen_binary_or_skip()
    t = tag()
    argv = [str(binary), "--no-huge", "-m", "256", "--no-pci", "--file-prefix", f"nfvperf-{t}",
            "--lcores", "0@0,1@0", "--vdev", "net_ring0", "--",
            "--socket", str(tmp_path / "x.sock")] + args
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(f"/var/run/dpdk/nfvperf-{t}", ignore_errors=True)
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert option in p.stderr, p.stderr[-2000:]
