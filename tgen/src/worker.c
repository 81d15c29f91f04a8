/* Data path: one run loop per worker lcore, TX pacing and RX accounting.
 * No locks or syscalls while a trial runs; idle workers sleep 1 ms between polls. */
#include <string.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_prefetch.h>
#include "tgen.h"

#define MASK48 ((1ULL << 48) - 1)

/* a cache line about to be written, asked for in the exclusive state (x86 PREFETCHW: one request
 * instead of a read then an ownership request; a no-op on CPUs without it).  Not
 * rte_prefetch0_write: experimental in DPDK 22.11, and __builtin_prefetch(p, 1) emits a read
 * prefetch unless the whole build targets a CPU with PREFETCHW */
static inline void prefetch_for_write(const void *p)
{
#if defined(__x86_64__)
    __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1, 3);
#endif
}

static void tx_drop_pending(struct tx_stream *ts)
{
    if (ts->npend) rte_pktmbuf_free_bulk(ts->pend + ts->pend_off, ts->npend);
    ts->npend = 0;
    ts->pend_off = 0;
}

/* One frame into a TX mbuf: the fields TX needs, then the frame (tagged: tmpl_fast_write, which
 * copies the header part only when the mbuf's tag says the rest is zero; else a whole copy as
 * tmpl_fill, and the mbuf's tag, where mbufs have one, says what the copy left zero) */
static inline __attribute__((always_inline)) void
tx_write_frame(const tmpl_fast_t *f, struct rte_mbuf *b, int tagged, int tag_off, uint32_t flow, uint64_t seq,
               uint64_t tx_ns, const int hw, uint64_t olf, uint64_t txo)
{
    b->data_off = RTE_PKTMBUF_HEADROOM;
    b->ol_flags = hw ? olf : 0;
    if (hw) b->tx_offload = txo;    /* the header lengths the port's checksum offload needs */
    b->data_len = f->len;
    b->pkt_len = f->len;
    uint8_t *d = rte_pktmbuf_mtod(b, uint8_t *);
    if (tagged) {
        uint64_t *tag = RTE_MBUF_DYNFIELD(b, tag_off, uint64_t *);
        *tag = tmpl_fast_write_k(f, d, *tag, flow, seq, tx_ns, hw);
    } else {
        for (unsigned o = 0; o < f->full; o += 32) memcpy(d + o, f->data + o, 32);
        tmpl_fast_fields_k(f, d, flow, seq, tx_ns, hw);
        if (tag_off >= 0) *RTE_MBUF_DYNFIELD(b, tag_off, uint64_t *) = (uint64_t)f->zero_from << 32 | f->full;
    }
}

/* a frame with the port's checksum offload (tmpl_fast_offload): its ol_flags and tx_offload */
static inline void tx_offload_flags(const tmpl_fast_t *f, uint64_t *olf, uint64_t *txo)
{
    *olf = f->ipv4 ? RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_UDP_CKSUM
                   : RTE_MBUF_F_TX_IPV6 | RTE_MBUF_F_TX_UDP_CKSUM;
    *txo = rte_mbuf_tx_offload(f->ip_off, (uint64_t)(f->udp_off - f->ip_off), 0, 0, 0, 0, 0);
}

