"""The suite's `topology:` section: what to build and how to drive the DUT."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OvsSpec(_Strict):
    pmd_cpu_mask: Optional[str] = Field(None, description="hex mask of PMD cores, e.g. '0x2'")
    n_rxq: int = Field(1, ge=1, le=64)
    n_rxq_desc: int = Field(1024, ge=64, le=8192)
    n_txq_desc: int = Field(1024, ge=64, le=8192)
    emc_insert_inv_prob: Optional[int] = Field(None, ge=0, le=4294967295)
    smc_enable: bool = False
    socket_mem_mb: int = Field(1024, ge=256)
    rules: int = Field(0, ge=0, description="extra src/dst-IP rules for rule-complexity tests")
    pmd_maxsleep_us: Optional[int] = Field(
        None, ge=0, le=10000, description="OVS other_config:pmd-maxsleep (idle PMDs sleep up to this "
        "long); None = 500 when the CPU plan shares cores (the PMD then yields its CPU to the "
        "generator/VNF when idle), else off")
    existing_db: Optional[str] = Field(
        None, description="use an OVS that is already running: its ovsdb socket "
        "(e.g. /var/run/openvswitch/db.sock); nfvperf then only adds and deletes its own bridge")
    existing_ctl: Optional[str] = Field(
        None, description="that ovs-vswitchd's unixctl socket (default: the ovs-vswitchd.<pid>.ctl "
        "next to existing_db)")


class TestpmdSpec(_Strict):
    __test__ = False   # not a pytest class
    forward_mode: Literal["io", "mac"] = "io"
    lcores: Optional[str] = Field(None, description="EAL --lcores, e.g. '0@0,1@1' (default: the CPU plan)")
    memory: Literal["hugepages", "in-memory", "no-huge"] = Field(
        "hugepages", description="hugepage files with the run's --file-prefix, --in-memory, or --no-huge")
    queues: int = Field(1, ge=1, le=16, description="rx/tx queues per port")
    rxd: int = Field(1024, ge=64, le=8192)
    txd: int = Field(1024, ge=64, le=8192)
    vnf_queue_size: int = Field(
        1024, ge=64, le=4096, description="virtqueue size of the container VNF's virtio-user ports "
        "(a power of two; DPDK's default is 256): a VNF sharing a CPU is descheduled for "
        "milliseconds, and the vring is what the switch can queue to it meanwhile")

    @field_validator("vnf_queue_size")
    @classmethod
    def _power_of_two(cls, v: int) -> int:
        if v & (v - 1):
            raise ValueError(f"vnf_queue_size must be a power of two, not {v}")
        return v


class LinuxBridgeSpec(_Strict):
    mode: Literal["pairs", "single"] = Field(
        "pairs", description="one bridge per port pair (cross-connect) or all ports in one bridge")
    ageing_s: float = Field(300.0, ge=0)


class TopologySpec(_Strict):
    kind: Literal["p2p", "p-ovs-p", "pvp", "pvvp", "vxlan"] = "p-ovs-p"
    dut: Literal["ovs-dpdk", "linux-bridge", "testpmd"] = "ovs-dpdk"
    ports: int = Field(2, ge=2, le=8)
    port_kind: Literal["af_xdp", "af_packet", "pci"] = "af_packet"
    pci: list[str] = Field(default_factory=list, description="PCI addresses when port_kind=pci")
    vnf: Literal["container", "vm"] = "container"
    tgen_lcores: Optional[str] = None
    ovs: OvsSpec = Field(default_factory=OvsSpec)
    testpmd: TestpmdSpec = Field(default_factory=TestpmdSpec)
    linux_bridge: LinuxBridgeSpec = Field(default_factory=LinuxBridgeSpec)
    mtu: int = Field(1500, ge=68, le=9600, description="MTU of the test ports (jumbo frames: 9000)")
    preflight: bool = Field(True, description="run the preflight checks before bringing the topology up")
