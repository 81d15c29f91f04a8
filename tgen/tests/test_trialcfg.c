/* trial.start validation (defaults, refusals naming the field, their order) and the schedule and
 * result arithmetic of trialcfg.c, without EAL. */
#include <math.h>
#include <string.h>
#include "harness.h"
#include "trialcfg.h"

static trialcfg_t T;
static rpc_err_t E;
static uint16_t ids[MAX_STREAM_ID];
static unsigned nids;
static int defined[MAX_STREAM_ID];

static int exists(unsigned id) { return defined[id]; }

/* the whole of trial.start's request handling: keys, stream list, the rest */
static int start(const char *js)
{
    json_error_t je;
    json_t *o = js ? json_loads(js, JSON_DECODE_ANY, &je) : NULL;
    if (js && !o) { fprintf(stderr, "bad test json %s\n", js); return -9; }
    E.code = 0;
    E.msg[0] = 0;
    int rc = trialcfg_check_keys(o, &E) || trialcfg_stream_ids(o, exists, ids, &nids, &E) || trialcfg_parse(o, &T, &E) ? -1 : 0;
    json_decref(o);
    return rc;
}

#define REFUSED(js, c, field) do { int r_ = start(js); \
    CHECK(r_ < 0 && E.code == (c) && !strncmp(E.msg, field ":", strlen(field) + 1), "%s -> %d %s", js, E.code, E.msg); } while (0)

static void test_requests(void)
{
    defined[0] = defined[2] = defined[7] = 1;
    CHECK(start("{\"duration_s\":2}") == 0, "duration: %s", E.msg);
    CHECK(nids == 3 && ids[0] == 0 && ids[1] == 2 && ids[2] == 7, "every defined stream in id order");
    CHECK(T.nsegs == 1 && T.segs[0].duration_s == 2 && T.segs[0].max_frames == 0 && T.segs[0].scale == 1, "one timed segment");
    CHECK(T.learning == 0 && T.latency == 1 && T.learning_frames == 3 && T.learning_wait_s == 2 && T.drain_s == 2, "defaults");
    CHECK(T.duration_s == 2 && T.pps_over == 0 && !strcmp(T.rate_field, "rate"), "duration, no override");
    CHECK(start("{\"streams\":[7,0],\"frames\":1000,\"pps\":500,\"learning\":true,\"learning_frames\":5,"
                "\"learning_wait_s\":0.5,\"drain_s\":0,\"latency\":false}") == 0, "frames: %s", E.msg);
    CHECK(nids == 2 && ids[0] == 7 && ids[1] == 0, "listed order kept");
    CHECK(T.segs[0].max_frames == 1000 && T.segs[0].duration_s == 0 && T.segs[0].pps == 500, "frames + pps");
    CHECK(T.learning == 1 && T.latency == 0 && T.learning_frames == 5 && T.learning_wait_s == 0.5 && T.drain_s == 0, "options");
    CHECK(!strcmp(T.rate_field, "pps"), "rate field pps");
    CHECK(start("{\"segments\":[{\"duration_s\":5,\"scale\":1.1},{\"duration_s\":5,\"pps\":2000}],\"pps\":100}") == 0, "segments: %s", E.msg);
    CHECK(T.nsegs == 2 && T.segs[0].scale == 1.1 && fabs(T.segs[0].pps - 110) < 1e-9 && T.segs[1].pps == 2000, "override scales, absolute stays");
    CHECK(T.duration_s == 10 && !strcmp(T.rate_field, "segments"), "segments duration");
    CHECK(start("{\"mode\":\"burst\",\"burst_frames\":5000,\"bursts\":3,\"burst_interval_s\":0.1}") == 0, "burst: %s", E.msg);
    CHECK(T.nsegs == 3 && T.segs[2].max_frames == 5000 && T.segs[0].duration_s == 0.1 && T.segs[2].duration_s == 0, "bursts");
    CHECK(fabs(T.duration_s - 0.2) < 1e-12, "burst intervals %g", T.duration_s);
    CHECK(start(NULL) < 0 && E.code == -32602 && !strncmp(E.msg, "duration_s:", 11), "no params: %s", E.msg);

    REFUSED("[1]", -32602, "params");
    REFUSED("{\"duration_s\":1,\"bogus\":1}", -32602, "bogus");
    REFUSED("{\"streams\":[],\"duration_s\":1}", -32602, "streams");
    REFUSED("{\"streams\":[1],\"duration_s\":1}", -32001, "streams[0]");
    REFUSED("{\"streams\":[0,\"2\"],\"duration_s\":1}", -32001, "streams[1]");
    REFUSED("{\"streams\":[0,0],\"duration_s\":1}", -32602, "streams[1]");
    REFUSED("{\"streams\":[99999],\"duration_s\":1}", -32001, "streams[0]");
    REFUSED("{\"streams\":[1],\"duration_s\":-1}", -32001, "streams[0]");        /* the stream list is checked first */
    REFUSED("{\"duration_s\":-1}", -32602, "duration_s");
    REFUSED("{\"duration_s\":\"2\"}", -32602, "duration_s");
    REFUSED("{\"duration_s\":2e6}", -32602, "duration_s");
    REFUSED("{\"frames\":1.5}", -32602, "frames");
    REFUSED("{\"duration_s\":1,\"frames\":10}", -32602, "frames");
    REFUSED("{\"duration_s\":1,\"pps\":0.5}", -32602, "pps");
    REFUSED("{\"duration_s\":1,\"mode\":\"fast\"}", -32602, "mode");
    REFUSED("{\"duration_s\":1,\"mode\":1}", -32602, "mode");
    REFUSED("{\"duration_s\":1,\"learning\":1}", -32602, "learning");
    REFUSED("{\"duration_s\":1,\"latency\":\"no\"}", -32602, "latency");
    REFUSED("{\"duration_s\":1,\"learning_frames\":0}", -32602, "learning_frames");
    REFUSED("{\"duration_s\":1,\"learning_frames\":1001}", -32602, "learning_frames");
    REFUSED("{\"duration_s\":1,\"learning_wait_s\":-1}", -32602, "learning_wait_s");
    REFUSED("{\"duration_s\":1,\"drain_s\":3601}", -32602, "drain_s");
    REFUSED("{\"duration_s\":-1,\"drain_s\":3601}", -32602, "duration_s");        /* the length is checked first */
    REFUSED("{\"segments\":[{\"duration_s\":1}],\"frames\":5}", -32602, "segments");
    REFUSED("{\"segments\":[]}", -32602, "segments");
    REFUSED("{\"segments\":[1]}", -32602, "segments[0]");
    REFUSED("{\"segments\":[{\"duration_s\":1},{\"duration_s\":0}]}", -32602, "segments[1].duration_s");
    REFUSED("{\"segments\":[{\"duration_s\":1,\"speed\":2}]}", -32602, "segments[0].speed");
    REFUSED("{\"segments\":[{\"duration_s\":1,\"scale\":1,\"pps\":5}]}", -32602, "segments[0]");
    REFUSED("{\"segments\":[{\"duration_s\":1,\"scale\":0}]}", -32602, "segments[0].scale");
    REFUSED("{\"segments\":[{\"duration_s\":1,\"pps\":0.5}]}", -32602, "segments[0].pps");
    REFUSED("{\"mode\":\"burst\"}", -32602, "burst_frames");
    REFUSED("{\"mode\":\"burst\",\"burst_frames\":10,\"bursts\":65}", -32602, "bursts");
    REFUSED("{\"mode\":\"burst\",\"burst_frames\":10,\"bursts\":2}", -32602, "burst_interval_s");
    REFUSED("{\"mode\":\"burst\",\"burst_frames\":10,\"burst_interval_s\":0}", -32602, "burst_interval_s");
    REFUSED("{\"drain_s\":1}", -32602, "duration_s");
    memset(defined, 0, sizeof(defined));
    REFUSED("{\"duration_s\":1}", -32602, "streams");
}

