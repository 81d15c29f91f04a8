/* Frame templates, flow variation, checksums and the test signature (no DPDK dependency). */
#ifndef TGEN_TMPL_H
#define TGEN_TMPL_H
#include <stdint.h>
#include <stddef.h>
#include <string.h>

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
    uint16_t ip_off, udp_off, sig_off, oudp_off;
    uint16_t compact;          /* compact 14-byte signature (40-bit seq and timestamp) */
    uint16_t sip_off, dip_off;  /* offsets of the varying 4 address bytes */
    uint16_t zero_from;        /* data[zero_from..] is zero, and no per-frame field lies there */
    uint32_t ip_sum_base;      /* IPv4 header sum without checksum and addresses */
    uint32_t udp_sum_base;     /* pseudo header + UDP + payload without varying fields/signature */
    uint32_t phdr_sum_base;    /* the pseudo header alone without the varying address bytes (the sum
                                * a NIC's UDP checksum offload wants in the checksum field) */
    uint8_t data[] __attribute__((aligned(32)));   /* len + 32 bytes (tmpl_fill copies 32-byte blocks) */
} tmpl_t;

/* smallest legal size_b for this header stack (incl. FCS, inner for VXLAN) */
unsigned tmpl_min_size(const tmpl_cfg_t *c);
/* on-wire size incl. FCS */
static inline unsigned tmpl_wire_size(const tmpl_cfg_t *c, unsigned size_b)
{ return size_b + (c->vxlan ? VXLAN_OVERHEAD : 0); }

/* bytes to allocate for the template of a frame of size_b */
static inline size_t tmpl_alloc_size(const tmpl_cfg_t *c, unsigned size_b)
{ return sizeof(tmpl_t) + (size_b + (c->vxlan ? VXLAN_OVERHEAD : 0)) + 64; }
/* t must point to at least tmpl_alloc_size(c, size_b) bytes */
int tmpl_build(const tmpl_cfg_t *c, unsigned size_b, tmpl_t *t, char *err, size_t errlen);

typedef struct {
    uint16_t stream_id;
    uint8_t ts_bits;           /* 48 (full) or 40 (compact) */
    uint64_t seq;
    uint64_t tx_ns48;          /* tx timestamp mod 2^ts_bits */
} tgsig_t;
/* 1 if buf holds a test frame (signature found), 0 otherwise.  sig_parse_inline (below) is the
 * same, inlined into the RX loop; sig_parse_general is it without the usual frame's fast test. */
int sig_parse(const uint8_t *buf, uint32_t len, tgsig_t *out);

/* one's complement helpers */
uint32_t csum_add_bytes(uint32_t sum, const uint8_t *p, size_t n);   /* n even or odd */
static inline uint16_t csum_fold(uint32_t s)
{
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return (uint16_t)s;
}
int parse_mac(const char *s, uint8_t mac[6]);

static inline void tm_st16(uint8_t *p, uint16_t v) { v = __builtin_bswap16(v); memcpy(p, &v, 2); }
static inline void tm_st32(uint8_t *p, uint32_t v) { v = __builtin_bswap32(v); memcpy(p, &v, 4); }
static inline uint32_t tm_ld32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return __builtin_bswap32(v); }
static inline uint16_t tm_ld16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return __builtin_bswap16(v); }

/* sig_parse's parts: the UDP header's offset after Ethernet (up to two VLAN tags) and IPv4/IPv6 */
static inline int sig_parse_l2l4(const uint8_t *buf, uint32_t len, uint32_t *udp)
{
    uint32_t o = 12;
    if (len < 14) return 0;
    uint16_t et = tm_ld16(buf + o);
    for (int tags = 0; tags < 2 && (et == 0x8100 || et == 0x88A8); tags++) {
        if (len < o + 8) return 0;
        o += 4;
        et = tm_ld16(buf + o);
    }
    o += 2;
    if (et == 0x0800) {
        if (len < o + 20) return 0;
        const uint8_t *ip = buf + o;
        if ((ip[0] >> 4) != 4 || ip[9] != 17) return 0;
        if (tm_ld16(ip + 6) & 0x3fff) return 0;     /* fragment */
        o += (uint32_t)(ip[0] & 0xf) * 4;
    } else if (et == 0x86DD) {
        if (len < o + 40) return 0;
        if (buf[o + 6] != 17) return 0;
        o += 40;
    } else {
        return 0;
    }
    if (len < o + 8) return 0;
    *udp = o;
    return 1;
}

