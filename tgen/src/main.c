/* tgen: DPDK traffic generator for RFC 2544-family benchmarks.
 * main lcore: control (JSON-RPC or one-shot); worker lcores: data path. */
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>
#include <errno.h>
#include <math.h>
#include <limits.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <time.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_cycles.h>
#include "tgen.h"
#include "tscal.h"

struct port g_ports[MAX_PORTS];
unsigned g_nports;
struct stream *g_streams[MAX_STREAM_ID];
struct worker g_workers[MAX_WORKERS];
unsigned g_nworkers;
struct rte_mempool *g_pool;
struct rte_mempool *g_txpool;
int g_tmpl_tag_off = -1;
int g_main_tags;
volatile int g_phase;
struct trial *volatile g_trial;
volatile int g_quit;
uint64_t g_tsc_hz, g_tsc0, g_ns_mult;
uint64_t g_tsc_hz_dpdk;
json_t *g_tsc_cal;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: tgen <EAL args> -- [options]\n"
        "  --socket PATH            control socket (default /tmp/tgen.<pid>.sock, mode 0600)\n"
        "  --tcp [HOST:]PORT --token T   also listen on TCP (127.0.0.1 by default; needs --token)\n"
        "  --port ID:speed=10G,rxq=1,txq=1,rxd=1024,txd=1024,mtu=1500,promisc=1,rx=1,mac=02:00:00:00:00:01\n"
        "                           (repeatable; mac: the address tgen puts on the wire for the port, its\n"
        "                           frames' source and the default destination of streams to it; the\n"
        "                           device's own address is left as it is; tx_reuse=0|1: build frames\n"
        "                           above 128 B in mbufs RX brought back, default 1 on virtio only;\n"
        "                           prefetch=0|1: another core/device touches its mbufs (default: not\n"
        "                           for memif, af_packet, ring, null; a zero-copy memif client: give 1);\n"
        "                           cksum_offload=0|1: the port computes IPv4/UDP checksums where it offers\n"
        "                           that (default 1; 0: software, e.g. to keep a NIC's vector TX path)\n"
        "  --tx-lcores L --rx-lcores L   worker lcores for TX / RX (default: all workers do both)\n"
        "  --auth-timeout S         drop a TCP client that has not authenticated after S s (default 5)\n"
        "  --idle-timeout S         drop a TCP client silent for S s (default 300; 0 = never)\n"
        "  --mbufs N                mbuf pool size\n"
        "  --tsc-hz calibrate|dpdk|HZ   TSC frequency: measured against CLOCK_MONOTONIC_RAW at start (default),\n"
        "                           DPDK's (rounded to 10 MHz), or given\n"
        " one-shot trial (prints the trial.result JSON and exits):\n"
        "  --oneshot --stream 'port=0,rx_port=1,size=64,flows=1000,pps=1e6' [--stream ...]\n"
        "            (a receive group: rx_ports=1+3)\n"
        "  --duration S | --frames N | --segments D:SCALE,... | --mode burst --burst-frames N [--bursts N --burst-interval S]\n"
        "  [--pps X] [--drain S] [--learning 0|1] [--learning-wait S] [--no-latency]\n"
        "See tgen/PROTOCOL.md.\n");
}

static void die2(const char *opt, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die2(const char *opt, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tgen: %s: ", opt);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

struct portopt { int set; double speed; unsigned rxq, txq, rxd, txd, mtu, promisc, rx, tx_reuse, prefetch, cksum; int mac_set; uint8_t mac[6]; };
static struct portopt popt[MAX_PORTS];

static unsigned parse_uint(const char *opt, const char *s, unsigned lo, unsigned hi)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *s == 0 || *end || *s == '-' || v < lo || v > hi) die2(opt, "'%s' must be an integer %u..%u", s, lo, hi);
    return (unsigned)v;
}

static double parse_dbl(const char *opt, const char *s, double lo, double hi)
{
    char *end;
    double v = strtod(s, &end);
    if (*s == 0 || *end || !isfinite(v) || v < lo || v > hi) die2(opt, "'%s' must be a number %g..%g", s, lo, hi);
    return v;
}