static void test_schedule(void)
{
    struct seg timed = { .duration_s = 1.0, .scale = 0.5 }, counted = { .max_frames = 12345, .scale = 1 };
    struct seg abs = { .duration_s = 0.25, .pps = 1000, .scale = 1 };
    CHECK(trial_seg_pps(&timed, 100000) == 50000 && trial_seg_pps(&abs, 7) == 1000, "segment rates");
    CHECK(trial_seg_frames(&timed, 50000) == 50000, "1 s at 50 kpps = 50000 (no ceil rounding up)");
    CHECK(trial_seg_frames(&timed, 2.5) == 3 && trial_seg_frames(&abs, 1000) == 250, "ceil(duration x rate)");
    CHECK(trial_seg_frames(&counted, 1e6) == 12345, "frame count");
    CHECK(trial_seg_len_s(&timed, 50000, 50000) == 1.0 && trial_seg_len_s(&counted, 12345, 1000) == 12.345, "segment lengths");
    CHECK(trial_seg_len_s(&counted, 10, 0) == 0, "no rate -> 0");
    CHECK(trial_seg_grace_s(0.5) == 0.1 && fabs(trial_seg_grace_s(5) - 0.5) < 1e-12 && trial_seg_grace_s(100) == 1.0, "grace 10 %%, 0.1..1 s");
    CHECK(trial_watchdog_slack(1000, 100) == 1000 && trial_watchdog_slack(10, 100) == 500, "watchdog max(5 s, length)");

    trialcfg_t tc = { .nsegs = 2, .rate_field = "segments" };
    double load[2] = { 10e9, 5e9 }, speed[2] = { 10e9, 0 };
    CHECK(trial_check_port_load(&tc, load, speed, 2, &E) == 0, "exactly line rate, unknown speed: accepted");
    load[0] = 10.1e9;
    CHECK(trial_check_port_load(&tc, load, speed, 2, &E) < 0 && E.code == -32602 && strstr(E.msg, "segments: port 0") &&
          strstr(E.msg, "in some segment"), "%s", E.msg);
    CHECK(trial_check_rx_memory(1000, 1, 1, 20000, 90000, &E) == 0, "1000 streams fit");
    CHECK(trial_check_rx_memory(65536, 4, 1, 20000, 90000, &E) < 0 && !strncmp(E.msg, "streams:", 8), "%s", E.msg);
    CHECK(trial_check_rx_memory(65536, 4, 0, 20000, 90000, &E) < 0, "65536 x 4 x 20 kB > 2 GiB");
    CHECK(trial_check_rx_memory(65536, 1, 0, 20000, 90000, &E) == 0, "65536 x 20 kB without latency fits");
}

