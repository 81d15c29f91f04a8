/* Template builder: layouts, sizes (FCS excluded from the buffer), checksums checked by an
 * independent straightforward computation, VLAN, IPv6, VXLAN, flow variation, signature. */
#include <string.h>
#include <arpa/inet.h>
#include "harness.h"
#include "tmpl.h"
#include "tmpl_cfg.h"

static uint16_t g16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

/* independent RFC 1071 checksum over a byte buffer */
static uint16_t rfc1071(const uint8_t *p, size_t n)
{
    unsigned long sum = 0;
    for (size_t i = 0; i < n; i += 2) {
        unsigned hi = p[i], lo = i + 1 < n ? p[i + 1] : 0;
        sum += (hi << 8) | lo;
    }
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

/* verify the IP/UDP checksums of the (inner) packet starting at l3 with ethertype et */
static void verify_l3(const uint8_t *l3, uint16_t et, size_t avail, const char *what)
{
    uint8_t pseudo[40 + 8 + 9300];
    size_t plen;
    const uint8_t *udp;
    size_t ulen;
    if (et == 0x0800) {
        CHECK(rfc1071(l3, 20) == 0, "%s: IPv4 header checksum", what);
        CHECK(g16(l3 + 2) == avail, "%s: IPv4 total length %u vs %zu", what, g16(l3 + 2), avail);
        udp = l3 + 20;
        ulen = g16(udp + 4);
        CHECK(ulen == avail - 20, "%s: UDP length", what);
        memcpy(pseudo, l3 + 12, 8);
        pseudo[8] = 0; pseudo[9] = 17; pseudo[10] = (uint8_t)(ulen >> 8); pseudo[11] = (uint8_t)ulen;
        plen = 12;
    } else {
        udp = l3 + 40;
        ulen = g16(udp + 4);
        CHECK(g16(l3 + 4) == ulen && ulen == avail - 40, "%s: IPv6 payload length", what);
        memcpy(pseudo, l3 + 8, 32);
        memset(pseudo + 32, 0, 8);
        pseudo[34] = (uint8_t)(ulen >> 8); pseudo[35] = (uint8_t)ulen; pseudo[39] = 17;
        plen = 40;
    }
    memcpy(pseudo + plen, udp, ulen);
    CHECK(g16(udp + 6) != 0, "%s: UDP checksum present", what);
    CHECK(rfc1071(pseudo, plen + ulen) == 0, "%s: UDP checksum verifies", what);
}

static union { tmpl_t t; uint8_t raw[sizeof(tmpl_t) + MAX_FRAME_B + 200]; } TU;
#define T (TU.t)
static uint8_t buf[MAX_FRAME_B + 100];
static tmpl_cfg_t cur_cfg;

/* The per-frame writer as first written (before tmpl_fast_t: fields read through the template and
 * configuration, the compact signature's checksum by csum_add_bytes, folds in a loop): the TX path
 * must put the very same bytes on the wire */
static void ref_fill_fields(const tmpl_t *t, const tmpl_cfg_t *c, uint8_t *buf, uint32_t flow, uint64_t seq,
                            uint64_t tx_ns)
{
    uint32_t sip = tm_ld32(t->data + t->sip_off), dip = tm_ld32(t->data + t->dip_off);
    uint32_t sp = c->src_port, dp = c->dst_port;
    uint32_t v = c->vary;
    if (v & VARY_SRC_IP) { sip += flow; tm_st32(buf + t->sip_off, sip); }
    if (v & VARY_DST_IP) { dip += flow; tm_st32(buf + t->dip_off, dip); }
    if (v & VARY_SRC_PORT) {
        if (flow) sp = (sp - 1 + flow) % 65535 + 1;
        tm_st16(buf + t->udp_off, (uint16_t)sp);
    }
    if (v & VARY_DST_PORT) {
        if (flow) {
            dp = (dp - 1 + flow) % 65535 + 1;
            if (dp == VXLAN_PORT) dp = VXLAN_PORT + 1;
        }
        tm_st16(buf + t->udp_off + 2, (uint16_t)dp);
    }
    if (c->vxlan) tm_st16(buf + t->oudp_off, (uint16_t)(49152 + flow % 16384));
    uint8_t *sg = buf + t->sig_off;
    uint32_t a = (sip >> 16) + (sip & 0xffff) + (dip >> 16) + (dip & 0xffff);
    if (!c->ipv6) tm_st16(buf + t->ip_off + 10, (uint16_t)~csum_fold(t->ip_sum_base + a));
    uint32_t s;
    if (t->compact) {
        sg[4] = (uint8_t)(seq >> 32); tm_st32(sg + 5, (uint32_t)seq);
        sg[9] = (uint8_t)(tx_ns >> 32); tm_st32(sg + 10, (uint32_t)tx_ns);
        s = csum_add_bytes(t->udp_sum_base + a + sp + dp, sg + 4, 10);
    } else {
        uint16_t s0 = (uint16_t)(seq >> 32), s1 = (uint16_t)(seq >> 16), s2 = (uint16_t)seq;
        uint16_t t0 = (uint16_t)(tx_ns >> 32), t1 = (uint16_t)(tx_ns >> 16), t2 = (uint16_t)tx_ns;
        tm_st16(sg + 6, s0); tm_st16(sg + 8, s1); tm_st16(sg + 10, s2);
        tm_st16(sg + 12, t0); tm_st16(sg + 14, t1); tm_st16(sg + 16, t2);
        s = t->udp_sum_base + a + sp + dp + s0 + s1 + s2 + t0 + t1 + t2;
    }
    uint16_t ck = (uint16_t)~csum_fold(s);
    tm_st16(buf + t->udp_off + 6, ck ? ck : 0xffff);
}

static uint64_t xrng = 0x2545F4914F6CDD1DULL;
static uint64_t xr(void) { xrng ^= xrng << 13; xrng ^= xrng >> 7; xrng ^= xrng << 17; return xrng; }

/* tmpl_fill_fields / tmpl_fast_write (one prepared template, many frames, as a TX burst) against
 * ref_fill_fields: every vary combination, random and edge flows, sequences and timestamps */
static void same_bytes_as_ref(const char *what, unsigned size)
{
    static uint8_t r[MAX_FRAME_B + 100], n[MAX_FRAME_B + 100], w[MAX_FRAME_B + 100];
    unsigned diffs = 0, frames = 0;
    for (uint32_t vary = 0; vary < 16; vary++) {
        tmpl_cfg_t c = cur_cfg;
        c.vary = vary;
        char err[256];
        if (tmpl_build(&c, size, &T, err, sizeof(err))) { CHECK(0, "%s: build %s", what, err); return; }
        tmpl_fast_t f;
        tmpl_fast_init(&f, &T, &c);
        uint64_t tag = 0;
        memset(w, 0xA5, sizeof(w));
        for (unsigned k = 0; k < 3000; k++) {
            uint32_t flow = k < 8 ? (uint32_t[]){ 0, 1, 2, 65534, 65535, 65536, 4789 - 1024, 0xffffffffu }[k]
                                  : (uint32_t)(xr() % (k & 1 ? 70000 : 0xffffffffu));
            uint64_t seq = k % 3 ? xr() & 0xFFFFFFFFFFFFULL : (uint64_t)k * 0x01010101ULL;
            uint64_t ts = k % 5 ? xr() & 0xFFFFFFFFFFFFULL : 0xFFFFFFFFFFFFULL - k;
            tmpl_copy(&T, r);
            tmpl_copy(&T, n);
            ref_fill_fields(&T, &c, r, flow, seq, ts);
            tmpl_fill_fields(&T, &c, n, flow, seq, ts);
            tag = tmpl_fast_write(&f, w, tag, flow, seq, ts);
            frames++;
            if (memcmp(r, n, T.len) || memcmp(r, w, T.len)) diffs++;
        }
    }
    CHECK(diffs == 0, "%s size %u: %u of %u frames differ from the reference writer's", what, size, diffs, frames);
}

/* sig_parse_inline (a fast test for the usual frame, then the general parser) == sig_parse_general
 * on the template's frames, cut short at every length and with random bytes of the headers and
 * signature changed (each header test failing in turn) */
static void parse_fast_same_as_general(const char *what, unsigned size)
{
    static uint8_t f[MAX_FRAME_B + 100];
    unsigned diffs = 0, fast_hits = 0, tries = 0;
    for (unsigned k = 0; k < 4000; k++) {
        tmpl_fill(&T, &cur_cfg, f, (uint32_t)k, 0x123456789AULL + k, 0xABCDEF012345ULL - k);
        uint32_t len = T.len;
        if (k % 4 == 1) len = (uint32_t)(xr() % (T.len + 1));
        if (k % 4 >= 2) {
            unsigned nchg = 1 + (unsigned)(xr() % 3);
            for (unsigned c = 0; c < nchg; c++) {
                unsigned at = (unsigned)(xr() % (T.len < 80 ? T.len : 80));
                f[at] = k % 8 == 2 ? (uint8_t)(f[at] ^ (1u << (xr() % 8))) : (uint8_t)xr();
            }
        }
        tgsig_t a, b;
        memset(&a, 0x5A, sizeof(a));
        memset(&b, 0x5A, sizeof(b));
        int ra = sig_parse_inline(f, len, &a), rb = sig_parse_general(f, len, &b);
        tries++;
        if (ra != rb || (ra && memcmp(&a, &b, sizeof(a)))) diffs++;
        if (ra && len >= 60 && f[14] == 0x45) fast_hits++;
    }
    CHECK(diffs == 0, "%s size %u: sig_parse_inline differs from sig_parse_general on %u of %u frames", what, size,
          diffs, tries);
    if (!cur_cfg.vxlan && cur_cfg.vlan < 0 && !cur_cfg.ipv6 && !T.compact)
        CHECK(fast_hits > 0, "%s size %u: the fast test was taken", what, size);
}

static void run(const char *what, tmpl_cfg_t c, unsigned size)
{
    cur_cfg = c;
    same_bytes_as_ref(what, size);
    char err[256];
    int rc = tmpl_build(&c, size, &T, err, sizeof(err));
    CHECK(rc == 0, "%s size %u: build: %s", what, size, err);
    if (rc) return;
    parse_fast_same_as_general(what, size);
    unsigned expect = size - 4 + (c.vxlan ? 50 : 0);
    CHECK(T.len == expect, "%s size %u: buffer %u bytes, expected %u (size - FCS)", what, size, T.len, expect);
    uint32_t flows[] = { 0, 1, 77, 65535, 999999, 4789 - 1024 };
    for (unsigned fi = 0; fi < 6; fi++) {
        uint64_t seq = 0x123456789AULL + fi, ts = 0xABCDEF012345ULL;
        tmpl_fill(&T, &c, buf, flows[fi], seq, ts);
        const uint8_t *p = buf;
        size_t n = T.len;
        if (c.vxlan) {
            CHECK(g16(p + 12) == 0x0800, "%s: outer ethertype", what);
            CHECK(rfc1071(p + 14, 20) == 0, "%s: outer IPv4 checksum", what);
            CHECK(g16(p + 16) == n - 14, "%s: outer IP length", what);
            CHECK(p[23] == 17, "%s: outer proto UDP", what);
            CHECK(g16(p + 36) == 4789, "%s: outer UDP dst 4789", what);
            CHECK(g16(p + 34) == 49152 + flows[fi] % 16384, "%s: outer UDP src port entropy", what);
            CHECK(g16(p + 38) == n - 34, "%s: outer UDP length", what);
            CHECK(g16(p + 40) == 0, "%s: outer UDP checksum 0", what);
            CHECK(p[42] == 0x08 && ((uint32_t)p[46] << 16 | p[47] << 8 | p[48]) == c.vni, "%s: VXLAN flags/VNI", what);
            p += 50;
            n -= 50;
        }
        CHECK(memcmp(p, c.dst_mac, 6) == 0 && memcmp(p + 6, c.src_mac, 6) == 0, "%s: MACs", what);
        size_t o = 12;
        if (c.vlan >= 0) {
            CHECK(g16(p + 12) == 0x8100 && (g16(p + 14) & 0xfff) == c.vlan, "%s: 802.1Q tag", what);
            o += 4;
        }
        uint16_t et = g16(p + o);
        CHECK(et == (c.ipv6 ? 0x86DD : 0x0800), "%s: ethertype", what);
        verify_l3(p + o + 2, et, n - o - 2, what);
        /* flow variation */
        const uint8_t *ip = p + o + 2;
        const uint8_t *sip = c.ipv6 ? ip + 20 : ip + 12, *dip = c.ipv6 ? ip + 36 : ip + 16;
        uint32_t s0 = (uint32_t)c.src_ip[c.ipv6 ? 12 : 0] << 24 | (uint32_t)c.src_ip[c.ipv6 ? 13 : 1] << 16 | (uint32_t)c.src_ip[c.ipv6 ? 14 : 2] << 8 | c.src_ip[c.ipv6 ? 15 : 3];
        uint32_t sv = (uint32_t)sip[0] << 24 | (uint32_t)sip[1] << 16 | (uint32_t)sip[2] << 8 | sip[3];
        uint32_t dv = (uint32_t)dip[0] << 24 | (uint32_t)dip[1] << 16 | (uint32_t)dip[2] << 8 | dip[3];
        (void)dv;
        if (c.vary & VARY_SRC_IP) CHECK(sv == s0 + flows[fi], "%s: src ip stepped by flow", what);
        const uint8_t *udp = ip + (c.ipv6 ? 40 : 20);
        if (c.vary & VARY_DST_PORT) {
            unsigned want = (c.dst_port - 1 + flows[fi]) % 65535 + 1;
            if (want == 4789) want = 4790;
            CHECK(g16(udp + 2) == want, "%s: dst port", what);
        }
        /* signature round trip */
        tgsig_t sg;
        CHECK(sig_parse(buf, T.len, &sg) == 1, "%s: signature found", what);
        if (T.compact) {
            CHECK(sg.stream_id == 7 && sg.seq == (seq & 0xFFFFFFFFFFULL) && sg.tx_ns48 == (ts & 0xFFFFFFFFFFULL) && sg.ts_bits == 40,
                  "%s: compact signature fields", what);
            CHECK(g16(udp + 8) == 0x6E66, "%s: compact magic at UDP payload start", what);
        } else {
            CHECK(sg.stream_id == 7 && sg.seq == seq && sg.tx_ns48 == ts && sg.ts_bits == 48, "%s: signature fields", what);
            CHECK(g16(udp + 8) == 0x4E46 && g16(udp + 10) == 0x5047, "%s: magic at UDP payload start", what);
        }
    }
    /* the TX path rewrites only tmpl_fill_fields' bytes in a buffer that already holds the template
     * (a recycled mbuf of the same template, last written for another flow/seq/timestamp): the frame
     * must be byte for byte the one a whole copy gives, whatever was written before */
    static uint8_t re[MAX_FRAME_B + 100];
    memset(re, 0, sizeof(re));
    tmpl_copy(&T, re);
    for (unsigned fi = 0; fi < 6; fi++) {
        for (unsigned pi = 0; pi < 6; pi++) {
            tmpl_fill_fields(&T, &c, re, flows[pi], 0xFFFFFFFFFFFFULL - pi, 0x5555AAAA5555ULL + pi);
            uint64_t seq = 0x123456789AULL + fi, ts = 0xABCDEF012345ULL;
            tmpl_fill_fields(&T, &c, re, flows[fi], seq, ts);
            tmpl_fill(&T, &c, buf, flows[fi], seq, ts);
            CHECK(memcmp(re, buf, T.len) == 0, "%s size %u: rewritten frame (flow %u after flow %u) equals a fresh one",
                  what, size, flows[fi], flows[pi]);
        }
    }
}

/* tmpl_write on one reused buffer (a TX mbuf), templates of different streams, sizes and header
 * stacks in turn: every frame equals a fresh whole copy, and the buffer's tag stays true (the bytes it
 * says are zero are zero) */
static void reuse_mixed(void)
{
    static union { tmpl_t t; uint8_t raw[sizeof(tmpl_t) + MAX_FRAME_B + 200]; } U[6];
    tmpl_cfg_t cs[6];
    unsigned sizes[6] = { 1518, 64, 1518, 128, 9000, 78 };
    for (int i = 0; i < 6; i++) {
        cs[i] = base();
        cs[i].stream_id = (uint16_t)(100 + i);
        cs[i].flows = 1000;
        cs[i].vary = VARY_SRC_IP | VARY_DST_IP | VARY_SRC_PORT | VARY_DST_PORT;
    }
    cs[2].vlan = 12;
    cs[3].ipv6 = 1;
    inet_pton(AF_INET6, "2001:db8::1", cs[3].src_ip);
    inet_pton(AF_INET6, "2001:db8::2", cs[3].dst_ip);
    cs[4].vxlan = 1;
    cs[4].vni = 77;
    inet_pton(AF_INET, "10.0.0.1", cs[4].osrc_ip);
    inet_pton(AF_INET, "10.0.0.2", cs[4].odst_ip);
    char err[256];
    for (int i = 0; i < 6; i++)
        CHECK(tmpl_build(&cs[i], sizes[i], &U[i].t, err, sizeof(err)) == 0, "reuse: build %d: %s", i, err);
    static uint8_t mb[MAX_FRAME_B + 200];
    memset(mb, 0xA5, sizeof(mb));           /* whatever the mbuf held: tag 0 says nothing is known */
    uint64_t tag = 0;
    unsigned order[] = { 0, 0, 1, 0, 2, 1, 4, 0, 3, 5, 4, 4, 1, 2, 3, 0, 5, 5, 0 };
    unsigned bad = 0, short_copies = 0;
    for (unsigned k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
        const tmpl_t *t = &U[order[k]].t;
        uint32_t flow = (k * 7919u) % 1000u;
        uint64_t zt_before = tag & 0xffffffffu;
        tag = tmpl_write(t, &cs[order[k]], mb, tag, flow, 1000 + k, 0x123456789ULL * k);
        tmpl_fill(t, &cs[order[k]], buf, flow, 1000 + k, 0x123456789ULL * k);
        if (memcmp(mb, buf, t->len) != 0) bad++;
        if (zt_before >= t->len) short_copies++;
        for (unsigned o = (unsigned)(tag >> 32); o < (unsigned)tag; o++) if (mb[o]) { bad++; break; }
    }
    CHECK(bad == 0, "reuse: %u frames differ from a fresh copy (or the zero range lies)", bad);
    CHECK(short_copies >= 10, "reuse: header-only copies happen (%u)", short_copies);
}

int main(void)
{
    char err[256];
    reuse_mixed();
    unsigned sizes[] = { 64, 65, 128, 256, 512, 1024, 1280, 1518, 9216 };
    for (unsigned i = 0; i < 9; i++) run("ipv4", base(), sizes[i]);
    tmpl_cfg_t c = base();
    c.vlan = 100;
    CHECK(tmpl_min_size(&c) == 64, "VLAN min size 64 (compact signature)");
    run("vlan", c, 64);
    CHECK(T.compact == 1, "VLAN 64: compact signature");
    run("vlan", c, 67);
    CHECK(T.compact == 1, "VLAN 67: compact signature");
    run("vlan", c, 68);
    CHECK(T.compact == 0, "VLAN 68: full signature");
    run("vlan", c, 1522);
    c = base();
    c.ipv6 = 1;
    inet_pton(AF_INET6, "2001:2::1", c.src_ip);
    inet_pton(AF_INET6, "2001:2:0:1::1", c.dst_ip);
    c.vary = VARY_SRC_IP | VARY_DST_IP | VARY_SRC_PORT | VARY_DST_PORT;
    CHECK(tmpl_min_size(&c) == 80, "IPv6 min size %u", tmpl_min_size(&c));
    CHECK(tmpl_build(&c, 79, &T, err, sizeof(err)) == -1 && strncmp(err, "size_b:", 7) == 0, "IPv6 79 refused: %s", err);
    run("ipv6", c, 80);
    CHECK(T.compact == 1, "IPv6 80: compact");
    run("ipv6", c, 84);
    CHECK(T.compact == 0, "IPv6 84: full");
    run("ipv6", c, 1518);
    c.vlan = 5;
    CHECK(tmpl_min_size(&c) == 84, "IPv6+VLAN min size %u", tmpl_min_size(&c));
    run("ipv6+vlan", c, 84);
    run("ipv6+vlan", c, 88);
    c = base();
    c.vxlan = 1;
    c.vni = 0xABCDE;
    uint8_t om[6] = { 2, 0, 0, 0, 9, 1 };
    memcpy(c.osrc_mac, om, 6); om[5] = 2; memcpy(c.odst_mac, om, 6);
    inet_pton(AF_INET, "10.0.0.1", c.osrc_ip);
    inet_pton(AF_INET, "10.0.0.2", c.odst_ip);
    c.vary = VARY_SRC_IP | VARY_DST_PORT;
    CHECK(tmpl_wire_size(&c, 64) == 114, "VXLAN 64 -> 114 on the wire (TV3)");
    run("vxlan", c, 64);
    run("vxlan", c, 1518);
    c.vlan = 9;
    run("vxlan+inner vlan", c, 64);
    run("vxlan+inner vlan", c, 68);
    /* sizes out of range */
    c = base();
    CHECK(tmpl_build(&c, 63, &T, err, sizeof(err)) == -1, "63 refused");
    CHECK(tmpl_build(&c, 9217, &T, err, sizeof(err)) == -1, "9217 refused");
    /* non-test frames are not parsed as test traffic */
    tgsig_t sg;
    uint8_t arp[60] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06 };
    CHECK(sig_parse(arp, 60, &sg) == 0, "ARP is not a test frame");
    run("ipv4", base(), 64);
    tmpl_fill(&T, &c, buf, 0, 1, 1);
    buf[T.sig_off] ^= 0xff;       /* a UDP frame with a wrong magic */
    CHECK(sig_parse(buf, T.len, &sg) == 0, "UDP without magic is not a test frame");
    tmpl_fill(&T, &c, buf, 0, 1, 1);
    CHECK(sig_parse(buf, 40, &sg) == 0, "truncated frame is not a test frame");
    return DONE();
}
