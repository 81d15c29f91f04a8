#include "hist.h"
#include <string.h>
#include <math.h>

void hist_reset(hist_t *h) { memset(h, 0, sizeof(*h)); }

uint64_t hist_bucket_lo(unsigned i)
{
    if (i < HIST_LIN) return i;
    unsigned j = i - HIST_LIN;
    unsigned msb = 8 + j / HIST_SUB;
    uint64_t sub = j % HIST_SUB;
    return (HIST_SUB + sub) << (msb - 7);
}

uint64_t hist_bucket_hi(unsigned i)
{
    if (i < HIST_LIN) return i;
    unsigned j = i - HIST_LIN;
    unsigned msb = 8 + j / HIST_SUB;
    if (i == HIST_NBUCKETS - 1) return UINT64_MAX;
    return hist_bucket_lo(i) + ((uint64_t)1 << (msb - 7)) - 1;
}

void hist_merge(hist_t *dst, const hist_t *src)
{
    if (src->count == 0) return;
    if (dst->count == 0 || src->min < dst->min) dst->min = src->min;
    if (src->max > dst->max) dst->max = src->max;
    dst->count += src->count;
    dst->sum += src->sum;
    for (unsigned i = 0; i < HIST_NBUCKETS; i++) dst->b[i] += src->b[i];
}

double hist_percentile(const hist_t *h, double p)
{
    if (h->count == 0) return 0.0;
    uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)h->count);
    if (rank < 1) rank = 1;
    if (rank > h->count) rank = h->count;
    uint64_t cum = 0;
    for (unsigned i = 0; i < HIST_NBUCKETS; i++) {
        cum += h->b[i];
        if (cum >= rank) {
            double lo = (double)hist_bucket_lo(i);
            double hi = (i == HIST_NBUCKETS - 1) ? (double)h->max : (double)hist_bucket_hi(i);
            double v = (lo + hi) / 2.0;
            if (v < (double)h->min) v = (double)h->min;
            if (v > (double)h->max) v = (double)h->max;
            return v;
        }
    }
    return (double)h->max;
}
