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
    s->tx_whole = s->plen == 1 && s->tmpls[s->pattern[0]]->len <= TX_SMALL_MAX;
    const tmpl_t *t0 = s->tmpls[s->pattern[0]];
    s->rx_tag = s->plen == 1 && !s->tx_whole ? (uint64_t)t0->zero_from << 32 | t0->len : 0;
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
    free(t->rx_slot);
    free(t->rx_tag);
    free(t->ivals);
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
        free(w->rx_by_slot); w->rx_by_slot = NULL;
        memset(w->misrouted_port, 0, sizeof(w->misrouted_port));
        w->non_test = w->late_rx = w->foreign_rx = 0;
        w->run_cyc = w->busy_cyc = 0;
    }
}

/* learning frames: from every port of each stream's receive group, with the stream's destination
 * MAC as source, so a learning DUT puts that MAC behind the group (an OVS bond learns it on the
 * bond, whichever member the frame entered by) */
static void send_learning_frames(const struct stream *st, uint16_t port, unsigned n)
{
    const tmpl_cfg_t *c = &st->sc.cfg;
    for (unsigned f = 0; f < n; f++) {
        /* from the pool the port's TX queues send (MBUF_FAST_FREE: the TX pool only) */
        struct rte_mbuf *m = rte_pktmbuf_alloc(g_ports[port].fast_free ? g_ports[port].tx_pool : g_ports[port].rx_pool);
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
        if (g_tmpl_tag_off >= 0) *mbuf_tmpl_tag(m) = 0;   /* its data is not a template's any more */
        /* queue 0 of the rx port: workers do not transmit outside the running phase */
        if (rte_eth_tx_burst(port, 0, &m, 1) != 1) rte_pktmbuf_free(m);
    }
}

static void send_learning(struct trial *t)
{
    for (unsigned i = 0; i < t->nstreams; i++) {
        const struct stream *st = t->ts[i].st;
        for (int g = 0; g < st->sc.n_rx_ports; g++)
            send_learning_frames(st, (uint16_t)st->sc.rx_ports[g], t->learning_frames);
    }
}

static void begin_running(struct trial *t)
{
    /* TX counters at the start of the window in which only the workers transmit (after the
     * learning frames, which the control thread sent): the result compares their deltas with
     * what the workers handed each port */
    for (unsigned q = 0; q < g_nports; q++) if (t->port_used[q]) port_tx_counters(q, &t->txc0[q]);
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
        double grace = trial_seg_grace_s(sg->duration_s);
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
    t->watchdog_tsc = sched_end + trial_watchdog_slack(sched_end - start, g_tsc_hz);
    if (t->interval_s > 0 && (t->ivals = malloc(sizeof(*t->ivals))) != NULL)
        ivals_start(t->ivals, (uint64_t)(t->interval_s * (double)g_tsc_hz), start);
    set_phase(PH_RUNNING);
}

static int stream_exists(unsigned id) { return g_streams[id] != NULL; }

/* a trial for n streams from a validated request; its per-stream arrays are zeroed */
static struct trial *trial_alloc(const trialcfg_t *tc, unsigned n, rpc_err_t *e)
{
    struct trial *t = calloc(1, sizeof(*t));
    if (!t) { e->code = -32603; snprintf(e->msg, sizeof(e->msg), "out of memory"); return NULL; }
    memcpy(t->segs, tc->segs, sizeof(t->segs));
    t->nsegs = tc->nsegs;
    t->learning = tc->learning;
    t->latency = tc->latency;
    t->learning_frames = tc->learning_frames;
    t->learning_wait_s = tc->learning_wait_s;
    t->drain_s = tc->drain_s;
    t->interval_s = tc->interval_s;
    t->duration_s = tc->duration_s;
    t->ts = aligned_alloc(RTE_CACHE_LINE_SIZE, ((sizeof(struct tx_stream) * n + RTE_CACHE_LINE_SIZE - 1) / RTE_CACHE_LINE_SIZE) * RTE_CACHE_LINE_SIZE);
    t->sid_map = malloc(sizeof(int32_t) * MAX_STREAM_ID);
    t->rx_slot = malloc((size_t)n * RXG_MAX_PORTS);
    t->rx_tag = calloc(n ? n : 1, sizeof(uint64_t));
    if (!t->ts || !t->sid_map || !t->rx_slot || !t->rx_tag) {
        trial_free(t);
        e->code = -32603;
        snprintf(e->msg, sizeof(e->msg), "out of memory");
        return NULL;
    }
    memset(t->ts, 0, sizeof(struct tx_stream) * n);
    for (unsigned i = 0; i < MAX_STREAM_ID; i++) t->sid_map[i] = -1;
    t->nstreams = n;
    return t;
}

