"""The suite's `topology:` section: what to build and how to drive the DUT.

Nothing here lists topologies or DUTs.  ``kind`` accepts the kinds registered with
``@nfvperf.topo.register`` and ``dut`` the adapters registered with ``@register_dut``, both looked
up when a spec is validated (so a new topology or adapter module is accepted as soon as it
exists); a topology declares the DUTs it can use (``Topology.duts``) and an adapter the port kinds
it can drive (``DutAdapter.port_kinds``), and a spec pairing them otherwise is refused here, with
the allowed values.  The per-DUT option sections (``ovs:``, ``testpmd:``, ``linux_bridge:``,
``l3fwd:``) are the adapters' own options models (``DutAdapter.options_key`` / ``options_model``),
declared on :class:`TopologySpec` (mypy sees them: ``spec.ovs.bond_mode``, not ``getattr``); a
plugin adapter's section is added to it when this module is imported (:func:`_build`).
:meth:`TopologySpec.dut_options` is the spec's DUT's own section.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Optional

from pydantic import (BaseModel, ConfigDict, Field, ValidationInfo, create_model, field_validator,
                      model_validator)
from pydantic_core import PydanticCustomError

from nfvperf.dut import load_adapters
from nfvperf.dut.base import DUT_REGISTRY, AdapterOptions, DutAdapter, dut_class
from nfvperf.dut.l3fwd import L3fwdSpec
from nfvperf.dut.linux_bridge import LinuxBridgeSpec
from nfvperf.dut.ovs_spec import OvsSpec
from nfvperf.dut.testpmd import TestpmdSpec

from nfvperf.vm.guest import VmSpec

from .ports import port_kind_class, port_kind_names
from nfvperf.topo.registry import REGISTRY, registered_kinds, topology_class
from nfvperf.validation import deep_merge
from nfvperf.tg.tgen import _lcore_cpus


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _one_of(values: list[str]) -> str:
    """'a', 'b' or 'c' (pydantic's wording for Literal errors, which config's messages expect)."""
    q = [repr(v) for v in values]
    return q[0] if len(q) == 1 else ", ".join(q[:-1]) + " or " + q[-1]


def dut_names() -> list[str]:
    """Registered DUT adapters (``topology.dut`` values), sorted."""
    load_adapters()
    return sorted(DUT_REGISTRY)


def kind_names() -> list[str]:
    """Registered topology kinds (``topology.kind`` values), in module order."""
    return registered_kinds()


def _topology_cls(kind: Optional[str]) -> Any:
    return REGISTRY.get(kind) if kind else None


def allowed_duts(kind: str) -> list[str]:
    """The DUTs topology ``kind`` can use: what its class declares in ``duts`` (None = all),
    and the adapters that declare ``kind`` in their ``topologies``."""
    cls = _topology_cls(kind)
    declared = getattr(cls, "duts", None)
    return [d for d in dut_names()
            if declared is None or d in declared or kind in DUT_REGISTRY[d].topologies]


def allowed_port_kinds(kind: str, dut: str) -> list[str]:
    """Port kinds both the topology (``Topology.port_kinds``) and the DUT adapter can use."""
    out = port_kind_names()
    for cls in (_topology_cls(kind), DUT_REGISTRY.get(dut)):
        declared = getattr(cls, "port_kinds", None)
        if declared is not None:
            out = [p for p in out if p in declared]
    return out


def port_kind_refusal(kind: str, dut: str, port_kind: str) -> Optional[str]:
    """Why topology ``kind`` with ``dut`` cannot use ``port_kind`` (None if it can): the
    allowed kinds, with the adapter's or the kind's reason when one is declared."""
    ok = allowed_port_kinds(kind, dut)
    if port_kind in ok:
        return None
    cls = DUT_REGISTRY.get(dut)
    reason = (getattr(cls, "port_kind_notes", {}) or {}).get(port_kind)
    declared = getattr(cls, "port_kinds", None) or ()
    if not reason and port_kind in port_kind_names() and declared and \
            all(k in port_kind_names() and port_kind_class(k).kernel for k in declared):
        reason = port_kind_class(port_kind).kernel_refusal or None    # a kernel-only DUT
    why = f" ({reason})" if reason else ""
    return (f"kind {kind} with dut {dut} cannot use port_kind {port_kind!r}{why}; allowed: "
            f"{_one_of(ok)}")


def mtu_refusal(dut: Optional[str], port_kind: str, mtu: int) -> Optional[str]:
    """Why ``mtu`` cannot work on ``port_kind`` with ``dut`` (None if it can), whoever drives
    the other end.  A kernel DUT (``DutAdapter.dpdk_ports`` False) needs only the kind's path to
    carry it (a Linux bridge forwards jumbo frames on veth); a DPDK DUT opens its own ends with
    the kind's PMD, so the PMD's limit (``PortKind.max_mtu``) holds for every test, TCP tests
    too.  The generator's limit on the other end is checked per test in config."""
    pk = port_kind_class(port_kind)
    cls = DUT_REGISTRY.get(dut) if dut else None
    dpdk = cls is not None and bool(getattr(cls, "dpdk_ports", True))
    why = pk.check_mtu(mtu, generator=dpdk)
    if why is None or not dpdk or pk.check_mtu(mtu, generator=False) is not None:
        return why           # None, or the kind's path itself cannot carry it (any DUT)
    return (f"dut {dut} opens its {port_kind} ports with DPDK, in TCP tests too (iperf3, no "
            f"tgen): {why}; lower topology.mtu to {pk.mtu_limit(generator=True)} or less")


