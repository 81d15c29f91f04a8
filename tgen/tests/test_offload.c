/* TX offloads: the decision (txoff_decide: offered -> used, not offered -> software with a note,
 * fast free only where every mbuf of the queue comes from one pool), and the frames written for a
 * port that computes the checksums (tmpl_fast_offload): IPv4 checksum field 0, UDP checksum field
 * the pseudo-header sum; completed as a NIC does, every frame equals the software-checksummed one. */
#include <string.h>
#include <arpa/inet.h>
#include "harness.h"
#include "tmpl.h"
#include "txoff.h"
#include "tmpl_cfg.h"

static uint16_t g16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static void p16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }

static uint32_t sum16(const uint8_t *p, size_t n, uint32_t s)
{
    for (size_t i = 0; i < n; i += 2) s += (uint32_t)(p[i] << 8 | (i + 1 < n ? p[i + 1] : 0));
    return s;
}
static uint16_t fold(uint32_t s) { while (s >> 16) s = (s & 0xffff) + (s >> 16); return (uint16_t)s; }

static void decisions(void)
{
    txoff_out_t o;
    txoff_in_t all = { 1, 1, 1, 1, 1 };
    txoff_decide(&all, &o);
    CHECK(o.cksum_hw && o.fast_free && o.note[0] == 0, "all offered -> all used, no note (%s)", o.note);
    txoff_in_t none = { 0, 0, 0, 1, 1 };
    txoff_decide(&none, &o);
    CHECK(!o.cksum_hw && !o.fast_free, "nothing offered -> software");
    CHECK(strstr(o.note, "IPv4/UDP checksums written in software (the port offers no IPV4_CKSUM/UDP_CKSUM") != NULL &&
          strstr(o.note, "no MBUF_FAST_FREE (the port does not offer it)") != NULL, "note: %s", o.note);
    txoff_in_t ip_only = { 1, 0, 0, 1, 1 };
    txoff_decide(&ip_only, &o);
    CHECK(!o.cksum_hw && strstr(o.note, "no UDP_CKSUM") != NULL, "IPV4_CKSUM alone is not enough: %s", o.note);
    txoff_in_t udp_only = { 0, 1, 1, 1, 1 };
    txoff_decide(&udp_only, &o);
    CHECK(!o.cksum_hw && o.fast_free && strstr(o.note, "no IPV4_CKSUM") != NULL && !strstr(o.note, "FAST_FREE"),
          "UDP_CKSUM alone: software checksums, fast free used: %s", o.note);
    txoff_in_t off = { 1, 1, 1, 0, 1 };
    txoff_decide(&off, &o);
    CHECK(!o.cksum_hw && o.fast_free && strstr(o.note, "cksum_offload=0") != NULL, "cksum_offload=0: %s", o.note);
    txoff_in_t two_pools = { 1, 1, 1, 1, 0 };
    txoff_decide(&two_pools, &o);
    CHECK(o.cksum_hw && !o.fast_free && strstr(o.note, "more than one pool") != NULL,
          "fast free offered but the queues mix pools -> not used: %s", o.note);
}

static union { tmpl_t t; uint8_t raw[sizeof(tmpl_t) + MAX_FRAME_B + 200]; } TU;
static uint8_t sw[MAX_FRAME_B + 100], hw[MAX_FRAME_B + 100];

/* what a NIC does with a frame of IPV4(+IP_CKSUM)+UDP_CKSUM / IPV6+UDP_CKSUM offload: the IPv4
 * header checksum over the header (field 0), the UDP checksum over the UDP header and payload
 * starting from the pseudo-header sum in the field */
static void nic_complete(uint8_t *f, unsigned len, unsigned l2, unsigned l3, int ipv4)
{
    if (ipv4) {
        CHECK(g16(f + l2 + 10) == 0, "offload: IPv4 checksum field left 0");
        p16(f + l2 + 10, (uint16_t)~fold(sum16(f + l2, l3, 0)));
    }
    uint8_t *u = f + l2 + l3;
    unsigned ulen = g16(u + 4);
    CHECK(l2 + l3 + ulen == len, "offload: UDP length %u", ulen);
    uint16_t c = (uint16_t)~fold(sum16(u, ulen, 0));
    p16(u + 6, c ? c : 0xffff);
}

static void offload_frames(const char *what, tmpl_cfg_t c, unsigned size)
{
    char err[256];
    CHECK(tmpl_build(&c, size, &TU.t, err, sizeof(err)) == 0, "%s %u: build: %s", what, size, err);
    tmpl_fast_t fs, fh;
    tmpl_fast_init(&fs, &TU.t, &c);
    tmpl_fast_init(&fh, &TU.t, &c);
    CHECK(tmpl_fast_offload(&fh) == 1, "%s: offload applies", what);
    unsigned bad = 0;
    for (uint32_t flow = 0; flow < 300; flow += 7) {
        uint64_t seq = 0x1234567ULL * flow + 5, ts = 0xABCDEF0123ULL ^ flow;
        tmpl_fast_write(&fs, sw, 0, flow, seq, ts);
        tmpl_fast_write(&fh, hw, 0, flow, seq, ts);
        nic_complete(hw, TU.t.len, TU.t.ip_off, TU.t.udp_off - TU.t.ip_off, !c.ipv6);
        if (memcmp(sw, hw, TU.t.len)) bad++;
    }
    CHECK(bad == 0, "%s %u: %u frames completed by the NIC differ from the software-checksummed ones", what, size, bad);
}

int main(void)
{
    decisions();
    tmpl_cfg_t c = base();
    inet_pton(AF_INET, "198.19.255.250", c.dst_ip);
    c.dst_port = 65530;
    c.flows = 1000;
    c.vary = VARY_SRC_IP | VARY_DST_IP | VARY_SRC_PORT | VARY_DST_PORT;
    unsigned sizes[] = { 64, 65, 128, 1518, 9216 };
    for (unsigned i = 0; i < 5; i++) offload_frames("ipv4", c, sizes[i]);
    c.vlan = 100;
    offload_frames("ipv4+vlan (compact signature)", c, 64);
    offload_frames("ipv4+vlan", c, 1518);
    c.vlan = -1;
    c.ipv6 = 1;
    inet_pton(AF_INET6, "2001:2::1", c.src_ip);
    inet_pton(AF_INET6, "2001:2:0:1::ffff:fffe", c.dst_ip);
    offload_frames("ipv6 (compact signature)", c, 80);
    offload_frames("ipv6", c, 1518);
    /* VXLAN keeps software checksums: the offload does not apply and the frames are unchanged */
    memset(&c, 0, sizeof(c));
    c.vlan = -1;
    c.vxlan = 1;
    c.vni = 5;
    inet_pton(AF_INET, "198.18.0.1", c.src_ip);
    inet_pton(AF_INET, "198.19.0.1", c.dst_ip);
    c.flows = 10;
    c.vary = VARY_SRC_IP;
    char err[256];
    CHECK(tmpl_build(&c, 128, &TU.t, err, sizeof(err)) == 0, "vxlan build");
    tmpl_fast_t fs, fh;
    tmpl_fast_init(&fs, &TU.t, &c);
    tmpl_fast_init(&fh, &TU.t, &c);
    CHECK(tmpl_fast_offload(&fh) == 0 && fh.csum_hw == 0, "vxlan: no checksum offload");
    tmpl_fast_write(&fs, sw, 0, 3, 77, 88);
    tmpl_fast_write(&fh, hw, 0, 3, 77, 88);
    CHECK(memcmp(sw, hw, TU.t.len) == 0, "vxlan: software checksums either way");
    return DONE();
}
