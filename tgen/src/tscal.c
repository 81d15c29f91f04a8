#include "tscal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#define TSCAL_MAX_POINTS 64

tscal_point_t tscal_best(const tscal_read_t *r, unsigned n)
{
    tscal_point_t best = { 0, 0, UINT64_MAX };
    for (unsigned i = 0; i < n; i++) {
        if (r[i].tsc1 < r[i].tsc0) continue;          /* not a bracket (TSC went backwards) */
        uint64_t w = r[i].tsc1 - r[i].tsc0;
        if (w < best.width) {
            best.width = w;
            best.tsc = r[i].tsc0 + w / 2;
            best.ns = r[i].ns;
        }
    }
    return best;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define FAIL(...) do { snprintf(out->why, sizeof(out->why), __VA_ARGS__); out->hz = 0; return -1; } while (0)

int tscal_compute(const tscal_point_t *p, unsigned n, double hz_hint, const tscal_limits_t *lim,
                  tscal_result_t *out)
{
    memset(out, 0, sizeof(*out));
    out->points = n;
    if (n > TSCAL_MAX_POINTS) n = TSCAL_MAX_POINTS;
    if (!(hz_hint > 0)) FAIL("no frequency hint");
    double cyc_ns = hz_hint / 1e9;
    /* the tightest bracket sets the scale of a clean one */
    uint64_t wmin = UINT64_MAX;
    for (unsigned i = 0; i < n; i++) if (p[i].width < wmin) wmin = p[i].width;
    if (wmin == UINT64_MAX) FAIL("no valid bracket");
    double wlim = lim->width_rel * (double)wmin + lim->width_abs_ns * cyc_ns;
    unsigned used[TSCAL_MAX_POINTS], nu = 0;
    for (unsigned i = 0; i < n; i++) {
        if ((double)p[i].width > wlim) continue;       /* preempted around every read */
        if (nu && (p[i].tsc <= p[used[nu - 1]].tsc || p[i].ns <= p[used[nu - 1]].ns)) continue;
        used[nu++] = i;
    }
    out->points_used = nu;
    out->bracket_ns_min = (double)wmin / cyc_ns;
    for (unsigned k = 0; k < nu; k++) {
        double w = (double)p[used[k]].width / cyc_ns;
        if (w > out->bracket_ns_max) out->bracket_ns_max = w;
    }
    /* one estimate per window between consecutive clean points */
    double est[TSCAL_MAX_POINTS];
    unsigned ne = 0, first = 0, last = 0;
    for (unsigned k = 1; k < nu; k++) {
        const tscal_point_t *a = &p[used[k - 1]], *b = &p[used[k]];
        double dns = (double)(b->ns - a->ns);
        if (dns < lim->min_window_s * 1e9) continue;
        double dtsc = (double)(b->tsc - a->tsc);
        est[ne++] = dtsc / dns * 1e9;
        double eb = ((double)a->width + (double)b->width) / 2.0 / dtsc * 1e6;
        if (eb > out->error_bound_ppm) out->error_bound_ppm = eb;
        if (ne == 1) first = used[k - 1];
        last = used[k];
    }
    out->windows = ne;
    if (ne) out->window_s = (double)(p[last].ns - p[first].ns) / 1e9;
    if (ne < lim->min_windows || ne == 0)
        FAIL("only %u clean windows of >= %g s (need %u; %u of %u points had a tight bracket)",
             ne, lim->min_window_s, lim->min_windows, nu, n);
    qsort(est, ne, sizeof(est[0]), cmp_dbl);
    double hz = ne % 2 ? est[ne / 2] : (est[ne / 2 - 1] + est[ne / 2]) / 2.0;
    out->spread_ppm = (est[ne - 1] - est[0]) / hz * 1e6;
    if (out->spread_ppm > lim->max_spread_ppm)
        FAIL("window estimates disagree by %.1f ppm (limit %g)", out->spread_ppm, lim->max_spread_ppm);
    if (fabs(hz / hz_hint - 1.0) > lim->max_dev_hint)
        FAIL("measured %.0f Hz is %.2f %% away from DPDK's %.0f Hz", hz, (hz / hz_hint - 1.0) * 100.0, hz_hint);
    out->hz = hz;
    return 0;
}
