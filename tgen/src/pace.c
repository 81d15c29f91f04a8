#include "pace.h"
#include <stdio.h>
#include <math.h>

int rate_to_pps(enum rate_kind k, double v, double wire, double speed, double *pps,
                const char *field, char *err, size_t errlen)
{
    if (!(v > 0) || !isfinite(v)) { snprintf(err, errlen, "%s: must be a positive number", field); return -1; }
    double p;
    switch (k) {
    case RATE_PPS: p = v; break;
    case RATE_PERCENT:
        if (speed <= 0) { snprintf(err, errlen, "%s: the port's link speed is unknown; declare it with --port ID:speed=...", field); return -1; }
        if (v > 100.0) { snprintf(err, errlen, "%s: %g %% is above 100 %% of the line rate", field, v); return -1; }
        p = v / 100.0 * line_rate_pps(speed, wire);
        break;
    case RATE_L1_BPS: p = v / l1_bits(wire); break;
    case RATE_L2_BPS: p = v / l2_bits(wire); break;
    default: snprintf(err, errlen, "%s: unknown rate kind", field); return -1;
    }
    if (p < PACE_MIN_PPS) { snprintf(err, errlen, "%s: %g frames/s is below the minimum %g", field, p, PACE_MIN_PPS); return -1; }
    if (speed > 0) {
        double lr = line_rate_pps(speed, wire);
        if (p > lr * (1.0 + 1e-9)) {
            snprintf(err, errlen, "%s: %.2f frames/s is above the line rate %.2f (%.1f B on the wire at %.0f b/s)",
                     field, p, lr, wire, speed);
            return -1;
        }
    }
    *pps = p;
    return 0;
}

uint64_t pace_gap_fp(double tsc_hz, double pps)
{
    long double g = (long double)tsc_hz / (long double)pps * (long double)(1ULL << PACE_SHIFT);
    if (g < 1) g = 1;
    if (g > 1.8e19L) g = 1.8e19L;
    return (uint64_t)g;
}

uint64_t pace_due(uint64_t start, uint64_t now, uint64_t gap_fp)
{
    if (now < start) return 0;
    unsigned __int128 num = (unsigned __int128)(now - start) << PACE_SHIFT;
    uint64_t k = (uint64_t)(num / gap_fp);   /* deadline(k) <= now for k <= this */
    /* deadline(k) = start + floor(k*gap/2^S) <= now  <=>  k*gap < (now-start+1)*2^S */
    unsigned __int128 lim = (unsigned __int128)(now - start + 1) << PACE_SHIFT;
    while ((unsigned __int128)(k + 1) * gap_fp < lim) k++;
    while (k > 0 && (unsigned __int128)k * gap_fp >= lim) k--;
    return k + 1;
}
