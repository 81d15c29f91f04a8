/* Histogram accuracy: percentiles within 1 % of the exact (nearest-rank) values. */
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include "harness.h"
#include "hist.h"

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rng = 88172645463325252ULL;
static double urand(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (double)(rng >> 11) / 9007199254740992.0; }

static void check_dist(const char *name, uint64_t *v, size_t n)
{
    static hist_t h;
    hist_reset(&h);
    for (size_t i = 0; i < n; i++) hist_add(&h, v[i]);
    qsort(v, n, sizeof(v[0]), cmp);
    static const double ps[] = { 1, 10, 50, 90, 99, 99.9, 99.99, 100 };
    for (unsigned i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
        size_t rank = (size_t)ceil(ps[i] / 100.0 * (double)n);
        if (rank < 1) rank = 1;
        double exact = (double)v[rank - 1];
        double got = hist_percentile(&h, ps[i]);
        double rel = exact > 0 ? fabs(got - exact) / exact : fabs(got);
        CHECK(rel <= 0.01, "%s p%g exact %.0f got %.1f rel %.4f", name, ps[i], exact, got, rel);
    }
    CHECK(h.min == v[0] && h.max == v[n - 1], "%s min/max", name);
    CHECK(h.count == n, "%s count", name);
}

/* the bucket formula as first written (linear part, then 128 sub-buckets per power of two) */
static unsigned ref_index(uint64_t v)
{
    if (v < HIST_LIN) return (unsigned)v;
    unsigned msb = 63 - (unsigned)__builtin_clzll(v);
    if (msb > HIST_MAX_MSB) return HIST_NBUCKETS - 1;
    unsigned shift = msb - 7;
    return HIST_LIN + (msb - 8) * HIST_SUB + (unsigned)((v >> shift) - HIST_SUB);
}

int main(void)
{
    /* hist_index (branch-light) == the reference formula: every value below 2^20, then each power
     * of two's edges and random values over the whole range, up to UINT64_MAX */
    for (uint64_t v = 0; v < (1u << 20); v++)
        if (hist_index(v) != ref_index(v)) { CHECK(0, "index %llu: %u vs %u", (unsigned long long)v, hist_index(v), ref_index(v)); break; }
    for (unsigned b = 0; b < 64; b++) {
        uint64_t p = (uint64_t)1 << b;
        uint64_t e[] = { p - 1, p, p + 1, p | (p >> 1), p + (p - 1) };
        for (unsigned k = 0; k < 5; k++)
            CHECK(hist_index(e[k]) == ref_index(e[k]), "index %llu: %u vs %u", (unsigned long long)e[k], hist_index(e[k]), ref_index(e[k]));
    }
    for (int i = 0; i < 1000000; i++) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        uint64_t v = rng >> (rng & 63);
        if (hist_index(v) != ref_index(v)) { CHECK(0, "index %llu: %u vs %u", (unsigned long long)v, hist_index(v), ref_index(v)); break; }
    }
    CHECK(hist_index(UINT64_MAX) == HIST_NBUCKETS - 1 && hist_index(0) == 0, "ends");
    /* bucket geometry: every value falls in its bucket, and buckets are <= 1/128 wide */
    for (int i = 0; i < 200000; i++) {
        uint64_t x = (uint64_t)exp(urand() * 33.0);   /* < 2^48 */
        unsigned b = hist_index(x);
        CHECK(hist_bucket_lo(b) <= x && x <= hist_bucket_hi(b), "value %llu bucket %u [%llu,%llu]",
              (unsigned long long)x, b, (unsigned long long)hist_bucket_lo(b), (unsigned long long)hist_bucket_hi(b));
        if (x >= 256) {
            double w = (double)(hist_bucket_hi(b) - hist_bucket_lo(b) + 1);
            CHECK(w / (double)hist_bucket_lo(b) <= 1.0 / 128 + 1e-12, "bucket width %g lo %llu", w, (unsigned long long)hist_bucket_lo(b));
        }
        if (h_fail > 10) break;
    }
    /* contiguous buckets */
    for (unsigned b = 1; b < HIST_NBUCKETS - 1; b++)
        if (hist_bucket_lo(b) != hist_bucket_hi(b - 1) + 1) { CHECK(0, "gap at bucket %u", b); break; }
    CHECK(hist_index(255) == 255 && hist_index(256) == 256, "linear range");

    size_t n = 100000;
    uint64_t *v = malloc(n * sizeof(*v));
    /* log-normal latencies around 10 us */
    for (size_t i = 0; i < n; i++) {
        double u1 = urand() + 1e-12, u2 = urand();
        double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
        v[i] = (uint64_t)(10000.0 * exp(0.8 * z));
    }
    check_dist("lognormal", v, n);
    /* uniform 0..5 ms */
    for (size_t i = 0; i < n; i++) v[i] = (uint64_t)(urand() * 5e6);
    check_dist("uniform", v, n);
    /* small values (exact region) + a long tail */
    for (size_t i = 0; i < n; i++) v[i] = i % 1000 == 0 ? (uint64_t)(urand() * 1e9) : 30 + (uint64_t)(urand() * 200);
    check_dist("bimodal", v, n);

    /* merge equals adding everything to one */
    static hist_t a, b, c;
    hist_reset(&a); hist_reset(&b); hist_reset(&c);
    for (size_t i = 0; i < n; i++) { hist_add(i & 1 ? &a : &b, v[i]); hist_add(&c, v[i]); }
    hist_merge(&a, &b);
    CHECK(a.count == c.count && a.min == c.min && a.max == c.max && memcmp(a.b, c.b, sizeof(a.b)) == 0, "merge");
    CHECK(hist_percentile(&a, 99) == hist_percentile(&c, 99), "merge p99");
    /* huge values saturate in the last bucket */
    hist_reset(&a);
    hist_add(&a, UINT64_MAX / 2);
    CHECK(a.b[HIST_NBUCKETS - 1] == 1, "saturation");
    free(v);
    return DONE();
}