/* per stream and segment: rate, frame gap and frame count; refuse a port offered more than its
 * line rate in any segment; then the intended duration (timed segments their length; frame-count
 * segments the time the slowest stream needs for its frames at its rate) */
static int trial_schedule(struct trial *t, const trialcfg_t *tc, const uint16_t *ids, rpc_err_t *e)
{
    double speed[MAX_PORTS];
    for (unsigned q = 0; q < g_nports; q++) speed[q] = port_speed_bps(q);
    for (unsigned s = 0; s < t->nsegs; s++) {
        double load_bps[MAX_PORTS] = { 0 };
        for (unsigned i = 0; i < t->nstreams; i++) {
            const struct stream *st = g_streams[ids[i]];
            double pps = trial_seg_pps(&t->segs[s], st->sc.rate_pps);
            t->ts[i].seg_pps[s] = pps;
            t->ts[i].gap_fp[s] = pace_gap_fp((double)g_tsc_hz, pps);
            t->ts[i].seg_max[s] = trial_seg_frames(&t->segs[s], pps);
            load_bps[st->sc.port] += pps * l1_bits(st->sc.wire_size_b);
        }
        if (trial_check_port_load(tc, load_bps, speed, g_nports, e)) return -1;
    }
    t->duration_s = 0;
    for (unsigned s = 0; s < t->nsegs; s++) {
        double d = 0;
        for (unsigned i = 0; i < t->nstreams; i++) {
            double l = trial_seg_len_s(&t->segs[s], t->ts[i].seg_max[s], t->ts[i].seg_pps[s]);
            if (l > d) d = l;
        }
        t->duration_s += d;
    }
    return 0;
}

static unsigned rx_lcore_count(void)
{
    unsigned nrx = 0;
    for (unsigned w = 0; w < g_nworkers; w++) if (g_workers[w].does_rx) nrx++;
    return nrx;
}

/* the previous trial ends for good: workers idle, its state freed */
static void retire_previous_trial(void)
{
    set_phase(PH_IDLE);
    wait_workers(PH_IDLE);
    workers_free_trial_state();
    trial_free(cur);
    cur = NULL;
    g_trial = NULL;
}

/* copy what the data path and the results need from each stream into the trial */
static void trial_bind_streams(struct trial *t, const uint16_t *ids)
{
    for (unsigned i = 0; i < t->nstreams; i++) {
        struct tx_stream *ts = &t->ts[i];
        struct stream *st = g_streams[ids[i]];
        ts->st = st;
        snprintf(ts->name, sizeof(ts->name), "%s", st->sc.name);
        ts->tx_port = st->sc.port;
        ts->rx_port = st->sc.rx_port;
        memcpy(ts->rx_ports, st->sc.rx_ports, sizeof(ts->rx_ports));
        ts->n_rx_ports = st->sc.n_rx_ports;
        ts->sid = ids[i];
        ts->port = (uint16_t)st->sc.port;
        ts->queue = st->txq;
        ts->worker = g_ports[ts->port].tx_lcore[ts->queue];
        ts->reuse = g_ports[ts->port].tx_reuse && st->rx_tag != 0 && g_tmpl_tag_off >= 0;
        ts->prefetch = g_ports[ts->port].remote;
        ts->cksum_hw = g_ports[ts->port].cksum_hw;
        ts->fast_free = g_ports[ts->port].fast_free;
        ts->pool = g_ports[ts->port].rx_pool;
        ts->txpool = g_ports[ts->port].tx_pool;
        t->rx_tag[i] = g_tmpl_tag_off >= 0 ? st->rx_tag : 0;
        t->sid_map[ids[i]] = (int32_t)i;
        rxgroup_slots(st->sc.rx_ports, st->sc.n_rx_ports, t->rx_slot + (size_t)i * RXG_MAX_PORTS);
        t->port_used[st->sc.port] = 1;
        for (int g = 0; g < st->sc.n_rx_ports; g++) t->port_used[st->sc.rx_ports[g]] = 1;
    }
}

/* zeroed, in whole cache lines of its own: one lcore's per-trial state never shares a line with
 * another lcore's (two workers' small arrays next to each other on the heap would: each one's
 * per-burst counter stores would take the line from the other) */
