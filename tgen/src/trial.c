/* Trial life cycle (control thread): set-up, learning, phases, drain, result. */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <math.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_cycles.h>
#include <rte_lcore.h>
#include "tgen.h"

const char *phase_name[] = { "idle", "learning", "running", "draining", "done" };

static struct trial *cur;          /* the current/last trial (same as g_trial) */

#define EFAIL(c, ...) do { e->code = (c); snprintf(e->msg, sizeof(e->msg), __VA_ARGS__); return -1; } while (0)

void stream_free(struct stream *s)
{
    if (!s) return;
    if (s->input) json_decref(s->input);
    for (int i = 0; i < MAX_IMIX; i++) free(s->tmpls[i]);
    free(s->pattern);
    free(s);
}

int stream_build(struct stream *s, char *err, size_t errlen)
{
    for (int i = 0; i < MAX_IMIX; i++) { free(s->tmpls[i]); s->tmpls[i] = NULL; }
    free(s->pattern);
    s->pattern = NULL;
    unsigned tw = 0;
    for (int i = 0; i < s->sc.nsizes; i++) tw += s->sc.weights[i];
    s->pattern = calloc(tw ? tw : 1, sizeof(uint16_t));
    if (!s->pattern) { snprintf(err, errlen, "out of memory"); return -1; }
    for (int i = 0; i < s->sc.nsizes; i++) {
        s->tmpls[i] = aligned_alloc(64, (tmpl_alloc_size(&s->sc.cfg, s->sc.sizes[i]) + 63) / 64 * 64);
        if (!s->tmpls[i]) { snprintf(err, errlen, "out of memory"); return -1; }
        if (tmpl_build(&s->sc.cfg, s->sc.sizes[i], s->tmpls[i], err, errlen)) return -1;
    }
    if (s->sc.nsizes == 1) { s->pattern[0] = 0; s->plen = 1; }
    else s->plen = streamcfg_imix_pattern(&s->sc, s->pattern, tw);
    return 0;
}

int trial_active(void)
{
    int ph = __atomic_load_n(&g_phase, __ATOMIC_ACQUIRE);
    return ph == PH_LEARNING || ph == PH_RUNNING || ph == PH_DRAINING;
}

static void set_phase(int ph)
{
    if (cur) cur->phase_tsc = rte_rdtsc();
    __atomic_store_n(&g_phase, ph, __ATOMIC_RELEASE);
}

static void wait_workers(int ph)
{
    for (;;) {
        int ok = 1;
        for (unsigned i = 0; i < g_nworkers; i++)
            if (__atomic_load_n(&g_workers[i].seen_phase, __ATOMIC_ACQUIRE) != ph) ok = 0;
        if (ok) return;
        rte_delay_us_sleep(200);
    }
}

static void trial_free(struct trial *t)
{
    if (!t) return;
    free(t->ts);
    free(t->sid_map);
    free(t->rx_port_of);
    if (t->result) json_decref(t->result);
    free(t);
}

static void workers_free_trial_state(void)
{
    for (unsigned i = 0; i < g_nworkers; i++) {
        struct worker *w = &g_workers[i];
        free(w->tx); w->tx = NULL; w->ntx = 0;
        free(w->acct); w->acct = NULL;
        free(w->lat); w->lat = NULL;
        free(w->ipdv); w->ipdv = NULL;
        free(w->misrouted); w->misrouted = NULL;
        memset(w->misrouted_port, 0, sizeof(w->misrouted_port));
        w->non_test = w->late_rx = w->foreign_rx = 0;
    }
}

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

static const char *trial_keys[] = { "streams", "duration_s", "frames", "pps", "mode", "burst_frames", "bursts",
    "burst_interval_s", "segments", "learning", "learning_frames", "learning_wait_s", "drain_s", "latency", NULL };

static void send_learning(struct trial *t)
{
    for (unsigned i = 0; i < t->nstreams; i++) {
        const struct stream *st = t->ts[i].st;
        const tmpl_cfg_t *c = &st->sc.cfg;
        uint16_t port = (uint16_t)st->sc.rx_port;
        for (unsigned f = 0; f < t->learning_frames; f++) {
            struct rte_mbuf *m = rte_pktmbuf_alloc(g_pool);
            if (!m) break;
            uint8_t *p = rte_pktmbuf_mtod(m, uint8_t *);
            memset(p, 0, 60);
            memset(p, 0xff, 6);
            memcpy(p + 6, c->vxlan ? c->odst_mac : c->dst_mac, 6);
            unsigned o = 12;
            if (c->vlan >= 0 && !c->vxlan) { p[o] = 0x81; p[o + 1] = 0; p[o + 2] = (uint8_t)(c->vlan >> 8); p[o + 3] = (uint8_t)c->vlan; o += 4; }
            p[o] = 0x88; p[o + 1] = 0xB5;   /* local experimental EtherType */
            memcpy(p + o + 2, "tgen-learning", 13);
            m->data_len = m->pkt_len = 60 + ((c->vlan >= 0 && !c->vxlan) ? 4 : 0);
            /* queue 0 of the rx port: workers do not transmit outside the running phase */
            if (rte_eth_tx_burst(port, 0, &m, 1) != 1) rte_pktmbuf_free(m);
        }
    }
}

