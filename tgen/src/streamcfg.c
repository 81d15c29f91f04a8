#include "streamcfg.h"
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <arpa/inet.h>

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

void fmt_mac(const uint8_t m[6], char out[18])
{
    snprintf(out, 18, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

double parse_speed(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0)) return -1;
    switch (*end) {
    case 'G': case 'g': v *= 1e9; end++; break;
    case 'M': case 'm': v *= 1e6; end++; break;
    case 'K': case 'k': v *= 1e3; end++; break;
    case 'T': case 't': v *= 1e12; end++; break;
    default: break;
    }
    if (*end == 'b' || *end == 'B') end++;
    if (*end) return -1;
    return v;
}

static int get_int(json_t *o, const char *k, long long lo, long long hi, long long *v, int *present,
                   char *err, size_t errlen)
{
    json_t *j = json_object_get(o, k);
    *present = 0;
    if (!j || json_is_null(j)) return 0;
    double d;
    if (json_is_integer(j)) d = (double)json_integer_value(j);
    else if (json_is_real(j)) d = json_real_value(j);
    else FAIL("%s: must be an integer", k);
    if (d != floor(d)) FAIL("%s: must be an integer (got %g)", k, d);
    if (d < (double)lo || d > (double)hi) FAIL("%s: must be %lld..%lld (got %.0f)", k, lo, hi, d);
    *v = (long long)d;
    *present = 1;
    return 0;
}

static int get_bool(json_t *o, const char *k, int *v, char *err, size_t errlen)
{
    json_t *j = json_object_get(o, k);
    if (!j || json_is_null(j)) return 0;
    if (json_is_boolean(j)) { *v = json_is_true(j); return 0; }
    if (json_is_integer(j) && (json_integer_value(j) == 0 || json_integer_value(j) == 1)) { *v = (int)json_integer_value(j); return 0; }
    FAIL("%s: must be a boolean", k);
}

static int get_mac(json_t *o, const char *k, uint8_t mac[6], char *err, size_t errlen)
{
    json_t *j = json_object_get(o, k);
    if (!j || json_is_null(j)) return 0;
    if (!json_is_string(j) || parse_mac(json_string_value(j), mac)) FAIL("%s: must be a MAC address like 02:00:00:00:00:01", k);
    return 0;
}

static int get_ip(json_t *o, const char *k, int v6, uint8_t *ip, char *err, size_t errlen)
{
    json_t *j = json_object_get(o, k);
    if (!j || json_is_null(j)) return 0;
    if (!json_is_string(j)) FAIL("%s: must be a string", k);
    if (inet_pton(v6 ? AF_INET6 : AF_INET, json_string_value(j), ip) != 1)
        FAIL("%s: '%.60s' is not an IPv%d address", k, json_string_value(j), v6 ? 6 : 4);
    return 0;
}

static const char *known_keys[] = { "port", "rx_port", "rx_ports", "name", "size_b", "imix", "flows", "vary", "src_mac",
    "dst_mac", "src_ip", "dst_ip", "src_port", "dst_port", "vlan", "ipv6", "vxlan", "rate", "id", NULL };

