/* Loss over time (issue 28): the control thread samples the trial's frames sent and received
 * every interval while traffic runs and drains; the result gives them per interval.  No DPDK
 * dependency (linked by the unit tests).
 *
 * A bounded array: when it fills, neighbouring intervals are merged and the interval doubles, so a
 * trial of any length keeps at most IVALS_MAX intervals. */
#ifndef TGEN_IVALS_H
#define TGEN_IVALS_H
#include <stdint.h>
#include <jansson.h>

#define IVALS_MAX 2048

typedef struct {
    uint64_t every_cyc;     /* interval length in TSC cycles (0 = off) */
    uint64_t start_cyc;     /* the traffic's start */
    uint64_t next_cyc;      /* the next interval's end */
    uint64_t last_sent, last_recv;  /* the cumulative counts at the previous sample */
    unsigned n;
    uint64_t sent[IVALS_MAX], recv[IVALS_MAX];   /* per interval */
} ivals_t;

/* off when interval_cyc == 0 */
void ivals_start(ivals_t *iv, uint64_t interval_cyc, uint64_t start_cyc);
/* cumulative counts at `now`: closes every interval that ended by then (a late tick puts the
 * counts in the interval it closes first; the rest it skipped get 0) */
void ivals_tick(ivals_t *iv, uint64_t now, uint64_t sent, uint64_t recv);
/* the last (partial) interval, up to `now` */
void ivals_finish(ivals_t *iv, uint64_t now, uint64_t sent, uint64_t recv);
/* {"interval_ms", "sent": [...], "received": [...], "lost": [...]} (lost = sent - received of the
 * interval, negative when frames sent in one interval arrive in the next); NULL when off */
json_t *ivals_json(const ivals_t *iv, uint64_t tsc_hz);
#endif
