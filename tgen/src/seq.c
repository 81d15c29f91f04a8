#include "seq.h"
#include <string.h>

void seqacct_reset(seqacct_t *a, uint64_t first_expected, hist_t *lat, hist_t *ipdv_abs)
{
    memset(a, 0, sizeof(*a));
    a->first_expected = first_expected;
    a->next_exp = first_expected;
    a->lat = lat;
    a->ipdv_abs = ipdv_abs;
    if (lat) hist_reset(lat);
    if (ipdv_abs) hist_reset(ipdv_abs);
}

static inline int win_test(const seqacct_t *a, uint64_t s)
{
    uint32_t b = (uint32_t)(s % SEQ_WIN);
    return (a->win[b >> 6] >> (b & 63)) & 1;
}
static inline void win_set(seqacct_t *a, uint64_t s)
{
    uint32_t b = (uint32_t)(s % SEQ_WIN);
    a->win[b >> 6] |= (uint64_t)1 << (b & 63);
}
static inline void win_clear(seqacct_t *a, uint64_t s)
{
    uint32_t b = (uint32_t)(s % SEQ_WIN);
    a->win[b >> 6] &= ~((uint64_t)1 << (b & 63));
}

/* clear window slots for sequence numbers [from, to) */
static void win_clear_range(seqacct_t *a, uint64_t from, uint64_t to)
{
    if (to - from >= SEQ_WIN) { memset(a->win, 0, sizeof(a->win)); return; }
    uint64_t s = from;
    while (s < to && (s % 64) != 0) win_clear(a, s++);
    while (to - s >= 64) { a->win[(s % SEQ_WIN) >> 6] = 0; s += 64; }
    while (s < to) win_clear(a, s++);
}

static void note_delay(seqacct_t *a, int64_t d)
{
    if (!a->lat) return;
    if (d < 0) d = 0;
    hist_add(a->lat, (uint64_t)d);
    if (a->have_prev_delay) {
        int64_t v = d - a->prev_delay;
        if (a->ipdv_count == 0 || v < a->ipdv_min) a->ipdv_min = v;
        if (a->ipdv_count == 0 || v > a->ipdv_max) a->ipdv_max = v;
        a->ipdv_sum += v;
        a->ipdv_count++;
        if (a->ipdv_abs) hist_add(a->ipdv_abs, (uint64_t)(v < 0 ? -v : v));
    }
    a->have_prev_delay = 1;
    a->prev_delay = d;
}

static void note_lost(seqacct_t *a, const seq_gap_t *g)
{
    if (!a->first_lost.valid) a->first_lost = *g;
    a->last_lost = *g;
}

static void gap_push(seqacct_t *a, const seq_gap_t *g)
{
    if (a->gap_n == SEQ_MAX_GAPS) {          /* the oldest open gap is taken as lost */
        uint32_t old = (a->gap_head + SEQ_MAX_GAPS - a->gap_n) % SEQ_MAX_GAPS;
        if (a->gaps[old].missing) note_lost(a, &a->gaps[old]);
        a->gap_n--;
    }
    a->gaps[a->gap_head] = *g;
    a->gap_head = (a->gap_head + 1) % SEQ_MAX_GAPS;
    a->gap_n++;
}

/* a late frame: if it belongs to an open gap, that gap misses one frame less */
static void gap_fill(seqacct_t *a, uint64_t s)
{
    uint32_t lo = 0, hi = a->gap_n;
    uint32_t oldest = (a->gap_head + SEQ_MAX_GAPS - a->gap_n) % SEQ_MAX_GAPS;
    while (lo < hi) {                        /* first gap whose end (seq) is > s */
        uint32_t mid = (lo + hi) / 2;
        if (a->gaps[(oldest + mid) % SEQ_MAX_GAPS].seq > s) hi = mid; else lo = mid + 1;
    }
    if (lo >= a->gap_n) return;
    seq_gap_t *g = &a->gaps[(oldest + lo) % SEQ_MAX_GAPS];
    uint64_t first_missing = g->head ? a->first_expected : g->prev_seq + 1;
    if (s >= first_missing && s < g->seq && g->missing) g->missing--;
}