static void tx_one_stream(struct trial *t, struct tx_stream *ts, uint64_t now)
{
    if (ts->npend) {
        uint16_t n = rte_eth_tx_burst(ts->port, ts->queue, ts->pend + ts->pend_off, (uint16_t)ts->npend);
        if (n) {
            if (ts->sent == 0) ts->first_tx_ns = ts->last_tx_ns; /* set below on build */
            ts->sent += n;
            ts->pend_off += n;
            ts->npend -= n;
        }
        if (ts->npend) { ts->retries++; return; }
        ts->pend_off = 0;
        now = 0;                   /* the retry took time: the burst below reads the clock again */
    }
    if (ts->seg >= (int)t->nsegs) { ts->done = 1; return; }
    if (!now) now = rte_rdtsc();   /* read only when a burst may be built (not while TX is blocked) */
    /* count due frames without committing */
    int seg = ts->seg;
    uint64_t k = ts->k, oldest = 0;
    unsigned n = 0;
    int finished = 0;
    while (n < BURST) {
        const struct seg *sg = &t->segs[seg];
        uint64_t lim = ts->seg_max[seg], gap = ts->gap_fp[seg];
        uint64_t dl = pace_deadline(sg->start_tsc, k, gap);
        if (k >= lim || dl >= sg->end_tsc || now >= sg->cut_tsc) {
            if (++seg >= (int)t->nsegs) { finished = 1; break; }
            k = 0;
            continue;
        }
        if (dl > now) break;
        if (n == 0) oldest = dl;
        /* frames k.. with deadline <= now and < segment end, at most what is left of the burst */
        uint64_t upto = now < sg->end_tsc ? now : sg->end_tsc - 1;
        uint64_t want = BURST - n;
        if (want > lim - k) want = lim - k;
        if (pace_deadline(sg->start_tsc, k + want - 1, gap) > upto) {
            uint64_t due = pace_due(sg->start_tsc, upto, gap);   /* > k, since dl(k) <= upto */
            if (due - k < want) want = due - k;
        }
        n += (unsigned)want;
        k += want;
    }
    if (n) {
        struct rte_mbuf *m[BURST];
        /* raw get: pool mbufs already have refcnt 1, nb_segs 1, next NULL; set what TX needs.
         * From the TX pool, an mbuf's tag says which of its bytes are zero (only tgen writes these
         * mbufs' data: tgen.h g_txpool), so a frame whose payload is already there (zero) gets only
         * its header part copied and its per-frame fields written (tmpl_write).
         * A stream of one small size (<= TX_SMALL_MAX) copies its frames whole into mbufs of the
         * main pool instead: those are the ones the RX loop just freed, whose data line this
         * core has just read, while a TX pool mbuf's line was last read by the consumer of the
         * port (a vhost backend, a memif peer on the other core) and must be fetched back.
         * A larger frame on a port whose consumer copies it out on another core (ts->reuse:
         * virtio) is built in main-pool mbufs too, tagged: mostly ones that brought a frame of
         * the stream back, whose payload that core has just written (vhost 1518 B: 1.08x) */
        const struct stream *st = ts->st;
        int tagged;
        if (ts->fast_free) {
            /* MBUF_FAST_FREE: every mbuf of the queue from the one TX pool, small frames too */
            tagged = !st->tx_whole;
            if (rte_mempool_get_bulk(ts->txpool, (void **)m, n) != 0) { ts->nombuf++; return; }
        } else {
            struct rte_mempool *pool = ts->reuse ? ts->pool : ts->txpool;
            tagged = pool != NULL && !st->tx_whole;
            if (!tagged || rte_mempool_get_bulk(pool, (void **)m, n) != 0) {
                tagged = 0;
                if (rte_mempool_get_bulk(ts->pool, (void **)m, n) != 0) { ts->nombuf++; return; }
            }
        }
        /* the burst's timestamp is the clock read its pacing used (one rdtsc per stream and
         * burst, taken right before it) */
        uint64_t tx_ns = tsc_to_ns(now) & MASK48;
        /* the per-frame state in registers: the frames' byte stores could alias ts and st as far as
         * the compiler knows, so it would read and write them around every frame */
        uint64_t seq = ts->seq;
        uint32_t flow = ts->flow, flows = st->sc.cfg.flows;
        unsigned pat_pos = ts->pat_pos, plen = st->plen;
        const uint16_t *pattern = st->pattern;
        int tag_off = g_tmpl_tag_off;
        /* every line the burst's frames will write, asked for at once: a line another core had
         * (the port's consumer read it) is fetched while the others are, not one frame at a time
         * behind a full store buffer (vhost 64 B, the generator's CPU the bottleneck: 1.14x).
         * Not where the PMD copies on this core (port.remote): the lines are here already, and
         * the prefetches cost (tgen_tx_cost without them: ring 0.91, memif 64 B 0.95) */
        if (ts->prefetch) {
            for (unsigned i = 0; i < n; i++) {
                prefetch_for_write(m[i]);
                prefetch_for_write((char *)m[i] + RTE_CACHE_LINE_SIZE);
            }
            /* (a second loop: buf_addr is read from the header line, so every header line's
             * fetch is under way before the first of those reads waits) */
            for (unsigned i = 0; i < n; i++) prefetch_for_write((char *)m[i]->buf_addr + RTE_PKTMBUF_HEADROOM);
        }
        /* the templates, read out once per burst: the stream's one size, or each IMIX size; with
         * the port's checksum offload, the flags and header lengths (one header stack per stream) */
        uint64_t olf = 0, txo = 0;
        if (plen == 1) {
            tmpl_fast_t f;
            tmpl_fast_init(&f, st->tmpls[pattern[0]], &st->sc.cfg);
            if (ts->cksum_hw && tmpl_fast_offload(&f)) tx_offload_flags(&f, &olf, &txo);
            /* (two loops: hw a constant in each, no per-frame test of it) */
            if (olf)
                for (unsigned i = 0; i < n; i++) {
                    tx_write_frame(&f, m[i], tagged, tag_off, flow, seq++, tx_ns, 1, olf, txo);
                    if (++flow >= flows) flow = 0;
                }
            else
                for (unsigned i = 0; i < n; i++) {
                    tx_write_frame(&f, m[i], tagged, tag_off, flow, seq++, tx_ns, 0, 0, 0);
                    if (++flow >= flows) flow = 0;
                }
        } else {
            tmpl_fast_t fa[MAX_IMIX];
            for (int k = 0; k < st->sc.nsizes; k++) {
                tmpl_fast_init(&fa[k], st->tmpls[k], &st->sc.cfg);
                if (ts->cksum_hw && tmpl_fast_offload(&fa[k])) tx_offload_flags(&fa[k], &olf, &txo);
            }
            /* the stream's sizes share its header stack: all offloaded or none */
            for (unsigned i = 0; i < n; i++) {
                if (olf) tx_write_frame(&fa[pattern[pat_pos]], m[i], tagged, tag_off, flow, seq++, tx_ns, 1, olf, txo);
                else tx_write_frame(&fa[pattern[pat_pos]], m[i], tagged, tag_off, flow, seq++, tx_ns, 0, 0, 0);
                if (++pat_pos >= plen) pat_pos = 0;
                if (++flow >= flows) flow = 0;
            }
        }
        ts->seq = seq;
        ts->flow = flow;
        ts->pat_pos = pat_pos;
        uint64_t late = now - oldest;
        if (late > ts->late_max_cyc) ts->late_max_cyc = late;
        uint16_t s = rte_eth_tx_burst(ts->port, ts->queue, m, (uint16_t)n);
        if (s && ts->sent == 0) ts->first_tx_ns = tx_ns;
        ts->sent += s;
        ts->last_tx_ns = tx_ns;
        if (s < n) {
            memcpy(ts->pend, m + s, (n - s) * sizeof(m[0]));
            ts->npend = n - s;
            ts->pend_off = 0;
            ts->retries++;
        }
    }
    ts->seg = finished ? (int)t->nsegs : seg;
    ts->k = k;
    if (finished && ts->npend == 0) ts->done = 1;
}

