#include "tmpl.h"
#include <string.h>
#include <stdio.h>

static inline void put16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = v & 0xff; }
static inline void put32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }

uint32_t csum_add_bytes(uint32_t sum, const uint8_t *p, size_t n)
{
    uint64_t s = sum;
    size_t i = 0;
    for (; i + 1 < n; i += 2) s += (uint32_t)(p[i] << 8 | p[i + 1]);
    if (i < n) s += (uint32_t)(p[i] << 8);
    while (s >> 32) s = (s & 0xffffffff) + (s >> 32);
    /* keep it below 2^31 so callers can keep adding */
    while (s >> 20) s = (s & 0xffff) + (s >> 16);
    return (uint32_t)s;
}

int parse_mac(const char *s, uint8_t mac[6])
{
    unsigned v[6];
    char tail;
    if (sscanf(s, "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6) return -1;
    for (int i = 0; i < 6; i++) { if (v[i] > 255) return -1; mac[i] = (uint8_t)v[i]; }
    return 0;
}

unsigned tmpl_min_size(const tmpl_cfg_t *c)
{
    unsigned h = 14 + (c->vlan >= 0 ? 4 : 0) + (c->ipv6 ? 40 : 20) + 8 + SIG_LEN_C + 4;
    return h < 64 ? 64 : h;
}

/* write an L2/L3/L4 header stack at p for a frame of flen bytes (no FCS); returns header length */
static unsigned write_hdrs(uint8_t *p, const tmpl_cfg_t *c, unsigned flen, uint16_t *ip_off, uint16_t *udp_off)
{
    unsigned o = 0;
    memcpy(p, c->dst_mac, 6);
    memcpy(p + 6, c->src_mac, 6);
    o = 12;
    if (c->vlan >= 0) { put16(p + o, 0x8100); put16(p + o + 2, (uint16_t)c->vlan); o += 4; }
    put16(p + o, c->ipv6 ? 0x86DD : 0x0800);
    o += 2;
    *ip_off = (uint16_t)o;
    unsigned l4len = flen - o - (c->ipv6 ? 40 : 20);
    if (!c->ipv6) {
        p[o] = 0x45; p[o + 1] = 0;
        put16(p + o + 2, (uint16_t)(flen - o));
        put16(p + o + 4, 0);          /* id */
        put16(p + o + 6, 0x4000);     /* DF */
        p[o + 8] = 64; p[o + 9] = 17;
        put16(p + o + 10, 0);
        memcpy(p + o + 12, c->src_ip, 4);
        memcpy(p + o + 16, c->dst_ip, 4);
        o += 20;
    } else {
        put32(p + o, 0x60000000);
        put16(p + o + 4, (uint16_t)l4len);
        p[o + 6] = 17; p[o + 7] = 64;
        memcpy(p + o + 8, c->src_ip, 16);
        memcpy(p + o + 24, c->dst_ip, 16);
        o += 40;
    }
    *udp_off = (uint16_t)o;
    put16(p + o, c->src_port);
    put16(p + o + 2, c->dst_port);
    put16(p + o + 4, (uint16_t)l4len);
    put16(p + o + 6, 0);
    return o + 8;
}

int tmpl_build(const tmpl_cfg_t *c, unsigned size_b, tmpl_t *t, char *err, size_t errlen)
{
    unsigned min = tmpl_min_size(c);
    if (size_b < min || size_b > MAX_FRAME_B) {
        snprintf(err, errlen, "size_b: %u is outside %u..%u for this header stack", size_b, min, MAX_FRAME_B);
        return -1;
    }
    memset(t, 0, tmpl_alloc_size(c, size_b));
    t->size_b = (uint16_t)size_b;
    unsigned inner_len = size_b - 4;
    uint8_t *in = t->data;
    if (c->vxlan) {
        uint8_t *p = t->data;
        memcpy(p, c->odst_mac, 6); memcpy(p + 6, c->osrc_mac, 6);
        put16(p + 12, 0x0800);
        uint8_t *ip = p + 14;
        unsigned olen = inner_len + VXLAN_OVERHEAD;
        ip[0] = 0x45; ip[1] = 0; put16(ip + 2, (uint16_t)(olen - 14)); put16(ip + 4, 0);
        put16(ip + 6, 0x4000); ip[8] = 64; ip[9] = 17; put16(ip + 10, 0);
        memcpy(ip + 12, c->osrc_ip, 4); memcpy(ip + 16, c->odst_ip, 4);
        put16(ip + 10, (uint16_t)~csum_fold(csum_add_bytes(0, ip, 20)));
        uint8_t *u = ip + 20;
        t->oudp_off = 34;
        put16(u, 49152); put16(u + 2, VXLAN_PORT); put16(u + 4, (uint16_t)(olen - 34)); put16(u + 6, 0);
        uint8_t *vx = u + 8;
        vx[0] = 0x08; vx[1] = vx[2] = vx[3] = 0;
        vx[4] = (c->vni >> 16) & 0xff; vx[5] = (c->vni >> 8) & 0xff; vx[6] = c->vni & 0xff; vx[7] = 0;
        in = t->data + VXLAN_OVERHEAD;
        t->len = (uint16_t)olen;
    } else {
        t->len = (uint16_t)inner_len;
    }
    uint16_t ip_off, udp_off;
    unsigned hl = write_hdrs(in, c, inner_len, &ip_off, &udp_off);
    unsigned base = (unsigned)(in - t->data);
    t->ip_off = (uint16_t)(base + ip_off);
    t->udp_off = (uint16_t)(base + udp_off);
    t->sig_off = (uint16_t)(base + hl);
    t->sip_off = (uint16_t)(t->ip_off + (c->ipv6 ? 8 + 12 : 12));
    t->dip_off = (uint16_t)(t->ip_off + (c->ipv6 ? 24 + 12 : 16));
    uint8_t *ip = t->data + t->ip_off;
    if (!c->ipv6) {
        /* header without checksum (0) and addresses */
        t->ip_sum_base = csum_add_bytes(0, ip, 12);
        t->ip_sum_base = csum_add_bytes(t->ip_sum_base, ip + 20, 0);
    }
    /* UDP: pseudo header (addresses except varying 4 bytes), proto, length; UDP length;
     * payload except signature (payload is zero, so nothing). */
    uint32_t s = 0;
    unsigned l4len = inner_len - (udp_off);
    if (!c->ipv6) {
        s = 17 + l4len;
    } else {
        s = csum_add_bytes(0, ip + 8, 12);        /* src high 96 bits */
        s = csum_add_bytes(s, ip + 24, 12);       /* dst high 96 bits */
        s += 17 + l4len;
    }
    t->phdr_sum_base = s;
    s += l4len;                                   /* UDP length field */
    t->compact = (uint16_t)(l4len - 8 < SIG_LEN);
    /* magic and stream id are the same in every frame: put them in the template and the base sum */
    if (t->compact) {
        s += SIG_MAGIC_C + c->stream_id;
        put16(t->data + t->sig_off, SIG_MAGIC_C);
        put16(t->data + t->sig_off + 2, c->stream_id);
        t->udp_sum_base = csum_add_bytes(s, t->data + t->sig_off + SIG_LEN_C, t->len - t->sig_off - SIG_LEN_C);
    } else {
        s += (SIG_MAGIC >> 16) + (SIG_MAGIC & 0xffff) + c->stream_id;
        put32(t->data + t->sig_off, SIG_MAGIC);
        put16(t->data + t->sig_off + 4, c->stream_id);
        t->udp_sum_base = csum_add_bytes(s, t->data + t->sig_off + SIG_LEN, t->len - t->sig_off - SIG_LEN);
    }
    unsigned z = t->len;
    while (z > 0 && t->data[z - 1] == 0) z--;
    unsigned sig_end = t->sig_off + (t->compact ? SIG_LEN_C : SIG_LEN);
    t->zero_from = (uint16_t)(z > sig_end ? z : sig_end);
    return 0;
}

int sig_parse(const uint8_t *buf, uint32_t len, tgsig_t *out) { return sig_parse_inline(buf, len, out); }