static void begin_running(struct trial *t)
{
    uint64_t now = rte_rdtsc();
    uint64_t start = now + g_tsc_hz / 500;   /* 2 ms ahead, so every worker starts on time */
    t->start_tsc = start;
    t->t0_ns = tsc_to_ns(start);
    uint64_t off = start;
    for (unsigned s = 0; s < t->nsegs; s++) {
        struct seg *sg = &t->segs[s];
        uint64_t len = (uint64_t)(sg->duration_s * (double)g_tsc_hz);
        sg->start_tsc = off;
        sg->end_tsc = sg->duration_s > 0 ? off + len : UINT64_MAX;
        /* a pacer that fell behind (shared CPU, slow PMD) may catch up for a while after the end of a
         * timed segment, then the rest is not sent: 10 % of the segment, at least 0.1 s, at most 1 s */
        double grace = sg->duration_s * 0.1;
        if (grace < 0.1) grace = 0.1;
        if (grace > 1.0) grace = 1.0;
        sg->cut_tsc = sg->duration_s > 0 ? off + len + (uint64_t)(grace * (double)g_tsc_hz) : UINT64_MAX;
        off = sg->end_tsc == UINT64_MAX ? off : sg->end_tsc;
    }
    /* watchdog: a TX queue that never drains (link down, stuck PMD) must not hang the trial */
    uint64_t sched_end = start;
    for (unsigned i = 0; i < t->nstreams; i++) {
        uint64_t e = start;
        for (unsigned s = 0; s < t->nsegs; s++) {
            const struct seg *sg = &t->segs[s];
            uint64_t fe = pace_deadline(sg->start_tsc, t->ts[i].seg_max[s], t->ts[i].gap_fp[s]);
            e = sg->end_tsc != UINT64_MAX && sg->end_tsc < fe ? sg->end_tsc : fe;
        }
        if (e > sched_end) sched_end = e;
    }
    uint64_t slack = sched_end - start;
    if (slack < 5 * g_tsc_hz) slack = 5 * g_tsc_hz;
    t->watchdog_tsc = sched_end + slack;
    set_phase(PH_RUNNING);
}

int trial_start(json_t *p, rpc_err_t *e)
{
    if (trial_active()) EFAIL(-32000, "state: a trial is already %s", phase_name[g_phase]);
    if (!p) p = json_object();
    if (!json_is_object(p)) EFAIL(-32602, "params: must be an object");
    const char *key;
    json_t *val;
    json_object_foreach(p, key, val) {
        int ok = 0;
        for (int i = 0; trial_keys[i]; i++) if (!strcmp(key, trial_keys[i])) ok = 1;
        if (!ok) EFAIL(-32602, "%.60s: unknown field", key);
    }
    /* streams */
    static uint16_t ids[MAX_STREAM_ID];
    unsigned n = 0;
    json_t *sl = json_object_get(p, "streams");
    if (sl && !json_is_null(sl)) {
        if (!json_is_array(sl) || json_array_size(sl) == 0) EFAIL(-32602, "streams: must be a non-empty list of stream ids");
        size_t i;
        json_t *x;
        json_array_foreach(sl, i, x) {
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= MAX_STREAM_ID ||
                !g_streams[json_integer_value(x)])
                EFAIL(-32001, "streams[%zu]: no such stream", i);
            for (unsigned k = 0; k < n; k++)
                if (ids[k] == json_integer_value(x)) EFAIL(-32602, "streams[%zu]: listed twice", i);
            ids[n++] = (uint16_t)json_integer_value(x);
        }
    } else {
        for (unsigned i = 0; i < MAX_STREAM_ID; i++) if (g_streams[i]) ids[n++] = (uint16_t)i;
    }
    if (n == 0) EFAIL(-32602, "streams: no streams defined (stream.add first)");

    double v;
    int pr;
    double duration = 0, frames = 0, pps_over = 0;
    int have_dur = 0, have_frames = 0;
    if (get_num(p, "duration_s", &v, &pr, e)) return -1;
    if (pr) { if (!(v > 0) || v > 1e6) EFAIL(-32602, "duration_s: must be > 0 and <= 1e6 (got %g)", v); duration = v; have_dur = 1; }
    if (get_num(p, "frames", &v, &pr, e)) return -1;
    if (pr) { if (!(v >= 1) || v != floor(v) || v > 1e15) EFAIL(-32602, "frames: must be a positive integer (got %g)", v); frames = v; have_frames = 1; }
    if (get_num(p, "pps", &v, &pr, e)) return -1;
    if (pr) { if (!(v >= PACE_MIN_PPS)) EFAIL(-32602, "pps: must be >= %g (got %g)", PACE_MIN_PPS, v); pps_over = v; }
    int burst = 0;
    json_t *mj = json_object_get(p, "mode");
    if (mj && !json_is_null(mj)) {
        if (!json_is_string(mj)) EFAIL(-32602, "mode: must be \"continuous\" or \"burst\"");
        if (!strcmp(json_string_value(mj), "burst")) burst = 1;
        else if (strcmp(json_string_value(mj), "continuous")) EFAIL(-32602, "mode: must be \"continuous\" or \"burst\"");
    }
    struct trial *t = calloc(1, sizeof(*t));
    if (!t) EFAIL(-32603, "out of memory");
    t->learning = 0;
    t->learning_frames = 3;
    t->learning_wait_s = 2.0;
    t->drain_s = 2.0;
    t->latency = 1;