static uint64_t do_tx(struct worker *w, struct trial *t)
{
    uint64_t now = rte_rdtsc();
    if (now < t->start_tsc) return 0;
    int all = 1;
    uint64_t moved = 0;
    int stop = __atomic_load_n(&t->stop, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < w->ntx; i++) {
        struct tx_stream *ts = w->tx[i];
        if (ts->done) continue;
        if (stop) { tx_drop_pending(ts); ts->done = 1; continue; }
        uint64_t sent0 = ts->sent;
        tx_one_stream(t, ts, i ? 0 : now);   /* 0: the stream reads the clock if it builds a burst */
        moved += ts->sent - sent0;
        if (!ts->done) all = 0;
    }
    if (all) __atomic_store_n(&w->tx_done, 1, __ATOMIC_RELEASE);
    return moved;
}

/* Give a received burst back: rte_pktmbuf_free_bulk's work, inlined (a direct, single-segment
 * mbuf with refcnt 1 goes back to its pool in one put per run of mbufs of one pool; anything else
 * through rte_pktmbuf_free).  Each of tgen's own mbufs (of the port's socket's pools) gets its tag (tgen.h) from tag[]: 0, or the
 * rx_tag of the stream whose test frame it brought back at that stream's length (do_rx).  The
 * receiving port wrote its data, so whatever the mbuf held before says nothing any more.  Without
 * tag[] (no port reuses main-pool mbufs: g_main_tags) only a TX-pool mbuf's tag is reset (net_ring
 * hands them back). */
static inline void rx_free(struct rte_mbuf **m, unsigned n, const uint64_t *tag, struct rte_mempool *mainpool,
                           struct rte_mempool *txpool)
{
    void *run[BURST];
    unsigned k = 0;
    struct rte_mempool *pool = NULL;
    int tag_off = g_tmpl_tag_off;    /* read once: the tag stores below may alias the globals */
    for (unsigned i = 0; i < n; i++) {
        struct rte_mbuf *x = m[i];
        if (tag) {
            if (x->pool == mainpool || x->pool == txpool) *RTE_MBUF_DYNFIELD(x, tag_off, uint64_t *) = tag[i];
        } else if (x->pool == txpool) {
            *RTE_MBUF_DYNFIELD(x, tag_off, uint64_t *) = 0;
        }
        if (unlikely(x->nb_segs != 1)) { rte_pktmbuf_free(x); continue; }
        x = rte_pktmbuf_prefree_seg(x);
        if (unlikely(x == NULL)) continue;
        if (x->pool != pool) {
            if (k) rte_mempool_put_bulk(pool, run, k);
            k = 0;
            pool = x->pool;
        }
        run[k++] = x;
    }
    if (k) rte_mempool_put_bulk(pool, run, k);
}

