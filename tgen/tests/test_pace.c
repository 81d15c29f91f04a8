/* Rate arithmetic (METHODOLOGY A1/A3, TV1/TV2/TV3), line-rate refusal, absolute-deadline pacing. */
#include <math.h>
#include <string.h>
#include "harness.h"
#include "pace.h"

#define NEAR(a, b, tol) (fabs((a) - (b)) <= (tol))

int main(void)
{
    char err[256];
    double pps;
    /* TV1: max fps at 10G */
    CHECK(NEAR(line_rate_pps(10e9, 64), 14880952.38, 0.01), "64B 10G");
    CHECK(NEAR(line_rate_pps(10e9, 128), 8445945.95, 0.01), "128B 10G");
    CHECK(NEAR(line_rate_pps(10e9, 1518), 812743.82, 0.01), "1518B 10G");
    CHECK(NEAR(line_rate_pps(100e9, 9000), 1385809.31, 0.01), "9000B 100G");
    CHECK(NEAR(line_rate_pps(25e9, 256), 11322463.77, 0.01), "256B 25G");
    /* TV3: VXLAN 64 inner -> 114 on the wire */
    CHECK(NEAR(line_rate_pps(10e9, 114), 9328358.21, 0.01), "VXLAN 114B 10G");
    /* TV2: 64 B at 5 Mfps = L1 3360 Mb/s (33.6 %), L2 2560 Mb/s */
    CHECK(rate_to_pps(RATE_L1_BPS, 3.36e9, 64, 10e9, &pps, "rate.l1_bps", err, sizeof(err)) == 0 && NEAR(pps, 5e6, 1e-3), "L1 -> pps %g", pps);
    CHECK(rate_to_pps(RATE_L2_BPS, 2.56e9, 64, 10e9, &pps, "rate.l2_bps", err, sizeof(err)) == 0 && NEAR(pps, 5e6, 1e-3), "L2 -> pps %g", pps);
    CHECK(rate_to_pps(RATE_PERCENT, 33.6, 64, 10e9, &pps, "rate.percent", err, sizeof(err)) == 0 && NEAR(pps, 5e6, 1e-3), "percent -> pps %g", pps);
    CHECK(rate_to_pps(RATE_PERCENT, 100, 64, 10e9, &pps, "rate.percent", err, sizeof(err)) == 0 && NEAR(pps, 14880952.38, 0.01), "100 %%");
    CHECK(NEAR(5e6 * l1_bits(64), 3.36e9, 1) && NEAR(5e6 * l2_bits(64), 2.56e9, 1), "L1/L2 bits per frame");
    /* refusals name the field */
    CHECK(rate_to_pps(RATE_PPS, 14880953, 64, 10e9, &pps, "rate.pps", err, sizeof(err)) == -1 && !strncmp(err, "rate.pps:", 9), "above line rate: %s", err);
    CHECK(strstr(err, "line rate") != NULL, "message says why: %s", err);
    CHECK(rate_to_pps(RATE_PERCENT, 101, 64, 10e9, &pps, "rate.percent", err, sizeof(err)) == -1, "101 %% refused");
    CHECK(rate_to_pps(RATE_PERCENT, 50, 64, 0, &pps, "rate.percent", err, sizeof(err)) == -1 && strstr(err, "speed"), "percent without speed: %s", err);
    CHECK(rate_to_pps(RATE_PPS, 0, 64, 10e9, &pps, "rate.pps", err, sizeof(err)) == -1, "zero refused");
    CHECK(rate_to_pps(RATE_PPS, -5, 64, 10e9, &pps, "rate.pps", err, sizeof(err)) == -1, "negative refused");
    CHECK(rate_to_pps(RATE_PPS, NAN, 64, 10e9, &pps, "rate.pps", err, sizeof(err)) == -1, "NaN refused");
    CHECK(rate_to_pps(RATE_PPS, 1e9, 64, 0, &pps, "rate.pps", err, sizeof(err)) == 0, "unknown speed: no line-rate check");
    CHECK(rate_to_pps(RATE_L1_BPS, 10e9, 1518, 10e9, &pps, "rate.l1_bps", err, sizeof(err)) == 0, "exactly line rate ok");

    /* pacing: gaps and deadlines without drift (34.30 fixed point: < 2 cycles after 1e9 frames) */
    double hz = 2.6e9;
    uint64_t g = pace_gap_fp(hz, 1e6);
    CHECK(NEAR((double)g / (double)(1ULL << PACE_SHIFT), 2600.0, 1e-6), "gap 1 Mpps = 2600 cycles");
    g = pace_gap_fp(hz, 14880952.38);
    uint64_t start = 1000000;
    for (uint64_t k = 1; k <= 1000000000ULL; k *= 10) {
        double exact = (double)start + (double)k * hz / 14880952.38;
        CHECK(fabs((double)pace_deadline(start, k, g) - exact) <= 2.0, "deadline k=%llu off by %g", (unsigned long long)k,
              (double)pace_deadline(start, k, g) - exact);
    }
    /* frames due: exactly those with deadline <= now */
    g = pace_gap_fp(hz, 3e6 / 7);
    for (uint64_t now = start; now < start + 200000; now += 997) {
        uint64_t n = pace_due(start, now, g);
        CHECK(pace_deadline(start, n - 1, g) <= now && pace_deadline(start, n, g) > now, "due at %llu", (unsigned long long)now);
    }
    CHECK(pace_due(start, start - 1, g) == 0, "nothing due before start");
    CHECK(pace_due(start, start, g) == 1, "frame 0 due at start");
    /* one second at 1 Mpps = 1,000,000 deadlines in [start, start+hz) */
    g = pace_gap_fp(hz, 1e6);
    CHECK(pace_due(start, start + (uint64_t)hz - 1, g) == 1000000, "1 s at 1 Mpps -> %llu", (unsigned long long)pace_due(start, start + (uint64_t)hz - 1, g));
    /* low rates do not overflow */
    g = pace_gap_fp(4.5e9, 1.0);
    CHECK(pace_deadline(0, 10, g) >= 44999999990ULL && pace_deadline(0, 10, g) <= 45000000001ULL, "1 pps at 4.5 GHz");
    return DONE();
}