static inline int sig_parse_general(const uint8_t *buf, uint32_t len, tgsig_t *out)
{
    uint32_t u;
    if (!sig_parse_l2l4(buf, len, &u)) return 0;
    if (tm_ld16(buf + u + 2) == VXLAN_PORT) {
        uint32_t in = u + 16;
        if (len < in + 14) return 0;
        uint32_t u2;
        if (!sig_parse_l2l4(buf + in, len - in, &u2)) return 0;
        u = in + u2;
    }
    const uint8_t *sg = buf + u + 8;
    if (len >= u + 8 + SIG_LEN && tm_ld32(sg) == SIG_MAGIC) {
        out->stream_id = tm_ld16(sg + 4);
        out->seq = (uint64_t)tm_ld16(sg + 6) << 32 | tm_ld32(sg + 8);
        out->tx_ns48 = (uint64_t)tm_ld16(sg + 12) << 32 | tm_ld32(sg + 14);
        out->ts_bits = 48;
        return 1;
    }
    if (len >= u + 8 + SIG_LEN_C && tm_ld16(sg) == SIG_MAGIC_C) {
        out->stream_id = tm_ld16(sg + 2);
        out->seq = (uint64_t)sg[4] << 32 | tm_ld32(sg + 5);
        out->tx_ns48 = (uint64_t)sg[9] << 32 | tm_ld32(sg + 10);
        out->ts_bits = 40;
        return 1;
    }
    return 0;
}

/* The usual frame first, tested at fixed offsets: untagged IPv4 without options (0x45), UDP, not a
 * fragment, to a port other than VXLAN's, full signature at byte 42.  Such a frame gets exactly
 * what sig_parse_general gives it (the same tests in the same order, with the offsets known);
 * anything else goes through sig_parse_general. */
static inline int sig_parse_inline(const uint8_t *buf, uint32_t len, tgsig_t *out)
{
    if (len >= 42 + SIG_LEN && tm_ld16(buf + 12) == 0x0800 && buf[14] == 0x45 && buf[23] == 17 &&
        !(tm_ld16(buf + 20) & 0x3fff) && tm_ld16(buf + 36) != VXLAN_PORT && tm_ld32(buf + 42) == SIG_MAGIC) {
        const uint8_t *sg = buf + 42;
        out->stream_id = tm_ld16(sg + 4);
        out->seq = (uint64_t)tm_ld16(sg + 6) << 32 | tm_ld32(sg + 8);
        out->tx_ns48 = (uint64_t)tm_ld16(sg + 12) << 32 | tm_ld32(sg + 14);
        out->ts_bits = 48;
        return 1;
    }
    return sig_parse_general(buf, len, out);
}

/* One's complement sum of a 32-bit sum folded to 16 bits: two folds are enough for any 32-bit value
 * (the first leaves at most 0x1fffe, the second at most 0xffff) */
static inline uint16_t csum_fold2(uint32_t s)
{
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    return (uint16_t)s;
}

/* A template and its stream's settings as the per-frame writer uses them, read out once (per TX
 * burst): every field a frame needs, in one small struct the compiler keeps in registers or on the
 * stack.  (Read through t and c, each of the frame's byte stores could have changed them, as far
 * as the compiler knows, so it read them again after every store.) */
typedef struct {
    const uint8_t *data;
    uint16_t len, zero_from, head, full;   /* head/full: zero_from and len rounded up to 32 */
    uint16_t ip_off, udp_off, sig_off, oudp_off, sip_off, dip_off;
    uint8_t vary, vxlan, ipv4, compact;
    uint8_t csum_hw;                       /* the port computes the checksums (tmpl_fast_offload) */
    uint32_t sip, dip, sp, dp;             /* the template's addresses and the stream's ports */
    uint32_t ip_sum_base, udp_sum_base, phdr_sum_base;
} tmpl_fast_t;

static inline void tmpl_fast_init(tmpl_fast_t *f, const tmpl_t *t, const tmpl_cfg_t *c)
{
    f->data = t->data;
    f->len = t->len;
    f->zero_from = t->zero_from;
    f->head = (uint16_t)((t->zero_from + 31u) & ~31u);
    f->full = (uint16_t)((t->len + 31u) & ~31u);
    f->ip_off = t->ip_off; f->udp_off = t->udp_off; f->sig_off = t->sig_off; f->oudp_off = t->oudp_off;
    f->sip_off = t->sip_off; f->dip_off = t->dip_off;
    f->vary = (uint8_t)c->vary;
    f->vxlan = c->vxlan != 0;
    f->ipv4 = !c->ipv6;
    f->compact = t->compact != 0;
    f->sip = tm_ld32(t->data + t->sip_off);
    f->dip = tm_ld32(t->data + t->dip_off);
    f->sp = c->src_port;
    f->dp = c->dst_port;
    f->ip_sum_base = t->ip_sum_base;
    f->udp_sum_base = t->udp_sum_base;
    f->phdr_sum_base = t->phdr_sum_base;
    f->csum_hw = 0;
}

