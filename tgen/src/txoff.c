#include "txoff.h"
#include <stdio.h>
#include <string.h>

void txoff_decide(const txoff_in_t *in, txoff_out_t *out)
{
    memset(out, 0, sizeof(*out));
    out->cksum_hw = in->ipv4_cksum && in->udp_cksum && in->cksum_allowed;
    out->fast_free = in->fast_free && in->one_pool;
    size_t n = 0;
    if (!out->cksum_hw) {
        const char *why = !in->cksum_allowed ? "cksum_offload=0 was given"
                        : in->ipv4_cksum ? "the port offers no UDP_CKSUM TX offload"
                        : in->udp_cksum ? "the port offers no IPV4_CKSUM TX offload"
                        : "the port offers no IPV4_CKSUM/UDP_CKSUM TX offload";
        n += (size_t)snprintf(out->note + n, sizeof(out->note) - n,
                              "IPv4/UDP checksums written in software (%s)", why);
    }
    if (!out->fast_free && n < sizeof(out->note)) {
        const char *why = !in->fast_free ? "the port does not offer it"
                        : "its TX queues send mbufs of more than one pool (tx_reuse, or no TX pool)";
        snprintf(out->note + n, sizeof(out->note) - n, "%sno MBUF_FAST_FREE (%s)", n ? "; " : "", why);
    }
}
