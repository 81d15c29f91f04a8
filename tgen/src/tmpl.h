/* Frame templates, flow variation, checksums and the test signature (no DPDK dependency). */
#ifndef TGEN_TMPL_H
#define TGEN_TMPL_H
#include <stdint.h>
#include <stddef.h>

#define SIG_MAGIC 0x4E465047u   /* "NFPG": full signature, 18 bytes */
#define SIG_LEN 18
#define SIG_MAGIC_C 0x6E66u     /* "nf": compact signature, 14 bytes, when the payload has < 18 */
#define SIG_LEN_C 14
#define VXLAN_PORT 4789
#define VXLAN_OVERHEAD 50
#define MAX_FRAME_B 9216        /* incl. FCS */

enum { VARY_SRC_IP = 1, VARY_DST_IP = 2, VARY_SRC_PORT = 4, VARY_DST_PORT = 8 };

typedef struct {
    uint8_t src_mac[6], dst_mac[6];
    int vlan;                  /* -1: untagged */
    int ipv6;
    uint8_t src_ip[16], dst_ip[16];   /* IPv4 in the first 4 bytes, network order */
    uint16_t src_port, dst_port;
    int vxlan;
    uint32_t vni;
    uint8_t osrc_mac[6], odst_mac[6];
    uint8_t osrc_ip[4], odst_ip[4];
    uint32_t flows;
    uint32_t vary;
    uint16_t stream_id;
} tmpl_cfg_t;

typedef struct {
    uint16_t size_b;           /* L2 size incl. FCS (inner size for VXLAN) */
    uint16_t len;              /* bytes in the buffer: size_b - 4 (+50 VXLAN) */
    uint8_t data[MAX_FRAME_B + VXLAN_OVERHEAD];
    uint16_t ip_off, udp_off, sig_off, oudp_off;
    uint16_t compact;          /* compact 14-byte signature (40-bit seq and timestamp) */
    uint16_t sip_off, dip_off;  /* offsets of the varying 4 address bytes */
    uint32_t ip_sum_base;      /* IPv4 header sum without checksum and addresses */
    uint32_t udp_sum_base;     /* pseudo header + UDP + payload without varying fields/signature */
} tmpl_t;

/* smallest legal size_b for this header stack (incl. FCS, inner for VXLAN) */
unsigned tmpl_min_size(const tmpl_cfg_t *c);
/* on-wire size incl. FCS */
static inline unsigned tmpl_wire_size(const tmpl_cfg_t *c, unsigned size_b)
{ return size_b + (c->vxlan ? VXLAN_OVERHEAD : 0); }

int tmpl_build(const tmpl_cfg_t *c, unsigned size_b, tmpl_t *t, char *err, size_t errlen);
/* Write frame (t->len bytes) for flow/seq/tx timestamp into buf. */
void tmpl_fill(const tmpl_t *t, const tmpl_cfg_t *c, uint8_t *buf, uint32_t flow, uint64_t seq, uint64_t tx_ns);

typedef struct {
    uint16_t stream_id;
    uint8_t ts_bits;           /* 48 (full) or 40 (compact) */
    uint64_t seq;
    uint64_t tx_ns48;          /* tx timestamp mod 2^ts_bits */
} tgsig_t;
/* 1 if buf holds a test frame (signature found), 0 otherwise. */
int sig_parse(const uint8_t *buf, uint32_t len, tgsig_t *out);

/* one's complement helpers */
uint32_t csum_add_bytes(uint32_t sum, const uint8_t *p, size_t n);   /* n even or odd */
static inline uint16_t csum_fold(uint32_t s)
{
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return (uint16_t)s;
}
int parse_mac(const char *s, uint8_t mac[6]);
#endif
