"""Issue 18's demonstration: a new DUT adapter, a fake forwarder written against the typed
interface in its own module (``plugins/fake_forwarder.py``, copied to a temporary directory),
type-checks with ``mypy --strict``, loads as a plugin of ``nfvperf.dut`` and forwards frames in a
p2p topology, with nothing outside its module edited (it declares the topology it works on)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dut_plugins import load_dut_plugin

import nfvperf.topo as topo_pkg
from nfvperf.host.run import RunContext
from nfvperf.topo.spec import TopologySpec, allowed_duts

PLUGIN = Path(__file__).parent / "plugins" / "fake_forwarder.py"
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def fake_forwarder(tmp_path):
    """The plugin module in a directory of its own, on ``nfvperf.dut``'s path while the test runs."""
    yield from load_dut_plugin(tmp_path, PLUGIN, "fake-forwarder")


def test_the_plugin_type_checks_strictly(fake_forwarder) -> None:
    env = dict(os.environ, MYPYPATH=str(SRC))
    cp = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                         "--ignore-missing-imports", "--no-error-summary", str(fake_forwarder)],
                        capture_output=True, text=True, env=env, cwd=fake_forwarder.parent, timeout=600)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    # and mypy does look at it: a call that breaks the port-end interface is caught
    bad = fake_forwarder.parent / "broken.py"
    bad.write_text(fake_forwarder.read_text().replace("kernel_ifname(port, self.name)",
                                                      "kernel_ifname(port)"))
    cp = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                         "--ignore-missing-imports", str(bad)],
                        capture_output=True, text=True, env=env, cwd=bad.parent, timeout=600)
    assert cp.returncode != 0 and "kernel_ifname" in cp.stdout


@pytest.mark.root
def test_the_plugin_forwards_in_a_p2p_topology(fake_forwarder, tmp_path, leak_check, raw_port) -> None:
    assert "fake-forwarder" in allowed_duts("p2p")          # declared by the adapter alone
    run = RunContext(run_dir=tmp_path / "run")
    leak_check.watch(run.tag)
    spec = TopologySpec(kind="p2p", dut="fake-forwarder", port_kind="af_packet")
    with topo_pkg.build(spec, run, start_tgen=False) as t:
        p0, p1 = raw_port(t.ports[0].tg_ifname), raw_port(t.ports[1].tg_ifname)
        before = t.dut_counters()["total"]
        p0.send(50, sig=b"FAKE", gap_s=0.0005)
        assert len(p1.receive(sig=b"FAKE", wait_s=3, want=50)) == 50
        p1.send(20, sig=b"BACK", gap_s=0.0005)
        assert len(p0.receive(sig=b"BACK", wait_s=3, want=20)) == 20
        after = t.dut_counters()["total"]
        assert after["rx_packets"] - before["rx_packets"] >= 70
        assert t.environment()["dut"]["dut"] == "fake-forwarder"
        t.dut_alive()


def test_a_userspace_port_kind_is_refused_by_the_adapters_declaration(fake_forwarder) -> None:
    with pytest.raises(ValueError, match="cannot use port_kind 'vhost'"):
        TopologySpec(kind="p2p", dut="fake-forwarder", port_kind="vhost")
