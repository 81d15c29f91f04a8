/* Shared state of the tgen process (DPDK side). */
#ifndef TGEN_TGEN_H
#define TGEN_TGEN_H
#include <stdint.h>
#include <jansson.h>
#include <rte_mbuf.h>
#include <rte_cycles.h>
#include "streamcfg.h"
#include "seq.h"
#include "hist.h"
#include "trialcfg.h"
#include "ivals.h"

#define TGEN_VERSION "1"
#define MAX_PORTS 32
_Static_assert(MAX_PORTS == RXG_MAX_PORTS, "rxgroup.h's slot tables have MAX_PORTS entries");
#define MAX_QUEUES 16
#ifndef BURST
#define BURST 64        /* frames per rx/tx burst (-DBURST=n to try another) */
#endif
#define MAX_WORKERS 64

enum phase { PH_IDLE = 0, PH_LEARNING, PH_RUNNING, PH_DRAINING, PH_DONE };
extern const char *phase_name[];

struct port {
    int used;
    uint16_t id;
    char name[128];
    char driver[64];
    uint8_t mac[6];
    double speed_decl;      /* declared bps, 0 = none */
    unsigned rxq, txq, rxd, txd, mtu, promisc;
    int rx_poll;            /* poll RX queues (default: yes, except net_null whose RX is synthetic) */
    int rx_lcore;           /* the lcore polling all its RX queues; RXG_NOT_POLLED / RXG_SPLIT (rxgroup.h) */
    int started;
    int tx_lcore[MAX_QUEUES];   /* worker index owning each tx queue */
    int rxq_worker[MAX_QUEUES]; /* worker index polling each rx queue, -1 = none (rx=0) */
    int remote;             /* another agent writes its RX mbufs and reads its TX mbufs (a vhost backend,
                             * a NIC, the kernel into AF_XDP's umem, a zero-copy memif server): the
                             * data path prefetches their lines a burst at a time.  Not for PMDs that
                             * copy on tgen's own core (memif, af_packet, ring, null): their lines are
                             * in its cache already.  --port prefetch= overrides */
    int tx_reuse;           /* frames above TX_SMALL_MAX built in main-pool mbufs the RX loop tagged
                             * (worker.c): --port tx_reuse=, by default where another core copies the
                             * frames out (virtio: the vhost backend) */
    unsigned if_index;      /* kernel interface behind an af_packet/af_xdp port (0 = none) */
    uint64_t tx_offload_capa;   /* the TX offloads the port offers */
    int cksum_allowed;      /* --port cksum_offload (default 1) */
    int cksum_hw, fast_free;    /* IPV4/UDP_CKSUM and MBUF_FAST_FREE enabled (txoff.h, ports_init) */
    char txoff_note[256];   /* what TX does in software instead, and why ("" = nothing) */
    int socket;             /* the port's NUMA socket (-1 unknown) */
    struct rte_mempool *rx_pool;   /* its socket's main pool: RX queues' mbufs, small and learning
                                    * frames (g_pool on the main lcore's socket or an unknown one) */
    struct rte_mempool *tx_pool;   /* its socket's TX pool (g_txpool likewise; NULL: none) */
};

/* a port's TX counters at one instant: the PMD's (rte_eth_stats) and, for af_packet/af_xdp, the
 * kernel interface's (/proc/self/net/dev), which count what the kernel really transmitted */
struct port_txc {
    int pmd_ok, if_ok;
    uint64_t opackets, oerrors;
    uint64_t if_tx_packets, if_tx_dropped, if_tx_errors;
    char ifname[32];
};

struct stream {
    json_t *input;          /* user's object, kept for stream.modify */
    streamcfg_t sc;
    tmpl_t *tmpls[MAX_IMIX];   /* one per size */
    uint16_t *pattern;      /* imix: size index per frame */
    unsigned plen;
    uint16_t txq;
    int tx_whole;           /* one size <= TX_SMALL_MAX: built whole in main-pool mbufs (stream_build) */
    uint64_t rx_tag;        /* one size > TX_SMALL_MAX: the tag an mbuf that brought back one of its
                             * frames gets (tmpl.h; zero from the template's zero_from to its length),
                             * else 0 (stream_build) */
};

