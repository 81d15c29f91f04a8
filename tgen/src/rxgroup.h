/* Receive groups (no DPDK): a stream's frames may come back on any port of its group (a LAG, an
 * OVS bond's members); they count for the stream on every port of the group, and loss,
 * duplicates, reordering and latency stay per stream.
 *
 * The lcore rule: a group of two or more ports is polled by ONE lcore (every RX queue of every
 * port of the group), so the stream's sequence state (one seqacct_t per stream and RX lcore) sees
 * all of the stream's frames in arrival order: a frame that overtakes another across members is
 * reordered, a copy that comes back on both members is a duplicate.  A group whose queues are
 * split over lcores is refused when the stream is defined (rxgroup_check_lcores); a single
 * rx_port may still spread its queues over lcores (their views are merged, as before).
 *
 * The RX path finds a frame's place in O(1): per trial stream a table of MAX_PORTS slots,
 * slot[port] = the port's index in the stream's group, -1 when the port is not in it. */
#ifndef TGEN_RXGROUP_H
#define TGEN_RXGROUP_H
#include <stddef.h>
#include <stdint.h>
#include "seq.h"
#include "tmpl.h"

#define RXG_MAX_PORTS 32      /* = MAX_PORTS of tgen.h */
#define MAX_RX_GROUP 8        /* ports in one receive group */

/* slot[0..RXG_MAX_PORTS-1] for a group of n ports (ports[i] < RXG_MAX_PORTS) */
void rxgroup_slots(const int *ports, int n, int8_t *slot);

/* Where a received test frame is counted.  ti: the trial's index of the frame's stream (-1: the
 * stream is not in the trial); accounting: the trial is learning/running/draining (not done);
 * slots: the trial's slot tables (RXG_MAX_PORTS per stream); port: the port the frame arrived on.
 * Only the port matters, not the queue or lcore: a stream's frames on any RX queue of any port of
 * its group are received (*slot = the port's index in the group), on any other port misrouted
 * (counted as lost for the stream). */
enum rx_class { RX_FOREIGN = 0, RX_LATE, RX_MISROUTED, RX_ACCOUNT };
static inline enum rx_class rx_classify(int32_t ti, int accounting, const int8_t *slots, uint16_t port,
                                        int *slot)
{
    if (ti < 0) return RX_FOREIGN;
    if (!accounting) return RX_LATE;
    int s = port < RXG_MAX_PORTS ? slots[(size_t)ti * RXG_MAX_PORTS + port] : -1;
    if (s < 0) return RX_MISROUTED;
    *slot = s;
    return RX_ACCOUNT;
}

/* One RX lcore's receive accounting for a trial (worker.c keeps one per RX lcore; the trial's
 * result merges them: trial_merge_acct).  Arrays are indexed by trial stream. */
typedef struct {
    seqacct_t *acct;             /* one sequence state per trial stream */
    uint64_t *misrouted;         /* per trial stream */
    uint64_t *rx_by_slot;        /* MAX_RX_GROUP per trial stream */
    uint64_t *misrouted_port;    /* RXG_MAX_PORTS */
    uint64_t *non_test, *late_rx, *foreign_rx;
} rxacct_t;

/* What the RX path reads of the trial: sid_map[stream id] = trial index or -1; rx_slot: the slot
 * tables (rxgroup_slots, RXG_MAX_PORTS per trial stream). */
typedef struct { const int32_t *sid_map; const int8_t *rx_slot; } rxtrial_t;

#define RXACCT_MAX_BURST 64
/* parse(ctx, i, &sig): the signature of frame i of the burst, 1 if it has one (the RX loop's
 * sig_parse_inline on mbuf i; the C tests' frames) */
typedef int (*rx_parse_fn)(void *ctx, unsigned i, tgsig_t *sig);

