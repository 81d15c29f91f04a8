"""Port kinds: how a topology's emulated (or real) PHY ports are made, one class per kind.

Like OVS's netdev providers, the kinds are interchangeable: a topology asks the spec's kind for
its ports (:meth:`PortKind.create`) and each port for its two ends — the generator's
(:meth:`HostPort.tg_port_spec`, a tgen ``PortSpec``) and the DUT's (:meth:`HostPort.dut_portref`,
a ``PortRef`` the adapter attaches) — and never branches on the kind.

=========== ============================================ =========================================
kind        generator end (tgen)                         DUT end
=========== ============================================ =========================================
af_packet   net_af_packet on veth ``<tag>p<i>``          veth ``<tag>d<i>`` (kernel DUT, or a DPDK
af_xdp      net_af_xdp on veth ``<tag>p<i>``             DUT's af_packet/af_xdp vdev on it)
vhost       net_virtio_user, vhost-user *server* on      vhost-user backend as *client*: OVS
            ``<run dir>/<tag>-vhu<i>.sock``              ``dpdkvhostuserclient``, testpmd net_vhost
memif       net_memif ``role=client`` on                 net_memif ``role=server`` (testpmd)
            ``<run dir>/<tag>-memif<i>.sock``
pci         the NIC at ``pci[2i]``                       the NIC at ``pci[2i+1]``
=========== ============================================ =========================================

Kinds register with ``@register_port_kind``; the modules of this package are imported on demand
(a new kind is one module).
"""
from __future__ import annotations

from .base import (PORT_KIND_REGISTRY, CabledLink, HostPort, PortKind, load_port_kinds, port_kind_class,
                   port_kind_names, register_port_kind)

__all__ = ["HostPort", "PortKind", "register_port_kind", "load_port_kinds", "port_kind_class", "port_kind_names",
           "PORT_KIND_REGISTRY", "CabledLink"]
