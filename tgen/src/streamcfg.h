/* Stream definition from JSON (validation, defaults), no DPDK dependency. */
#ifndef TGEN_STREAMCFG_H
#define TGEN_STREAMCFG_H
#include <jansson.h>
#include "tmpl.h"
#include "pace.h"
#include "rxgroup.h"

#define MAX_IMIX 16
#define MAX_IMIX_WEIGHT 4096
#define MAX_FLOWS 1000000

typedef struct {
    int exists;
    uint8_t mac[6];
    double speed_bps;      /* for % line rate and checks; 0 unknown */
    unsigned mtu;
} portinfo_t;

typedef struct {
    int port, rx_port;
    int rx_ports[MAX_RX_GROUP];   /* the receive group (rx_port is one of them; default: rx_port alone) */
    int n_rx_ports;
    char name[64];
    tmpl_cfg_t cfg;
    int imix;
    int nsizes;
    uint16_t sizes[MAX_IMIX];
    uint32_t weights[MAX_IMIX];
    enum rate_kind rate_kind;
    double rate_value;
    double rate_pps;
    double mean_size_b;    /* inner mean size incl. FCS */
    double wire_size_b;    /* mean on-wire size incl. FCS (outer for VXLAN) */
} streamcfg_t;

/* Parse obj (the user's stream object) into out.  Returns 0, or -1 (invalid value) / -2 (unknown port)
 * with err = "field: why". */
int streamcfg_parse(json_t *obj, const portinfo_t *ports, int nports, uint16_t id,
                    streamcfg_t *out, char *err, size_t errlen);
/* normalized object with all defaults filled in */
json_t *streamcfg_to_json(const streamcfg_t *s);
/* Deterministic interleaved IMIX pattern: fills idx[0..total-1] with size indexes, returns total. */
unsigned streamcfg_imix_pattern(const streamcfg_t *s, uint16_t *idx, unsigned cap);
/* parse "10G", "25g", "1000M", "1e10" -> bps; -1 on error */
double parse_speed(const char *s);
void fmt_mac(const uint8_t m[6], char out[18]);
#endif
