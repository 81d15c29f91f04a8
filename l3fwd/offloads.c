/* Offloads a port cannot do are dropped before DPDK sees them (linked with ld --wrap; see
 * meson.build).  l3fwd asks every port for RX checksum offload and repeats its port offloads in
 * each queue's configuration; DPDK 22.11's virtual PMDs (af_packet, af_xdp, vhost, memif) have
 * no checksum offload, and ethdev refuses the whole configuration.  Here each request is cut to
 * what rte_eth_dev_info_get() says the port offers, and the cut is printed once per port. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <rte_ethdev.h>

int __real_rte_eth_dev_configure(uint16_t port_id, uint16_t nb_rx_q, uint16_t nb_tx_q,
		const struct rte_eth_conf *conf);
int __real_rte_eth_rx_queue_setup(uint16_t port_id, uint16_t queue_id, uint16_t nb_desc,
		unsigned int socket_id, const struct rte_eth_rxconf *rx_conf,
		struct rte_mempool *mb_pool);
int __real_rte_eth_tx_queue_setup(uint16_t port_id, uint16_t queue_id, uint16_t nb_desc,
		unsigned int socket_id, const struct rte_eth_txconf *tx_conf);

int __wrap_rte_eth_dev_configure(uint16_t port_id, uint16_t nb_rx_q, uint16_t nb_tx_q,
		const struct rte_eth_conf *conf);
int __wrap_rte_eth_rx_queue_setup(uint16_t port_id, uint16_t queue_id, uint16_t nb_desc,
		unsigned int socket_id, const struct rte_eth_rxconf *rx_conf,
		struct rte_mempool *mb_pool);
int __wrap_rte_eth_tx_queue_setup(uint16_t port_id, uint16_t queue_id, uint16_t nb_desc,
		unsigned int socket_id, const struct rte_eth_txconf *tx_conf);

int
__wrap_rte_eth_dev_configure(uint16_t port_id, uint16_t nb_rx_q, uint16_t nb_tx_q,
		const struct rte_eth_conf *conf)
{
	struct rte_eth_dev_info info;
	struct rte_eth_conf c;

	if (conf == NULL || rte_eth_dev_info_get(port_id, &info) != 0)
		return __real_rte_eth_dev_configure(port_id, nb_rx_q, nb_tx_q, conf);
	c = *conf;
	c.rxmode.offloads &= info.rx_offload_capa;
	c.txmode.offloads &= info.tx_offload_capa;
	if (c.rxmode.offloads != conf->rxmode.offloads || c.txmode.offloads != conf->txmode.offloads)
		printf("nfvperf-l3fwd: port %u: offloads the port lacks dropped: rx 0x%" PRIx64
		       " tx 0x%" PRIx64 "\n", port_id, conf->rxmode.offloads & ~c.rxmode.offloads,
		       conf->txmode.offloads & ~c.txmode.offloads);
	return __real_rte_eth_dev_configure(port_id, nb_rx_q, nb_tx_q, &c);
}

int
__wrap_rte_eth_rx_queue_setup(uint16_t port_id, uint16_t queue_id, uint16_t nb_desc,
		unsigned int socket_id, const struct rte_eth_rxconf *rx_conf,
		struct rte_mempool *mb_pool)
{
	struct rte_eth_dev_info info;
	struct rte_eth_conf dev;
	struct rte_eth_rxconf c;

	if (rx_conf == NULL || rte_eth_dev_info_get(port_id, &info) != 0 ||
	    rte_eth_dev_conf_get(port_id, &dev) != 0)
		return __real_rte_eth_rx_queue_setup(port_id, queue_id, nb_desc, socket_id, rx_conf,
						     mb_pool);
	c = *rx_conf;
	c.offloads &= dev.rxmode.offloads | info.rx_queue_offload_capa;
	return __real_rte_eth_rx_queue_setup(port_id, queue_id, nb_desc, socket_id, &c, mb_pool);
}

int
__wrap_rte_eth_tx_queue_setup(uint16_t port_id, uint16_t queue_id, uint16_t nb_desc,
		unsigned int socket_id, const struct rte_eth_txconf *tx_conf)
{
	struct rte_eth_dev_info info;
	struct rte_eth_conf dev;
	struct rte_eth_txconf c;

	if (tx_conf == NULL || rte_eth_dev_info_get(port_id, &info) != 0 ||
	    rte_eth_dev_conf_get(port_id, &dev) != 0)
		return __real_rte_eth_tx_queue_setup(port_id, queue_id, nb_desc, socket_id, tx_conf);
	c = *tx_conf;
	c.offloads &= dev.txmode.offloads | info.tx_queue_offload_capa;
	return __real_rte_eth_tx_queue_setup(port_id, queue_id, nb_desc, socket_id, &c);
}