#define TFAIL(c, ...) do { trial_free(t); EFAIL(c, __VA_ARGS__); } while (0)
    if (get_flag(p, "learning", &t->learning, e) || get_flag(p, "latency", &t->latency, e)) { trial_free(t); return -1; }
    if (get_num(p, "learning_frames", &v, &pr, e)) { trial_free(t); return -1; }
    if (pr) { if (v < 1 || v > 1000 || v != floor(v)) TFAIL(-32602, "learning_frames: must be 1..1000"); t->learning_frames = (unsigned)v; }
    if (get_num(p, "learning_wait_s", &v, &pr, e)) { trial_free(t); return -1; }
    if (pr) { if (v < 0 || v > 3600) TFAIL(-32602, "learning_wait_s: must be 0..3600"); t->learning_wait_s = v; }
    if (get_num(p, "drain_s", &v, &pr, e)) { trial_free(t); return -1; }
    if (pr) { if (v < 0 || v > 3600) TFAIL(-32602, "drain_s: must be 0..3600"); t->drain_s = v; }

    json_t *segs = json_object_get(p, "segments");
    if (segs && !json_is_null(segs)) {
        if (burst || have_dur || have_frames) TFAIL(-32602, "segments: cannot be combined with duration_s, frames or burst mode");
        if (!json_is_array(segs) || json_array_size(segs) == 0 || json_array_size(segs) > MAX_SEGS)
            TFAIL(-32602, "segments: must be a list of 1..%d {duration_s, scale|pps}", MAX_SEGS);
        size_t i;
        json_t *sj;
        json_array_foreach(segs, i, sj) {
            struct seg *sg = &t->segs[i];
            if (!json_is_object(sj)) TFAIL(-32602, "segments[%zu]: must be an object", i);
            json_t *d = json_object_get(sj, "duration_s"), *sc = json_object_get(sj, "scale"), *pp = json_object_get(sj, "pps");
            const char *sk;
            json_t *sv;
            json_object_foreach(sj, sk, sv) if (strcmp(sk, "duration_s") && strcmp(sk, "scale") && strcmp(sk, "pps"))
                TFAIL(-32602, "segments[%zu].%.40s: unknown field", i, sk);
            if (!json_is_number(d) || !(json_number_value(d) > 0) || json_number_value(d) > 1e6)
                TFAIL(-32602, "segments[%zu].duration_s: must be a number > 0", i);
            sg->duration_s = json_number_value(d);
            sg->scale = 1.0;
            if (sc && pp) TFAIL(-32602, "segments[%zu]: give scale or pps, not both", i);
            if (sc) {
                if (!json_is_number(sc) || !(json_number_value(sc) > 0)) TFAIL(-32602, "segments[%zu].scale: must be a number > 0", i);
                sg->scale = json_number_value(sc);
            }
            if (pp) {
                if (!json_is_number(pp) || !(json_number_value(pp) >= PACE_MIN_PPS)) TFAIL(-32602, "segments[%zu].pps: must be a number >= %g", i, PACE_MIN_PPS);
                sg->pps = json_number_value(pp);
            }
            t->duration_s += sg->duration_s;
        }
        t->nsegs = (unsigned)json_array_size(segs);
    } else if (burst) {
        double bf = 0, nb = 1, bi = 0;
        if (get_num(p, "burst_frames", &bf, &pr, e)) { trial_free(t); return -1; }
        if (!pr || bf < 1 || bf != floor(bf)) TFAIL(-32602, "burst_frames: burst mode needs a positive integer burst_frames");
        if (get_num(p, "bursts", &v, &pr, e)) { trial_free(t); return -1; }
        if (pr) { if (v < 1 || v > MAX_SEGS || v != floor(v)) TFAIL(-32602, "bursts: must be 1..%d", MAX_SEGS); nb = v; }
        if (get_num(p, "burst_interval_s", &v, &pr, e)) { trial_free(t); return -1; }
        if (pr) { if (!(v > 0)) TFAIL(-32602, "burst_interval_s: must be > 0"); bi = v; }
        if (nb > 1 && bi <= 0) TFAIL(-32602, "burst_interval_s: needed when bursts > 1");
        for (unsigned b = 0; b < (unsigned)nb; b++) {
            struct seg *sg = &t->segs[b];
            sg->scale = 1.0;
            sg->max_frames = (uint64_t)bf;
            sg->duration_s = (b + 1 < (unsigned)nb) ? bi : 0;   /* last burst: until its frames are out */
        }
        t->nsegs = (unsigned)nb;
        t->duration_s = bi * (nb - 1);
    } else {
        if (!have_dur && !have_frames) TFAIL(-32602, "duration_s: give duration_s, frames, segments or mode=burst");
        if (have_dur && have_frames) TFAIL(-32602, "frames: give duration_s or frames, not both");
        t->segs[0].scale = 1.0;
        t->segs[0].duration_s = have_dur ? duration : 0;
        t->segs[0].max_frames = have_frames ? (uint64_t)frames : 0;
        t->nsegs = 1;
        t->duration_s = duration;
    }
    if (pps_over > 0) for (unsigned s = 0; s < t->nsegs; s++) if (t->segs[s].pps == 0) t->segs[s].pps = pps_over * t->segs[s].scale;

    /* per stream rates, line-rate checks per port and segment */
    t->ts = aligned_alloc(RTE_CACHE_LINE_SIZE, ((sizeof(struct tx_stream) * n + RTE_CACHE_LINE_SIZE - 1) / RTE_CACHE_LINE_SIZE) * RTE_CACHE_LINE_SIZE);
    t->sid_map = malloc(sizeof(int32_t) * MAX_STREAM_ID);
    t->rx_port_of = malloc(n);
    if (!t->ts || !t->sid_map || !t->rx_port_of) TFAIL(-32603, "out of memory");
    memset(t->ts, 0, sizeof(struct tx_stream) * n);
    for (unsigned i = 0; i < MAX_STREAM_ID; i++) t->sid_map[i] = -1;
    t->nstreams = n;
    for (unsigned s = 0; s < t->nsegs; s++) {
        double load_bps[MAX_PORTS] = { 0 };
        for (unsigned i = 0; i < n; i++) {
            struct stream *st = g_streams[ids[i]];
            double pps = t->segs[s].pps > 0 ? t->segs[s].pps : st->sc.rate_pps * t->segs[s].scale;
            t->ts[i].seg_pps[s] = pps;
            t->ts[i].gap_fp[s] = pace_gap_fp((double)g_tsc_hz, pps);
            /* a timed segment carries exactly ceil(duration * rate) frames */
            t->ts[i].seg_max[s] = t->segs[s].max_frames ? t->segs[s].max_frames
                                                         : (uint64_t)ceil(t->segs[s].duration_s * pps - 1e-6);
            load_bps[st->sc.port] += pps * l1_bits(st->sc.wire_size_b);
        }
        for (unsigned q = 0; q < g_nports; q++) {
            double sp = port_speed_bps(q);
            if (sp > 0 && load_bps[q] > sp * (1 + 1e-9)) {
                const char *fld = json_object_get(p, "segments") ? "segments" : (pps_over > 0 ? "pps" : "rate");
                int multi = t->nsegs > 1;
                trial_free(t);
                EFAIL(-32602, "%s: port %u would be offered %.0f b/s (L1), above its line rate %.0f b/s%s",
                      fld, q, load_bps[q], sp, multi ? " in some segment" : "");
            }
        }
    }
    /* intended duration: timed segments their length; frame-count segments (frames, bursts) the
     * time the slowest stream needs for its frames at its rate */
    t->duration_s = 0;
    for (unsigned s = 0; s < t->nsegs; s++) {
        double d = t->segs[s].duration_s;
        if (!(d > 0))
            for (unsigned i = 0; i < n; i++)
                if (t->ts[i].seg_pps[s] > 0 && (double)t->ts[i].seg_max[s] / t->ts[i].seg_pps[s] > d)
                    d = (double)t->ts[i].seg_max[s] / t->ts[i].seg_pps[s];
        t->duration_s += d;
    }
    /* receive accounting memory: per stream and RX lcore */
    {
        unsigned nrx = 0;
        for (unsigned w = 0; w < g_nworkers; w++) if (g_workers[w].does_rx) nrx++;
        double need = (double)n * nrx * ((double)sizeof(seqacct_t) + (t->latency ? 2.0 * sizeof(hist_t) : 0));
        if (need > 2.0 * 1024 * 1024 * 1024) {
            trial_free(t);
            EFAIL(-32602, "streams: %u streams x %u RX lcores need %.0f MB of receive accounting (limit 2048 MB); "
                  "use fewer streams, fewer RX lcores or latency=false", n, nrx, need / 1048576);
        }
    }
    /* all checks passed: stop old trial state, publish the new one */
    set_phase(PH_IDLE);
    wait_workers(PH_IDLE);
    workers_free_trial_state();
    trial_free(cur);
    cur = NULL;
    g_trial = NULL;

    for (unsigned i = 0; i < n; i++) {
        struct tx_stream *ts = &t->ts[i];
        struct stream *st = g_streams[ids[i]];
        ts->st = st;
        snprintf(ts->name, sizeof(ts->name), "%s", st->sc.name);
        ts->tx_port = st->sc.port;
        ts->rx_port = st->sc.rx_port;
        ts->sid = ids[i];
        ts->port = (uint16_t)st->sc.port;
        ts->queue = st->txq;
        ts->worker = g_ports[ts->port].tx_lcore[ts->queue];
        t->sid_map[ids[i]] = (int32_t)i;
        t->rx_port_of[i] = (uint8_t)st->sc.rx_port;
        t->port_used[st->sc.port] = 1;
        t->port_used[st->sc.rx_port] = 1;
    }
    for (unsigned wi = 0; wi < g_nworkers; wi++) {
        struct worker *w = &g_workers[wi];
        w->tx = calloc(n, sizeof(*w->tx));
        w->acct = malloc(sizeof(seqacct_t) * n);
        w->misrouted = calloc(n, sizeof(uint64_t));
        if (t->latency && w->does_rx) {
            w->lat = malloc(sizeof(hist_t) * n);
            w->ipdv = malloc(sizeof(hist_t) * n);
        }
        if (!w->tx || !w->acct || !w->misrouted || (t->latency && w->does_rx && (!w->lat || !w->ipdv))) {
            trial_free(t);
            workers_free_trial_state();
            EFAIL(-32603, "out of memory for %u streams", n);
        }
        for (unsigned i = 0; i < n; i++) {
            seqacct_reset(&w->acct[i], 0, w->lat ? &w->lat[i] : NULL, w->ipdv ? &w->ipdv[i] : NULL);
            if (t->ts[i].worker == (int)wi) w->tx[w->ntx++] = &t->ts[i];
        }
        w->tx_done = 0;
    }
    for (unsigned q = 0; q < g_nports; q++) if (t->port_used[q]) { rte_eth_stats_reset((uint16_t)q); rte_eth_xstats_reset((uint16_t)q); }
    t->begin_tsc = rte_rdtsc();
    cur = t;
    g_trial = t;
    rte_smp_wmb();
    if (t->learning) {
        set_phase(PH_LEARNING);
        send_learning(t);
        t->learn_end_tsc = rte_rdtsc() + (uint64_t)(t->learning_wait_s * (double)g_tsc_hz);
    } else {
        begin_running(t);
    }
    return 0;
}

