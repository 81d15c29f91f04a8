/* Rate arithmetic and absolute-deadline pacing (no DPDK dependency). */
#ifndef TGEN_PACE_H
#define TGEN_PACE_H
#include <stdint.h>
#include <stddef.h>

#define PACE_SHIFT 30            /* gap in TSC cycles as 34.30 fixed point */
#define PACE_MIN_PPS 1.0

enum rate_kind { RATE_PPS, RATE_PERCENT, RATE_L1_BPS, RATE_L2_BPS };

static inline double l1_bits(double size_b) { return (size_b + 20.0) * 8.0; }
static inline double l2_bits(double size_b) { return size_b * 8.0; }
/* frames/s at 100 % line rate for mean wire size (incl. FCS) */
static inline double line_rate_pps(double speed_bps, double wire_size_b) { return speed_bps / l1_bits(wire_size_b); }

/* Convert a rate to pps.  speed_bps 0 = unknown (percent refused, no line-rate check).
 * Returns 0 or -1 with err set ("<field>: why"). */
int rate_to_pps(enum rate_kind k, double v, double wire_size_b, double speed_bps, double *pps,
                const char *field, char *err, size_t errlen);

/* fixed-point cycles per frame */
uint64_t pace_gap_fp(double tsc_hz, double pps);
/* deadline of frame k (0-based) of a segment starting at start */
static inline uint64_t pace_deadline(uint64_t start, uint64_t k, uint64_t gap_fp)
{
    return start + (uint64_t)(((unsigned __int128)k * gap_fp) >> PACE_SHIFT);
}
/* number of frames whose deadline is <= now (frames 0..n-1) */
uint64_t pace_due(uint64_t start, uint64_t now, uint64_t gap_fp);
#endif
