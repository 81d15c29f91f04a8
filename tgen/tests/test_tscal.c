/* TSC calibration arithmetic on synthetic brackets: a known TSC/ns ratio is recovered, preempted
 * brackets are dropped, inconsistent or too few windows fail, DPDK's 10 MHz-rounded hint is only
 * a hint. */
#include <math.h>
#include <string.h>
#include "harness.h"
#include "tscal.h"

static const double HZ = 2445430000.0;      /* this VM's TSC; DPDK says 2450 MHz */
static const double HINT = 2450000000.0;
static const uint64_t TSC0 = 123456789012345ULL;
static const int64_t NS0 = 987654321000LL;

static uint64_t rng = 88172645463325252ULL;
static double urand(void)      /* xorshift64, [0,1) */
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static uint64_t tsc_at(double t_ns) { return TSC0 + (uint64_t)llround(t_ns * HZ / 1e9); }

/* one bracket around a clock read at t_ns: the first rdtsc `before` ns earlier, the second
 * `after` ns later */
static tscal_read_t bracket(double t_ns, double before, double after)
{
    tscal_read_t r = { tsc_at(t_ns - before), tsc_at(t_ns + after), NS0 + (int64_t)llround(t_ns) };
    return r;
}

/* a point at t_ns: the tightest of 32 brackets of 25..85 ns; preempt_ns > 0: every bracket of
 * this point was widened by a preemption of that length right after the clock read */
static tscal_point_t point(double t_ns, double preempt_ns)
{
    tscal_read_t r[32];
    double t = t_ns;
    for (int i = 0; i < 32; i++) {
        double b = 10 + urand() * 30, a = 15 + urand() * 30;
        r[i] = bracket(t, b, a + preempt_ns * (0.5 + urand()));
        t += 100 + preempt_ns;
    }
    return tscal_best(r, 32);
}

static double ppm(double x, double ref) { return (x / ref - 1.0) * 1e6; }