void trial_stop(void)
{
    if (!cur) return;
    int ph = g_phase;
    if (ph == PH_LEARNING) { cur->stopped_by = "trial.stop"; __atomic_store_n(&cur->stop, 1, __ATOMIC_RELEASE); begin_running(cur); }
    else if (ph == PH_RUNNING) { cur->stopped_by = "trial.stop"; __atomic_store_n(&cur->stop, 1, __ATOMIC_RELEASE); }
}

static json_t *build_result(struct trial *t);

void trial_tick(void)
{
    struct trial *t = cur;
    if (!t) return;
    int ph = g_phase;
    uint64_t now = rte_rdtsc();
    if (ph == PH_LEARNING && now >= t->learn_end_tsc) {
        begin_running(t);
    } else if (ph == PH_RUNNING) {
        if (now > t->watchdog_tsc && !t->stop) {
            t->stopped_by = "watchdog";
            __atomic_store_n(&t->stop, 1, __ATOMIC_RELEASE);
            fprintf(stderr, "tgen: watchdog: TX still busy long after the schedule ended; stopping the trial\n");
        }
        int all = 1;
        for (unsigned i = 0; i < g_nworkers; i++)
            if (g_workers[i].does_tx && !__atomic_load_n(&g_workers[i].tx_done, __ATOMIC_ACQUIRE)) all = 0;
        if (all) {
            t->run_end_tsc = now;
            t->drain_end_tsc = now + (uint64_t)(t->drain_s * (double)g_tsc_hz);
            set_phase(PH_DRAINING);
        }
    } else if (ph == PH_DRAINING && now >= t->drain_end_tsc) {
        set_phase(PH_DONE);
        wait_workers(PH_DONE);
        rte_smp_rmb();
        t->result = build_result(t);
    }
}