static void parse_port_opt(const char *arg)
{
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", arg);
    char *colon = strchr(buf, ':');
    if (colon) *colon = 0;
    unsigned id = parse_uint("--port", buf, 0, MAX_PORTS - 1);
    struct portopt *p = &popt[id];
    p->set = 1;
    if (!colon) return;
    char *save = NULL;
    for (char *kv = strtok_r(colon + 1, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) die2("--port", "'%s' is not key=value", kv);
        *eq = 0;
        const char *v = eq + 1;
        if (!strcmp(kv, "speed")) { p->speed = parse_speed(v); if (p->speed <= 0) die2("--port", "speed '%s' is not a speed like 10G, 100M or 1e10", v); }
        else if (!strcmp(kv, "rxq")) p->rxq = parse_uint("--port rxq", v, 1, MAX_QUEUES);
        else if (!strcmp(kv, "txq")) p->txq = parse_uint("--port txq", v, 1, MAX_QUEUES);
        else if (!strcmp(kv, "rxd")) p->rxd = parse_uint("--port rxd", v, 32, 32768);
        else if (!strcmp(kv, "txd")) p->txd = parse_uint("--port txd", v, 32, 32768);
        else if (!strcmp(kv, "mtu")) p->mtu = parse_uint("--port mtu", v, 68, MAX_FRAME_B);
        else if (!strcmp(kv, "promisc")) p->promisc = parse_uint("--port promisc", v, 0, 1) + 1;
        else if (!strcmp(kv, "rx")) p->rx = parse_uint("--port rx", v, 0, 1) + 1;
        else if (!strcmp(kv, "tx_reuse")) p->tx_reuse = parse_uint("--port tx_reuse", v, 0, 1) + 1;
        else if (!strcmp(kv, "prefetch")) p->prefetch = parse_uint("--port prefetch", v, 0, 1) + 1;
        else if (!strcmp(kv, "cksum_offload")) p->cksum = parse_uint("--port cksum_offload", v, 0, 1) + 1;
        else if (!strcmp(kv, "mac")) {
            if (parse_mac(v, p->mac) || (p->mac[0] & 1))
                die2("--port", "mac '%s' must be a unicast MAC address like 02:00:00:00:00:01", v);
            p->mac_set = 1;
        }
        else die2("--port", "unknown key '%s' (speed, rxq, txq, rxd, txd, mtu, promisc, rx, tx_reuse, prefetch, cksum_offload, mac)", kv);
    }
}

static int parse_lcore_list(const char *opt, const char *s, unsigned *out, int max)
{
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", s);
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n >= max) die2(opt, "too many lcores");
        out[n++] = parse_uint(opt, t, 0, RTE_MAX_LCORE - 1);
    }
    if (!n) die2(opt, "empty lcore list");
    return n;
}

/* "port=0,size=64,pps=1e6,imix=64:7/576:4,vary=src_ip+dst_port,vxlan=5" -> stream object */
static json_t *stream_spec_json(const char *spec)
{
    char buf[4096];
    if (strlen(spec) >= sizeof(buf)) die2("--stream", "spec too long");
    snprintf(buf, sizeof(buf), "%s", spec);
    json_t *o = json_object(), *vx = NULL;
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) die2("--stream", "'%s' is not key=value", kv);
        *eq = 0;
        char *k = kv, *v = eq + 1;
        if (!strcmp(k, "size")) k = "size_b";
        char *end;
        double d = strtod(v, &end);
        int isnum = *v && !*end;
        json_t *jv;
        if (!strcmp(v, "true") || !strcmp(v, "false")) jv = json_boolean(!strcmp(v, "true"));
        else if (isnum && d == floor(d) && fabs(d) < 9e15) jv = json_integer((json_int_t)d);
        else if (isnum) jv = json_real(d);
        else jv = json_string(v);
        if (!strcmp(k, "pps") || !strcmp(k, "percent") || !strcmp(k, "l1_bps") || !strcmp(k, "l2_bps")) {
            if (!isnum) die2("--stream", "%s: '%s' is not a number", k, v);
            json_decref(jv);
            if (!strcmp(k, "l1_bps") || !strcmp(k, "l2_bps")) { d = parse_speed(v); if (d <= 0) die2("--stream", "%s: bad value '%s'", k, v); }
            json_object_set_new(o, "rate", json_pack("{sf}", k, d));
        } else if (!strcmp(k, "imix")) {
            json_decref(jv);
            json_t *l = json_array();
            char *s2 = NULL;
            for (char *e = strtok_r(v, "/", &s2); e; e = strtok_r(NULL, "/", &s2)) {
                unsigned sz, w;
                char tail;
                if (sscanf(e, "%u:%u%c", &sz, &w, &tail) != 2) die2("--stream", "imix entry '%s' is not SIZE:WEIGHT", e);
                json_array_append_new(l, json_pack("[ii]", sz, w));
            }
            json_object_set_new(o, "imix", l);
        } else if (!strcmp(k, "rx_ports")) {
            /* rx_ports=1+3: a receive group */
            json_decref(jv);
            json_t *l = json_array();
            char *s2 = NULL;
            for (char *e = strtok_r(v, "+/:", &s2); e; e = strtok_r(NULL, "+/:", &s2))
                json_array_append_new(l, json_integer((json_int_t)parse_uint("--stream rx_ports", e, 0, MAX_PORTS - 1)));
            json_object_set_new(o, "rx_ports", l);
        } else if (!strcmp(k, "vary")) {
            json_decref(jv);
            json_t *l = json_array();
            char *s2 = NULL;
            for (char *e = strtok_r(v, "+/:", &s2); e; e = strtok_r(NULL, "+/:", &s2)) json_array_append_new(l, json_string(e));
            json_object_set_new(o, "vary", l);
        } else if (!strcmp(k, "vxlan") || !strcmp(k, "vni")) {
            if (!vx) vx = json_object();
            if (!json_is_integer(jv)) die2("--stream", "vxlan: VNI must be an integer");
            json_object_set_new(vx, "vni", jv);
        } else if (!strncmp(k, "outer_", 6)) {
            if (!vx) vx = json_object();
            json_object_set_new(vx, k, jv);
        } else if (!strcmp(k, "ipv6")) {
            if (json_is_integer(jv)) { json_int_t b = json_integer_value(jv); json_decref(jv); jv = json_boolean(b); }
            json_object_set_new(o, k, jv);
        } else {
            json_object_set_new(o, k, jv);
        }
    }
    if (vx) json_object_set_new(o, "vxlan", vx);
    return o;
}