struct tx_stream {
    struct stream *st;             /* valid while the trial runs (streams are frozen then) */
    char name[64];                 /* copies, for results after the stream is removed */
    int tx_port, rx_port;
    int rx_ports[MAX_RX_GROUP];    /* the receive group (rx_port is one of them) */
    int n_rx_ports;
    uint16_t sid;
    uint16_t port, queue;
    int worker;
    double seg_pps[MAX_SEGS];
    uint64_t gap_fp[MAX_SEGS];
    uint64_t seg_max[MAX_SEGS];    /* frames this stream sends in each segment */
    /* owned by the tx worker during the trial */
    int seg;
    uint64_t k;
    uint64_t seq;
    uint32_t flow;
    unsigned pat_pos;
    uint64_t sent;
    uint64_t first_tx_ns, last_tx_ns;
    uint64_t late_max_cyc;
    uint64_t retries, nombuf;
    int reuse;                     /* frames built in main-pool mbufs, tagged (port.tx_reuse) */
    int cksum_hw, fast_free;       /* port.cksum_hw / fast_free: fast_free = every mbuf from txpool */
    struct rte_mempool *pool, *txpool;   /* the port's socket's pools (port.rx_pool / tx_pool) */
    int prefetch;                  /* port.remote */
    int done;
    struct rte_mbuf *pend[BURST];
    unsigned npend, pend_off;
} __rte_cache_aligned;

struct rxq_ref {                /* prefetch: port.remote; pool/txpool: the port's rx_pool/tx_pool */
    uint16_t port, queue;
    int prefetch;
    struct rte_mempool *pool, *txpool;
};

struct worker {
    unsigned lcore;
    int does_tx, does_rx;
    struct rxq_ref rxq[MAX_PORTS * MAX_QUEUES];
    unsigned nrxq;
    /* per trial */
    struct tx_stream **tx;
    unsigned ntx;
    seqacct_t *acct;        /* one per trial stream */
    hist_t *lat, *ipdv;     /* one per trial stream if latency */
    uint64_t non_test, late_rx, foreign_rx;
    uint64_t *misrouted;    /* one per trial stream: its frames that arrived on a port outside its receive group */
    uint64_t *rx_by_slot;   /* MAX_RX_GROUP per trial stream: its test frames accounted on each port of its group */
    uint64_t misrouted_port[MAX_PORTS];   /* test frames of trial streams received on the wrong port, by port */
    /* how busy the lcore was while the trial's traffic ran (PH_RUNNING): TSC cycles of the run
     * loop's iterations, and of those that moved a frame (sent or received one), as OVS counts a
     * PMD's busy cycles.  One clock read per iteration; reset at trial.start */
    uint64_t run_cyc, busy_cyc;
    volatile int seen_phase;
    volatile int tx_done;
} __rte_cache_aligned;

struct trial {
    unsigned nstreams;
    struct tx_stream *ts;
    int32_t *sid_map;           /* MAX_STREAM_ID entries, -1 = not in trial */
    int8_t *rx_slot;            /* RXG_MAX_PORTS per trial stream: each port's index in the stream's receive
                                 * group, -1 = not in it (read-only for the RX path, rxgroup.h) */
    uint64_t *rx_tag;           /* per trial stream: its stream.rx_tag (read-only for the RX path) */
    struct seg segs[MAX_SEGS];
    unsigned nsegs;
    int learning, latency;
    unsigned learning_frames;
    double learning_wait_s, drain_s, duration_s;
    uint64_t start_tsc, t0_ns;
    uint64_t learn_end_tsc, drain_end_tsc, run_end_tsc;
    uint64_t phase_tsc;         /* when the current phase began */
    uint64_t begin_tsc;         /* trial.start time */
    int stop;
    const char *stopped_by;     /* NULL, "trial.stop", "watchdog", "shutdown" */
    uint64_t watchdog_tsc;      /* force stop if TX is still busy then */
    int port_used[MAX_PORTS];
    struct port_txc txc0[MAX_PORTS];   /* TX counters just before the running phase */
    double interval_s;          /* loss over time (ivals.h): 0 = off */
    ivals_t *ivals;             /* allocated when the traffic starts */
    json_t *result;
};