json_t *trial_status(void)
{
    json_t *o = json_object();
    int ph = g_phase;
    json_object_set_new(o, "state", json_string(phase_name[ph]));
    double el = 0;
    uint64_t sent = 0, recv = 0;
    if (cur) {
        el = (double)(rte_rdtsc() - cur->begin_tsc) / (double)g_tsc_hz;
        for (unsigned i = 0; i < cur->nstreams; i++) {
            sent += cur->ts[i].sent;
            for (unsigned w = 0; w < g_nworkers; w++) if (g_workers[w].acct) recv += g_workers[w].acct[i].received;
        }
    }
    json_object_set_new(o, "elapsed_s", json_real(ph == PH_IDLE ? 0 : el));
    json_object_set_new(o, "sent", json_integer((json_int_t)sent));
    json_object_set_new(o, "received", json_integer((json_int_t)recv));
    return o;
}

static json_t *num_or_null(int ok, double v) { return ok ? json_real(v) : json_null(); }

static json_t *latency_json(const hist_t *h, const seqacct_t *a)
{
    json_t *o = json_object();
    json_object_set_new(o, "count", json_integer((json_int_t)h->count));
    int ok = h->count > 0;
    double mn = (double)h->min, avg = ok ? h->sum / (double)h->count : 0, mx = (double)h->max;
    json_object_set_new(o, "min_ns", num_or_null(ok, mn));
    json_object_set_new(o, "avg_ns", num_or_null(ok, avg));
    json_object_set_new(o, "max_ns", num_or_null(ok, mx));
    json_t *pc = json_object();
    static const double ps[] = { 50, 90, 99, 99.9, 99.99 };
    static const char *pn[] = { "50", "90", "99", "99.9", "99.99" };
    double p99 = 0;
    if (ok) for (int i = 0; i < 5; i++) {
        double x = hist_percentile(h, ps[i]);
        if (i == 2) p99 = x;
        json_object_set_new(pc, pn[i], json_real(x));
    }
    json_object_set_new(o, "percentiles_ns", pc);
    json_t *hl = json_array();
    for (unsigned i = 0; i < HIST_NBUCKETS; i++)
        if (h->b[i]) json_array_append_new(hl, json_pack("[fI]", (double)(i == HIST_NBUCKETS - 1 ? h->max : hist_bucket_hi(i)), (json_int_t)h->b[i]));
    json_object_set_new(o, "histogram", hl);
    json_t *pdv = json_object();
    if (ok) {
        json_object_set_new(pdv, "min", json_real(0));
        json_object_set_new(pdv, "avg", json_real(avg - mn));
        json_object_set_new(pdv, "max", json_real(mx - mn));
        json_object_set_new(pdv, "p99", json_real(p99 - mn < 0 ? 0 : p99 - mn));
    }
    json_object_set_new(o, "pdv_ns", pdv);
    json_t *ip = json_object();
    if (a->ipdv_count) {
        json_object_set_new(ip, "min", json_real((double)a->ipdv_min));
        json_object_set_new(ip, "avg", json_real(a->ipdv_sum / (double)a->ipdv_count));
        json_object_set_new(ip, "max", json_real((double)a->ipdv_max));
        if (a->ipdv_abs) json_object_set_new(ip, "p99", json_real(hist_percentile(a->ipdv_abs, 99)));
        json_object_set_new(ip, "count", json_integer((json_int_t)a->ipdv_count));
    }
    json_object_set_new(o, "ipdv_ns", ip);
    return o;
}