def _require_one_of(v: str, names: list[str]) -> None:
    """A registry-backed field: refuse a value that no module registered, naming the allowed ones
    (the same error shape as a Literal's)."""
    if v not in names:
        raise PydanticCustomError("literal_error", "Input should be {expected}",
                                  {"expected": _one_of(names)})


def tgen_worker_count(tgen_cores: Optional[int], tgen_ht: bool, tgen_lcores: Optional[str]) -> int:
    """tgen's worker lcores: every lcore but the main one of ``tgen_lcores``, else ``tgen_cores``
    (x 2 with ``tgen_ht``); 1 when neither says."""
    if tgen_lcores:
        return max(1, len(_lcore_cpus(str(tgen_lcores))) - 1)
    return int(tgen_cores or 1) * (2 if tgen_cores and tgen_ht else 1)


class TopologyBase(_Strict):
    """The fields every topology has; :class:`TopologySpec` adds the adapters' sections."""

    kind: str = Field("p-ovs-p", description="topology kind (the registered topologies)")
    dut: str = Field("ovs-dpdk", validate_default=True,
                     description="DUT adapter (the registered adapters the topology can use)")
    ports: int = Field(2, ge=2, le=8)
    port_kind: str = Field("af_packet", validate_default=True,
                           description="how the PHY ports are made (nfvperf.topo.ports): af_packet, "
                           "af_xdp (veth), vhost, memif (userspace), pci (real NICs)")
    pci: list[str] = Field(default_factory=list, description="PCI addresses when port_kind=pci")
    vnf: Literal["container", "vm"] = "container"
    vm: VmSpec = Field(default_factory=VmSpec, description="the TCP guests of kinds host-vm, "
                       "vm-link-vm and vm-vm (seed 001): vcpus, memory_mb, queues, image, accel")
    tgen_lcores: Optional[str] = Field(None, description="the generator's EAL --lcores, e.g. "
                                       "'0@0,1@2' (default: the CPU plan; or give tgen_cores)")
    tgen_cores: Optional[int] = Field(
        None, ge=1, le=64, description="generator worker cores as a count of physical cores, "
        "resolved from the host's sibling map when the topology is built")
    tgen_ht: bool = Field(False, description="with tgen_cores: workers on both hyper-threads "
                          "of each core")

    @model_validator(mode="after")
    def _tgen_cores_one_way(self) -> "TopologyBase":
        if self.tgen_cores is not None and self.tgen_lcores:
            raise ValueError(f"give tgen_cores ({self.tgen_cores}) or tgen_lcores "
                             f"({self.tgen_lcores!r}), not both")
        if self.tgen_ht and self.tgen_cores is None:
            raise ValueError("tgen_ht: true applies to tgen_cores; give tgen_cores")
        return self

    def tgen_worker_count(self) -> int:
        """tgen's worker lcores as the spec gives them (:func:`tgen_worker_count`)."""
        return tgen_worker_count(self.tgen_cores, self.tgen_ht, self.tgen_lcores)

    @model_validator(mode="after")
    def _dut_polls_every_tgen_queue(self) -> "TopologyBase":
        """On vhost ports each tgen worker sends on its own queue pair of the port (tgen_cores):
        a forwarder that polls fewer RX queues never sees the frames of the others, and they
        would count as its loss."""
        workers = self.tgen_worker_count()
        if workers <= 1 or not port_kind_class(self.port_kind).tg_queue_pair_per_worker \
                or self.dut not in ("testpmd", "l3fwd"):
            return self
        queues = int(getattr(getattr(self, self.dut, None), "queues", 1) or 1)
        if queues < workers:
            given = (f"tgen_lcores {self.tgen_lcores!r}" if self.tgen_lcores else
                     f"tgen_cores {self.tgen_cores}" + (" with tgen_ht" if self.tgen_ht else ""))
            raise ValueError(f"{given} makes tgen send on {workers} queues of each vhost port, but "
                             f"{self.dut}.queues is {queues}: {self.dut} would poll only {queues} of "
                             f"them and the frames on the others would count as its loss; give "
                             f"{self.dut}: {{queues: {workers}}} (or more)")
        return self

    @model_validator(mode="after")
    def _pci_pairs_are_the_ports(self) -> "TopologyBase":
        """``pci:`` is read as generator/DUT pairs [tg0, dut0, tg1, dut1, ...]: one pair per port."""
        n = len(self.pci)
        if n and (n % 2 or n // 2 != self.ports):
            raise ValueError(
                f"topology.ports: {self.ports}, but topology.pci gives {n} address(es), read as "
                f"generator/DUT pairs [tg0, dut0, tg1, dut1, ...]: {n // 2} pair(s)"
                + (" and one left over" if n % 2 else "") + f"; give {2 * self.ports} addresses "
                "(the generator's NIC then the DUT's, per cable), or ports: the pairs you give, or "
                "leave pci: out and give the NICs in a testbed file (--testbed; "
                "testbeds/two-server-lab.example.yaml)")
        return self

    @model_validator(mode="after")
    def _kind_accepts(self) -> "TopologyBase":
        """What the topology kind refuses in this spec (``Topology.spec_refusal``, e.g. a bond
        of one member), with the field and the fix."""
        cls = _topology_cls(self.kind)
        why = cls.spec_refusal(self) if cls is not None and hasattr(cls, "spec_refusal") else None
        if why:
            raise ValueError(why)
        return self

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, v: str) -> str:
        _require_one_of(v, kind_names())
        return v

    @field_validator("dut")
    @classmethod
    def _known_dut(cls, v: str, info: ValidationInfo) -> str:
        _require_one_of(v, dut_names())
        kind = info.data.get("kind")
        if kind is not None:
            ok = allowed_duts(kind)
            if v not in ok:
                others = [k for k in kind_names() if v in allowed_duts(k)]
                hint = f"; dut {v} works with kind {', '.join(others)}" if others else ""
                raise ValueError(f"kind {kind} cannot use dut {v!r}; allowed DUTs for {kind}: "
                                 f"{_one_of(ok)}{hint}")
        return v

    @field_validator("port_kind")
    @classmethod
    def _usable_port_kind(cls, v: str, info: ValidationInfo) -> str:
        _require_one_of(v, port_kind_names())
        kind, dut = info.data.get("kind"), info.data.get("dut")
        if kind is not None and dut is not None:
            refusal = port_kind_refusal(kind, dut, v)
            if refusal:
                raise ValueError(refusal)
        return v

    @field_validator("mtu", check_fields=False)
    @classmethod
    def _mtu_fits_port_kind(cls, v: int, info: ValidationInfo) -> int:
        """The MTU the port kind's path and the DUT's end carry (:func:`mtu_refusal`; the
        generator's own limit is checked per test in config, since TCP tests run without it,
        and when a topology starts tgen)."""
        pk = info.data.get("port_kind")
        if pk in port_kind_names():
            why = mtu_refusal(info.data.get("dut"), pk, v)
            if why:
                raise ValueError(why)
        return v

    # -- what the topology and its adapters declare ------------------------------------------
    def topology_class(self) -> Any:
        return topology_class(self.kind)

    def dut_class(self) -> type[DutAdapter]:
        return dut_class(self.dut)

    def preflight_needs(self) -> Any:
        """What the host must offer for this spec (nfvperf.host.preflight.Needs), as the
        topology class and its DUT/VNF adapters declare it."""
        return self.topology_class().preflight_needs(self)


