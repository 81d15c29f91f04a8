/* TSC calibration against the kernel's CLOCK_MONOTONIC_RAW (pure arithmetic, no DPDK).
 *
 * DPDK 22.11 rounds the TSC frequency it reports to 10 MHz (2445.43 MHz -> 2450 MHz here): every
 * rate tgen paced and every duration it timed was off by that rounding (0.19 % here, up to 0.5 %
 * at 2 GHz).  tgen measures the frequency itself at start-up instead:
 *
 *   a "bracket" is three reads, tsc0 = rdtsc, ns = clock_gettime(CLOCK_MONOTONIC_RAW), tsc1 =
 *   rdtsc; the clock was read somewhere inside [tsc0, tsc1], so the midpoint is off by at most
 *   (tsc1 - tsc0) / 2.  A preempted (or interrupted, or migrated) thread shows as a wide bracket.
 *   A "point" is the tightest of a few dozen brackets taken back to back.  Points are taken some
 *   70-100 ms apart; each pair of consecutive clean points gives one frequency estimate
 *   (delta tsc / delta ns); the result is the median of those estimates.  Points whose tightest
 *   bracket is still wide (the thread was preempted throughout) are dropped, and the calibration
 *   fails when the estimates disagree or too few are left (the caller then keeps DPDK's value).
 *
 * The TSC of every CPU this code targets is invariant (constant_tsc, nonstop_tsc): only the
 * reading thread's preemption can spoil a point, not the vCPU's speed, so tight brackets are all
 * that is needed.  CLOCK_MONOTONIC_RAW is not slewed by NTP; its accuracy is that of the kernel's
 * own clocksource calibration (ppm-level). */
#ifndef TGEN_TSCAL_H
#define TGEN_TSCAL_H
#include <stdint.h>
#include <stddef.h>

typedef struct { uint64_t tsc0, tsc1; int64_t ns; } tscal_read_t;     /* one bracket */
typedef struct { uint64_t tsc; int64_t ns; uint64_t width; } tscal_point_t;

typedef struct {
    double width_rel;        /* a point is dropped when its bracket is wider than  */
    double width_abs_ns;     /*   width_rel x the tightest point's + width_abs_ns   */
    double min_window_s;     /* consecutive clean points closer than this are not a window */
    unsigned min_windows;    /* at least this many window estimates */
    double max_spread_ppm;   /* estimates further apart than this: fail */
    double max_dev_hint;     /* result further than this fraction from the hint (DPDK's Hz): fail */
} tscal_limits_t;

#define TSCAL_LIMITS_DEFAULT { 2.0, 250.0, 0.05, 2, 100.0, 0.05 }

typedef struct {
    double hz;               /* the calibrated frequency; 0 when the calibration failed */
    double window_s;         /* first to last clean point */
    double spread_ppm;       /* (max - min) of the window estimates / hz */
    double error_bound_ppm;  /* worst window: (half its two bracket widths) / its length */
    double bracket_ns_min, bracket_ns_max;   /* over the clean points */
    unsigned points, points_used, windows;
    char why[160];           /* why the calibration failed ("" when it did not) */
} tscal_result_t;

/* the tightest of n brackets; its tsc is the midpoint */
tscal_point_t tscal_best(const tscal_read_t *r, unsigned n);

/* The frequency from n points (in time order) with hz_hint (DPDK's value, for unit conversion
 * of the limits and the sanity check).  Returns 0 and fills out, or -1 with out->why set (and
 * out->hz = 0; the other fields describe what was seen). */
int tscal_compute(const tscal_point_t *p, unsigned n, double hz_hint, const tscal_limits_t *lim,
                  tscal_result_t *out);
#endif
