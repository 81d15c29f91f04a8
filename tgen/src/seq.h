/* Per-stream receive accounting (no DPDK): loss, duplicates, RFC 4737 reordering, gaps,
 * loss-time estimates and one-way delay / IPDV statistics.
 *
 * Duplicate detection: a sliding bitmap of SEQ_WIN sequence numbers below NextExp.  A frame more
 * than SEQ_WIN behind NextExp is counted as received+reordered and cannot be recognised as a
 * duplicate.  Reorder extent (RFC 4737 e(i) = i - min{j<i: s[j] > s[i]}) is exact while the first
 * later frame is among the last SEQ_ADV_RING NextExp advances; beyond that a lower bound. */
#ifndef TGEN_SEQ_H
#define TGEN_SEQ_H
#include <stdint.h>
#include "hist.h"

#define SEQ_WIN 65536u
#define SEQ_ADV_RING 256u

#define SEQ_MAX_GAPS 128u

typedef struct {
    int valid;
    int head;              /* gap starts at the stream's first frame (nothing received before) */
    uint64_t prev_seq, prev_tx_ns;   /* last in-order frame before the gap (if !head) */
    uint64_t seq, tx_ns;             /* frame after the gap */
    uint64_t missing;                /* sequence numbers of the gap not (yet) received */
} seq_gap_t;

typedef struct {
    uint64_t first_expected;
    uint64_t next_exp;
    uint64_t arrivals;     /* unique arrivals (arrival index for extent) */
    uint64_t received;     /* unique */
    uint64_t duplicates;
    uint64_t reordered;
    uint64_t reorder_extent_max;
    uint64_t seq_gaps;
    uint64_t max_rx_gap_ns;
    int have_max;
    uint64_t max_tx_ns;    /* tx time of seq next_exp-1 */
    /* open gaps (newest SEQ_MAX_GAPS, ordered by sequence); a late frame that fills a gap
     * completely makes it not a loss.  Older gaps are taken as losses (first/last_lost). */
    seq_gap_t gaps[SEQ_MAX_GAPS];
    uint32_t gap_head, gap_n;
    seq_gap_t first_lost, last_lost;
    /* extent ring: each NextExp advance (seq, arrival index), increasing seq */
    uint64_t adv_seq[SEQ_ADV_RING], adv_idx[SEQ_ADV_RING];
    uint32_t adv_head, adv_n;
    uint64_t win[SEQ_WIN / 64];
    /* delay */
    int latency;
    hist_t *lat;           /* NULL when latency off */
    hist_t *ipdv_abs;
    int have_prev_delay;
    int64_t prev_delay;
    int64_t ipdv_min, ipdv_max;
    __int128 ipdv_sum;         /* exact (as hist_t.sum) */
    uint64_t ipdv_count;
} seqacct_t;

/* lat/ipdv may be NULL (no latency statistics). */
void seqacct_reset(seqacct_t *a, uint64_t first_expected, hist_t *lat, hist_t *ipdv_abs);
/* One arriving test frame: sequence, its tx time and one-way delay (both ns). */
void seqacct_add(seqacct_t *a, uint64_t seq, uint64_t tx_ns, int64_t delay_ns);

/* n arriving test frames of one stream, in arrival order: the same state as seqacct_add on each in
 * turn (bit for bit).  Faster for a burst: a frame that is the
 * next expected one (the usual case) updates counters held in registers, not in memory; any other
 * frame goes through seqacct_add. */
typedef struct { uint64_t seq, tx_ns; int64_t delay_ns; } seqacct_frame_t;
void seqacct_add_n(seqacct_t *a, const seqacct_frame_t *f, unsigned n);

/* Loss-time estimate given the tx side's view: sent frames, tx time of the first and last sent
 * frame (same clock as tx_ns).  Outputs -1 when nothing is lost. */
void seqacct_loss_times(const seqacct_t *a, uint64_t sent, uint64_t first_tx_ns, uint64_t last_tx_ns,
                        int64_t *first_loss_ns, int64_t *last_loss_ns);

/* rx_classify (where a received test frame is counted): rxgroup.h */
#endif
