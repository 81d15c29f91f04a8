/* Sequence accounting: METHODOLOGY.md TV10, duplicates, gaps, loss times. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "seq.h"

static seqacct_t A;
static hist_t L, I;

/* seqacct_add_n == seqacct_add frame by frame: the whole state (counters, window, gap list,
 * extent ring, histograms, IPDV sums) compared byte for byte after every burst */
static seqacct_t R, B;
static hist_t RL, RI, BL, BI;
static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static int same_state(void)
{
    seqacct_t r = R, b = B;
    r.lat = b.lat = NULL;
    r.ipdv_abs = b.ipdv_abs = NULL;
    if (memcmp(&r, &b, sizeof(r))) return 0;
    if ((R.lat != NULL) != (B.lat != NULL) || (R.ipdv_abs != NULL) != (B.ipdv_abs != NULL)) return 0;
    if (R.lat && memcmp(R.lat, B.lat, sizeof(hist_t))) return 0;
    if (R.ipdv_abs && memcmp(R.ipdv_abs, B.ipdv_abs, sizeof(hist_t))) return 0;
    return 1;
}

/* a stream of frames with the given chances (per mille) of loss, reordering (swap with a later
 * frame), duplication and a long jump; delays random, some negative (clamped to 0) and huge */
static void check_burst_equiv(const char *what, int lat, int ipdv, unsigned loss, unsigned reord, unsigned dup,
                              unsigned jump, unsigned repeat, unsigned nframes)
{
    static seqacct_frame_t fr[256];
    seqacct_reset(&R, 7, lat ? &RL : NULL, lat && ipdv ? &RI : NULL);
    seqacct_reset(&B, 7, lat ? &BL : NULL, lat && ipdv ? &BI : NULL);
    uint64_t seq = 7, t = 1000;
    unsigned done = 0, bursts = 0;
    int ok = 1;
    while (done < nframes && ok) {
        unsigned n = (unsigned)(rnd() % 65);     /* 0..64, as an RX burst */
        for (unsigned k = 0; k < n; k++) {
            if (rnd() % 1000 < loss) seq++;
            if (rnd() % 1000 < jump) seq += SEQ_WIN + rnd() % 1000;
            fr[k].seq = seq++;
            fr[k].tx_ns = t += 1 + rnd() % 100;
            uint64_t r = rnd() % 1000;
            fr[k].delay_ns = r < 5 ? -(int64_t)(rnd() % 1000) : r < 8 ? (int64_t)(rnd() >> 10) : (int64_t)(rnd() % 100000);
            /* as a real burst: one TX timestamp and one RX clock read give many frames one delay */
            if (k && rnd() % 1000 < repeat) fr[k].delay_ns = fr[k - 1].delay_ns;
        }
        for (unsigned k = 0; k + 1 < n; k++) {
            if (rnd() % 1000 < reord) {
                unsigned j = k + 1 + (unsigned)(rnd() % (n - k - 1));
                seqacct_frame_t x = fr[k]; fr[k] = fr[j]; fr[j] = x;
            }
            if (rnd() % 1000 < dup) fr[k + 1] = fr[k];
        }
        for (unsigned k = 0; k < n; k++) seqacct_add(&R, fr[k].seq, fr[k].tx_ns, fr[k].delay_ns);
        seqacct_add_n(&B, fr, n);
        ok = same_state();
        done += n;
        bursts++;
    }
    CHECK(ok, "%s: seqacct_add_n differs from seqacct_add after burst %u (%u frames)", what, bursts, done);
    CHECK(R.received > 0 && (!lat || RL.count > 0), "%s: frames were accounted", what);
}