/* TX checksum offload (a port offering IPV4_CKSUM and UDP_CKSUM, txoff.h): the frames' IPv4
 * header checksum is left 0 and the UDP checksum field holds the pseudo-header sum (not
 * complemented, as DPDK's rte_ipv4/ipv6_phdr_cksum give it), which the NIC completes over the UDP
 * header and payload.  Not for VXLAN: its inner checksums would need the tunnel offloads, so those
 * frames keep software checksums.  Returns whether f now has the offload. */
static inline int tmpl_fast_offload(tmpl_fast_t *f)
{
    f->csum_hw = !f->vxlan;
    return f->csum_hw;
}

/* Write every byte of the frame that depends on flow/seq/tx timestamp into buf, which already holds
 * a copy of this template's frame (possibly with another flow/seq/timestamp written over it): the
 * varied addresses and ports (written for every flow, flow 0 included, so a previous frame's values
 * never stay), the outer UDP source port, the IPv4 and UDP checksums and the signature's sequence
 * and timestamp.  The rest of the frame is never written per frame. */
static inline __attribute__((always_inline)) void
tmpl_fast_fields_k(const tmpl_fast_t *f, uint8_t *buf, uint32_t flow, uint64_t seq, uint64_t tx_ns, int csum_hw)
{
    uint32_t sip = f->sip, dip = f->dip;
    uint32_t sp = f->sp, dp = f->dp;
    uint32_t v = f->vary;
    if (v & VARY_SRC_IP) { sip += flow; tm_st32(buf + f->sip_off, sip); }
    if (v & VARY_DST_IP) { dip += flow; tm_st32(buf + f->dip_off, dip); }
    if (v & VARY_SRC_PORT) {
        if (flow) sp = (sp - 1 + flow) % 65535 + 1;
        tm_st16(buf + f->udp_off, (uint16_t)sp);
    }
    if (v & VARY_DST_PORT) {
        if (flow) {
            dp = (dp - 1 + flow) % 65535 + 1;
            if (dp == VXLAN_PORT) dp = VXLAN_PORT + 1;   /* never look like VXLAN */
        }
        tm_st16(buf + f->udp_off + 2, (uint16_t)dp);
    }
    if (f->vxlan) tm_st16(buf + f->oudp_off, (uint16_t)(49152 + flow % 16384));
    uint8_t *sg = buf + f->sig_off;
    uint32_t a = (sip >> 16) + (sip & 0xffff) + (dip >> 16) + (dip & 0xffff);
    if (csum_hw) {
        /* the port computes both checksums: IPv4's field 0, UDP's the pseudo-header sum */
        if (f->ipv4) tm_st16(buf + f->ip_off + 10, 0);
        tm_st16(buf + f->udp_off + 6, csum_fold2(f->phdr_sum_base + a));
        if (f->compact) {
            sg[4] = (uint8_t)(seq >> 32); tm_st32(sg + 5, (uint32_t)seq);
            sg[9] = (uint8_t)(tx_ns >> 32); tm_st32(sg + 10, (uint32_t)tx_ns);
        } else {
            tm_st16(sg + 6, (uint16_t)(seq >> 32)); tm_st32(sg + 8, (uint32_t)seq);
            tm_st16(sg + 12, (uint16_t)(tx_ns >> 32)); tm_st32(sg + 14, (uint32_t)tx_ns);
        }
        return;
    }
    if (f->ipv4) tm_st16(buf + f->ip_off + 10, (uint16_t)~csum_fold2(f->ip_sum_base + a));
    uint32_t s;
    if (f->compact) {
        /* seq 40 bit at 4..8, timestamp 40 bit at 9..13; their checksum words: bytes 4-5, 6-7, 8-9,
         * 10-11, 12-13 = seq[39:24], seq[23:8], seq[7:0]|ts[39:32], ts[31:16], ts[15:0] */
        sg[4] = (uint8_t)(seq >> 32); tm_st32(sg + 5, (uint32_t)seq);
        sg[9] = (uint8_t)(tx_ns >> 32); tm_st32(sg + 10, (uint32_t)tx_ns);
        s = f->udp_sum_base + a + sp + dp + (uint32_t)((seq >> 24) & 0xffff) + (uint32_t)((seq >> 8) & 0xffff) +
            (uint32_t)((seq & 0xff) << 8 | ((tx_ns >> 32) & 0xff)) + (uint32_t)((tx_ns >> 16) & 0xffff) +
            (uint32_t)(tx_ns & 0xffff);
    } else {
        uint16_t s0 = (uint16_t)(seq >> 32), s1 = (uint16_t)(seq >> 16), s2 = (uint16_t)seq;
        uint16_t t0 = (uint16_t)(tx_ns >> 32), t1 = (uint16_t)(tx_ns >> 16), t2 = (uint16_t)tx_ns;
        tm_st16(sg + 6, s0); tm_st16(sg + 8, s1); tm_st16(sg + 10, s2);
        tm_st16(sg + 12, t0); tm_st16(sg + 14, t1); tm_st16(sg + 16, t2);
        s = f->udp_sum_base + a + sp + dp + s0 + s1 + s2 + t0 + t1 + t2;
    }
    uint16_t ck = (uint16_t)~csum_fold2(s);
    tm_st16(buf + f->udp_off + 6, ck ? ck : 0xffff);
}
/* (tmpl_fast_fields_k with csum_hw = f->csum_hw; the TX loop passes a constant, so a burst's
 * frames carry no per-frame test of it) */
