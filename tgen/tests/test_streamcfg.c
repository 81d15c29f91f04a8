/* Stream object validation: defaults, and refusals that name the field. */
#include <string.h>
#include "harness.h"
#include "streamcfg.h"

static portinfo_t P[2];
static streamcfg_t S;
static char err[512];

static int parse(const char *js)
{
    json_error_t je;
    json_t *o = json_loads(js, 0, &je);
    if (!o) { fprintf(stderr, "bad test json %s\n", js); return -9; }
    err[0] = 0;
    int rc = streamcfg_parse(o, P, 2, 3, &S, err, sizeof(err));
    json_decref(o);
    return rc;
}

#define REFUSED(js, field) do { int r_ = parse(js); CHECK(r_ < 0 && !strncmp(err, field ":", strlen(field) + 1), "%s -> %s", js, err); } while (0)

int main(void)
{
    for (int i = 0; i < 2; i++) {
        P[i].exists = 1;
        P[i].mtu = 1500;
        P[i].speed_bps = 10e9;
        uint8_t m[6] = { 2, 0, 0, 0, 0, (uint8_t)(0x10 + i) };
        memcpy(P[i].mac, m, 6);
    }
    CHECK(parse("{\"port\":0,\"rx_port\":1}") == 0, "minimal: %s", err);
    CHECK(S.sizes[0] == 64 && S.cfg.flows == 1 && S.rate_pps == 1000, "defaults");
    CHECK(S.cfg.src_ip[0] == 198 && S.cfg.src_ip[1] == 18 && S.cfg.dst_ip[1] == 19, "198.18/15 defaults");
    CHECK(S.cfg.dst_mac[5] == 0x11 && S.cfg.src_mac[5] == 0x10, "MAC defaults from ports");
    CHECK(parse("{\"port\":0,\"size_b\":1518,\"flows\":1000000,\"vary\":[\"src_port\",\"dst_port\"],\"rate\":{\"percent\":100}}") == 0, "%s", err);
    CHECK(S.rate_pps > 812743 && S.rate_pps < 812744, "100 %% of 10G at 1518 B");
    CHECK(parse("{\"port\":0,\"size_b\":64,\"vxlan\":{\"vni\":5},\"rate\":{\"percent\":100}}") == 0, "%s", err);
    CHECK(S.wire_size_b == 114 && S.rate_pps > 9328358 && S.rate_pps < 9328359, "VXLAN line rate (TV3)");
    CHECK(parse("{\"port\":0,\"imix\":[[64,7],[576,4],[1500,1]]}") == 0, "imix: %s", err);
    CHECK(S.nsizes == 3 && S.mean_size_b > 354.33 && S.mean_size_b < 354.34, "imix mean %g", S.mean_size_b);
    uint16_t pat[64];
    unsigned n = streamcfg_imix_pattern(&S, pat, 64);
    unsigned cnt[3] = { 0 };
    for (unsigned i = 0; i < n; i++) cnt[pat[i]]++;
    CHECK(n == 12 && cnt[0] == 7 && cnt[1] == 4 && cnt[2] == 1, "imix pattern");
    CHECK(parse("{\"port\":1,\"ipv6\":true,\"size_b\":84,\"vlan\":null}") == 0, "ipv6: %s", err);
    CHECK(parse("{\"port\":0,\"l2\":1}") == -1 && strstr(err, "unknown"), "unknown field");

    REFUSED("{\"rx_port\":1}", "port");
    REFUSED("{\"port\":2}", "port");
    REFUSED("{\"port\":\"x\"}", "port");
    REFUSED("{\"port\":0,\"rx_port\":7}", "rx_port");
    /* receive groups */
    CHECK(parse("{\"port\":0,\"rx_ports\":[1,0]}") == 0 && S.rx_port == 1 && S.n_rx_ports == 2 &&
          S.rx_ports[0] == 1 && S.rx_ports[1] == 0, "rx_ports: rx_port defaults to the first: %s", err);
    CHECK(S.cfg.dst_mac[5] == 0x11, "dst MAC of the group's first port");
    CHECK(parse("{\"port\":0,\"rx_port\":0,\"rx_ports\":[1,0]}") == 0 && S.rx_port == 0, "rx_port in the group: %s", err);
    CHECK(parse("{\"port\":0,\"rx_port\":1}") == 0 && S.n_rx_ports == 1 && S.rx_ports[0] == 1, "no group: rx_port alone");
    {
        json_t *o = streamcfg_to_json(&S);
        json_t *rg = json_object_get(o, "rx_ports");
        CHECK(json_is_array(rg) && json_array_size(rg) == 1 && json_integer_value(json_array_get(rg, 0)) == 1,
              "normalized object lists rx_ports");
        json_decref(o);
    }
    REFUSED("{\"port\":0,\"rx_ports\":[]}", "rx_ports");
    REFUSED("{\"port\":0,\"rx_ports\":1}", "rx_ports");
    REFUSED("{\"port\":0,\"rx_ports\":[0,1,0,1,0,1,0,1,0]}", "rx_ports");
    REFUSED("{\"port\":0,\"rx_ports\":[1,1]}", "rx_ports[1]");
    REFUSED("{\"port\":0,\"rx_ports\":[1,\"x\"]}", "rx_ports[1]");
    REFUSED("{\"port\":0,\"rx_ports\":[1,5]}", "rx_ports[1]");
    CHECK(parse("{\"port\":0,\"rx_ports\":[1,5]}") == -2, "unknown port in a group is -2 (-32001)");
    P[1].mtu = 1000;
    REFUSED("{\"port\":0,\"rx_port\":0,\"rx_ports\":[0,1],\"size_b\":1200}", "size_b");   /* member 1's MTU */
    P[1].mtu = 1500;
    REFUSED("{\"port\":0,\"rx_port\":0,\"rx_ports\":[1]}", "rx_port");
    REFUSED("{\"port\":0,\"size_b\":63}", "size_b");
    REFUSED("{\"port\":0,\"size_b\":1519}", "size_b");     /* above MTU 1500 + 18 */
    CHECK(parse("{\"port\":0,\"size_b\":1522,\"vlan\":1}") == 0, "1522 with VLAN fits MTU 1500 + 18 + 4: %s", err);
    REFUSED("{\"port\":0,\"size_b\":1523,\"vlan\":1}", "size_b");
    CHECK(parse("{\"port\":0,\"size_b\":64,\"vlan\":1}") == 0, "VLAN 64 accepted: %s", err);
    REFUSED("{\"port\":0,\"size_b\":79,\"ipv6\":true}", "size_b");
    REFUSED("{\"port\":0,\"size_b\":64,\"ipv6\":true}", "size_b");
    REFUSED("{\"port\":0,\"size_b\":9300}", "size_b");
    REFUSED("{\"port\":0,\"size_b\":1500,\"vxlan\":{}}", "size_b");
    REFUSED("{\"port\":0,\"flows\":0}", "flows");
    REFUSED("{\"port\":0,\"flows\":1000001}", "flows");
    REFUSED("{\"port\":0,\"flows\":2.5}", "flows");
    REFUSED("{\"port\":0,\"vary\":[\"ttl\"]}", "vary[0]");
    REFUSED("{\"port\":0,\"vlan\":4096}", "vlan");
    REFUSED("{\"port\":0,\"src_ip\":\"300.1.1.1\"}", "src_ip");
    REFUSED("{\"port\":0,\"dst_mac\":\"zz\"}", "dst_mac");
    REFUSED("{\"port\":0,\"dst_port\":4789}", "dst_port");
    REFUSED("{\"port\":0,\"rate\":{\"pps\":2e7}}", "rate.pps");
    REFUSED("{\"port\":0,\"rate\":{\"percent\":120}}", "rate.percent");
    REFUSED("{\"port\":0,\"rate\":{\"l1_bps\":11e9}}", "rate.l1_bps");
    REFUSED("{\"port\":0,\"rate\":{\"pps\":1,\"percent\":1}}", "rate");
    REFUSED("{\"port\":0,\"rate\":{\"kpps\":1}}", "rate.kpps");
    REFUSED("{\"port\":0,\"rate\":{\"pps\":\"fast\"}}", "rate.pps");
    REFUSED("{\"port\":0,\"imix\":[[64,1],[40,1]]}", "imix[1]");
    REFUSED("{\"port\":0,\"imix\":[[64,1]],\"size_b\":64}", "imix");
    REFUSED("{\"port\":0,\"vxlan\":{\"vni\":16777216}}", "vni");
    REFUSED("{\"port\":0,\"vxlan\":{\"bogus\":1}}", "vxlan.bogus");
    /* percent needs a known speed */
    P[0].speed_bps = 0;
    REFUSED("{\"port\":0,\"rate\":{\"percent\":50}}", "rate.percent");
    CHECK(parse("{\"port\":0,\"rate\":{\"pps\":5e7}}") == 0, "no speed, no line-rate check");
    /* jumbo */
    P[0].mtu = 9198; P[1].mtu = 9198;
    CHECK(parse("{\"port\":0,\"rx_port\":1,\"size_b\":9216}") == 0, "jumbo 9216 at MTU 9198: %s", err);
    P[1].mtu = 1500;
    REFUSED("{\"port\":0,\"rx_port\":1,\"size_b\":9216}", "size_b");
    CHECK(strstr(err, "rx_port") != NULL, "names the rx port: %s", err);
    CHECK(parse_speed("10G") == 10e9 && parse_speed("25g") == 25e9 && parse_speed("100M") == 1e8 && parse_speed("x") < 0, "speeds");
    json_t *o = streamcfg_to_json(&S);
    CHECK(json_object_get(o, "id") && json_integer_value(json_object_get(o, "id")) == 3, "to_json id");
    json_decref(o);
    return DONE();
}