/* merge per-worker accounting of trial stream i into out (lat/ipdv histograms into lh/ih) */
static unsigned merged_lcores;

static const seqacct_t *merge_acct(struct trial *t, unsigned i, seqacct_t *m, hist_t *lh, hist_t *ih)
{
    const seqacct_t *best = NULL;
    unsigned nw = 0;
    hist_reset(lh);
    hist_reset(ih);
    memset(m, 0, sizeof(*m));
    for (unsigned w = 0; w < g_nworkers; w++) {
        if (!g_workers[w].does_rx || !g_workers[w].acct) continue;
        const seqacct_t *a = &g_workers[w].acct[i];
        if (a->received == 0 && a->duplicates == 0) continue;
        nw++;
        if (!best || a->received > best->received) best = a;
        if (a->lat) hist_merge(lh, a->lat);
        if (a->ipdv_abs) hist_merge(ih, a->ipdv_abs);
    }
    merged_lcores = nw;
    if (!best) {
        for (unsigned w = 0; w < g_nworkers; w++) if (g_workers[w].does_rx && g_workers[w].acct) { *m = g_workers[w].acct[i]; break; }
        return NULL;
    }
    *m = *best;
    if (nw > 1) {
        m->received = m->duplicates = m->reordered = m->seq_gaps = m->ipdv_count = 0;
        m->ipdv_sum = 0;
        for (unsigned w = 0; w < g_nworkers; w++) {
            if (!g_workers[w].does_rx || !g_workers[w].acct) continue;
            const seqacct_t *a = &g_workers[w].acct[i];
            if (a->received == 0 && a->duplicates == 0) continue;
            m->received += a->received;
            m->duplicates += a->duplicates;
            m->reordered += a->reordered;
            m->seq_gaps += a->seq_gaps;
            if (a->reorder_extent_max > m->reorder_extent_max) m->reorder_extent_max = a->reorder_extent_max;
            if (a->max_rx_gap_ns > m->max_rx_gap_ns) m->max_rx_gap_ns = a->max_rx_gap_ns;
            if (a->ipdv_count) {
                if (m->ipdv_count == 0 || a->ipdv_min < m->ipdv_min) m->ipdv_min = a->ipdv_min;
                if (m->ipdv_count == 0 || a->ipdv_max > m->ipdv_max) m->ipdv_max = a->ipdv_max;
                m->ipdv_count += a->ipdv_count;
                m->ipdv_sum += a->ipdv_sum;
            }
        }
    }
    m->lat = lh;
    m->ipdv_abs = ih;
    return best;
}