int main(void)
{
    check_burst_equiv("in order", 1, 1, 0, 0, 0, 0, 0, 200000);
    check_burst_equiv("in order, delays repeat", 1, 1, 0, 0, 0, 0, 950, 200000);
    check_burst_equiv("in order, some delays repeat", 1, 1, 0, 0, 0, 0, 500, 200000);
    check_burst_equiv("in order, no latency", 0, 0, 0, 0, 0, 0, 0, 50000);
    check_burst_equiv("in order, no IPDV histogram", 1, 0, 0, 0, 0, 0, 800, 50000);
    check_burst_equiv("loss", 1, 1, 20, 0, 0, 0, 500, 200000);
    check_burst_equiv("reordering", 1, 1, 0, 20, 0, 0, 500, 200000);
    check_burst_equiv("duplicates", 1, 1, 0, 0, 20, 0, 500, 200000);
    check_burst_equiv("everything", 1, 1, 30, 30, 30, 1, 500, 300000);
    check_burst_equiv("heavy", 1, 1, 300, 300, 300, 5, 300, 100000);
    /* the comparison can fail: one frame given to one side only */
    seqacct_reset(&R, 0, &RL, &RI);
    seqacct_reset(&B, 0, &BL, &BI);
    seqacct_frame_t one = { 0, 100, 50 };
    seqacct_add_n(&B, &one, 1);
    CHECK(!same_state(), "a frame on one side only shows");
    seqacct_add(&R, 0, 100, 50);
    CHECK(same_state(), "and the same frame on both sides not");

    /* TV10: arrivals 1,2,4,5,3,6 -> one reordered, extent 2, ratio 16.67 % */
    uint64_t arr[] = { 1, 2, 4, 5, 3, 6 };
    seqacct_reset(&A, 1, &L, &I);
    for (int i = 0; i < 6; i++) seqacct_add(&A, arr[i], 1000 * arr[i], 10);
    CHECK(A.received == 6, "received %llu", (unsigned long long)A.received);
    CHECK(A.reordered == 1, "reordered %llu", (unsigned long long)A.reordered);
    CHECK(A.reorder_extent_max == 2, "extent %llu", (unsigned long long)A.reorder_extent_max);
    CHECK(fabs(100.0 * (double)A.reordered / (double)A.received - 16.67) < 0.005, "ratio");
    CHECK(A.duplicates == 0, "dups");
    CHECK(A.seq_gaps == 1, "gaps %llu (4 after 2)", (unsigned long long)A.seq_gaps);
    int64_t f, l;
    seqacct_loss_times(&A, 6, 1000, 6000, &f, &l);
    CHECK(f == -1 && l == -1, "no loss -> no loss times (%lld, %lld)", (long long)f, (long long)l);

    /* TV10 delays 10,12,11,15,10 us: IPDV +2,-1,+4,-5; PDV 0,2,1,5,0 */
    int64_t d[] = { 10000, 12000, 11000, 15000, 10000 };
    seqacct_reset(&A, 0, &L, &I);
    for (int i = 0; i < 5; i++) seqacct_add(&A, (uint64_t)i, (uint64_t)i * 1000, d[i]);
    CHECK(A.ipdv_count == 4, "ipdv count");
    CHECK(A.ipdv_min == -5000 && A.ipdv_max == 4000, "ipdv min %lld max %lld", (long long)A.ipdv_min, (long long)A.ipdv_max);
    CHECK(A.ipdv_sum == 0, "ipdv sum (+2-1+4-5=0)");
    CHECK(L.min == 10000 && L.max == 15000, "delay min/max");
    double avg = L.sum / (double)L.count;
    CHECK(fabs(avg - 11600) < 1e-6, "avg delay %g", avg);
    CHECK(fabs((avg - (double)L.min) - 1600) < 1e-6, "PDV avg = mean(0,2,1,5,0) = 1.6 us");
    CHECK(L.max - L.min == 5000, "PDV max 5 us");
    /* |ipdv| = 2,1,4,5 -> p99 5 us within 1 % */
    CHECK(fabs(hist_percentile(&I, 99) - 5000) <= 50, "ipdv p99 %g", hist_percentile(&I, 99));
    CHECK(fabs(hist_percentile(&L, 50) - 11000) <= 110, "delay p50 %g", hist_percentile(&L, 50));

    /* duplicates: 0,1,1,2,0,3 -> 2 duplicates, 4 unique, no reorder counted for dups */
    uint64_t dup[] = { 0, 1, 1, 2, 0, 3 };
    seqacct_reset(&A, 0, NULL, NULL);
    for (int i = 0; i < 6; i++) seqacct_add(&A, dup[i], dup[i] * 10, 0);
    CHECK(A.received == 4 && A.duplicates == 2 && A.reordered == 0, "dup: rx %llu dup %llu reo %llu",
          (unsigned long long)A.received, (unsigned long long)A.duplicates, (unsigned long long)A.reordered);
    /* a reordered frame that arrives twice: second copy is a duplicate */
    uint64_t rd[] = { 0, 2, 1, 1, 3 };
    seqacct_reset(&A, 0, NULL, NULL);
    for (int i = 0; i < 5; i++) seqacct_add(&A, rd[i], rd[i] * 10, 0);
    CHECK(A.received == 4 && A.duplicates == 1 && A.reordered == 1, "reorder+dup");

    /* loss: 0..99 sent 1 us apart, 10..19 and 95..99 lost */
    seqacct_reset(&A, 0, NULL, NULL);
    for (uint64_t s = 0; s < 100; s++) if (!((s >= 10 && s < 20) || s >= 95)) seqacct_add(&A, s, 1000000 + s * 1000, 5000);
    CHECK(A.received == 85 && A.seq_gaps == 1, "gaps %llu", (unsigned long long)A.seq_gaps);
    CHECK(A.max_rx_gap_ns == 11000, "max rx gap %llu (9 -> 20)", (unsigned long long)A.max_rx_gap_ns);
    seqacct_loss_times(&A, 100, 1000000, 1000000 + 99 * 1000, &f, &l);
    CHECK(f == 1000000 + 10 * 1000, "first loss %lld", (long long)f);
    CHECK(l == 1000000 + 99 * 1000, "last loss %lld (tail)", (long long)l);
    /* system-recovery shape: loss only in the middle */
    seqacct_reset(&A, 0, NULL, NULL);
    for (uint64_t s = 0; s < 100; s++) if (!(s >= 30 && s < 60)) seqacct_add(&A, s, s * 1000, 0);
    seqacct_loss_times(&A, 100, 0, 99000, &f, &l);
    CHECK(f == 30000 && l == 59000, "middle loss %lld..%lld", (long long)f, (long long)l);
    /* head loss: the first 5 frames lost */
    seqacct_reset(&A, 0, NULL, NULL);
    for (uint64_t s = 5; s < 10; s++) seqacct_add(&A, s, s * 1000, 0);
    seqacct_loss_times(&A, 10, 0, 9000, &f, &l);
    CHECK(f == 0 && l == 4000, "head loss %lld..%lld", (long long)f, (long long)l);
    /* nothing received */
    seqacct_reset(&A, 0, NULL, NULL);
    seqacct_loss_times(&A, 10, 100, 9100, &f, &l);
    CHECK(f == 100 && l == 9100, "all lost");

    /* a reordered frame that fills a gap is not a loss: 0..99, 20 arrives after 21, 50 lost */
    seqacct_reset(&A, 0, NULL, NULL);
    for (uint64_t s = 0; s < 100; s++) {
        if (s == 20 || s == 50) continue;
        seqacct_add(&A, s, s * 1000, 0);
        if (s == 21) seqacct_add(&A, 20, 20 * 1000, 0);
    }
    seqacct_loss_times(&A, 100, 0, 99000, &f, &l);
    CHECK(A.received == 99 && A.reordered == 1 && A.seq_gaps == 2, "fill: rx %llu", (unsigned long long)A.received);
    CHECK(f == 50000 && l == 50000, "filled gap is not a loss: %lld..%lld", (long long)f, (long long)l);
    /* partially filled gap stays a loss */
    seqacct_reset(&A, 0, NULL, NULL);
    for (uint64_t s = 0; s < 100; s++) if (s < 30 || s > 32) seqacct_add(&A, s, s * 1000, 0);
    seqacct_add(&A, 31, 31000, 0);
    seqacct_loss_times(&A, 100, 0, 99000, &f, &l);
    CHECK(f == 30000 && l == 32000, "partial fill %lld..%lld", (long long)f, (long long)l);
    /* more open gaps than the list holds: the oldest are taken as losses */
    seqacct_reset(&A, 0, NULL, NULL);
    for (uint64_t s = 0; s < 10 * SEQ_MAX_GAPS; s++) if (s % 5 != 2) seqacct_add(&A, s, s * 1000, 0);
    seqacct_loss_times(&A, 10 * SEQ_MAX_GAPS, 0, (10 * SEQ_MAX_GAPS - 1) * 1000, &f, &l);
    CHECK(f == 2000 && l == (int64_t)((10 * SEQ_MAX_GAPS - 3) * 1000), "many gaps %lld..%lld", (long long)f, (long long)l);

    /* window: a frame 70000 behind NextExp is counted (not a dup), duplicates inside the window found */
    seqacct_reset(&A, 0, NULL, NULL);
    for (uint64_t s = 0; s < 100000; s++) if (s != 5) seqacct_add(&A, s, s, 0);
    seqacct_add(&A, 5, 5, 0);          /* late, beyond the window */
    seqacct_add(&A, 99990, 99990, 0);  /* duplicate inside the window */
    CHECK(A.received == 100000 && A.duplicates == 1 && A.reordered == 1, "window: rx %llu dup %llu",
          (unsigned long long)A.received, (unsigned long long)A.duplicates);
    CHECK(A.reorder_extent_max > 0, "extent lower bound when history is gone");
    /* big jump clears the window so old bits do not make false duplicates */
    seqacct_reset(&A, 0, NULL, NULL);
    seqacct_add(&A, 0, 0, 0);
    seqacct_add(&A, SEQ_WIN, 1, 0);        /* same slot as 0 */
    seqacct_add(&A, SEQ_WIN - 1, 2, 0);    /* late, must not be a dup */
    CHECK(A.duplicates == 0 && A.received == 3, "slot reuse");
    /* extent with several earlier larger frames: 1 2 5 3 4 6 -> 3 extent 1... e(3)= idx(3)-idx(5) */
    uint64_t ex[] = { 1, 2, 5, 6, 7, 3 };
    seqacct_reset(&A, 1, NULL, NULL);
    for (int i = 0; i < 6; i++) seqacct_add(&A, ex[i], 0, 0);
    CHECK(A.reorder_extent_max == 3, "extent %llu (6-3)", (unsigned long long)A.reorder_extent_max);

    /* RX classification (receive groups): test_rxgroup.c */
    return DONE();
}