static void on_signal(int s) { (void)s; __atomic_store_n(&g_quit, 1, __ATOMIC_RELEASE); }

struct opts {
    const char *sock, *tcp, *token;
    unsigned txl[MAX_WORKERS], rxl[MAX_WORKERS];   /* --tx-lcores/--rx-lcores (lcore ids) */
    int ntxl, nrxl;                                /* 0 = option not given */
    unsigned mbufs;
    int oneshot;
    const char *tsc_hz;     /* --tsc-hz: NULL/"calibrate", "dpdk" or a frequency */
    double auth_timeout_s, idle_timeout_s;
    int have_auth_timeout, have_idle_timeout;
    json_t *specs;          /* --stream objects (one-shot) */
    json_t *tp;             /* trial.start params (one-shot) */
};

static const char *next_arg(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) die2(argv[*i], "needs a value");
    return argv[++*i];
}

/* "5:1.1,5:0.5" -> [{duration_s, scale}, ...] */
static json_t *segments_json(const char *opt, const char *arg)
{
    char buf[2048];
    if (strlen(arg) >= sizeof(buf)) die2(opt, "list too long");
    snprintf(buf, sizeof(buf), "%s", arg);
    json_t *l = json_array();
    char *save = NULL;
    for (char *e = strtok_r(buf, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
        double d, s;
        char tail;
        if (sscanf(e, "%lf:%lf%c", &d, &s, &tail) != 2 || !(d > 0) || !(s > 0)) die2(opt, "'%s' is not DURATION_S:SCALE", e);
        json_array_append_new(l, json_pack("{sfsf}", "duration_s", d, "scale", s));
    }
    return l;
}

/* One-shot trial options -> trial.start params.  Returns 0 if argv[*i] is not one of them. */
static int parse_trial_opt(int argc, char **argv, int *i, json_t *tp)
{
    const char *o = argv[*i];
#define TPSET(k, v) json_object_set_new(tp, k, v)
    if (!strcmp(o, "--duration")) TPSET("duration_s", json_real(parse_dbl(o, next_arg(argc, argv, i), 1e-6, 1e6)));
    else if (!strcmp(o, "--frames")) TPSET("frames", json_integer((json_int_t)parse_dbl(o, next_arg(argc, argv, i), 1, 1e15)));
    else if (!strcmp(o, "--pps")) TPSET("pps", json_real(parse_dbl(o, next_arg(argc, argv, i), 1, 1e10)));
    else if (!strcmp(o, "--drain")) TPSET("drain_s", json_real(parse_dbl(o, next_arg(argc, argv, i), 0, 3600)));
    else if (!strcmp(o, "--learning")) TPSET("learning", json_boolean(parse_uint(o, next_arg(argc, argv, i), 0, 1)));
    else if (!strcmp(o, "--learning-wait")) TPSET("learning_wait_s", json_real(parse_dbl(o, next_arg(argc, argv, i), 0, 3600)));
    else if (!strcmp(o, "--no-latency")) TPSET("latency", json_false());
    else if (!strcmp(o, "--mode")) {
        const char *m = next_arg(argc, argv, i);
        if (strcmp(m, "burst") && strcmp(m, "continuous")) die2(o, "must be continuous or burst");
        TPSET("mode", json_string(m));
    }
    else if (!strcmp(o, "--burst-frames")) TPSET("burst_frames", json_integer(parse_uint(o, next_arg(argc, argv, i), 1, 4000000000u)));
    else if (!strcmp(o, "--bursts")) TPSET("bursts", json_integer(parse_uint(o, next_arg(argc, argv, i), 1, MAX_SEGS)));
    else if (!strcmp(o, "--burst-interval")) TPSET("burst_interval_s", json_real(parse_dbl(o, next_arg(argc, argv, i), 1e-6, 3600)));
    else if (!strcmp(o, "--segments")) TPSET("segments", segments_json(o, next_arg(argc, argv, i)));
    else return 0;
#undef TPSET
    return 1;
}

/* tgen options (after "--"); exits 2 naming the option on any mistake.  Returns 1 for --help. */
static int parse_args(int argc, char **argv, int first, struct opts *op)
{
    for (int i = first; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) return 1;
        else if (!strcmp(o, "--socket")) op->sock = next_arg(argc, argv, &i);
        else if (!strcmp(o, "--tcp")) op->tcp = next_arg(argc, argv, &i);
        else if (!strcmp(o, "--token")) op->token = next_arg(argc, argv, &i);
        else if (!strcmp(o, "--auth-timeout")) { op->auth_timeout_s = parse_dbl(o, next_arg(argc, argv, &i), 0.1, 3600); op->have_auth_timeout = 1; }
        else if (!strcmp(o, "--idle-timeout")) { op->idle_timeout_s = parse_dbl(o, next_arg(argc, argv, &i), 0, 1e6); op->have_idle_timeout = 1; }
        else if (!strcmp(o, "--port")) parse_port_opt(next_arg(argc, argv, &i));
        else if (!strcmp(o, "--tx-lcores")) op->ntxl = parse_lcore_list(o, next_arg(argc, argv, &i), op->txl, MAX_WORKERS);
        else if (!strcmp(o, "--rx-lcores")) op->nrxl = parse_lcore_list(o, next_arg(argc, argv, &i), op->rxl, MAX_WORKERS);
        else if (!strcmp(o, "--tsc-hz")) {
            op->tsc_hz = next_arg(argc, argv, &i);
            if (strcmp(op->tsc_hz, "calibrate") && strcmp(op->tsc_hz, "dpdk")) parse_dbl(o, op->tsc_hz, 1e6, 1e11);
        }
        else if (!strcmp(o, "--mbufs")) op->mbufs = parse_uint(o, next_arg(argc, argv, &i), 1024, 1u << 24);
        else if (!strcmp(o, "--oneshot")) op->oneshot = 1;
        else if (!strcmp(o, "--stream")) json_array_append_new(op->specs, stream_spec_json(next_arg(argc, argv, &i)));
        else if (!parse_trial_opt(argc, argv, &i, op->tp)) die2(o, "unknown option (see --help)");
    }
    if (op->tcp && !op->token) die2("--tcp", "refusing to listen on TCP without --token");
    if (op->token && !op->tcp) die2("--token", "only meaningful with --tcp");
    if (op->have_auth_timeout && !op->tcp) die2("--auth-timeout", "only meaningful with --tcp");
    if (op->have_idle_timeout && !op->tcp) die2("--idle-timeout", "only meaningful with --tcp");
    if (op->oneshot && json_array_size(op->specs) == 0) die2("--oneshot", "needs at least one --stream");
    if (!op->oneshot && (json_array_size(op->specs) || json_object_size(op->tp))) die2("--stream", "trial options need --oneshot");
    return 0;
}