/* rx_account's parse (rxgroup.h): frame i of the burst's mbufs */
static inline int rx_mbuf_sig(void *ctx, unsigned i, tgsig_t *sg)
{
    struct rte_mbuf *b = ((struct rte_mbuf **)ctx)[i];
    return sig_parse_inline(rte_pktmbuf_mtod(b, const uint8_t *), b->data_len, sg);
}

static unsigned do_rx(struct worker *w, struct trial *t, int ph)
{
    struct rte_mbuf *m[BURST];
    int32_t ti[BURST];             /* each frame's trial stream when accounted, else -1 */
    _Static_assert(BURST <= RXACCT_MAX_BURST, "rx_account takes at most RXACCT_MAX_BURST frames a burst");
    unsigned total = 0;
    int acct = t && (ph == PH_LEARNING || ph == PH_RUNNING || ph == PH_DRAINING);
    rxacct_t ra = { w->acct, w->misrouted, w->rx_by_slot, w->misrouted_port, &w->non_test, &w->late_rx,
                    &w->foreign_rx };
    rxtrial_t rt = { t ? t->sid_map : NULL, t ? t->rx_slot : NULL };
    for (unsigned q = 0; q < w->nrxq; q++) {
        uint16_t n = rte_eth_rx_burst(w->rxq[q].port, w->rxq[q].queue, m, BURST);
        if (!n) continue;
        total += n;
        uint64_t tagv[BURST];      /* each mbuf's tag when given back (rx_free), where kept */
        uint64_t *tag = g_main_tags ? tagv : NULL;
        if (tag) memset(tag, 0, n * sizeof(tag[0]));
        if (t && (acct || ph == PH_DONE)) {
            uint64_t now_ns = tsc_to_ns(rte_rdtsc());
            /* the whole burst's signatures asked for at once (the lines were written by the
             * port's producer on another core: fetched in parallel, not 4 at a time) */
            if (w->rxq[q].prefetch)
                for (uint16_t i = 0; i < n; i++) rte_prefetch0(rte_pktmbuf_mtod(m[i], void *));
            /* the accounting itself (rxgroup.h): the function the C tests call */
            rx_account(&rt, &ra, acct, w->rxq[q].port, now_ns, n, rx_mbuf_sig, m, ti);
            /* a frame of the stream's one length, in one segment where TX builds its frames:
             * its payload past the signature is the template's (zero), unless the DUT wrote it */
            if (tag)
                for (uint16_t i = 0; i < n; i++) {
                    if (ti[i] < 0) continue;
                    uint64_t rtag = t->rx_tag[ti[i]];
                    if (rtag && (uint32_t)rtag == m[i]->data_len && m[i]->nb_segs == 1 &&
                        m[i]->data_off == RTE_PKTMBUF_HEADROOM)
                        tag[i] = rtag;
                }
        }
        rx_free(m, n, tag, w->rxq[q].pool, w->rxq[q].txpool);
    }
    return total;
}

int worker_main(void *arg)
{
    struct worker *w = arg;
    uint64_t last = 0;      /* the clock at the previous running iteration's end (0: none) */
    while (!__atomic_load_n(&g_quit, __ATOMIC_ACQUIRE)) {
        int ph = __atomic_load_n(&g_phase, __ATOMIC_ACQUIRE);
        struct trial *t = g_trial;
        __atomic_store_n(&w->seen_phase, ph, __ATOMIC_RELEASE);
        uint64_t moved = 0;
        if (ph == PH_RUNNING && t && w->does_tx && !w->tx_done) moved = do_tx(w, t);
        unsigned got = w->does_rx ? do_rx(w, ph == PH_IDLE ? NULL : t, ph) : 0;
        if (ph == PH_RUNNING) {     /* busy share: each iteration's cycles, and those that moved frames */
            uint64_t now = rte_rdtsc();
            if (last) {
                w->run_cyc += now - last;
                if (moved || got) w->busy_cyc += now - last;
            }
            last = now;
        } else {
            last = 0;
        }
        int tx_busy = ph == PH_RUNNING && w->does_tx && !w->tx_done;
        if (got == 0 && (ph == PH_IDLE || ph == PH_DONE || (w->nrxq == 0 && !tx_busy)))
            rte_delay_us_sleep(1000);   /* nothing to poll: do not burn a shared CPU */
    }
    __atomic_store_n(&w->seen_phase, -1, __ATOMIC_RELEASE);
    return 0;
}
