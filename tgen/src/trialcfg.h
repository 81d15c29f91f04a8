/* Trial request validation and the arithmetic of schedules and results, no DPDK dependency
 * (linked by the unit tests, like streamcfg.c). */
#ifndef TGEN_TRIALCFG_H
#define TGEN_TRIALCFG_H
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "seq.h"
#include "hist.h"

#define MAX_STREAM_ID 65536
#define MAX_SEGS 64

/* a JSON-RPC error: code and "field: why" */
typedef struct { int code; char msg[512]; } rpc_err_t;

struct seg {
    uint64_t start_tsc, end_tsc;   /* end UINT64_MAX = until max_frames */
    uint64_t cut_tsc;              /* a late pacer stops sending this segment's frames here */
    uint64_t max_frames;           /* 0 = unlimited inside the time window */
    double scale;                  /* multiplies stream rate (if pps == 0) */
    double pps;                    /* absolute per-stream rate if > 0 */
    double duration_s;
};

/* a validated trial.start request (everything but the stream list) */
typedef struct {
    struct seg segs[MAX_SEGS];     /* only max_frames, scale, pps, duration_s are set here */
    unsigned nsegs;
    int learning, latency;
    unsigned learning_frames;
    double learning_wait_s, drain_s;
    double interval_s;             /* loss over time: sample every this long (0 = off; ivals.h) */
    double duration_s;             /* sum of the timed segments (refined by trial_intended_duration) */
    double pps_over;               /* trial-level "pps" override, 0 = none */
    const char *rate_field;        /* field a line-rate refusal names: "segments", "pps" or "rate" */
} trialcfg_t;

/* params must be NULL or an object with only trial.start keys */
int trialcfg_check_keys(json_t *p, rpc_err_t *e);
/* "streams" list (or every defined stream, in id order) -> ids[0..*n-1]; exists(id) says whether
 * stream id is defined.  -32001 for an unknown id, -32602 for a bad list or no streams. */
int trialcfg_stream_ids(json_t *p, int (*exists)(unsigned id), uint16_t *ids, unsigned *n, rpc_err_t *e);
/* length (duration_s | frames | segments | burst mode), rate override, learning, drain, latency */
int trialcfg_parse(json_t *p, trialcfg_t *tc, rpc_err_t *e);

/* a stream's rate in a segment: the segment's absolute pps, else the stream's rate x scale */
double trial_seg_pps(const struct seg *sg, double stream_pps);
/* frames a stream sends in a segment: max_frames, or exactly ceil(duration_s x pps) for a timed one */
uint64_t trial_seg_frames(const struct seg *sg, double pps);
/* refusal when a port is offered more than its line rate (speed 0 = unknown, not checked) */
int trial_check_port_load(const trialcfg_t *tc, const double *load_bps, const double *speed_bps,
                          unsigned nports, rpc_err_t *e);
/* how long a segment lasts for one stream: its duration, else frames / pps */
double trial_seg_len_s(const struct seg *sg, uint64_t frames, double pps);
/* receive accounting per stream and RX lcore must stay below 2 GiB */
int trial_check_rx_memory(unsigned nstreams, unsigned nrx, int latency, size_t acct_b, size_t hist_b, rpc_err_t *e);
/* after a timed segment's end a late pacer may catch up for 10 % of it, 0.1 .. 1 s */
double trial_seg_grace_s(double duration_s);
/* the watchdog fires this long after the schedule's end: the schedule's length, at least 5 s */
uint64_t trial_watchdog_slack(uint64_t sched_len_cyc, uint64_t tsc_hz);

/* intended frames and rate of one stream (burst and frame-count trials: the rate inside the
 * burst; timed segments: frames over the scheduled time) */
void trial_stream_intended(const struct seg *segs, unsigned nsegs, const double *seg_pps,
                           const uint64_t *seg_max, double *frames, double *pps);
/* time from the trial's start (t0, 48-bit ns) to the last frame's end at the last segment's rate */
double trial_effective_s(uint64_t sent, uint64_t last_tx_ns, uint64_t t0_ns, double last_pps);
static inline uint64_t trial_lost(uint64_t sent, uint64_t received) { return sent > received ? sent - received : 0; }

/* Merge one stream's accounting from n RX lcores (entries may be NULL) into m; the latency and
 * |IPDV| histograms are merged into lh/ih and m points at them.  *nlcores = lcores that saw the
 * stream.  Returns the lcore view with the most frames, or NULL if none saw it (m is then the
 * first non-NULL entry, or zero). */
const seqacct_t *trial_merge_acct(const seqacct_t *const *a, unsigned n, seqacct_t *m, hist_t *lh,
                                  hist_t *ih, unsigned *nlcores);
#endif