/* ---- EAL runtime directory ----
 * EAL keeps /var/run/dpdk/<file-prefix> (config, fbarray files) after rte_eal_cleanup(); a test
 * run would leave one per process.  tgen removes it on exit, but only when --file-prefix was given
 * explicitly (the default "rte" directory may belong to another DPDK application) and the runtime
 * directory EAL used is exactly <...>/dpdk/<that prefix>. */
static char g_file_prefix[256];
static char g_rundir[PATH_MAX];

/* before rte_eal_init, which may reorder argv */
static void note_file_prefix(int eal_argc, char **argv)
{
    for (int i = 1; i < eal_argc; i++) {
        if (!strncmp(argv[i], "--file-prefix=", 14)) snprintf(g_file_prefix, sizeof(g_file_prefix), "%s", argv[i] + 14);
        else if (!strcmp(argv[i], "--file-prefix") && i + 1 < eal_argc) snprintf(g_file_prefix, sizeof(g_file_prefix), "%s", argv[++i]);
    }
}

/* after a successful rte_eal_init */
static void note_runtime_dir(void)
{
    const char *d = rte_eal_get_runtime_dir();
    if (!g_file_prefix[0] || !d || rte_eal_process_type() != RTE_PROC_PRIMARY) return;
    const char *base = strrchr(d, '/');
    if (!base || strcmp(base + 1, g_file_prefix) || strstr(d, "/dpdk/") == NULL) return;
    snprintf(g_rundir, sizeof(g_rundir), "%s", d);
}

