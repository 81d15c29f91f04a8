/* Which TX offloads a port gets (no DPDK: ports.c maps dev_info's tx_offload_capa to the inputs
 * and the result to the queue configuration; the C tests call it directly). */
#ifndef TGEN_TXOFF_H
#define TGEN_TXOFF_H
#include <stddef.h>

typedef struct {
    int ipv4_cksum, udp_cksum, fast_free;   /* the port offers RTE_ETH_TX_OFFLOAD_... */
    int cksum_allowed;      /* --port cksum_offload (default 1) */
    int one_pool;           /* every mbuf tgen sends on the port can come from one pool with refcnt 1
                             * (its socket's TX pool exists and the port does not build frames in
                             * mbufs RX brought back: tx_reuse=0) */
} txoff_in_t;

typedef struct {
    int cksum_hw;           /* IPV4_CKSUM + UDP_CKSUM enabled: the port computes the checksums of
                             * plain IPv4/IPv6 UDP frames (VXLAN frames keep software checksums) */
    int fast_free;          /* MBUF_FAST_FREE enabled: every mbuf on the port's queues is from its
                             * socket's TX pool (worker.c, trial.c learning frames) */
    char note[256];         /* what is done in software and why ("" when everything is offloaded) */
} txoff_out_t;

void txoff_decide(const txoff_in_t *in, txoff_out_t *out);
#endif