int streamcfg_parse(json_t *obj, const portinfo_t *ports, int nports, uint16_t id,
                    streamcfg_t *s, char *err, size_t errlen)
{
    long long v;
    int pr;
    if (!json_is_object(obj)) FAIL("params: must be an object");
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val) {
        int ok = 0;
        for (int i = 0; known_keys[i]; i++) if (!strcmp(key, known_keys[i])) ok = 1;
        if (!ok) FAIL("%.60s: unknown field", key);
    }
    memset(s, 0, sizeof(*s));
    tmpl_cfg_t *c = &s->cfg;
    c->stream_id = id;
    c->vlan = -1;
    if (get_int(obj, "port", 0, 65535, &v, &pr, err, errlen)) return -1;
    if (!pr) FAIL("port: required");
    if (v >= nports || !ports[v].exists) { snprintf(err, errlen, "port: unknown port %lld (%d ports)", v, nports); return -2; }
    s->port = (int)v;
    s->rx_port = s->port;
    if (get_int(obj, "rx_port", 0, 65535, &v, &pr, err, errlen)) return -1;
    if (pr) {
        if (v >= nports || !ports[v].exists) { snprintf(err, errlen, "rx_port: unknown port %lld (%d ports)", v, nports); return -2; }
        s->rx_port = (int)v;
    }
    int rx_given = pr;
    s->rx_ports[0] = s->rx_port;
    s->n_rx_ports = 1;
    json_t *rg = json_object_get(obj, "rx_ports");
    if (rg && !json_is_null(rg)) {
        if (!json_is_array(rg) || json_array_size(rg) < 1 || json_array_size(rg) > MAX_RX_GROUP)
            FAIL("rx_ports: must be a list of 1..%d port ids (the receive group)", MAX_RX_GROUP);
        size_t i;
        json_t *e;
        int member = 0;
        json_array_foreach(rg, i, e) {
            if (!json_is_integer(e)) FAIL("rx_ports[%zu]: must be a port id (an integer)", i);
            json_int_t q = json_integer_value(e);
            if (q < 0 || q >= nports || !ports[q].exists) {
                snprintf(err, errlen, "rx_ports[%zu]: unknown port %lld (%d ports)", i, (long long)q, nports);
                return -2;
            }
            for (size_t k = 0; k < i; k++)
                if (s->rx_ports[k] == (int)q) FAIL("rx_ports[%zu]: port %lld is listed twice", i, (long long)q);
            s->rx_ports[i] = (int)q;
            if (q == s->rx_port) member = 1;
        }
        s->n_rx_ports = (int)json_array_size(rg);
        if (!rx_given) s->rx_port = s->rx_ports[0];
        else if (!member) FAIL("rx_port: %d is not in rx_ports (give rx_port as a member of the group, or leave it out: "
                               "it is then rx_ports[0])", s->rx_port);
    }
    json_t *j = json_object_get(obj, "name");
    if (j && !json_is_null(j)) {
        if (!json_is_string(j)) FAIL("name: must be a string");
        snprintf(s->name, sizeof(s->name), "%s", json_string_value(j));
    } else {
        snprintf(s->name, sizeof(s->name), "p%d->p%d#%u", s->port, s->rx_port, id);
    }
    if (get_bool(obj, "ipv6", &c->ipv6, err, errlen)) return -1;
    if (get_int(obj, "vlan", 0, 4095, &v, &pr, err, errlen)) return -1;
    if (pr) c->vlan = (int)v;
    json_t *vx = json_object_get(obj, "vxlan");
    if (vx && !json_is_null(vx) && !json_is_false(vx)) {
        c->vxlan = 1;
        c->vni = 1;
        memcpy(c->osrc_mac, ports[s->port].mac, 6);
        memcpy(c->odst_mac, ports[s->rx_port].mac, 6);
        uint8_t a[4] = { 10, 0, 0, 1 }, b[4] = { 10, 0, 0, 2 };
        memcpy(c->osrc_ip, a, 4);
        memcpy(c->odst_ip, b, 4);
        if (json_is_object(vx)) {
            const char *vk;
            json_t *vv;
            json_object_foreach(vx, vk, vv) {
                if (strcmp(vk, "vni") && strcmp(vk, "outer_src_mac") && strcmp(vk, "outer_dst_mac") &&
                    strcmp(vk, "outer_src_ip") && strcmp(vk, "outer_dst_ip"))
                    FAIL("vxlan.%.60s: unknown field", vk);
            }
            if (get_int(vx, "vni", 0, 0xffffff, &v, &pr, err, errlen)) return -1;
            if (pr) c->vni = (uint32_t)v;
            if (get_mac(vx, "outer_src_mac", c->osrc_mac, err, errlen)) return -1;
            if (get_mac(vx, "outer_dst_mac", c->odst_mac, err, errlen)) return -1;
            if (get_ip(vx, "outer_src_ip", 0, c->osrc_ip, err, errlen)) return -1;
            if (get_ip(vx, "outer_dst_ip", 0, c->odst_ip, err, errlen)) return -1;
        } else if (!json_is_true(vx)) {
            FAIL("vxlan: must be an object {vni, outer_src_mac, ...}, true or null");
        }
    }
    /* addresses */
    if (c->vxlan) {
        uint8_t a[6] = { 2, 0, 0, 0, 0, 1 }, b[6] = { 2, 0, 0, 0, 0, 2 };
        memcpy(c->src_mac, a, 6);
        memcpy(c->dst_mac, b, 6);
    } else {
        memcpy(c->src_mac, ports[s->port].mac, 6);
        memcpy(c->dst_mac, ports[s->rx_port].mac, 6);
    }
    if (get_mac(obj, "src_mac", c->src_mac, err, errlen)) return -1;
    if (get_mac(obj, "dst_mac", c->dst_mac, err, errlen)) return -1;
    if (c->ipv6) {
        inet_pton(AF_INET6, "2001:2::1", c->src_ip);
        inet_pton(AF_INET6, "2001:2:0:1::1", c->dst_ip);
    } else {
        uint8_t a[4] = { 198, 18, 0, 1 }, b[4] = { 198, 19, 0, 1 };
        memcpy(c->src_ip, a, 4);
        memcpy(c->dst_ip, b, 4);
    }
    if (get_ip(obj, "src_ip", c->ipv6, c->src_ip, err, errlen)) return -1;
    if (get_ip(obj, "dst_ip", c->ipv6, c->dst_ip, err, errlen)) return -1;
    c->src_port = 1024;
    c->dst_port = 1024;
    if (get_int(obj, "src_port", 1, 65535, &v, &pr, err, errlen)) return -1;
    if (pr) c->src_port = (uint16_t)v;
    if (get_int(obj, "dst_port", 1, 65535, &v, &pr, err, errlen)) return -1;
    if (pr) {
        if (v == VXLAN_PORT) FAIL("dst_port: 4789 is reserved for VXLAN encapsulation");
        c->dst_port = (uint16_t)v;
    }
    c->flows = 1;
    if (get_int(obj, "flows", -((long long)1 << 40), (long long)1 << 40, &v, &pr, err, errlen)) return -1;
    if (pr) {
        if (v < 1 || v > MAX_FLOWS) FAIL("flows: must be 1..%d (got %lld)", MAX_FLOWS, v);
        c->flows = (uint32_t)v;
    }
    c->vary = VARY_SRC_IP | VARY_DST_IP;
    j = json_object_get(obj, "vary");
    if (j && !json_is_null(j)) {
        if (!json_is_array(j)) FAIL("vary: must be a list of src_ip, dst_ip, src_port, dst_port");
        c->vary = 0;
        size_t i;
        json_t *e;
        json_array_foreach(j, i, e) {
            const char *n = json_is_string(e) ? json_string_value(e) : "";
            if (!strcmp(n, "src_ip")) c->vary |= VARY_SRC_IP;
            else if (!strcmp(n, "dst_ip")) c->vary |= VARY_DST_IP;
            else if (!strcmp(n, "src_port")) c->vary |= VARY_SRC_PORT;
            else if (!strcmp(n, "dst_port")) c->vary |= VARY_DST_PORT;
            else FAIL("vary[%zu]: must be one of src_ip, dst_ip, src_port, dst_port", i);
        }
        if (c->flows > 1 && c->vary == 0) FAIL("vary: empty, but flows > 1 needs a field to vary");
    }
    /* sizes */
    unsigned min = tmpl_min_size(c);
    json_t *im = json_object_get(obj, "imix");
    json_t *sz = json_object_get(obj, "size_b");
    if (im && !json_is_null(im)) {
        if (sz && !json_is_null(sz)) FAIL("imix: give either size_b or imix, not both");
        if (!json_is_array(im) || json_array_size(im) == 0 || json_array_size(im) > MAX_IMIX)
            FAIL("imix: must be a list of 1..%d [size_b, weight] pairs", MAX_IMIX);
        s->imix = 1;
        size_t i;
        json_t *e;
        uint32_t tw = 0;
        json_array_foreach(im, i, e) {
            if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_integer(json_array_get(e, 0)) ||
                !json_is_integer(json_array_get(e, 1)))
                FAIL("imix[%zu]: must be [size_b, weight] (integers)", i);
            long long sb = json_integer_value(json_array_get(e, 0)), w = json_integer_value(json_array_get(e, 1));
            if (sb < min || sb > MAX_FRAME_B) FAIL("imix[%zu]: size_b %lld is outside %u..%u", i, sb, min, MAX_FRAME_B);
            if (w < 1 || w > MAX_IMIX_WEIGHT) FAIL("imix[%zu]: weight %lld must be 1..%d", i, w, MAX_IMIX_WEIGHT);
            s->sizes[i] = (uint16_t)sb;
            s->weights[i] = (uint32_t)w;
            tw += (uint32_t)w;
        }
        if (tw > MAX_IMIX_WEIGHT) FAIL("imix: weights sum to %u, above %d", tw, MAX_IMIX_WEIGHT);
        s->nsizes = (int)json_array_size(im);
    } else {
        s->nsizes = 1;
        s->weights[0] = 1;
        s->sizes[0] = 64;
        if (get_int(obj, "size_b", -((long long)1 << 40), (long long)1 << 40, &v, &pr, err, errlen)) return -1;
        if (pr) {
            if (v < min) FAIL("size_b: %lld is below the minimum %u for this header stack (headers + 14-byte signature + FCS)", v, min);
            if (v > MAX_FRAME_B) FAIL("size_b: %lld is above the maximum %d", v, MAX_FRAME_B);
            s->sizes[0] = (uint16_t)v;
        } else if (min > 64) {
            s->sizes[0] = (uint16_t)min;
        }
    }
    double tw = 0, ts = 0;
    for (int i = 0; i < s->nsizes; i++) {
        unsigned wire = tmpl_wire_size(c, s->sizes[i]);
        int pp[1 + MAX_RX_GROUP] = { s->port };
        for (int k = 0; k < s->n_rx_ports; k++) pp[1 + k] = s->rx_ports[k];
        for (int k = 0; k < 1 + s->n_rx_ports; k++) {
            unsigned lim = ports[pp[k]].mtu + 18 + ((c->vlan >= 0 && !c->vxlan) ? 4 : 0);
            if (wire > lim)
                FAIL("%s: %u B on the wire exceeds %s %d MTU %u (limit %u = MTU+18%s)", s->imix ? "imix" : "size_b",
                     wire, k ? (s->n_rx_ports > 1 ? "rx_ports member" : "rx_port") : "port", pp[k], ports[pp[k]].mtu, lim,
                     (c->vlan >= 0 && !c->vxlan) ? "+4 VLAN" : "");
        }
        tw += s->weights[i];
        ts += (double)s->sizes[i] * s->weights[i];
    }
    s->mean_size_b = ts / tw;
    s->wire_size_b = s->mean_size_b + (c->vxlan ? VXLAN_OVERHEAD : 0);
    /* rate */
    s->rate_kind = RATE_PPS;
    s->rate_value = 1000;
    j = json_object_get(obj, "rate");
    if (j && !json_is_null(j)) {
        if (!json_is_object(j) || json_object_size(j) != 1)
            FAIL("rate: must be an object with exactly one of pps, percent, l1_bps, l2_bps");
        const char *rk = json_object_iter_key(json_object_iter(j));
        json_t *rv = json_object_iter_value(json_object_iter(j));
        if (!strcmp(rk, "pps")) s->rate_kind = RATE_PPS;
        else if (!strcmp(rk, "percent")) s->rate_kind = RATE_PERCENT;
        else if (!strcmp(rk, "l1_bps")) s->rate_kind = RATE_L1_BPS;
        else if (!strcmp(rk, "l2_bps")) s->rate_kind = RATE_L2_BPS;
        else FAIL("rate.%.40s: unknown; use pps, percent, l1_bps or l2_bps", rk);
        if (!json_is_number(rv)) FAIL("rate.%s: must be a number", rk);
        s->rate_value = json_number_value(rv);
    }
    static const char *rnames[] = { "rate.pps", "rate.percent", "rate.l1_bps", "rate.l2_bps" };
    if (rate_to_pps(s->rate_kind, s->rate_value, s->wire_size_b, ports[s->port].speed_bps, &s->rate_pps,
                    rnames[s->rate_kind], err, errlen))
        return -1;
    return 0;
}