static void remove_runtime_dir(void)
{
    if (!g_rundir[0]) return;
    DIR *dir = opendir(g_rundir);
    if (!dir) return;
    int dfd = dirfd(dir);
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (unlinkat(dfd, de->d_name, 0) && errno != ENOENT)
            fprintf(stderr, "tgen: cannot remove %s/%s: %s\n", g_rundir, de->d_name, strerror(errno));
    }
    closedir(dir);
    if (rmdir(g_rundir) && errno != ENOENT)
        fprintf(stderr, "tgen: cannot remove EAL runtime directory %s: %s\n", g_rundir, strerror(errno));
    g_rundir[0] = 0;
}

static void eal_teardown(void)
{
    rte_eal_cleanup();
    remove_runtime_dir();
}

/* ---- ports and lcores (after EAL init; errors are printed, return 2) ---- */

static int setup_ports(void)
{
    g_nports = rte_eth_dev_count_avail();
    if (g_nports == 0) { fprintf(stderr, "tgen: no DPDK ports (give -a PCI or --vdev ...)\n"); return 2; }
    if (g_nports > MAX_PORTS) g_nports = MAX_PORTS;
    for (unsigned p = 0; p < MAX_PORTS; p++) {
        if (popt[p].set && p >= g_nports) { fprintf(stderr, "tgen: --port: port %u does not exist (%u ports)\n", p, g_nports); return 2; }
        struct port *pt = &g_ports[p];
        pt->speed_decl = popt[p].speed;
        pt->rxq = popt[p].rxq ? popt[p].rxq : 1;
        pt->txq = popt[p].txq ? popt[p].txq : 1;
        pt->rxd = popt[p].rxd ? popt[p].rxd : 1024;
        pt->txd = popt[p].txd ? popt[p].txd : 1024;
        pt->mtu = popt[p].mtu ? popt[p].mtu : 1500;
        pt->promisc = popt[p].promisc ? popt[p].promisc - 1 : 1;
        pt->tx_reuse = popt[p].tx_reuse ? (int)popt[p].tx_reuse - 1 : -1;   /* -1: by driver (ports_init) */
        pt->remote = popt[p].prefetch ? (int)popt[p].prefetch - 1 : -1;     /* likewise */
        pt->cksum_allowed = popt[p].cksum ? (int)popt[p].cksum - 1 : 1;
        if (p >= g_nports) continue;
        if (!rte_eth_dev_is_valid_port((uint16_t)p)) {
            /* tgen numbers ports 0..N-1 and uses the DPDK port id as its port id */
            fprintf(stderr, "tgen: DPDK port ids are not 0..%u (port %u is missing); cannot run\n", g_nports - 1, p);
            return 2;
        }
        if (popt[p].rx) pt->rx_poll = (int)popt[p].rx - 1;
        else {
            struct rte_eth_dev_info di;
            pt->rx_poll = !(rte_eth_dev_info_get((uint16_t)p, &di) == 0 && di.driver_name &&
                            strstr(di.driver_name, "net_null"));
        }
    }
    return 0;
}

/* --tx-lcores/--rx-lcores lcore ids -> worker indexes (all workers without a list) */
static int worker_set(const char *opt, const unsigned *lcores, int cnt, unsigned *out, unsigned *n)
{
    *n = 0;
    if (!cnt) { for (unsigned w = 0; w < g_nworkers; w++) out[(*n)++] = w; return 0; }
    for (int i = 0; i < cnt; i++) {
        unsigned w;
        for (w = 0; w < g_nworkers; w++) if (g_workers[w].lcore == lcores[i]) break;
        if (w == g_nworkers) { fprintf(stderr, "tgen: %s: lcore %u is not a worker lcore\n", opt, lcores[i]); return 2; }
        out[(*n)++] = w;
    }
    return 0;
}