def option_sections() -> dict[str, type[BaseModel]]:
    """``{section key: options model}`` of every registered DUT adapter that has options."""
    load_adapters()
    out: dict[str, type[BaseModel]] = {}
    for name in sorted(DUT_REGISTRY):
        cls = DUT_REGISTRY[name]
        if cls.options_key and cls.options_model is not None:
            out.setdefault(cls.options_key, cls.options_model)
    return out


def merge_override(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """A test's (or study unit's) ``topology:`` override deep-merged into the suite's dumped
    topology; in an adapter's section, an option given one way (``pmd_cores``) replaces the
    suite's other way of saying it (``pmd_cpu_mask``; ``AdapterOptions.alternatives``)."""
    base = dict(base)
    for key, model in option_sections().items():
        over = override.get(key)
        if isinstance(over, dict) and isinstance(base.get(key), dict) and \
                hasattr(model, "without_alternatives"):
            base[key] = model.without_alternatives(base[key], over)
    return deep_merge(base, override)


class TopologySpec(TopologyBase):
    """The suite's ``topology:`` section, declared: the common fields, the built-in adapters'
    option sections (each the adapter's own model: ``DutAdapter.options_key`` /
    ``options_model``), mtu and preflight.  mypy sees every field; :func:`_build` adds the
    sections of plugin adapters (modules added to ``nfvperf.dut``), which exist only at run time."""

    l3fwd: L3fwdSpec = Field(default_factory=L3fwdSpec)
    linux_bridge: LinuxBridgeSpec = Field(default_factory=LinuxBridgeSpec)
    ovs: OvsSpec = Field(default_factory=OvsSpec)
    testpmd: TestpmdSpec = Field(default_factory=TestpmdSpec)
    mtu: int = Field(1500, ge=68, le=9600, description="MTU of the test ports (jumbo frames: 9000)")
    preflight: bool = Field(True, description="run the preflight checks before bringing the topology up")

    def option_section(self, key: str) -> Optional[BaseModel]:
        """The options section ``key`` (a field holding an adapter's options model: ``ovs`` ...,
        or a plugin's, which :func:`_build` adds as a field at run time), None when no field
        ``key`` holds one.  A lookup among the model's own fields (``dict(self)``)."""
        section = dict(self).get(key)
        return section if isinstance(section, BaseModel) else None

    def dut_options(self) -> Optional[AdapterOptions]:
        """The section of the spec's DUT (``ovs`` for ovs-dpdk ...), None for an adapter without
        options: the adapter's own model, never read by name."""
        opts = self.dut_class().options(self)
        return opts if isinstance(opts, AdapterOptions) else None


#: the sections declared on :class:`TopologySpec` (a registered adapter must use its model)
STATIC_SECTIONS = {"l3fwd": L3fwdSpec, "linux_bridge": LinuxBridgeSpec, "ovs": OvsSpec,
                   "testpmd": TestpmdSpec}


def _build() -> type[TopologySpec]:
    """The declared :class:`TopologySpec`, or a subclass of it (same name) with the option
    sections of plugin adapters."""
    fields: dict[str, Any] = {}
    for key, model in option_sections().items():
        if key in STATIC_SECTIONS:
            if model is not STATIC_SECTIONS[key]:
                raise TypeError(f"DUT adapter option section {key!r}: {model.__name__} is not the "
                                f"declared {STATIC_SECTIONS[key].__name__}; give the adapter another "
                                "options_key")
            continue
        fields[key] = (model, Field(default_factory=model))
    if not fields:
        return TopologySpec
    return create_model("TopologySpec", __base__=TopologySpec, __module__=__name__, **fields)


if not TYPE_CHECKING:      # mypy checks the declared class; plugins' sections exist at run time
    TopologySpec = _build()
    TopologySpec.__doc__ = ("The suite's ``topology:`` section: the common fields, the registered "
                            "adapters' option sections (" + ", ".join(option_sections()) + "), mtu, "
                            "preflight.")