static void *lcore_calloc(size_t n, size_t size)
{
    size_t b = (n ? n : 1) * size;
    b = (b + RTE_CACHE_LINE_SIZE - 1) / RTE_CACHE_LINE_SIZE * RTE_CACHE_LINE_SIZE;
    void *p = aligned_alloc(RTE_CACHE_LINE_SIZE, b);
    if (p) memset(p, 0, b);
    return p;
}

/* per-lcore state: each worker's TX stream list, RX accounting (and histograms) per trial stream */
static int workers_alloc_trial_state(struct trial *t, rpc_err_t *e)
{
    unsigned n = t->nstreams;
    for (unsigned wi = 0; wi < g_nworkers; wi++) {
        struct worker *w = &g_workers[wi];
        w->tx = lcore_calloc(n, sizeof(*w->tx));
        w->acct = lcore_calloc(n, sizeof(seqacct_t));
        w->misrouted = lcore_calloc(n, sizeof(uint64_t));
        w->rx_by_slot = lcore_calloc((size_t)n * MAX_RX_GROUP, sizeof(uint64_t));
        if (t->latency && w->does_rx) {
            w->lat = lcore_calloc(n, sizeof(hist_t));
            w->ipdv = lcore_calloc(n, sizeof(hist_t));
        }
        if (!w->tx || !w->acct || !w->misrouted || !w->rx_by_slot || (t->latency && w->does_rx && (!w->lat || !w->ipdv))) {
            workers_free_trial_state();
            EFAIL(-32603, "out of memory for %u streams", n);
        }
        for (unsigned i = 0; i < n; i++) {
            seqacct_reset(&w->acct[i], 0, w->lat ? &w->lat[i] : NULL, w->ipdv ? &w->ipdv[i] : NULL);
            if (t->ts[i].worker == (int)wi) w->tx[w->ntx++] = &t->ts[i];
        }
        w->tx_done = 0;
    }
    return 0;
}

/* reset the ports' counters, publish the trial to the workers and start it */
static void trial_publish(struct trial *t)
{
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
}

int trial_start(json_t *p, rpc_err_t *e)
{
    if (trial_active()) EFAIL(-32000, "state: a trial is already %s", phase_name[g_phase]);
    static uint16_t ids[MAX_STREAM_ID];
    static trialcfg_t tc;
    unsigned n;
    if (trialcfg_check_keys(p, e) || trialcfg_stream_ids(p, stream_exists, ids, &n, e) || trialcfg_parse(p, &tc, e))
        return -1;
    struct trial *t = trial_alloc(&tc, n, e);
    if (!t) return -1;
    if (trial_schedule(t, &tc, ids, e) ||
        trial_check_rx_memory(n, rx_lcore_count(), t->latency, sizeof(seqacct_t) + MAX_RX_GROUP * sizeof(uint64_t),
                              sizeof(hist_t), e)) {
        trial_free(t);
        return -1;
    }
    /* all checks passed: stop old trial state, publish the new one */
    retire_previous_trial();
    trial_bind_streams(t, ids);
    if (workers_alloc_trial_state(t, e)) { trial_free(t); return -1; }
    trial_publish(t);
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

/* frames the trial's streams sent and received so far (read while the workers run: each count is
 * one aligned 64-bit word) */
static void trial_counts(const struct trial *t, uint64_t *sent, uint64_t *recv)
{
    *sent = *recv = 0;
    for (unsigned i = 0; i < t->nstreams; i++) {
        *sent += t->ts[i].sent;
        for (unsigned w = 0; w < g_nworkers; w++) if (g_workers[w].acct) *recv += g_workers[w].acct[i].received;
    }
}

/* loss over time: close the intervals that ended by now (ivals.h) */
static void trial_sample(struct trial *t, uint64_t now, int last)
{
    if (!t->ivals || (!last && now < t->ivals->next_cyc)) return;
    uint64_t s, r;
    trial_counts(t, &s, &r);
    if (last) ivals_finish(t->ivals, now, s, r);
    else ivals_tick(t->ivals, now, s, r);
}

void trial_tick(void)
{
    struct trial *t = cur;
    if (!t) return;
    int ph = g_phase;
    uint64_t now = rte_rdtsc();
    if (ph == PH_RUNNING || ph == PH_DRAINING) trial_sample(t, now, 0);
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
        trial_sample(t, now, 1);
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
        trial_counts(cur, &sent, &recv);
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
    double mn = (double)h->min, avg = ok ? (double)h->sum / (double)h->count : 0, mx = (double)h->max;
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
        json_object_set_new(ip, "avg", json_real((double)a->ipdv_sum / (double)a->ipdv_count));
        json_object_set_new(ip, "max", json_real((double)a->ipdv_max));
        if (a->ipdv_abs) json_object_set_new(ip, "p99", json_real(hist_percentile(a->ipdv_abs, 99)));
        json_object_set_new(ip, "count", json_integer((json_int_t)a->ipdv_count));
    }
    json_object_set_new(o, "ipdv_ns", ip);
    return o;
}