/* globals */
extern struct port g_ports[MAX_PORTS];
extern unsigned g_nports;
extern struct stream *g_streams[MAX_STREAM_ID];
extern struct worker g_workers[MAX_WORKERS];
extern unsigned g_nworkers;
extern struct rte_mempool *g_pool;
/* TX-only pool (no RX queue takes from it, so only the frame builder writes its data): each mbuf
 * carries in a dynamic field which of its data bytes are zero (tmpl.h tmpl_write), so a frame whose
 * zero payload is already there gets only its headers copied instead of the whole frame.  NULL when
 * it could not be created: TX then takes from g_pool and copies every frame. */
extern struct rte_mempool *g_txpool;
/* frames up to this many bytes (a stream of one size) are built whole in main-pool mbufs, not
 * from the TX pool: copying two lines costs less than fetching a line back from another core
 * (worker.c tx_one_stream) */
#define TX_SMALL_MAX 128
/* The dynamic field's offset in the mbuf (-1 without g_txpool).  Main-pool mbufs carry the tag
 * too: the RX loop sets it on each mbuf it gives back (0, or its stream's rx_tag for a test frame
 * of the stream's length: tgen trusts the DUT not to rewrite the zero payload past the signature),
 * and so does every writer of their data in tgen (TX, learning frames). */
extern int g_tmpl_tag_off;
/* some port has tx_reuse: only then does any TX read a main-pool mbuf's tag, so only then does the
 * RX loop keep them (ports_init) */
extern int g_main_tags;
static inline uint64_t *mbuf_tmpl_tag(struct rte_mbuf *m)
{ return RTE_MBUF_DYNFIELD(m, g_tmpl_tag_off, uint64_t *); }
extern volatile int g_phase;
extern struct trial *volatile g_trial;
extern volatile int g_quit;
extern uint64_t g_tsc_hz, g_tsc0, g_ns_mult;   /* g_tsc_hz: calibrated (main.c init_clock), used everywhere */
extern uint64_t g_tsc_hz_dpdk;                  /* what rte_get_tsc_hz() said (rounded to 10 MHz) */
extern json_t *g_tsc_cal;                       /* the calibration record ("tsc_calibration") */

static inline uint64_t tsc_to_ns(uint64_t tsc)
{
    return (uint64_t)(((unsigned __int128)(tsc - g_tsc0) * g_ns_mult) >> 32);
}
static inline double cyc_to_ns(uint64_t c) { return (double)c * 1e9 / (double)g_tsc_hz; }

/* ports.c */
int ports_init(char *err, size_t errlen);
void ports_fill_info(portinfo_t *pi);
double port_speed_bps(unsigned p);
double port_link_speed_bps(unsigned p);
json_t *port_list_json(void);
json_t *port_stats_json(unsigned p);
json_t *port_xstats_json(unsigned p);
void port_tx_counters(unsigned p, struct port_txc *c);
void ports_close(void);

/* worker.c */
int worker_main(void *arg);

/* trial.c */
int stream_build(struct stream *s, char *err, size_t errlen);
void stream_free(struct stream *s);
int trial_start(json_t *params, rpc_err_t *e);
void trial_tick(void);
int trial_active(void);
json_t *trial_status(void);
void trial_stop(void);
json_t *trial_result(rpc_err_t *e);
json_t *trial_stream_stats(int id, rpc_err_t *e);
void trial_shutdown(void);

/* ctl.c */
#define CTL_AUTH_TIMEOUT_S 5.0      /* a TCP client must authenticate within this */
#define CTL_IDLE_TIMEOUT_S 300.0    /* a TCP client silent this long is dropped (0 = never) */
void ctl_set_timeouts(double auth_s, double idle_s);
int ctl_listen_unix(const char *path, char *err, size_t errlen);
int ctl_listen_tcp(const char *hostport, const char *token, char *err, size_t errlen);
void ctl_loop(void);
void ctl_close(void);
json_t *rpc_dispatch(const char *method, json_t *params, int *authed, int is_tcp, rpc_err_t *e);
#endif