static void ipstr(const tmpl_cfg_t *c, const uint8_t *ip, char *out, size_t n)
{
    inet_ntop(c->ipv6 ? AF_INET6 : AF_INET, ip, out, (socklen_t)n);
}

json_t *streamcfg_to_json(const streamcfg_t *s)
{
    const tmpl_cfg_t *c = &s->cfg;
    char m1[18], m2[18], a[64], b[64];
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(c->stream_id));
    json_object_set_new(o, "name", json_string(s->name));
    json_object_set_new(o, "port", json_integer(s->port));
    json_object_set_new(o, "rx_port", json_integer(s->rx_port));
    json_t *rg = json_array();
    for (int i = 0; i < s->n_rx_ports; i++) json_array_append_new(rg, json_integer(s->rx_ports[i]));
    json_object_set_new(o, "rx_ports", rg);
    if (s->imix) {
        json_t *l = json_array();
        for (int i = 0; i < s->nsizes; i++)
            json_array_append_new(l, json_pack("[ii]", s->sizes[i], s->weights[i]));
        json_object_set_new(o, "imix", l);
    } else {
        json_object_set_new(o, "size_b", json_integer(s->sizes[0]));
    }
    json_object_set_new(o, "wire_size_b", json_real(s->wire_size_b));
    json_object_set_new(o, "flows", json_integer(c->flows));
    json_t *va = json_array();
    if (c->vary & VARY_SRC_IP) json_array_append_new(va, json_string("src_ip"));
    if (c->vary & VARY_DST_IP) json_array_append_new(va, json_string("dst_ip"));
    if (c->vary & VARY_SRC_PORT) json_array_append_new(va, json_string("src_port"));
    if (c->vary & VARY_DST_PORT) json_array_append_new(va, json_string("dst_port"));
    json_object_set_new(o, "vary", va);
    fmt_mac(c->src_mac, m1);
    fmt_mac(c->dst_mac, m2);
    json_object_set_new(o, "src_mac", json_string(m1));
    json_object_set_new(o, "dst_mac", json_string(m2));
    ipstr(c, c->src_ip, a, sizeof(a));
    ipstr(c, c->dst_ip, b, sizeof(b));
    json_object_set_new(o, "src_ip", json_string(a));
    json_object_set_new(o, "dst_ip", json_string(b));
    json_object_set_new(o, "src_port", json_integer(c->src_port));
    json_object_set_new(o, "dst_port", json_integer(c->dst_port));
    json_object_set_new(o, "vlan", c->vlan >= 0 ? json_integer(c->vlan) : json_null());
    json_object_set_new(o, "ipv6", json_boolean(c->ipv6));
    if (c->vxlan) {
        json_t *x = json_object();
        json_object_set_new(x, "vni", json_integer(c->vni));
        fmt_mac(c->osrc_mac, m1);
        fmt_mac(c->odst_mac, m2);
        json_object_set_new(x, "outer_src_mac", json_string(m1));
        json_object_set_new(x, "outer_dst_mac", json_string(m2));
        inet_ntop(AF_INET, c->osrc_ip, a, sizeof(a));
        inet_ntop(AF_INET, c->odst_ip, b, sizeof(b));
        json_object_set_new(x, "outer_src_ip", json_string(a));
        json_object_set_new(x, "outer_dst_ip", json_string(b));
        json_object_set_new(o, "vxlan", x);
    } else {
        json_object_set_new(o, "vxlan", json_null());
    }
    static const char *rk[] = { "pps", "percent", "l1_bps", "l2_bps" };
    json_t *r = json_object();
    json_object_set_new(r, rk[s->rate_kind], json_real(s->rate_value));
    json_object_set_new(o, "rate", r);
    json_object_set_new(o, "rate_pps", json_real(s->rate_pps));
    return o;
}

unsigned streamcfg_imix_pattern(const streamcfg_t *s, uint16_t *idx, unsigned cap)
{
    /* smooth weighted round robin: deterministic, interleaved */
    int64_t cur[MAX_IMIX] = { 0 };
    int64_t tot = 0;
    for (int i = 0; i < s->nsizes; i++) tot += s->weights[i];
    unsigned n = 0;
    for (int64_t k = 0; k < tot && n < cap; k++) {
        int best = 0;
        for (int i = 0; i < s->nsizes; i++) {
            cur[i] += s->weights[i];
            if (cur[i] > cur[best]) best = i;
        }
        cur[best] -= tot;
        idx[n++] = (uint16_t)best;
    }
    return n;
}