static uint64_t extent_for(const seqacct_t *a, uint64_t s, uint64_t i)
{
    /* earliest advance with seq > s; ring entries are in increasing seq order */
    if (a->adv_n == 0) return 0;
    uint32_t lo = 0, hi = a->adv_n; /* logical indexes, 0 = oldest */
    uint32_t oldest = (a->adv_head + SEQ_ADV_RING - a->adv_n) % SEQ_ADV_RING;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (a->adv_seq[(oldest + mid) % SEQ_ADV_RING] > s) hi = mid; else lo = mid + 1;
    }
    if (lo >= a->adv_n) return 0;
    uint64_t j = a->adv_idx[(oldest + lo) % SEQ_ADV_RING];
    return i > j ? i - j : 0;
}

void seqacct_add(seqacct_t *a, uint64_t seq, uint64_t tx_ns, int64_t delay_ns)
{
    if (seq < a->next_exp) {
        if (a->next_exp - seq <= SEQ_WIN) {
            if (seq < a->first_expected || win_test(a, seq)) { a->duplicates++; return; }
            win_set(a, seq);
        }
        gap_fill(a, seq);
        uint64_t i = ++a->arrivals;
        a->received++;
        a->reordered++;
        uint64_t e = extent_for(a, seq, i);
        if (e > a->reorder_extent_max) a->reorder_extent_max = e;
        note_delay(a, delay_ns);
        return;
    }
    uint64_t i = ++a->arrivals;
    if (seq > a->next_exp) {
        a->seq_gaps++;
        seq_gap_t g;
        g.valid = 1;
        g.head = !a->have_max;
        g.prev_seq = a->next_exp ? a->next_exp - 1 : 0;
        g.prev_tx_ns = a->max_tx_ns;
        g.seq = seq;
        g.tx_ns = tx_ns;
        g.missing = seq - a->next_exp;
        gap_push(a, &g);
    }
    if (a->have_max && tx_ns > a->max_tx_ns && tx_ns - a->max_tx_ns > a->max_rx_gap_ns)
        a->max_rx_gap_ns = tx_ns - a->max_tx_ns;
    win_clear_range(a, a->next_exp, seq);
    win_set(a, seq);
    a->next_exp = seq + 1;
    a->max_tx_ns = tx_ns;
    a->have_max = 1;
    a->adv_seq[a->adv_head] = seq;
    a->adv_idx[a->adv_head] = i;
    a->adv_head = (a->adv_head + 1) % SEQ_ADV_RING;
    if (a->adv_n < SEQ_ADV_RING) a->adv_n++;
    a->received++;
    note_delay(a, delay_ns);
}

/* set window slots for sequence numbers [from, to), to - from <= SEQ_WIN */
static inline void win_set_range(seqacct_t *a, uint64_t from, uint64_t to)
{
    while (from < to) {
        uint32_t bit = (uint32_t)(from % SEQ_WIN), w = bit >> 6, lo = bit & 63;
        uint64_t k = to - from < 64 - lo ? to - from : 64 - lo;     /* slots in this word */
        uint64_t mask = (k == 64 ? ~0ULL : ((1ULL << k) - 1)) << lo;
        a->win[w] |= mask;
        from += k;
    }
}

/* The delays of k in-order frames: note_delay on each, with the histograms' scalar fields, the
 * IPDV state and sums in registers.  A histogram's min starts at UINT64_MAX when it is empty (and
 * IPDV's min/max at the extremes when it has no value yet), so the first value needs no test; an
 * empty one keeps its stored fields. */