/* merge the RX lcores' accounting of trial stream i into m (lat/ipdv histograms into lh/ih) */
static const seqacct_t *merge_acct(unsigned i, seqacct_t *m, hist_t *lh, hist_t *ih, unsigned *nlcores)
{
    static const seqacct_t *per[MAX_WORKERS];
    for (unsigned w = 0; w < g_nworkers; w++)
        per[w] = g_workers[w].does_rx && g_workers[w].acct ? &g_workers[w].acct[i] : NULL;
    return trial_merge_acct(per, g_nworkers, m, lh, ih, nlcores);
}

static json_t *stream_json(struct trial *t, unsigned i, int final)
{
    struct tx_stream *ts = &t->ts[i];
    static seqacct_t m;
    static hist_t lh, ih;
    unsigned nlcores;
    merge_acct(i, &m, &lh, &ih, &nlcores);
    json_t *o = json_object();
    uint64_t sent = ts->sent;
    json_object_set_new(o, "id", json_integer(ts->sid));
    json_object_set_new(o, "name", json_string(ts->name));
    json_object_set_new(o, "tx_port", json_integer(ts->tx_port));
    json_object_set_new(o, "rx_port", json_integer(ts->rx_port));
    /* the receive group and the stream's test frames accounted on each of its ports (duplicates
     * included; misrouted ones are not: they arrived outside the group) */
    json_t *rg = json_array(), *byp = json_object();
    for (int g = 0; g < ts->n_rx_ports; g++) {
        uint64_t k = 0;
        for (unsigned w = 0; w < g_nworkers; w++)
            if (g_workers[w].rx_by_slot) k += g_workers[w].rx_by_slot[(size_t)i * MAX_RX_GROUP + (unsigned)g];
        char key[8];
        snprintf(key, sizeof(key), "%d", ts->rx_ports[g]);
        json_array_append_new(rg, json_integer(ts->rx_ports[g]));
        json_object_set_new(byp, key, json_integer((json_int_t)k));
    }
    json_object_set_new(o, "rx_ports", rg);
    json_object_set_new(o, "rx_by_port", byp);
    /* intended rate: frames the schedule asks for over the scheduled time */
    double ifr, ipps;
    trial_stream_intended(t->segs, t->nsegs, ts->seg_pps, ts->seg_max, &ifr, &ipps);
    json_object_set_new(o, "intended_pps", json_real(ipps));
    json_object_set_new(o, "intended_frames", json_integer((json_int_t)ifr));
    double eff = trial_effective_s(sent, ts->last_tx_ns, t->t0_ns, ts->seg_pps[t->nsegs - 1]);
    json_object_set_new(o, "effective_duration_s", json_real(eff));
    json_object_set_new(o, "achieved_pps", json_real(eff > 0 ? (double)sent / eff : 0));
    json_object_set_new(o, "sent", json_integer((json_int_t)sent));
    json_object_set_new(o, "received", json_integer((json_int_t)m.received));
    uint64_t lost = trial_lost(sent, m.received);
    json_object_set_new(o, "lost", json_integer((json_int_t)lost));
    uint64_t mis = 0;
    for (unsigned w = 0; w < g_nworkers; w++) if (g_workers[w].misrouted) mis += g_workers[w].misrouted[i];
    json_object_set_new(o, "misrouted", json_integer((json_int_t)mis));
    json_object_set_new(o, "duplicates", json_integer((json_int_t)m.duplicates));
    json_object_set_new(o, "reordered", json_integer((json_int_t)m.reordered));
    json_object_set_new(o, "reorder_extent_max", json_integer((json_int_t)m.reorder_extent_max));
    json_object_set_new(o, "seq_gaps", json_integer((json_int_t)m.seq_gaps));
    json_object_set_new(o, "rx_lcores", json_integer(nlcores));
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

/* "tx" of a port in the result: frames the workers handed the port (rte_eth_tx_burst accepted
 * them) against what the port's counters say went out during the running phase and the drain.
 * Returns the frames the port did not send (0 when its counters cover all of them or say nothing). */
static uint64_t port_tx_json(struct trial *t, unsigned q, json_t *po)
{
    uint64_t sent = 0;
    for (unsigned i = 0; i < t->nstreams; i++) if (t->ts[i].tx_port == (int)q) sent += t->ts[i].sent;
    struct port_txc c;
    port_tx_counters(q, &c);
    const struct port_txc *b = &t->txc0[q];
    json_t *o = json_object();
    json_object_set_new(o, "sent", json_integer((json_int_t)sent));
    uint64_t out = UINT64_MAX;
    if (c.pmd_ok && b->pmd_ok && c.opackets >= b->opackets) {
        uint64_t d = c.opackets - b->opackets;
        json_object_set_new(o, "port_opackets", json_integer((json_int_t)d));
        json_object_set_new(o, "port_oerrors", json_integer((json_int_t)(c.oerrors - b->oerrors)));
        out = d;
    } else {
        json_object_set_new(o, "port_opackets", json_null());
        json_object_set_new(o, "port_oerrors", json_null());
    }
    if (c.if_ok && b->if_ok && !strcmp(c.ifname, b->ifname) && c.if_tx_packets >= b->if_tx_packets) {
        uint64_t d = c.if_tx_packets - b->if_tx_packets;
        json_object_set_new(o, "iface", json_string(c.ifname));
        json_object_set_new(o, "iface_tx_packets", json_integer((json_int_t)d));
        json_object_set_new(o, "iface_tx_dropped", json_integer((json_int_t)(c.if_tx_dropped - b->if_tx_dropped)));
        json_object_set_new(o, "iface_tx_errors", json_integer((json_int_t)(c.if_tx_errors - b->if_tx_errors)));
        if (d < out) out = d;
    } else {
        json_object_set_new(o, "iface", g_ports[q].if_index ? json_string(c.ifname) : json_null());
        json_object_set_new(o, "iface_tx_packets", json_null());
    }
    uint64_t nt = out != UINT64_MAX && out < sent ? sent - out : 0;
    json_object_set_new(o, "not_sent", json_integer((json_int_t)nt));
    json_object_set_new(po, "tx", o);
    return nt;
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
    json_object_set_new(o, "tsc_hz_dpdk", json_integer((json_int_t)g_tsc_hz_dpdk));
    json_object_set(o, "tsc_calibration", g_tsc_cal);
    json_object_set_new(o, "stopped_by", t->stopped_by ? json_string(t->stopped_by) : json_null());
    json_object_set_new(o, "learning", json_boolean(t->learning));
    json_object_set_new(o, "drain_s", json_real(t->drain_s));
    json_object_set_new(o, "streams", ss);
    json_t *wl = json_array();
    for (unsigned w = 0; w < g_nworkers; w++) {
        const struct worker *wk = &g_workers[w];
        json_t *x = json_object();
        json_object_set_new(x, "lcore", json_integer(wk->lcore));
        json_object_set_new(x, "tx", json_boolean(wk->does_tx && wk->ntx));
        json_object_set_new(x, "rx", json_boolean(wk->does_rx && wk->nrxq));
        json_object_set_new(x, "running_s", json_real(cyc_to_ns(wk->run_cyc) / 1e9));
        json_object_set_new(x, "busy_share", wk->run_cyc ? json_real((double)wk->busy_cyc / (double)wk->run_cyc)
                                                          : json_null());
        json_array_append_new(wl, x);
    }
    json_object_set_new(o, "workers", wl);
    json_t *pl = json_array();
    uint64_t not_sent = 0;
    for (unsigned q = 0; q < g_nports; q++) {
        if (!t->port_used[q] && !mis_port[q]) continue;
        json_t *po = json_object();
        json_object_set_new(po, "id", json_integer(q));
        json_object_set_new(po, "misrouted", json_integer((json_int_t)mis_port[q]));
        json_object_set_new(po, "stats", port_stats_json(q));
        json_object_set_new(po, "xstats", port_xstats_json(q));
        if (t->port_used[q]) not_sent += port_tx_json(t, q, po);
        json_array_append_new(pl, po);
    }
    json_object_set_new(o, "ports", pl);
    json_object_set_new(o, "tx_not_sent", json_integer((json_int_t)not_sent));
    json_t *iv = t->ivals ? ivals_json(t->ivals, g_tsc_hz) : NULL;
    json_object_set_new(o, "intervals", iv ? iv : json_null());
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
