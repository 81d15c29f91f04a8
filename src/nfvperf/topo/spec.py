"""The suite's `topology:` section: what to build and how to drive the DUT."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field


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


class TestpmdSpec(_Strict):
    forward_mode: Literal["io", "mac"] = "io"
    lcores: Optional[str] = None


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
