/* Trial request validation and schedule/result arithmetic (no DPDK; see trialcfg.h). */
#include <stdio.h>
#include <string.h>
#include <math.h>
#include "trialcfg.h"
#include "pace.h"

#define EFAIL(c, ...) do { e->code = (c); snprintf(e->msg, sizeof(e->msg), __VA_ARGS__); return -1; } while (0)

static const char *trial_keys[] = { "streams", "duration_s", "frames", "pps", "mode", "burst_frames", "bursts",
    "burst_interval_s", "segments", "learning", "learning_frames", "learning_wait_s", "drain_s", "latency", "interval_ms", NULL };

static int get_num(json_t *p, const char *k, double *v, int *present, rpc_err_t *e)
{
    json_t *j = json_object_get(p, k);
    *present = 0;
    if (!j || json_is_null(j)) return 0;
    if (!json_is_number(j)) EFAIL(-32602, "%s: must be a number", k);
    *v = json_number_value(j);
    if (!isfinite(*v)) EFAIL(-32602, "%s: must be finite", k);
    *present = 1;
    return 0;
}

static int get_flag(json_t *p, const char *k, int *v, rpc_err_t *e)
{
    json_t *j = json_object_get(p, k);
    if (!j || json_is_null(j)) return 0;
    if (!json_is_boolean(j)) EFAIL(-32602, "%s: must be a boolean", k);
    *v = json_is_true(j);
    return 0;
}

int trialcfg_check_keys(json_t *p, rpc_err_t *e)
{
    if (!p) return 0;
    if (!json_is_object(p)) EFAIL(-32602, "params: must be an object");
    const char *key;
    json_t *val;
    json_object_foreach(p, key, val) {
        int ok = 0;
        for (int i = 0; trial_keys[i]; i++) if (!strcmp(key, trial_keys[i])) ok = 1;
        if (!ok) EFAIL(-32602, "%.60s: unknown field", key);
    }
    return 0;
}

int trialcfg_stream_ids(json_t *p, int (*exists)(unsigned id), uint16_t *ids, unsigned *np, rpc_err_t *e)
{
    unsigned n = 0;
    json_t *sl = p ? json_object_get(p, "streams") : NULL;
    if (sl && !json_is_null(sl)) {
        if (!json_is_array(sl) || json_array_size(sl) == 0) EFAIL(-32602, "streams: must be a non-empty list of stream ids");
        size_t i;
        json_t *x;
        json_array_foreach(sl, i, x) {
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= MAX_STREAM_ID ||
                !exists((unsigned)json_integer_value(x)))
                EFAIL(-32001, "streams[%zu]: no such stream", i);
            for (unsigned k = 0; k < n; k++)
                if (ids[k] == json_integer_value(x)) EFAIL(-32602, "streams[%zu]: listed twice", i);
            ids[n++] = (uint16_t)json_integer_value(x);
        }
    } else {
        for (unsigned i = 0; i < MAX_STREAM_ID; i++) if (exists(i)) ids[n++] = (uint16_t)i;
    }
    *np = n;
    if (n == 0) EFAIL(-32602, "streams: no streams defined (stream.add first)");
    return 0;
}

/* learning, learning_frames, learning_wait_s, drain_s, latency, interval_ms (defaults: off, 3, 2 s,
 * 2 s, on, 100 ms) */
static int parse_options(json_t *p, trialcfg_t *tc, rpc_err_t *e)
{
    double v;
    int pr;
    tc->learning = 0;
    tc->learning_frames = 3;
    tc->learning_wait_s = 2.0;
    tc->drain_s = 2.0;
    tc->interval_s = 0.1;
    tc->latency = 1;
    if (get_flag(p, "learning", &tc->learning, e) || get_flag(p, "latency", &tc->latency, e)) return -1;
    if (get_num(p, "learning_frames", &v, &pr, e)) return -1;
    if (pr) { if (v < 1 || v > 1000 || v != floor(v)) EFAIL(-32602, "learning_frames: must be 1..1000"); tc->learning_frames = (unsigned)v; }
    if (get_num(p, "learning_wait_s", &v, &pr, e)) return -1;
    if (pr) { if (v < 0 || v > 3600) EFAIL(-32602, "learning_wait_s: must be 0..3600"); tc->learning_wait_s = v; }
    if (get_num(p, "drain_s", &v, &pr, e)) return -1;
    if (pr) { if (v < 0 || v > 3600) EFAIL(-32602, "drain_s: must be 0..3600"); tc->drain_s = v; }
    if (get_num(p, "interval_ms", &v, &pr, e)) return -1;
    if (pr) {
        if (v != 0 && (v < 1 || v > 60000)) EFAIL(-32602, "interval_ms: must be 0 (off) or 1..60000");
        tc->interval_s = v / 1e3;
    }
    return 0;
}