static json_t *stream_json(struct trial *t, unsigned i, int final)
{
    struct tx_stream *ts = &t->ts[i];
    static seqacct_t m;
    static hist_t lh, ih;
    merge_acct(t, i, &m, &lh, &ih);
    json_t *o = json_object();
    uint64_t sent = ts->sent;
    json_object_set_new(o, "id", json_integer(ts->sid));
    json_object_set_new(o, "name", json_string(ts->name));
    json_object_set_new(o, "tx_port", json_integer(ts->tx_port));
    json_object_set_new(o, "rx_port", json_integer(ts->rx_port));
    /* intended rate: frames the schedule asks for over the scheduled time */
    double ifr = 0, idur = 0;
    for (unsigned s = 0; s < t->nsegs; s++) {
        double pps = ts->seg_pps[s];
        ifr += (double)ts->seg_max[s];
        idur += t->segs[s].duration_s > 0 ? t->segs[s].duration_s : (double)ts->seg_max[s] / pps;
    }
    /* burst and frame-count trials: the rate inside the burst; timed segments: the mean */
    double ipps = (t->segs[0].max_frames || idur <= 0) ? ts->seg_pps[0] : ifr / idur;
    json_object_set_new(o, "intended_pps", json_real(ipps));
    json_object_set_new(o, "intended_frames", json_integer((json_int_t)ifr));
    double span_ns = 0;
    if (sent) span_ns = (double)(ts->last_tx_ns - ((t->t0_ns) & ((1ULL << 48) - 1))) + 1e9 / ts->seg_pps[t->nsegs - 1];
    double eff = span_ns / 1e9;
    json_object_set_new(o, "effective_duration_s", json_real(eff));
    json_object_set_new(o, "achieved_pps", json_real(eff > 0 ? (double)sent / eff : 0));
    json_object_set_new(o, "sent", json_integer((json_int_t)sent));
    json_object_set_new(o, "received", json_integer((json_int_t)m.received));
    uint64_t lost = sent > m.received ? sent - m.received : 0;
    json_object_set_new(o, "lost", json_integer((json_int_t)lost));
    uint64_t mis = 0;
    for (unsigned w = 0; w < g_nworkers; w++) if (g_workers[w].misrouted) mis += g_workers[w].misrouted[i];
    json_object_set_new(o, "misrouted", json_integer((json_int_t)mis));
    json_object_set_new(o, "duplicates", json_integer((json_int_t)m.duplicates));
    json_object_set_new(o, "reordered", json_integer((json_int_t)m.reordered));
    json_object_set_new(o, "reorder_extent_max", json_integer((json_int_t)m.reorder_extent_max));
    json_object_set_new(o, "seq_gaps", json_integer((json_int_t)m.seq_gaps));
    json_object_set_new(o, "rx_lcores", json_integer(merged_lcores));
    int64_t fl = -1, ll = -1;
    if (final && lost) seqacct_loss_times(&m, sent, ts->first_tx_ns, ts->last_tx_ns, &fl, &ll);
    uint64_t t0 = t->t0_ns & ((1ULL << 48) - 1);
    json_object_set_new(o, "first_loss_ns", fl >= 0 ? json_real((double)((int64_t)fl - (int64_t)t0)) : json_null());
    json_object_set_new(o, "last_loss_ns", ll >= 0 ? json_real((double)((int64_t)ll - (int64_t)t0)) : json_null());
    json_object_set_new(o, "max_rx_gap_ns", m.received >= 2 ? json_real((double)m.max_rx_gap_ns) : json_null());
    json_object_set_new(o, "pacer_late_max_ns", json_real(cyc_to_ns(ts->late_max_cyc)));
    json_object_set_new(o, "tx_retries", json_integer((json_int_t)ts->retries));
    json_object_set_new(o, "tx_nombuf", json_integer((json_int_t)ts->nombuf));
    json_object_set_new(o, "latency", t->latency ? latency_json(&lh, &m) : json_null());
    return o;
}