static void delays_in_order(seqacct_t *a, const seqacct_frame_t *f, unsigned k)
{
    hist_t *lat = a->lat, *ipdv = a->ipdv_abs;
    unsigned i = 0;
    if (!a->have_prev_delay) {             /* the stream's first delay: no IPDV yet */
        int64_t d = f[0].delay_ns < 0 ? 0 : f[0].delay_ns;
        hist_add(lat, (uint64_t)d);
        a->have_prev_delay = 1;
        a->prev_delay = d;
        i = 1;
    }
    if (i == k) return;
    uint64_t *lb = lat->b, *ib = ipdv ? ipdv->b : NULL;
    uint64_t lmin = lat->count ? lat->min : UINT64_MAX, lmax = lat->max;
    uint64_t jmin = ipdv && ipdv->count ? ipdv->min : UINT64_MAX, jmax = ipdv ? ipdv->max : 0;
    int64_t prev = a->prev_delay, first_prev = prev;
    int64_t imin = a->ipdv_count ? a->ipdv_min : INT64_MAX, imax = a->ipdv_count ? a->ipdv_max : INT64_MIN;
    unsigned nv = k - i;
    /* A burst's frames mostly share one delay (one TX timestamp per burst, one RX clock read per
     * burst), so the same value comes again and again: a run of equal values is counted in a
     * register and added to its bucket once, and only a new value is looked up and compared with
     * min/max.  (Bucket counts through memory, one frame after another, were a chain of
     * read-modify-writes of one address.)  The sums are exact integers (hist_t.sum), added up
     * in 64 bits here (at most 64 frames of delays below 2^48 ns; test_seq's go to 2^54) and
     * once per call into the 128-bit totals; the signed IPDV's sum is the last delay less the one
     * before the first (each frame adds d - prev).  (Three floating-point sums, one addition per
     * frame each, were three dependency chains of 4-cycle additions.) */
    uint64_t lval = UINT64_MAX, jval = UINT64_MAX, lrun = 0, jrun = 0, lsum = 0, jsum = 0;
    unsigned lidx = 0, jidx = 0;
    while (i < k) {
        int64_t d = f[i].delay_ns < 0 ? 0 : f[i].delay_ns;
        if ((uint64_t)d != lval) {
            lb[lidx] += lrun;
            lrun = 0;
            lval = (uint64_t)d;
            lidx = hist_index(lval);
            if (lval < lmin) lmin = lval;
            if (lval > lmax) lmax = lval;
        }
        lrun++;
        lsum += (uint64_t)d;
        int64_t v = d - prev;
        if (v < imin) imin = v;
        if (v > imax) imax = v;
        if (ib) {
            uint64_t av = (uint64_t)(v < 0 ? -v : v);
            if (av != jval) {
                ib[jidx] += jrun;
                jrun = 0;
                jval = av;
                jidx = hist_index(av);
                if (av < jmin) jmin = av;
                if (av > jmax) jmax = av;
            }
            jrun++;
            jsum += av;
        }
        prev = d;
        i++;
        /* the frames right after it with the same delay (the rest of its burst, usually): each
         * adds d to the latency's run and sum and an IPDV of 0 */
        unsigned e = i;
        while (e < k && f[e].delay_ns == d) e++;
        uint64_t r = e - i;
        if (r) {
            lrun += r;
            lsum += r * (uint64_t)d;
            if (imin > 0) imin = 0;
            if (imax < 0) imax = 0;
            if (ib) {
                if (jval != 0) {
                    ib[jidx] += jrun;
                    jrun = 0;
                    jval = 0;
                    jidx = hist_index(0);
                    jmin = 0;          /* 0 is below any min, and jmax >= 0 already */
                }
                jrun += r;
            }
            i = e;
        }
    }
    lb[lidx] += lrun;
    if (ib) ib[jidx] += jrun;
    lat->count += nv; lat->min = lmin; lat->max = lmax; lat->sum += lsum;
    if (ipdv) { ipdv->count += nv; ipdv->min = jmin; ipdv->max = jmax; ipdv->sum += jsum; }
    a->ipdv_count += nv; a->ipdv_min = imin; a->ipdv_max = imax; a->ipdv_sum += prev - first_prev;
    a->prev_delay = prev;
}