/* segments: [{duration_s, scale | pps}, ...] */
static int parse_segments(json_t *segs, trialcfg_t *tc, rpc_err_t *e)
{
    if (!json_is_array(segs) || json_array_size(segs) == 0 || json_array_size(segs) > MAX_SEGS)
        EFAIL(-32602, "segments: must be a list of 1..%d {duration_s, scale|pps}", MAX_SEGS);
    size_t i;
    json_t *sj;
    json_array_foreach(segs, i, sj) {
        struct seg *sg = &tc->segs[i];
        if (!json_is_object(sj)) EFAIL(-32602, "segments[%zu]: must be an object", i);
        json_t *d = json_object_get(sj, "duration_s"), *sc = json_object_get(sj, "scale"), *pp = json_object_get(sj, "pps");
        const char *sk;
        json_t *sv;
        json_object_foreach(sj, sk, sv) if (strcmp(sk, "duration_s") && strcmp(sk, "scale") && strcmp(sk, "pps"))
            EFAIL(-32602, "segments[%zu].%.40s: unknown field", i, sk);
        if (!json_is_number(d) || !(json_number_value(d) > 0) || json_number_value(d) > 1e6)
            EFAIL(-32602, "segments[%zu].duration_s: must be a number > 0", i);
        sg->duration_s = json_number_value(d);
        sg->scale = 1.0;
        if (sc && pp) EFAIL(-32602, "segments[%zu]: give scale or pps, not both", i);
        if (sc) {
            if (!json_is_number(sc) || !(json_number_value(sc) > 0)) EFAIL(-32602, "segments[%zu].scale: must be a number > 0", i);
            sg->scale = json_number_value(sc);
        }
        if (pp) {
            if (!json_is_number(pp) || !(json_number_value(pp) >= PACE_MIN_PPS)) EFAIL(-32602, "segments[%zu].pps: must be a number >= %g", i, PACE_MIN_PPS);
            sg->pps = json_number_value(pp);
        }
        tc->duration_s += sg->duration_s;
    }
    tc->nsegs = (unsigned)json_array_size(segs);
    return 0;
}

/* mode=burst: burst_frames, bursts (1), burst_interval_s (needed when bursts > 1) */
static int parse_bursts(json_t *p, trialcfg_t *tc, rpc_err_t *e)
{
    double bf = 0, nb = 1, bi = 0, v;
    int pr;
    if (get_num(p, "burst_frames", &bf, &pr, e)) return -1;
    if (!pr || bf < 1 || bf != floor(bf)) EFAIL(-32602, "burst_frames: burst mode needs a positive integer burst_frames");
    if (get_num(p, "bursts", &v, &pr, e)) return -1;
    if (pr) { if (v < 1 || v > MAX_SEGS || v != floor(v)) EFAIL(-32602, "bursts: must be 1..%d", MAX_SEGS); nb = v; }
    if (get_num(p, "burst_interval_s", &v, &pr, e)) return -1;
    if (pr) { if (!(v > 0)) EFAIL(-32602, "burst_interval_s: must be > 0"); bi = v; }
    if (nb > 1 && bi <= 0) EFAIL(-32602, "burst_interval_s: needed when bursts > 1");
    for (unsigned b = 0; b < (unsigned)nb; b++) {
        struct seg *sg = &tc->segs[b];
        sg->scale = 1.0;
        sg->max_frames = (uint64_t)bf;
        sg->duration_s = (b + 1 < (unsigned)nb) ? bi : 0;   /* last burst: until its frames are out */
    }
    tc->nsegs = (unsigned)nb;
    tc->duration_s = bi * (nb - 1);
    return 0;
}