static json_t *build_result(struct trial *t)
{
    json_t *o = json_object();
    json_object_set_new(o, "state", json_string("done"));
    json_object_set_new(o, "duration_s", json_real(t->duration_s));
    json_t *ss = json_array();
    uint64_t sent = 0, recv = 0, late_max = 0;
    double eff = 0;
    for (unsigned i = 0; i < t->nstreams; i++) {
        json_t *s = stream_json(t, i, 1);
        sent += t->ts[i].sent;
        recv += (uint64_t)json_integer_value(json_object_get(s, "received"));
        double e = json_real_value(json_object_get(s, "effective_duration_s"));
        if (e > eff) eff = e;
        if (t->ts[i].late_max_cyc > late_max) late_max = t->ts[i].late_max_cyc;
        json_array_append_new(ss, s);
    }
    uint64_t nt = 0, late = 0, foreign = 0, mis = 0;
    uint64_t mis_port[MAX_PORTS] = { 0 };
    for (unsigned w = 0; w < g_nworkers; w++) {
        nt += g_workers[w].non_test; late += g_workers[w].late_rx; foreign += g_workers[w].foreign_rx;
        for (unsigned q = 0; q < MAX_PORTS; q++) { mis_port[q] += g_workers[w].misrouted_port[q]; mis += g_workers[w].misrouted_port[q]; }
    }
    json_object_set_new(o, "effective_duration_s", json_real(eff));
    json_object_set_new(o, "pacer_late_max_ns", json_real(cyc_to_ns(late_max)));
    json_object_set_new(o, "non_test_rx", json_integer((json_int_t)nt));
    json_object_set_new(o, "late_rx", json_integer((json_int_t)late));
    json_object_set_new(o, "foreign_test_rx", json_integer((json_int_t)foreign));
    json_object_set_new(o, "misrouted", json_integer((json_int_t)mis));
    json_object_set_new(o, "sent", json_integer((json_int_t)sent));
    json_object_set_new(o, "received", json_integer((json_int_t)recv));
    json_object_set_new(o, "tsc_hz", json_integer((json_int_t)g_tsc_hz));
    json_object_set_new(o, "stopped_by", t->stopped_by ? json_string(t->stopped_by) : json_null());
    json_object_set_new(o, "learning", json_boolean(t->learning));
    json_object_set_new(o, "drain_s", json_real(t->drain_s));
    json_object_set_new(o, "streams", ss);
    json_t *pl = json_array();
    for (unsigned q = 0; q < g_nports; q++) {
        if (!t->port_used[q] && !mis_port[q]) continue;
        json_t *po = json_object();
        json_object_set_new(po, "id", json_integer(q));
        json_object_set_new(po, "misrouted", json_integer((json_int_t)mis_port[q]));
        json_object_set_new(po, "stats", port_stats_json(q));
        json_object_set_new(po, "xstats", port_xstats_json(q));
        json_array_append_new(pl, po);
    }
    json_object_set_new(o, "ports", pl);
    return o;
}

json_t *trial_result(rpc_err_t *e)
{
    if (!cur || g_phase != PH_DONE || !cur->result) {
        e->code = -32000;
        snprintf(e->msg, sizeof(e->msg), "state: no finished trial (state=%s)", phase_name[g_phase]);
        return NULL;
    }
    return json_incref(cur->result);
}

json_t *trial_stream_stats(int id, rpc_err_t *e)
{
    if (!cur) { e->code = -32000; snprintf(e->msg, sizeof(e->msg), "state: no trial has run yet"); return NULL; }
    int final = g_phase == PH_DONE;
    if (id >= 0) {
        if (id >= MAX_STREAM_ID || cur->sid_map[id] < 0) { e->code = -32001; snprintf(e->msg, sizeof(e->msg), "id: stream %d was not in the last trial", id); return NULL; }
        return stream_json(cur, (unsigned)cur->sid_map[id], final);
    }
    json_t *a = json_array();
    for (unsigned i = 0; i < cur->nstreams; i++) json_array_append_new(a, stream_json(cur, i, final));
    return a;
}

void trial_shutdown(void)
{
    if (cur) __atomic_store_n(&cur->stop, 1, __ATOMIC_RELEASE);
}
