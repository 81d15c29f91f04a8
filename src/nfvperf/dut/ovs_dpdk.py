"""Open vSwitch with DPDK as the device under test.

The adapter runs its *own* ``ovsdb-server`` and ``ovs-vswitchd`` (the DPDK build) as children of
this process, with every file (database, pidfiles, logs, control and OpenFlow sockets) in a
directory of the run, and the DPDK EAL tagged with ``--file-prefix=<tag>``.  No system service,
database or bridge is touched.  Optionally the daemons run inside a network namespace (``netns``),
which keeps the bridge's tap devices and the VXLAN tunnel addresses out of the host's namespace;
the DPDK ``af_packet`` / ``af_xdp`` ports then open the veth ends that live in that namespace.

Life cycle (the DUT adapter convention): ``start()`` → ``add_bridge()`` / ``add_port()`` ...  →
``program(flows)`` → ``counters()`` around trials, ``alive()`` while traffic runs → ``stop()``.
``attach()`` points the adapter at an OVS that is already running (it then only creates and deletes
its own bridges).

Everything is driven through the OVS command-line tools with argument lists (no shell), always with
an explicit ``--db`` / ``-t`` / bridge management socket, so nothing falls back to the system paths.
"""
from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import ClassVar, Optional

from nfvperf.dut.base import TopologyView, host_binary, register_dut
from nfvperf.dut.ovs_ctl import OvsError
from nfvperf.dut.ovs_spec import OvsSpec, pmd_mask_check, socket_mem_check
from nfvperf.dut.ovs_telemetry import OVS_OFFERS, OvsStats
from nfvperf.dut.port_end import phy_end
from nfvperf.dut.vswitch import VSwitch
from nfvperf.host import hugepages as hp
from nfvperf.host.cpu import CoreRequest
from nfvperf.host.preflight import Binary, Needs
from nfvperf.units import cores_from_mask

log = logging.getLogger(__name__)
SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
OVS_VSWITCHD_DPDK = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"
#: the programs the adapter runs (preflight requires them)
VSWITCHD = Binary("ovs-vswitchd-dpdk", "openvswitch-switch-dpdk", candidates=(OVS_VSWITCHD_DPDK,),
                  env="NFVPERF_OVS_VSWITCHD")
OVSDB_SERVER = Binary("ovsdb-server", "openvswitch-switch")


def _find_vswitchd() -> str:
    path = VSWITCHD.find()       # also honours $NFVPERF_OVS_VSWITCHD
    if not path:
        raise OvsError("ovs-vswitchd with DPDK not found (apt-get install openvswitch-switch-dpdk, "
                       "or set NFVPERF_OVS_VSWITCHD)")
    return path