/* One received burst of n frames on `port`, in arrival order, received at now_ns: each frame
 * parsed (parse) and accounted where it belongs (rx_classify) in one lcore's state s, then the
 * burst's sequence numbers per stream; accounting = the trial is learning/running/draining;
 * n <= RXACCT_MAX_BURST.  ti[i] = the trial stream of an accounted test frame, else -1.
 * This is THE receive accounting of tgen: worker.c's do_rx calls it for every burst (with parse
 * inlined: one pass over the burst, the counters in registers) and the C tests call it too. */
static inline __attribute__((always_inline)) void
rx_account(const rxtrial_t *t, rxacct_t *s, int accounting, uint16_t port, uint64_t now_ns, unsigned n,
           rx_parse_fn parse, void *ctx, int32_t *ti)
{
    seqacct_frame_t fr[RXACCT_MAX_BURST];   /* the burst's accounted test frames, in arrival order */
    int32_t fti[RXACCT_MAX_BURST];          /* and each one's trial stream */
    unsigned nf = 0;
    uint64_t *cnt = NULL, ncnt = 0;
    for (unsigned i = 0; i < n; i++) {
        tgsig_t sg;
        ti[i] = -1;
        if (!parse(ctx, i, &sg)) { if (accounting) (*s->non_test)++; continue; }
        int32_t x = t->sid_map[sg.stream_id];
        int slot = 0;
        switch (rx_classify(x, accounting, t->rx_slot, port, &slot)) {
        case RX_FOREIGN: (*s->foreign_rx)++; continue;
        case RX_LATE: (*s->late_rx)++; continue;
        case RX_MISROUTED: s->misrouted[x]++; s->misrouted_port[port]++; continue;
        case RX_ACCOUNT: break;
        }
        ti[i] = x;
        /* per-port counts: consecutive frames of one stream and port add up in a register */
        uint64_t *c = &s->rx_by_slot[(size_t)x * MAX_RX_GROUP + (unsigned)slot];
        if (c != cnt) { if (cnt) *cnt += ncnt; cnt = c; ncnt = 0; }
        ncnt++;
        uint64_t lat = (now_ns - sg.tx_ns48) & ((1ULL << sg.ts_bits) - 1);
        fr[nf].seq = sg.seq;
        fr[nf].tx_ns = now_ns - lat;
        fr[nf].delay_ns = (int64_t)lat;
        fti[nf++] = x;
    }
    if (cnt) *cnt += ncnt;
    /* one sequence state per stream on this lcore, whichever port of the group the frame came
     * back on (a group is polled by one lcore); each stream's frames in arrival order, a run of
     * one stream's frames at a time */
    for (unsigned j = 0; j < nf;) {
        unsigned e = j + 1;
        while (e < nf && fti[e] == fti[j]) e++;
        seqacct_add_n(&s->acct[fti[j]], fr + j, e - j);
        j = e;
    }
}

/* a parsed burst (the tests): sig[i], valid when ok[i] */
typedef struct { const tgsig_t *sig; const uint8_t *ok; } rx_parsed_t;
static inline int rx_parsed_sig(void *ctx, unsigned i, tgsig_t *out)
{
    const rx_parsed_t *p = ctx;
    if (!p->ok[i]) return 0;
    *out = p->sig[i];
    return 1;
}
static inline void rx_account_burst(const rxtrial_t *t, rxacct_t *s, int accounting, uint16_t port,
                                    const tgsig_t *sig, const uint8_t *ok, unsigned n, uint64_t now_ns,
                                    int32_t *ti)
{
    rx_parsed_t p = { sig, ok };
    rx_account(t, s, accounting, port, now_ns, n, rx_parsed_sig, &p, ti);
}

/* port_lcore[p]: the lcore polling every RX queue of port p, RXG_NOT_POLLED when none does,
 * RXG_SPLIT when its queues are on several lcores.  Returns 0 when the group (n ports) may be
 * a receive group, else -1 with err = "rx_ports: why and the fix".  A group of one port is
 * always fine (that is a plain rx_port). */
#define RXG_NOT_POLLED (-1)
#define RXG_SPLIT (-2)
int rxgroup_check_lcores(const int *ports, int n, const int *port_lcore, char *err, size_t errlen);
#endif
