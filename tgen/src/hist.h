/* Log-linear latency histogram (HDR style), no DPDK dependency.
 * Values 0..255 ns: one bucket per ns (exact).
 * Values >= 256: for each power of two [2^m, 2^(m+1)), 128 equal sub-buckets of width 2^(m-7),
 * so a bucket is at most 1/128 of its lower bound wide; a percentile reported as the bucket
 * midpoint is within 1/256 (0.39 %) of the exact value.  Values >= 2^48 ns land in the last bucket. */
#ifndef TGEN_HIST_H
#define TGEN_HIST_H
#include <stdint.h>

#define HIST_SUB 128
#define HIST_LIN 256
#define HIST_MAX_MSB 47
#define HIST_NBUCKETS (HIST_LIN + (HIST_MAX_MSB - 8 + 1) * HIST_SUB)

typedef struct {
    uint64_t count;
    uint64_t min, max;
    unsigned __int128 sum;     /* exact: values below 2^48, counts below 2^64 */
    uint64_t b[HIST_NBUCKETS];
} hist_t;

void hist_reset(hist_t *h);
/* The bucket of v.  With shift = max(msb(v) - 7, 0), bucket = shift * 128 + (v >> shift): the same
 * as the linear part (v < 256: shift 0, bucket v) followed by 128 sub-buckets per power of
 * two (256 + (msb - 8) * 128 + (v >> (msb - 7)) - 128), computed without a branch on v's range. */
static inline unsigned hist_index(uint64_t v)
{
    unsigned msb = 63 - (unsigned)__builtin_clzll(v | 1);
    if (__builtin_expect(msb > HIST_MAX_MSB, 0)) return HIST_NBUCKETS - 1;
    unsigned shift = msb > 7 ? msb - 7 : 0;
    return (shift << 7) + (unsigned)(v >> shift);
}
uint64_t hist_bucket_lo(unsigned i);
uint64_t hist_bucket_hi(unsigned i);           /* inclusive upper bound */
static inline void hist_add(hist_t *h, uint64_t v)
{
    unsigned i = hist_index(v);
    h->b[i]++;
    if (h->count == 0 || v < h->min) h->min = v;
    if (v > h->max) h->max = v;
    h->count++;
    h->sum += v;
}
void hist_merge(hist_t *dst, const hist_t *src);
/* p in (0,100]; value of the rank ceil(p/100*count) sample; bucket midpoint clamped to [min,max]. */
double hist_percentile(const hist_t *h, double p);
#endif