static void test_results(void)
{
    /* segments 100 kpps x 0.5 s then 50 kpps x 0.5 s -> 75000 frames, 75 kpps */
    struct seg segs[2] = { { .duration_s = 0.5, .scale = 1 }, { .duration_s = 0.5, .scale = 0.5 } };
    double pps[2] = { 100000, 50000 }, fr, ip;
    uint64_t max[2] = { 50000, 25000 };
    trial_stream_intended(segs, 2, pps, max, &fr, &ip);
    CHECK(fr == 75000 && fabs(ip - 75000) < 1e-9, "segments intended %g %g", fr, ip);
    /* 3 bursts x 5000 at 1 Mpps: the rate inside the burst */
    struct seg b[3] = { { .max_frames = 5000, .duration_s = 0.1 }, { .max_frames = 5000, .duration_s = 0.1 }, { .max_frames = 5000 } };
    double bp[3] = { 1e6, 1e6, 1e6 };
    uint64_t bm[3] = { 5000, 5000, 5000 };
    trial_stream_intended(b, 3, bp, bm, &fr, &ip);
    CHECK(fr == 15000 && ip == 1e6, "bursts intended %g %g", fr, ip);
    CHECK(trial_effective_s(0, 123, 0, 1000) == 0, "nothing sent");
    /* 1000 frames at 1 kpps from t0: last frame at t0 + 999 ms, + one gap = 1 s; t0 taken mod 2^48 */
    uint64_t t0 = (5ULL << 48) + 1000;
    CHECK(fabs(trial_effective_s(1000, 1000 + 999000000ULL, t0, 1000) - 1.0) < 1e-12, "effective %g", trial_effective_s(1000, 1000 + 999000000ULL, t0, 1000));
    CHECK(trial_lost(10, 7) == 3 && trial_lost(7, 10) == 0, "lost = max(0, sent - received)");
}

static seqacct_t A[3], M;
static hist_t L[3], I[3], LH, IH;

static void test_merge(void)
{
    const seqacct_t *per[4] = { NULL, &A[0], &A[1], &A[2] };
    unsigned nl;
    for (int i = 0; i < 3; i++) seqacct_reset(&A[i], 0, &L[i], &I[i]);
    CHECK(trial_merge_acct(per, 4, &M, &LH, &IH, &nl) == NULL && nl == 0 && M.received == 0, "nobody saw it");
    /* one lcore: that lcore's view, exactly */
    for (uint64_t s = 0; s < 10; s++) seqacct_add(&A[1], s == 3 ? 4 : s == 4 ? 3 : s, s * 1000, 500 + (int64_t)s);
    const seqacct_t *best = trial_merge_acct(per, 4, &M, &LH, &IH, &nl);
    CHECK(best == &A[1] && nl == 1 && M.received == 10 && M.reordered == 1 && LH.count == 10 && M.lat == &LH, "one lcore");
    /* two lcores: counts summed, extents and gaps maxed, IPDV min/max over both, histograms merged */
    for (uint64_t s = 10; s < 14; s++) seqacct_add(&A[2], s, s * 1000, 2000);
    seqacct_add(&A[2], 12, 12000, 2000);   /* a duplicate */
    best = trial_merge_acct(per, 4, &M, &LH, &IH, &nl);
    CHECK(best == &A[1] && nl == 2, "best = most frames, 2 lcores");
    CHECK(M.received == 14 && M.duplicates == 1 && M.reordered == 1, "summed %llu %llu", (unsigned long long)M.received, (unsigned long long)M.duplicates);
    CHECK(M.reorder_extent_max == A[1].reorder_extent_max && LH.count == 14 && LH.max == 2000 && LH.min == 500, "merged histograms");
    CHECK(M.ipdv_count == A[1].ipdv_count + A[2].ipdv_count && M.ipdv_min == (A[1].ipdv_min < A[2].ipdv_min ? A[1].ipdv_min : A[2].ipdv_min), "ipdv merged");
}

int main(void)
{
    test_requests();
    test_schedule();
    test_results();
    test_merge();
    return DONE();
}