/* find the worker lcores and deal TX and RX queues to them round-robin */
static int setup_workers(const struct opts *op)
{
    unsigned lc;
    RTE_LCORE_FOREACH_WORKER(lc) {
        if (g_nworkers >= MAX_WORKERS) break;
        g_workers[g_nworkers++].lcore = lc;
    }
    if (g_nworkers == 0) {
        fprintf(stderr, "tgen: EAL: need at least one worker lcore besides the main one (e.g. --lcores 0@0,1@0 or -l 0,1)\n");
        return 2;
    }
    unsigned txs[MAX_WORKERS], rxs[MAX_WORKERS], ntx, nrx;
    if (worker_set("--tx-lcores", op->txl, op->ntxl, txs, &ntx) || worker_set("--rx-lcores", op->rxl, op->nrxl, rxs, &nrx))
        return 2;
    unsigned ti = 0, ri = 0;
    for (unsigned p = 0; p < g_nports; p++) {
        /* the workers on the port's NUMA socket first: a port's queues go to those when there are
         * any (one socket, or a port of unknown socket: every worker, as listed) */
        unsigned etx[MAX_WORKERS], erx[MAX_WORKERS], netx = 0, nerx = 0;
        int sock = rte_eth_dev_socket_id((uint16_t)p);
        for (unsigned i = 0; i < ntx; i++)
            if (sock < 0 || (int)rte_lcore_to_socket_id(g_workers[txs[i]].lcore) == sock) etx[netx++] = txs[i];
        for (unsigned i = 0; i < nrx; i++)
            if (sock < 0 || (int)rte_lcore_to_socket_id(g_workers[rxs[i]].lcore) == sock) erx[nerx++] = rxs[i];
        if (!netx) { memcpy(etx, txs, sizeof(txs[0]) * ntx); netx = ntx; }
        if (!nerx) { memcpy(erx, rxs, sizeof(rxs[0]) * nrx); nerx = nrx; }
        for (unsigned q = 0; q < g_ports[p].txq; q++) {
            unsigned w = etx[ti++ % netx];
            g_ports[p].tx_lcore[q] = (int)w;
            g_workers[w].does_tx = 1;
        }
        g_ports[p].rx_lcore = RXG_NOT_POLLED;
        for (unsigned q = 0; q < MAX_QUEUES; q++) g_ports[p].rxq_worker[q] = -1;
        for (unsigned q = 0; q < g_ports[p].rxq && g_ports[p].rx_poll; q++) {
            g_ports[p].rxq_worker[q] = (int)erx[ri % nerx];
            struct worker *w = &g_workers[erx[ri++ % nerx]];
            w->rxq[w->nrxq].port = (uint16_t)p;
            w->rxq[w->nrxq].queue = (uint16_t)q;
            w->nrxq++;
            w->does_rx = 1;
            /* which lcore polls the port (a receive group's ports must share one: rxgroup.h) */
            int l = (int)w->lcore;
            g_ports[p].rx_lcore = g_ports[p].rx_lcore == RXG_NOT_POLLED || g_ports[p].rx_lcore == l ? l : RXG_SPLIT;
        }
    }
    return 0;
}

/* --mbufs: a pool of that size, data room for the largest port MTU (+VLAN, +VXLAN) */
static int create_pool(unsigned mbufs)
{
    if (!mbufs) return 0;
    unsigned room = RTE_PKTMBUF_HEADROOM + 2048;
    for (unsigned p = 0; p < g_nports; p++) if (g_ports[p].mtu + 18 + 4 + VXLAN_OVERHEAD > room - RTE_PKTMBUF_HEADROOM)
        room = RTE_PKTMBUF_HEADROOM + g_ports[p].mtu + 18 + 4 + VXLAN_OVERHEAD;
    room += 64;   /* the frame builder copies in 32-byte blocks */
    g_pool = rte_pktmbuf_pool_create("tgen_pool", mbufs, 256, 0, (uint16_t)room, (int)rte_socket_id());
    if (!g_pool) { fprintf(stderr, "tgen: --mbufs: cannot create a pool of %u mbufs: %s\n", mbufs, rte_strerror(rte_errno)); return 1; }
    return 0;
}

static void launch_workers(void)
{
    for (unsigned w = 0; w < g_nworkers; w++) {
        g_workers[w].seen_phase = -2;
        rte_eal_remote_launch(worker_main, &g_workers[w], g_workers[w].lcore);
    }
}

static void print_json_line(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);
    printf("%s\n", s);
    fflush(stdout);
    free(s);
}

