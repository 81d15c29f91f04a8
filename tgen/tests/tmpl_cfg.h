/* The tests' base stream configuration: IPv4 198.18.0.1 -> 198.19.0.1, UDP 1024 -> 1024, untagged,
 * one flow varying both addresses, stream id 7 (test_tmpl, test_offload) */
#ifndef TGEN_TMPL_CFG_H
#define TGEN_TMPL_CFG_H
#include <string.h>
#include <arpa/inet.h>
#include "tmpl.h"

static inline tmpl_cfg_t base(void)
{
    tmpl_cfg_t c;
    memset(&c, 0, sizeof(c));
    uint8_t sm[6] = { 2, 0, 0, 0, 0, 1 }, dm[6] = { 2, 0, 0, 0, 0, 2 };
    memcpy(c.src_mac, sm, 6);
    memcpy(c.dst_mac, dm, 6);
    c.vlan = -1;
    inet_pton(AF_INET, "198.18.0.1", c.src_ip);
    inet_pton(AF_INET, "198.19.0.1", c.dst_ip);
    c.src_port = 1024;
    c.dst_port = 1024;
    c.flows = 1;
    c.vary = VARY_SRC_IP | VARY_DST_IP;
    c.stream_id = 7;
    return c;
}
#endif