void seqacct_add_n(seqacct_t *a, const seqacct_frame_t *f, unsigned n)
{
    unsigned i = 0;
    while (i < n) {
        /* frames that are not the next expected one: the general path */
        while (i < n && f[i].seq != a->next_exp) { seqacct_add(a, f[i].seq, f[i].tx_ns, f[i].delay_ns); i++; }
        if (i == n) break;
        /* a run of in-order frames (seq == next_exp each): seqacct_add's in-order branch (no gap, an
         * empty window range to clear), the sequence part first, then the delays */
        uint64_t first = a->next_exp, next = first, arrivals = a->arrivals;
        uint64_t max_tx = a->max_tx_ns, max_gap = a->max_rx_gap_ns;
        uint32_t adv_head = a->adv_head;
        unsigned j = i;
        if (!a->have_max) {        /* the stream's first frame: no gap to the previous one */
            max_tx = f[j].tx_ns;
            a->adv_seq[adv_head] = next;
            a->adv_idx[adv_head] = ++arrivals;
            adv_head = (adv_head + 1) % SEQ_ADV_RING;
            next++;
            j++;
        }
        for (; j < n && f[j].seq == next; j++) {
            uint64_t tx = f[j].tx_ns;
            if (tx > max_tx && tx - max_tx > max_gap) max_gap = tx - max_tx;
            max_tx = tx;
            a->adv_seq[adv_head] = next;
            a->adv_idx[adv_head] = ++arrivals;
            adv_head = (adv_head + 1) % SEQ_ADV_RING;
            next++;
        }
        unsigned k = j - i;
        win_set_range(a, first, next);
        a->next_exp = next;
        a->arrivals = arrivals;
        a->received += k;
        a->max_tx_ns = max_tx;
        a->max_rx_gap_ns = max_gap;
        a->have_max = 1;
        a->adv_head = adv_head;
        a->adv_n = a->adv_n + k < SEQ_ADV_RING ? a->adv_n + k : SEQ_ADV_RING;
        if (a->lat) delays_in_order(a, f + i, k);
        i = j;
    }
}

/* tx time of the first and last lost frame inside a gap, interpolated */
static void gap_times(const seq_gap_t *g, uint64_t first_tx_ns, uint64_t first_expected,
                      double *t_first, double *t_last)
{
    double s0, t0;
    if (g->head) { s0 = (double)first_expected - 1.0; t0 = (double)first_tx_ns; }
    else { s0 = (double)g->prev_seq; t0 = (double)g->prev_tx_ns; }
    double s1 = (double)g->seq, t1 = (double)g->tx_ns;
    if (g->head) {
        /* first_tx_ns is the tx time of seq first_expected itself */
        double per = (s1 - (double)first_expected) > 0 ? (t1 - t0) / (s1 - (double)first_expected) : 0;
        *t_first = t0;
        *t_last = t1 - per;
        return;
    }
    double per = (s1 - s0) > 0 ? (t1 - t0) / (s1 - s0) : 0;
    *t_first = t0 + per;
    *t_last = t1 - per;
}

void seqacct_loss_times(const seqacct_t *a, uint64_t sent, uint64_t first_tx_ns, uint64_t last_tx_ns,
                        int64_t *first_loss_ns, int64_t *last_loss_ns)
{
    *first_loss_ns = -1;
    *last_loss_ns = -1;
    uint64_t end = a->first_expected + sent;   /* one past the last sent seq */
    if (a->received >= sent) return;
    if (!a->have_max) { *first_loss_ns = (int64_t)first_tx_ns; *last_loss_ns = (int64_t)last_tx_ns; return; }
    double f = -1, l = -1, tf, tl;
    /* earliest loss: a gap taken as lost earlier, else the oldest open gap still missing frames;
     * latest: the newest open gap still missing frames, else the newest gap taken as lost */
    const seq_gap_t *fg = a->first_lost.valid ? &a->first_lost : NULL, *lg = NULL;
    uint32_t oldest = (a->gap_head + SEQ_MAX_GAPS - a->gap_n) % SEQ_MAX_GAPS;
    for (uint32_t i = 0; i < a->gap_n; i++) {
        const seq_gap_t *g = &a->gaps[(oldest + i) % SEQ_MAX_GAPS];
        if (!g->missing) continue;
        if (!fg) fg = g;
        lg = g;
    }
    if (!lg && a->last_lost.valid) lg = &a->last_lost;
    if (fg) { gap_times(fg, first_tx_ns, a->first_expected, &tf, &tl); f = tf; }
    if (lg) { gap_times(lg, first_tx_ns, a->first_expected, &tf, &tl); l = tl; }
    if (a->next_exp < end) {   /* tail loss */
        double s0 = (double)a->next_exp - 1, t0 = (double)a->max_tx_ns;
        double s1 = (double)end - 1, t1 = (double)last_tx_ns;
        double per = (s1 - s0) > 0 ? (t1 - t0) / (s1 - s0) : 0;
        if (f < 0) f = t0 + per;
        l = t1;
    }
    if (f < 0) return;   /* gaps were all filled by late frames but counts differ */
    *first_loss_ns = (int64_t)f;
    *last_loss_ns = (int64_t)l;
}