/* --oneshot: add the streams, run one trial, print its result */
static int run_oneshot(const struct opts *op)
{
    int authed = 1;
    rpc_err_t e;
    size_t i;
    json_t *sp;
    json_array_foreach(op->specs, i, sp) {
        json_t *r = rpc_dispatch("stream.add", sp, &authed, 0, &e);
        if (!r) { fprintf(stderr, "tgen: --stream #%zu: %s\n", i + 1, e.msg); return 2; }
        json_decref(r);
    }
    if (trial_start(op->tp, &e)) { fprintf(stderr, "tgen: trial: %s\n", e.msg); return 2; }
    while (!g_quit) {
        trial_tick();
        if (g_phase == PH_DONE) break;
        rte_delay_us_sleep(1000);
    }
    if (g_quit) { fprintf(stderr, "tgen: interrupted\n"); return 1; }
    json_t *r = trial_result(&e);
    if (!r) { fprintf(stderr, "tgen: %s\n", e.msg); return 1; }
    print_json_line(r);
    json_decref(r);
    return 0;
}

/* RPC server: listen, print the ready line, serve until shutdown or a signal */
static int run_server(const struct opts *op)
{
    char path[108], err[512];
    const char *sock = op->sock;
    if (!sock) { snprintf(path, sizeof(path), "/tmp/tgen.%d.sock", (int)getpid()); sock = path; }
    ctl_set_timeouts(op->auth_timeout_s, op->idle_timeout_s);
    if (ctl_listen_unix(sock, err, sizeof(err)) || (op->tcp && ctl_listen_tcp(op->tcp, op->token, err, sizeof(err)))) {
        fprintf(stderr, "tgen: %s\n", err);
        return 2;
    }
    json_t *ready = json_pack("{sbssss?sisi}", "ready", 1, "socket", sock, "tcp", op->tcp, "pid", (int)getpid(), "ports", (int)g_nports);
    print_json_line(ready);
    json_decref(ready);
    ctl_loop();
    return 0;
}

/* ---- TSC frequency (tscal.h) ----
 * DPDK 22.11 rounds the TSC frequency to 10 MHz; every rate and duration would carry that error
 * (0.19 % on this VM).  tgen measures it against CLOCK_MONOTONIC_RAW: CAL_POINTS points CAL_GAP_US
 * apart, each the tightest of CAL_BRACKETS rdtsc/clock_gettime/rdtsc brackets (0.3 s; one retry if
 * the measurement was disturbed).  If it still fails, DPDK's value is used and the reason reported. */
#define CAL_POINTS 5
#define CAL_GAP_US 75000
#define CAL_BRACKETS 48
#define CAL_ATTEMPTS 2

static int64_t mono_raw_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void cal_points(tscal_point_t *p, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        if (i) rte_delay_us_sleep(CAL_GAP_US);
        tscal_read_t r[CAL_BRACKETS];
        for (unsigned j = 0; j < CAL_BRACKETS; j++) {
            struct timespec ts;
            r[j].tsc0 = rte_rdtsc_precise();
            clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
            r[j].tsc1 = rte_rdtsc_precise();
            r[j].ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
        }
        p[i] = tscal_best(r, CAL_BRACKETS);
    }
}

static json_t *cal_json(const char *method, const tscal_result_t *r, unsigned attempts, double took_s)
{
    json_t *o = json_object();
    json_object_set_new(o, "method", json_string(method));
    json_object_set_new(o, "correction_ppm", json_real(((double)g_tsc_hz / (double)g_tsc_hz_dpdk - 1.0) * 1e6));
    if (r) {
        json_object_set_new(o, "window_s", json_real(r->window_s));
        json_object_set_new(o, "spread_ppm", json_real(r->spread_ppm));
        json_object_set_new(o, "error_bound_ppm", json_real(r->error_bound_ppm));
        json_object_set_new(o, "samples", json_integer(r->points_used));
        json_object_set_new(o, "points", json_integer(r->points));
        json_object_set_new(o, "windows", json_integer(r->windows));
        json_object_set_new(o, "bracket_ns_min", json_real(r->bracket_ns_min));
        json_object_set_new(o, "bracket_ns_max", json_real(r->bracket_ns_max));
        json_object_set_new(o, "attempts", json_integer(attempts));
        json_object_set_new(o, "took_s", json_real(took_s));
    }
    return o;
}