int main(void)
{
    const tscal_limits_t lim = TSCAL_LIMITS_DEFAULT;
    tscal_result_t res;

    /* tscal_best: the tightest bracket, its midpoint; a backwards bracket is ignored */
    tscal_read_t rs[4] = { bracket(1000, 200, 300), bracket(2000, 20, 40), bracket(3000, 50, 50), { 500, 400, 7 } };
    tscal_point_t b = tscal_best(rs, 4);
    CHECK(b.ns == NS0 + 2000 && b.width == rs[1].tsc1 - rs[1].tsc0, "tightest bracket chosen (width %llu)", (unsigned long long)b.width);
    CHECK(b.tsc == rs[1].tsc0 + (rs[1].tsc1 - rs[1].tsc0) / 2, "midpoint");

    /* five clean points 75 ms apart: the ratio to well under 1 ppm, DPDK's -1866 ppm rounding undone */
    tscal_point_t p[8];
    for (int i = 0; i < 5; i++) p[i] = point(i * 75e6, 0);
    CHECK(tscal_compute(p, 5, HINT, &lim, &res) == 0, "clean: %s", res.why);
    CHECK(fabs(ppm(res.hz, HZ)) < 0.5, "clean: %.3f Hz is %.3f ppm off", res.hz, ppm(res.hz, HZ));
    CHECK(res.windows == 4 && res.points_used == 5 && res.points == 5, "clean: 4 windows of 5 points (%u, %u)", res.windows, res.points_used);
    CHECK(fabs(res.window_s - 0.3) < 1e-3, "clean: window %.6f s", res.window_s);
    CHECK(res.spread_ppm < 1.0 && res.error_bound_ppm < 1.0, "clean: spread %.3f ppm, bound %.3f ppm", res.spread_ppm, res.error_bound_ppm);
    CHECK(res.bracket_ns_min >= 25 && res.bracket_ns_max <= 90, "clean: brackets %.1f..%.1f ns", res.bracket_ns_min, res.bracket_ns_max);
    CHECK(fabs(ppm(HINT, res.hz) - 1868.9) < 1.0, "DPDK's rounding: %+.1f ppm", ppm(HINT, res.hz));
    CHECK(res.why[0] == 0, "no failure reason");

    /* irregular spacing (a thread that slept 60..140 ms, a vCPU that changed speed) changes nothing:
     * only the brackets matter */
    double t = 0;
    for (int i = 0; i < 6; i++) { p[i] = point(t, 0); t += 60e6 + urand() * 80e6; }
    CHECK(tscal_compute(p, 6, HINT, &lim, &res) == 0 && fabs(ppm(res.hz, HZ)) < 0.5, "irregular: %.3f ppm (%s)", ppm(res.hz, HZ), res.why);

    /* a point preempted for 2 ms around every one of its reads is dropped; the result is still exact */
    for (int i = 0; i < 5; i++) p[i] = point(i * 75e6, i == 2 ? 2e6 : 0);
    CHECK(p[2].width > 1000000, "the preempted point is wide (%llu cycles)", (unsigned long long)p[2].width);
    CHECK(tscal_compute(p, 5, HINT, &lim, &res) == 0, "one preempted point: %s", res.why);
    CHECK(res.points_used == 4 && res.windows == 3, "one preempted point: dropped (%u used, %u windows)", res.points_used, res.windows);
    CHECK(fabs(ppm(res.hz, HZ)) < 0.5, "one preempted point: %.3f ppm", ppm(res.hz, HZ));
    /* ...which it had to be: the window through it is thousands of ppm off */
    double bad = (double)(p[2].tsc - p[1].tsc) / (double)(p[2].ns - p[1].ns) * 1e9;
    CHECK(fabs(ppm(bad, HZ)) > 1000, "the preempted window would be %.0f ppm off", ppm(bad, HZ));
    /* a slightly noisy point (every bracket >= 500 ns: an interrupt storm) is dropped too */
    for (int i = 0; i < 5; i++) p[i] = point(i * 75e6, i == 4 ? 1000 : 0);
    CHECK(tscal_compute(p, 5, HINT, &lim, &res) == 0 && res.points_used == 4 && fabs(ppm(res.hz, HZ)) < 0.5,
          "500 ns brackets dropped (%u used, %.3f ppm)", res.points_used, ppm(res.hz, HZ));

    /* two bad points in the middle: the clean ones around them still make two windows */
    for (int i = 0; i < 5; i++) p[i] = point(i * 75e6, (i == 2 || i == 3) ? 5e5 : 0);
    CHECK(tscal_compute(p, 5, HINT, &lim, &res) == 0 && res.windows == 2 && fabs(ppm(res.hz, HZ)) < 0.5,
          "two bad points: %u windows, %.3f ppm (%s)", res.windows, ppm(res.hz, HZ), res.why);

    /* three bad points of five: one window is not enough */
    for (int i = 0; i < 5; i++) p[i] = point(i * 75e6, (i >= 1 && i <= 3) ? 5e5 : 0);
    CHECK(tscal_compute(p, 5, HINT, &lim, &res) == -1 && res.hz == 0 && strstr(res.why, "clean windows"),
          "too few windows fail: %s", res.why);

    /* a point with a tight bracket but a clock that stepped 100 us: the estimates disagree -> fail */
    for (int i = 0; i < 5; i++) p[i] = point(i * 75e6, 0);
    p[3].ns += 100000;
    CHECK(tscal_compute(p, 5, HINT, &lim, &res) == -1 && strstr(res.why, "disagree") && res.spread_ppm > 100,
          "inconsistent windows fail: %s", res.why);

    /* points closer than the minimum window make no estimate */
    for (int i = 0; i < 5; i++) p[i] = point(i * 10e6, 0);
    CHECK(tscal_compute(p, 5, HINT, &lim, &res) == -1 && res.windows == 0, "10 ms apart: %s", res.why);

    /* a hint far from the measurement (not the TSC DPDK uses?) fails */
    for (int i = 0; i < 5; i++) p[i] = point(i * 75e6, 0);
    CHECK(tscal_compute(p, 5, 3.0e9, &lim, &res) == -1 && strstr(res.why, "DPDK"), "hint 3 GHz: %s", res.why);
    CHECK(tscal_compute(p, 5, 0, &lim, &res) == -1, "no hint");
    CHECK(tscal_compute(p, 0, HINT, &lim, &res) == -1, "no points");

    /* out-of-order points (clock or TSC not increasing) are skipped */
    for (int i = 0; i < 5; i++) p[i] = point(i * 75e6, 0);
    p[5] = p[1];
    CHECK(tscal_compute(p, 6, HINT, &lim, &res) == 0 && res.points_used == 5 && fabs(ppm(res.hz, HZ)) < 0.5,
          "a repeated point is skipped (%u used)", res.points_used);
    return DONE();
}