int trialcfg_parse(json_t *p, trialcfg_t *tc, rpc_err_t *e)
{
    memset(tc, 0, sizeof(*tc));
    double v, duration = 0, frames = 0;
    int pr, have_dur = 0, have_frames = 0, burst = 0;
    if (get_num(p, "duration_s", &v, &pr, e)) return -1;
    if (pr) { if (!(v > 0) || v > 1e6) EFAIL(-32602, "duration_s: must be > 0 and <= 1e6 (got %g)", v); duration = v; have_dur = 1; }
    if (get_num(p, "frames", &v, &pr, e)) return -1;
    if (pr) { if (!(v >= 1) || v != floor(v) || v > 1e15) EFAIL(-32602, "frames: must be a positive integer (got %g)", v); frames = v; have_frames = 1; }
    if (get_num(p, "pps", &v, &pr, e)) return -1;
    if (pr) { if (!(v >= PACE_MIN_PPS)) EFAIL(-32602, "pps: must be >= %g (got %g)", PACE_MIN_PPS, v); tc->pps_over = v; }
    json_t *mj = json_object_get(p, "mode");
    if (mj && !json_is_null(mj)) {
        if (!json_is_string(mj)) EFAIL(-32602, "mode: must be \"continuous\" or \"burst\"");
        if (!strcmp(json_string_value(mj), "burst")) burst = 1;
        else if (strcmp(json_string_value(mj), "continuous")) EFAIL(-32602, "mode: must be \"continuous\" or \"burst\"");
    }
    if (parse_options(p, tc, e)) return -1;
    json_t *segs = json_object_get(p, "segments");
    if (segs && !json_is_null(segs)) {
        if (burst || have_dur || have_frames) EFAIL(-32602, "segments: cannot be combined with duration_s, frames or burst mode");
        if (parse_segments(segs, tc, e)) return -1;
    } else if (burst) {
        if (parse_bursts(p, tc, e)) return -1;
    } else {
        if (!have_dur && !have_frames) EFAIL(-32602, "duration_s: give duration_s, frames, segments or mode=burst");
        if (have_dur && have_frames) EFAIL(-32602, "frames: give duration_s or frames, not both");
        tc->segs[0].scale = 1.0;
        tc->segs[0].duration_s = have_dur ? duration : 0;
        tc->segs[0].max_frames = have_frames ? (uint64_t)frames : 0;
        tc->nsegs = 1;
        tc->duration_s = duration;
    }
    if (tc->pps_over > 0)
        for (unsigned s = 0; s < tc->nsegs; s++) if (tc->segs[s].pps == 0) tc->segs[s].pps = tc->pps_over * tc->segs[s].scale;
    tc->rate_field = segs ? "segments" : (tc->pps_over > 0 ? "pps" : "rate");
    return 0;
}

double trial_seg_pps(const struct seg *sg, double stream_pps)
{
    return sg->pps > 0 ? sg->pps : stream_pps * sg->scale;
}

uint64_t trial_seg_frames(const struct seg *sg, double pps)
{
    return sg->max_frames ? sg->max_frames : (uint64_t)ceil(sg->duration_s * pps - 1e-6);
}

int trial_check_port_load(const trialcfg_t *tc, const double *load_bps, const double *speed_bps,
                          unsigned nports, rpc_err_t *e)
{
    for (unsigned q = 0; q < nports; q++) {
        double sp = speed_bps[q];
        if (sp > 0 && load_bps[q] > sp * (1 + 1e-9))
            EFAIL(-32602, "%s: port %u would be offered %.0f b/s (L1), above its line rate %.0f b/s%s",
                  tc->rate_field, q, load_bps[q], sp, tc->nsegs > 1 ? " in some segment" : "");
    }
    return 0;
}

double trial_seg_len_s(const struct seg *sg, uint64_t frames, double pps)
{
    if (sg->duration_s > 0) return sg->duration_s;
    return pps > 0 ? (double)frames / pps : 0;
}