static void init_clock(const char *mode)
{
    g_tsc_hz_dpdk = rte_get_tsc_hz();
    g_tsc_hz = g_tsc_hz_dpdk;
    if (mode && !strcmp(mode, "dpdk")) {
        g_tsc_cal = cal_json("dpdk", NULL, 0, 0);
        json_object_set_new(g_tsc_cal, "reason", json_string("--tsc-hz dpdk"));
    } else if (mode && strcmp(mode, "calibrate")) {
        g_tsc_hz = (uint64_t)llround(strtod(mode, NULL));
        g_tsc_cal = cal_json("given", NULL, 0, 0);
    } else {
        const tscal_limits_t lim = TSCAL_LIMITS_DEFAULT;
        tscal_point_t p[CAL_POINTS];
        tscal_result_t r;
        int64_t t0 = mono_raw_ns();
        unsigned a;
        int ok = -1;
        for (a = 1; a <= CAL_ATTEMPTS && ok; a++) {
            cal_points(p, CAL_POINTS);
            ok = tscal_compute(p, CAL_POINTS, (double)g_tsc_hz_dpdk, &lim, &r);
        }
        double took = (double)(mono_raw_ns() - t0) / 1e9;
        if (!ok) {
            g_tsc_hz = (uint64_t)llround(r.hz);
            g_tsc_cal = cal_json("CLOCK_MONOTONIC_RAW", &r, a - 1, took);
            fprintf(stderr, "tgen: TSC %" PRIu64 " Hz (against CLOCK_MONOTONIC_RAW over %.2f s, %u windows, spread %.2f ppm); "
                    "DPDK said %" PRIu64 " Hz (%+.1f ppm)\n", g_tsc_hz, r.window_s, r.windows, r.spread_ppm,
                    g_tsc_hz_dpdk, ((double)g_tsc_hz_dpdk / (double)g_tsc_hz - 1.0) * 1e6);
        } else {
            g_tsc_cal = cal_json("dpdk", &r, a - 1, took);
            char why[sizeof(r.why) + 32];
            snprintf(why, sizeof(why), "calibration failed: %s", r.why);
            json_object_set_new(g_tsc_cal, "reason", json_string(why));
            fprintf(stderr, "tgen: TSC calibration failed (%s); using DPDK's %" PRIu64 " Hz (rounded to 10 MHz)\n",
                    r.why, g_tsc_hz_dpdk);
        }
    }
    g_tsc0 = rte_rdtsc();
    g_ns_mult = (uint64_t)(1e9 * 4294967296.0 / (double)g_tsc_hz);
}

int main(int argc, char **argv)
{
    int sep = -1;
    for (int i = 1; i < argc; i++) if (!strcmp(argv[i], "--")) { sep = i; break; }
    int eal_argc = sep < 0 ? argc : sep;
    struct opts op = { .auth_timeout_s = CTL_AUTH_TIMEOUT_S, .idle_timeout_s = CTL_IDLE_TIMEOUT_S,
                       .specs = json_array(), .tp = json_object() };
    if (parse_args(argc, argv, sep < 0 ? argc : sep + 1, &op)) { usage(stdout); return 0; }

    note_file_prefix(eal_argc, argv);
    if (rte_eal_init(eal_argc, argv) < 0) {
        fprintf(stderr, "tgen: EAL: initialisation failed: %s (check the EAL arguments)\n", rte_strerror(rte_errno));
        return 2;
    }
    note_runtime_dir();
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    init_clock(op.tsc_hz);

    int rc = setup_ports();
    if (!rc) rc = setup_workers(&op);
    if (!rc) rc = create_pool(op.mbufs);
    if (rc) { eal_teardown(); return rc; }
    char err[512];
    if (ports_init(err, sizeof(err))) { fprintf(stderr, "tgen: %s\n", err); ports_close(); eal_teardown(); return 1; }
    /* --port N:mac=: the address on the wire, not the device's.  On a kernel interface (af_packet)
     * frames to the interface's own address also go up the kernel's IP stack, which routes each one
     * (in the context of whoever sent it: the DUT); frames to another address stop at ip_rcv's
     * first check (PACKET_OTHERHOST).  The socket still gets every frame. */
    for (unsigned p = 0; p < g_nports && p < MAX_PORTS; p++)
        if (popt[p].mac_set) memcpy(g_ports[p].mac, popt[p].mac, 6);
    launch_workers();
    int exit_code = op.oneshot ? run_oneshot(&op) : run_server(&op);

    trial_shutdown();
    __atomic_store_n(&g_quit, 1, __ATOMIC_RELEASE);
    rte_eal_mp_wait_lcore();
    ctl_close();
    ports_close();
    eal_teardown();
    json_decref(op.specs);
    json_decref(op.tp);
    json_decref(g_tsc_cal);
    return exit_code;
}