static inline void tmpl_fast_fields(const tmpl_fast_t *f, uint8_t *buf, uint32_t flow, uint64_t seq, uint64_t tx_ns)
{
    tmpl_fast_fields_k(f, buf, flow, seq, tx_ns, f->csum_hw);
}

/* The same, from the template and configuration directly */
static inline void tmpl_fill_fields(const tmpl_t *t, const tmpl_cfg_t *c, uint8_t *buf, uint32_t flow,
                                    uint64_t seq, uint64_t tx_ns)
{
    tmpl_fast_t f;
    tmpl_fast_init(&f, t, c);
    tmpl_fast_fields(&f, buf, flow, seq, tx_ns);
}

/* Copy the template into buf whole */
static inline void tmpl_copy(const tmpl_t *t, uint8_t *buf)
{
    for (unsigned o = 0; o < t->len; o += 32) memcpy(buf + o, t->data + o, 32);
}

/* A frame buffer that is reused (a TX mbuf) carries a tag saying which of its bytes are known to be
 * zero: [tag >> 32, tag & 0xffffffff).  Tag 0: nothing known.  Since every template's frame is zero
 * from its zero_from on (the payload), a buffer that is zero from the template's header end to its
 * length needs only the header part copied, whichever template (stream, size, encapsulation) it
 * held before.  Writes the frame for flow/seq/tx timestamp into buf (room as for tmpl_fill) and
 * returns buf's new tag. */
static inline __attribute__((always_inline)) uint64_t
tmpl_fast_write_k(const tmpl_fast_t *f, uint8_t *buf, uint64_t tag, uint32_t flow, uint64_t seq, uint64_t tx_ns,
                  int csum_hw)
{
    unsigned zf = (unsigned)(tag >> 32), zt = (unsigned)tag;
    unsigned head = f->head;                            /* what the 32-byte blocks copy */
    if (zf <= head && zt >= f->len) {
        for (unsigned o = 0; o < head; o += 32) memcpy(buf + o, f->data + o, 32);
        if (zt < head) zt = head;
    } else {
        for (unsigned o = 0; o < f->full; o += 32) memcpy(buf + o, f->data + o, 32);
        zt = f->full;
    }
    tmpl_fast_fields_k(f, buf, flow, seq, tx_ns, csum_hw);
    return (uint64_t)f->zero_from << 32 | zt;
}
static inline uint64_t tmpl_fast_write(const tmpl_fast_t *f, uint8_t *buf, uint64_t tag, uint32_t flow,
                                       uint64_t seq, uint64_t tx_ns)
{
    return tmpl_fast_write_k(f, buf, tag, flow, seq, tx_ns, f->csum_hw);
}

static inline uint64_t tmpl_write(const tmpl_t *t, const tmpl_cfg_t *c, uint8_t *buf, uint64_t tag, uint32_t flow,
                                  uint64_t seq, uint64_t tx_ns)
{
    tmpl_fast_t f;
    tmpl_fast_init(&f, t, c);
    return tmpl_fast_write(&f, buf, tag, flow, seq, tx_ns);
}

/* Write the frame (t->len bytes) for flow/seq/tx timestamp into buf.  buf must have room for
 * t->len rounded up to a multiple of 32 (the copy runs in 32-byte blocks). */
static inline void tmpl_fill(const tmpl_t *t, const tmpl_cfg_t *c, uint8_t *buf, uint32_t flow, uint64_t seq,
                             uint64_t tx_ns)
{
    tmpl_copy(t, buf);
    tmpl_fill_fields(t, c, buf, flow, seq, tx_ns);
}
#endif