int trial_check_rx_memory(unsigned n, unsigned nrx, int latency, size_t acct_b, size_t hist_b, rpc_err_t *e)
{
    double need = (double)n * nrx * ((double)acct_b + (latency ? 2.0 * (double)hist_b : 0));
    if (need > 2.0 * 1024 * 1024 * 1024)
        EFAIL(-32602, "streams: %u streams x %u RX lcores need %.0f MB of receive accounting (limit 2048 MB); "
              "use fewer streams, fewer RX lcores or latency=false", n, nrx, need / 1048576);
    return 0;
}

double trial_seg_grace_s(double duration_s)
{
    double grace = duration_s * 0.1;
    if (grace < 0.1) grace = 0.1;
    if (grace > 1.0) grace = 1.0;
    return grace;
}

uint64_t trial_watchdog_slack(uint64_t sched_len_cyc, uint64_t tsc_hz)
{
    return sched_len_cyc < 5 * tsc_hz ? 5 * tsc_hz : sched_len_cyc;
}

void trial_stream_intended(const struct seg *segs, unsigned nsegs, const double *seg_pps,
                           const uint64_t *seg_max, double *frames, double *pps)
{
    double ifr = 0, idur = 0;
    for (unsigned s = 0; s < nsegs; s++) {
        ifr += (double)seg_max[s];
        idur += segs[s].duration_s > 0 ? segs[s].duration_s : (double)seg_max[s] / seg_pps[s];
    }
    *frames = ifr;
    *pps = (segs[0].max_frames || idur <= 0) ? seg_pps[0] : ifr / idur;
}

double trial_effective_s(uint64_t sent, uint64_t last_tx_ns, uint64_t t0_ns, double last_pps)
{
    if (!sent) return 0;
    return ((double)(last_tx_ns - (t0_ns & ((1ULL << 48) - 1))) + 1e9 / last_pps) / 1e9;
}

const seqacct_t *trial_merge_acct(const seqacct_t *const *a, unsigned n, seqacct_t *m, hist_t *lh,
                                  hist_t *ih, unsigned *nlcores)
{
    const seqacct_t *best = NULL;
    unsigned nw = 0;
    hist_reset(lh);
    hist_reset(ih);
    memset(m, 0, sizeof(*m));
    for (unsigned w = 0; w < n; w++) {
        if (!a[w] || (a[w]->received == 0 && a[w]->duplicates == 0)) continue;
        nw++;
        if (!best || a[w]->received > best->received) best = a[w];
        if (a[w]->lat) hist_merge(lh, a[w]->lat);
        if (a[w]->ipdv_abs) hist_merge(ih, a[w]->ipdv_abs);
    }
    *nlcores = nw;
    if (!best) {
        for (unsigned w = 0; w < n; w++) if (a[w]) { *m = *a[w]; break; }
        return NULL;
    }
    *m = *best;
    if (nw > 1) {
        m->received = m->duplicates = m->reordered = m->seq_gaps = m->ipdv_count = 0;
        m->ipdv_sum = 0;
        for (unsigned w = 0; w < n; w++) {
            const seqacct_t *x = a[w];
            if (!x || (x->received == 0 && x->duplicates == 0)) continue;
            m->received += x->received;
            m->duplicates += x->duplicates;
            m->reordered += x->reordered;
            m->seq_gaps += x->seq_gaps;
            if (x->reorder_extent_max > m->reorder_extent_max) m->reorder_extent_max = x->reorder_extent_max;
            if (x->max_rx_gap_ns > m->max_rx_gap_ns) m->max_rx_gap_ns = x->max_rx_gap_ns;
            if (x->ipdv_count) {
                if (m->ipdv_count == 0 || x->ipdv_min < m->ipdv_min) m->ipdv_min = x->ipdv_min;
                if (m->ipdv_count == 0 || x->ipdv_max > m->ipdv_max) m->ipdv_max = x->ipdv_max;
                m->ipdv_count += x->ipdv_count;
                m->ipdv_sum += x->ipdv_sum;
            }
        }
    }
    m->lat = lh;
    m->ipdv_abs = ih;
    return best;
}