@register_dut("ovs-dpdk")
class OvsDpdk(OvsStats, VSwitch):
    """OVS-DPDK in the run directory (see the module doc).

    ``cpus`` are the PMD CPUs (``pmd-cpu-mask``) unless ``spec.pmd_cpu_mask`` says otherwise;
    ``spec`` is :class:`OvsSpec` (or a TopologySpec); ``lcore_cpu`` runs the non-PMD threads.
    Ports given to :meth:`add_port` (a :class:`PortRef`) go on the first bridge with OpenFlow port
    number index + 1; a ``veth`` port's namespace becomes OVS's namespace when ``netns`` is not set.
    """

    builds_bonds = True
    #: PMD counters, datapath flows, live port counters (dut/ovs_telemetry.py)
    telemetry_offers: ClassVar[frozenset[str]] = OVS_OFFERS

    name = "ovs-dpdk"
    runs_remote = True
    switching_operations = 1
    options_key = "ovs"
    options_model = OvsSpec
    binaries = (VSWITCHD, OVSDB_SERVER)
    #: PHY ports: veth (af_packet/af_xdp vdevs), vhost-user (dpdkvhostuserclient), memif (a
    #: dpdk port on net_memif, role=server; the peer must poll tx_queues() rings), real NICs
    port_kinds: ClassVar[tuple[str, ...]] = ("af_packet", "af_xdp", "vhost", "memif", "pci")
    @classmethod
    def in_place_for(cls, spec: TopologyView) -> frozenset[str]:
        """:attr:`in_place`, less the PMD mask on memif (the generator polls ``tx_queues()`` =
        PMD threads + 1 rings per port, fixed when it started) and the global other_config of an
        OVS that nfvperf only attached to (``existing_db``: not nfvperf's to change; a start
        does not set them either)."""
        out = cls.in_place
        if phy_end(spec.port_kind).fixed_rings:
            out = out - {"ovs.pmd_cpu_mask"}
        ovs = cls.options(spec)
        if ovs is not None and ovs.existing_db:
            out = out - cls.GLOBAL_IN_PLACE
        return out

    @classmethod
    def hugepage_demand_mb(cls, spec: TopologyView) -> int:
        ovs = cls.options(spec)
        return int(sum((ovs if ovs is not None else OvsSpec()).socket_mem_list()))

    @classmethod
    def preflight_needs(cls, spec: TopologyView) -> Needs:
        needs = super().preflight_needs(spec)
        ovs = cls.options(spec)
        if ovs is not None and ovs.socket_mem:
            needs.checks.append(lambda required: socket_mem_check(ovs.socket_mem_list()))
        if ovs is not None and ovs.pmd_cpu_mask:
            mask = ovs.pmd_cpu_mask
            needs.checks.append(lambda required: pmd_mask_check(mask))
        return needs

    @classmethod
    def polling_cpus_of(cls, spec: TopologyView) -> Optional[list[int]]:
        """``ovs.pmd_cpu_mask``'s CPUs: the PMD threads run there, not on the plan's ``dut``
        CPUs (the mask does not enter the plan; it can also change in place)."""
        ovs = cls.options(spec)
        if ovs is None or not ovs.pmd_cpu_mask:
            return None
        return cores_from_mask(ovs.pmd_cpu_mask)

    @classmethod
    def core_request(cls, spec: TopologyView) -> Optional[CoreRequest]:
        ovs = cls.options(spec)
        if ovs is None or ovs.pmd_cores is None:
            return None
        return CoreRequest("topology.ovs.pmd_cores", int(ovs.pmd_cores), bool(ovs.ht))

    @classmethod
    def describe_options(cls, section: dict[str, object]) -> list[str]:
        bits = []
        if section.get("pmd_cpu_mask"):
            bits.append(f"pmd-cpu-mask {section['pmd_cpu_mask']}")
        if section.get("pmd_cores"):
            n = int(str(section["pmd_cores"]))
            bits.append(f"{n} PMD core{'s' if n != 1 else ''}" +
                        (f" ({2 * n} threads, HT)" if section.get("ht") else ""))
        if int(str(section.get("bridges") or 1)) > 1:
            bits.append(f"{section['bridges']} bridges (patch ports)")
        vt, sm = section.get("vlan_translate"), section.get("socket_mem")
        if vt and isinstance(vt, dict):
            bits.append("VLAN " + ", ".join(f"{a}->{b}" for a, b in vt.items()))
        if section.get("bond_mode"):
            bits.append(f"bond {section['bond_mode']}")
        if sm and isinstance(sm, list):
            bits.append("socket-mem " + ",".join(str(x) for x in sm))
        if section.get("n_rxq", 1) != 1:
            bits.append(f"{section['n_rxq']} rxq")
        if section.get("rules"):
            bits.append(f"{int(str(section['rules'])):,} rules")
        return bits
    def start(self) -> None:
        """Start ovsdb-server and ovs-vswitchd-dpdk (unless attached to a running OVS), create the
        bridge and attach the ports added so far."""
        if self.started:
            return
        if self.netns is None and not self._attached:
            spaces = {p.netns for p in self.ports if p.end.kernel}
            if len(spaces) > 1:
                raise OvsError(f"OVS runs in one namespace; its veth ports are in {sorted(map(str, spaces))}")
            if spaces:
                self.netns = spaces.pop()
        if self.tracker is not None and self._own_dir and \
                ("dir", str(self.vhost_dir)) not in self.tracker.items():
            # the /tmp fallback dir goes at the end of the run, after the VNFs using it
            self.tracker.add("dir", str(self.vhost_dir), lambda: self.host.rmtree(self.vhost_dir))
        if not self._attached:
            self._start_daemons()
        self.started = True
        if self.tracker is not None:
            self.tracker.add("dut", f"ovs-dpdk:{self.tag}", self.stop)
        try:
            self.add_bridge()
            for i, port in enumerate(self.ports):
                self._attach_port(port, i)
        except BaseException:
            self.stop()
            raise

    def _vswitchd(self) -> str:
        return host_binary(self.host, self.remote, self.vswitchd_bin, "topology.ovs.vswitchd",
                           "an ovs-vswitchd build", _find_vswitchd, VSWITCHD)

    def _start_daemons(self) -> None:
        binary = self._vswitchd()
        self.host.mkdir(self.dir)
        if self.remote and self.tracker is not None:
            # the run's directory on that host (never the /tmp fallback's parent)
            root = Path(self.host.work_dir) / self.tag
            if root in self.dir.parents:
                self.tracker.add("dir", f"{self.host.name}:{root}", lambda: self.host.rmtree(root))
        db = self.dir / "conf.db"
        self.host.remove(db)
        self._run(["ovsdb-tool", "create", str(db), SCHEMA])
        self._spawn("ovsdb-server", [
            "ovsdb-server", str(db), f"--remote=punix:{self.db_sock}",
            f"--pidfile={self.dir / 'ovsdb-server.pid'}", f"--unixctl={self.db_ctl}",
            f"--log-file={self.dir / 'ovsdb-server.log'}", "-vconsole:off"])
        try:
            self._wait_path(self.db_sock, "ovsdb-server")
            self.vsctl("init", wait=False)
            cfg = self.other_config()
            if cfg:
                self.vsctl("set", "Open_vSwitch", ".",
                           *[f'other_config:{k}="{v}"' for k, v in cfg.items()], wait=False)
            self._spawn("ovs-vswitchd", [
                binary, f"unix:{self.db_sock}", f"--pidfile={self.dir / 'ovs-vswitchd.pid'}",
                f"--unixctl={self.ctl}", f"--log-file={self.dir / 'ovs-vswitchd.log'}",
                "-vconsole:off"], netns=self.netns)
            self._wait_path(self.ctl, "ovs-vswitchd")
            self._wait_datapath()
        except BaseException:
            self.started = True
            self.stop()
            raise
        log.info("%s up in %s (netns %s, pmd-cpu-mask %s)", self.name, self.dir, self.netns,
                 cfg.get("pmd-cpu-mask"))

    def _wait_datapath(self) -> None:
        """Wait until DPDK in ovs-vswitchd has initialised (dpdk_initialized)."""
        self._settle(lambda: (self.vsctl("get", "Open_vSwitch", ".", "dpdk_initialized", wait=False).strip() == "true",
                              None), self.start_timeout_s,
                     lambda _: f"DPDK in ovs-vswitchd did not initialise in {self.start_timeout_s:.0f} s", 0.2)

    def stop(self) -> None:
        """Delete our bridges, stop the daemons, remove sockets, pidfiles and hugepage files."""
        if self.tracker is not None:
            self.tracker.forget("dut", f"ovs-dpdk:{self.tag}")
        if self._attached:
            for br in list(self.bridges):
                try:
                    self.vsctl("--if-exists", "del-br", br, timeout=10)
                except OvsError as e:
                    log.warning("could not delete bridge %s: %s", br, e)
            self.bridges.clear()
            self.bonds.clear()
            self._release_dir()
            self.started = False
            return
        vsd = self._procs.get("ovs-vswitchd")
        if vsd is not None and vsd.running():
            with contextlib.suppress(Exception):  # stopping goes on (the host may be gone)
                self.host.run(["ovs-appctl", "-t", str(self.ctl), "--timeout=5", "exit", "--cleanup"],
                              env=self.ovs_env, timeout=8, check=False)
        # ovs-vswitchd was asked to exit: a grace for that, then SIGTERM, then SIGKILL
        for key, grace in (("ovs-vswitchd", 5.0), ("ovsdb-server", 0.0)):
            p = self._procs.get(key)
            if p is not None:
                p.stop(timeout=5.0, grace=grace)
        self._procs.clear()
        # OVS's sockets and pidfiles; logs and flow files stay in the run directory for the record.
        # The VNFs' vhost-user sockets are theirs (a reset() keeps the VNFs running).
        with contextlib.suppress(Exception):      # the host may be gone
            for pat in ("db.sock", "*.ctl", "*.mgmt", "*.snoop", "*.pid"):
                for stale in self.host.glob(self.dir, pat):
                    with contextlib.suppress(OSError):
                        self.host.remove(stale)
        if self.remote:
            hp.remove_prefix_on(self.host, self.file_prefix)
        else:
            hp.remove_leftovers(self.file_prefix)     # hugepage files and /var/run/dpdk/<prefix>
        self._release_dir()
        self.bridges.clear()
        self.bonds.clear()
        self.ovs_ports.clear()
        self.started = False

    def _release_dir(self) -> None:
        """Remove the /tmp fallback directory unless VNF sockets still live in it (reset())."""
        if self._own_dir:
            with contextlib.suppress(Exception):
                if not self.host.glob(self.vhost_dir, "vhu-*"):
                    self.host.rmtree(self.vhost_dir)

    def reset(self) -> None:
        """RFC 6201 reset: restart OVS and re-install the last programmed flows."""
        flows = getattr(self, "_last_flows", None)
        self.stop()
        self.start()
        self.program(flows)

