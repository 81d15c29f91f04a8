/* Receive groups: classification by port, one sequence state per stream across the group's ports
 * (as worker.c keeps it), the lcore rule. */
#include <string.h>
#include "harness.h"
#include "seq.h"
#include "rxgroup.h"
#include "trialcfg.h"
#include <stdlib.h>

/* one RX lcore's state over 3 trial streams, as worker.c keeps it, fed through worker.c's own
 * accounting function (rx_account_burst) */
static seqacct_t acct[3];
static uint64_t by_slot[3][MAX_RX_GROUP], misrouted[3], mis_port[RXG_MAX_PORTS], non_test, late_rx, foreign_rx;
static int8_t slots[3 * RXG_MAX_PORTS];
static int32_t sid_map[MAX_STREAM_ID];
static rxacct_t lc0 = { acct, misrouted, &by_slot[0][0], mis_port, &non_test, &late_rx, &foreign_rx };
static const rxtrial_t trial = { sid_map, slots };

/* stream id of trial stream ti: 100 + ti (sid_map says so) */
static void arrive(int32_t ti, uint16_t port, uint64_t seq)
{
    tgsig_t sg = { .stream_id = (uint16_t)(100 + ti), .ts_bits = 48, .seq = seq, .tx_ns48 = seq * 100 };
    uint8_t ok = 1;
    int32_t got;
    rx_account_burst(&trial, &lc0, 1, port, &sg, &ok, 1, seq * 100 + 1000, &got);
}

static void reset(void)
{
    for (int i = 0; i < 3; i++) seqacct_reset(&acct[i], 0, NULL, NULL);
    memset(by_slot, 0, sizeof(by_slot));
    memset(misrouted, 0, sizeof(misrouted));
    memset(mis_port, 0, sizeof(mis_port));
    non_test = late_rx = foreign_rx = 0;
}

/* a bond's member choice: a hash of the flow (frame k carries flow k % flows) */
static uint16_t member_of(uint64_t seq, unsigned flows, const int *group)
{
    uint32_t f = (uint32_t)(seq % flows);
    uint32_t h = f * 2654435761u;
    return (uint16_t)group[(h >> 16) & 1];
}


static int32_t sid_map2[MAX_STREAM_ID];
static int8_t slots2[RXG_MAX_PORTS];
static const rxtrial_t trial2 = { sid_map2, slots2 };

/* ---- several RX lcores (RSS queues): worker.c's accounting on each lcore, merged as the result
 * merges them (trial_merge_acct), against a reference model of the documented semantics
 * (PROTOCOL.md §6 "rx_lcores"): received and duplicates exact; reordered = RFC 4737 over each
 * lcore's own arrival order, summed. */
#define ML_N 200000u
#define ML_FLOWS 256u
#define ML_SID 7

typedef struct {
    seqacct_t acct[1];
    hist_t lat[1], ipdv[1];
    uint64_t by_slot[MAX_RX_GROUP], mis[1], misp[RXG_MAX_PORTS], nt, late, foreign;
    rxacct_t ra;
} lcore_t;

static void lcore_init(lcore_t *l)
{
    memset(l, 0, sizeof(*l));
    seqacct_reset(&l->acct[0], 0, &l->lat[0], &l->ipdv[0]);
    l->ra = (rxacct_t){ l->acct, l->mis, l->by_slot, l->misp, &l->nt, &l->late, &l->foreign };
}

typedef struct { uint64_t seq, tx; } mframe_t;
typedef struct { mframe_t *f; unsigned n; } mqueue_t;

static uint32_t lcg = 12345;
static uint32_t rnd(void) { lcg = lcg * 1103515245u + 12345u; return lcg >> 8; }
/* the NIC's RSS: a hash of the flow picks one of 2 queues */
static unsigned rss_queue(uint64_t seq) { uint32_t f = (uint32_t)(seq % ML_FLOWS); return ((f * 2654435761u) >> 13) & 1; }
static uint64_t ml_delay(uint64_t seq) { return 1000 + (seq * 7919) % 5000; }

/* the DUT: frames of one stream, frame k on flow k % 256, hashed over 2 queues; with `perturb`
 * it drops some frames, sends some twice (the copy on the same queue: same headers) and swaps
 * some neighbours within a queue */
static void make_queues(mqueue_t q[2], int perturb, uint64_t *dropped, uint64_t *copies)
{
    *dropped = *copies = 0;
    for (int i = 0; i < 2; i++) { q[i].f = malloc(sizeof(mframe_t) * ML_N * 2); q[i].n = 0; }
    for (uint64_t k = 0; k < ML_N; k++) {
        mqueue_t *x = &q[rss_queue(k)];
        mframe_t fr = { k, k * 67 };
        if (perturb && rnd() % 1000 == 0) { (*dropped)++; continue; }
        x->f[x->n++] = fr;
        if (perturb && rnd() % 997 == 0) {
            unsigned back = rnd() % 3;          /* the copy comes right after, or 1-2 frames later */
            x->f[x->n++] = fr;
            if (back && x->n > back + 1) { mframe_t c = x->f[x->n - 1]; x->f[x->n - 1] = x->f[x->n - 1 - back]; x->f[x->n - 1 - back] = c; }
            (*copies)++;
        }
        if (perturb && x->n >= 2 && rnd() % 500 == 0) {
            mframe_t c = x->f[x->n - 1]; x->f[x->n - 1] = x->f[x->n - 2]; x->f[x->n - 2] = c;
        }
    }
}

/* reference model of one lcore: full "seen" map, RFC 4737 NextExp over its arrival order */
typedef struct { uint8_t *seen; uint64_t next_exp, received, dups, reordered; hist_t lat; } ref_t;
static void ref_init(ref_t *r) { memset(r, 0, sizeof(*r)); r->seen = calloc(ML_N, 1); hist_reset(&r->lat); }
static void ref_add(ref_t *r, uint64_t seq, uint64_t delay)
{
    if (r->seen[seq]) { r->dups++; return; }
    r->seen[seq] = 1;
    r->received++;
    if (seq < r->next_exp) r->reordered++; else r->next_exp = seq + 1;
    hist_add(&r->lat, delay);
}

/* feed the queues' bursts (1..64 frames, the RX time of a burst = its last frame's arrival) to
 * lcores: lc[q] polls queue q (nl = 2), or one lcore polls both in turn (nl = 1); the references
 * likewise.  Returns the merged accounting in *m (histograms lh/ih). */
static unsigned feed(const mqueue_t q[2], unsigned nl, lcore_t *lc, ref_t *ref, seqacct_t *m, hist_t *lh, hist_t *ih)
{
    unsigned pos[2] = { 0, 0 };
    uint32_t saved = lcg;
    lcg = 777;                                  /* the same bursts for every lcore layout */
    while (pos[0] < q[0].n || pos[1] < q[1].n) {
        for (unsigned qi = 0; qi < 2; qi++) {
            if (pos[qi] >= q[qi].n) continue;
            unsigned n = 1 + rnd() % 64;
            if (n > q[qi].n - pos[qi]) n = q[qi].n - pos[qi];
            tgsig_t sig[64];
            uint8_t ok[64];
            int32_t ti[64];
            uint64_t now = 0;
            for (unsigned i = 0; i < n; i++) {
                const mframe_t *f = &q[qi].f[pos[qi] + i];
                if (f->tx + ml_delay(f->seq) > now) now = f->tx + ml_delay(f->seq);
            }
            for (unsigned i = 0; i < n; i++) {
                const mframe_t *f = &q[qi].f[pos[qi] + i];
                sig[i] = (tgsig_t){ .stream_id = ML_SID, .ts_bits = 48, .seq = f->seq, .tx_ns48 = f->tx };
                ok[i] = 1;
                ref_add(&ref[nl == 2 ? qi : 0], f->seq, now - f->tx);
            }
            lcore_t *l = &lc[nl == 2 ? qi : 0];
            rx_account_burst(&trial2, &l->ra, 1, 1, sig, ok, n, now, ti);
            pos[qi] += n;
        }
    }
    lcg = saved;
    const seqacct_t *per[2] = { &lc[0].acct[0], nl == 2 ? &lc[1].acct[0] : NULL };
    unsigned nlc;
    trial_merge_acct(per, 2, m, lh, ih, &nlc);
    return nlc;
}

static void multi_lcore_case(int perturb)
{
    static lcore_t l1[1], l2[2];
    static seqacct_t m1, m2;
    static hist_t lh1, ih1, lh2, ih2, rh;
    ref_t r1, r2[2];
    mqueue_t q[2];
    uint64_t dropped, copies;
    const char *what = perturb ? "DUT drops/copies/swaps" : "in order per queue";
    make_queues(q, perturb, &dropped, &copies);
    CHECK(q[0].n > ML_N / 4 && q[1].n > ML_N / 4, "%s: both queues carry a share (%u, %u)", what, q[0].n, q[1].n);
    lcore_init(&l1[0]);
    lcore_init(&l2[0]);
    lcore_init(&l2[1]);
    ref_init(&r1); ref_init(&r2[0]); ref_init(&r2[1]);
    unsigned n1 = feed(q, 1, l1, &r1, &m1, &lh1, &ih1);
    unsigned n2 = feed(q, 2, l2, r2, &m2, &lh2, &ih2);
    CHECK(n1 == 1 && n2 == 2, "%s: rx_lcores %u and %u", what, n1, n2);
    uint64_t sent = ML_N;
    /* loss and duplicates: exact, whatever the spread */
    CHECK(m2.received == ML_N - dropped && trial_lost(sent, m2.received) == dropped,
          "%s: 2 lcores: received %llu lost %llu (dropped %llu)", what, (unsigned long long)m2.received,
          (unsigned long long)trial_lost(sent, m2.received), (unsigned long long)dropped);
    CHECK(m2.duplicates == copies, "%s: 2 lcores: duplicates %llu (copies %llu)", what,
          (unsigned long long)m2.duplicates, (unsigned long long)copies);
    /* one lcore polling both queues: the same counters */
    CHECK(m1.received == m2.received && m1.duplicates == m2.duplicates, "%s: 1 lcore: received %llu dup %llu", what,
          (unsigned long long)m1.received, (unsigned long long)m1.duplicates);
    /* reordering: RFC 4737 over each lcore's arrival order, summed (the reference model) */
    uint64_t ref2 = r2[0].reordered + r2[1].reordered;
    CHECK(m2.reordered == ref2, "%s: 2 lcores: reordered %llu, model %llu", what, (unsigned long long)m2.reordered,
          (unsigned long long)ref2);
    CHECK(m1.reordered == r1.reordered, "%s: 1 lcore: reordered %llu, model %llu", what,
          (unsigned long long)m1.reordered, (unsigned long long)r1.reordered);
    CHECK(r2[0].received + r2[1].received == m2.received && r2[0].dups + r2[1].dups == m2.duplicates,
          "%s: model agrees on received/dups", what);
    if (!perturb) {
        CHECK(m2.reordered == 0 && m2.duplicates == 0 && m2.received == ML_N,
              "in order: 0 false loss, 0 false duplicates, 0 reordered on 2 lcores (reordered %llu)",
              (unsigned long long)m2.reordered);
    }
    /* the latency histogram: merged bucket by bucket, the same as one lcore's and the model's */
    hist_reset(&rh);
    hist_merge(&rh, &r2[0].lat);
    hist_merge(&rh, &r2[1].lat);
    CHECK(lh2.count == m2.received && lh1.count == lh2.count && lh1.min == lh2.min && lh1.max == lh2.max &&
          lh1.sum == lh2.sum && !memcmp(lh1.b, lh2.b, sizeof(lh1.b)), "%s: latency histogram 1 lcore == 2 lcores", what);
    CHECK(rh.count == lh2.count && rh.sum == lh2.sum && !memcmp(rh.b, lh2.b, sizeof(rh.b)),
          "%s: latency histogram == model", what);
    CHECK(hist_percentile(&lh1, 99) == hist_percentile(&lh2, 99), "%s: p99 equal", what);
    free(q[0].f); free(q[1].f); free(r1.seen); free(r2[0].seen); free(r2[1].seen);
}

static void multi_lcore_checks(void)
{
    for (unsigned i = 0; i < MAX_STREAM_ID; i++) sid_map2[i] = -1;
    sid_map2[ML_SID] = 0;
    const int g[] = { 1 };
    rxgroup_slots(g, 1, slots2);
    multi_lcore_case(0);
    multi_lcore_case(1);
}

int main(void)
{
    /* trial streams: 0: port 0 -> group {1, 3} (a bond's members); 1: port 1 -> group {0, 2};
     * 2: port 0 -> plain rx_port 1 (a group of one) */
    const int g0[] = { 1, 3 }, g1[] = { 0, 2 }, g2[] = { 1 };
    rxgroup_slots(g0, 2, slots);
    rxgroup_slots(g1, 2, slots + RXG_MAX_PORTS);
    rxgroup_slots(g2, 1, slots + 2 * RXG_MAX_PORTS);
    for (unsigned i = 0; i < MAX_STREAM_ID; i++) sid_map[i] = -1;
    for (int i = 0; i < 3; i++) sid_map[100 + i] = i;
    int s = -1;
    CHECK(rx_classify(0, 1, slots, 1, &s) == RX_ACCOUNT && s == 0, "stream 0 on group port 1 (slot 0)");
    CHECK(rx_classify(0, 1, slots, 3, &s) == RX_ACCOUNT && s == 1, "stream 0 on group port 3 (slot 1)");
    CHECK(rx_classify(0, 1, slots, 0, &s) == RX_MISROUTED, "stream 0 looped back to its tx port 0");
    CHECK(rx_classify(0, 1, slots, 2, &s) == RX_MISROUTED, "stream 0 on port 2, outside its group");
    CHECK(rx_classify(1, 1, slots, 2, &s) == RX_ACCOUNT && s == 1, "stream 1 on port 2");
    CHECK(rx_classify(2, 1, slots, 1, &s) == RX_ACCOUNT && s == 0, "plain rx_port 1");
    CHECK(rx_classify(2, 1, slots, 3, &s) == RX_MISROUTED, "plain rx_port: port 3 is another port");
    CHECK(rx_classify(0, 1, slots, 31, &s) == RX_MISROUTED, "last port id");
    CHECK(rx_classify(0, 1, slots, 40, &s) == RX_MISROUTED, "port id beyond the table");
    CHECK(rx_classify(-1, 1, slots, 1, &s) == RX_FOREIGN, "stream not in the trial");
    CHECK(rx_classify(-1, 0, slots, 1, &s) == RX_FOREIGN, "foreign wins over late");
    CHECK(rx_classify(0, 0, slots, 1, &s) == RX_LATE, "after the drain: late, group port");
    CHECK(rx_classify(0, 0, slots, 2, &s) == RX_LATE, "after the drain: late, other port too");

    /* 100000 frames of 256 flows hashed over the two members, each member in order: all received,
     * nothing lost, duplicated or reordered, both members carry a share */
    const uint64_t N = 100000;
    reset();
    for (uint64_t k = 0; k < N; k++) arrive(0, member_of(k, 256, g0), k);
    CHECK(acct[0].received == N && acct[0].duplicates == 0 && acct[0].reordered == 0 && acct[0].seq_gaps == 0,
          "spread over 2 members: rx %llu dup %llu reord %llu gaps %llu", (unsigned long long)acct[0].received,
          (unsigned long long)acct[0].duplicates, (unsigned long long)acct[0].reordered,
          (unsigned long long)acct[0].seq_gaps);
    CHECK(by_slot[0][0] + by_slot[0][1] == N && by_slot[0][0] > N / 4 && by_slot[0][1] > N / 4,
          "per port: %llu on port 1, %llu on port 3", (unsigned long long)by_slot[0][0], (unsigned long long)by_slot[0][1]);
    CHECK(misrouted[0] == 0, "nothing misrouted");
    /* the same frames in two separate sequence states (one per port, as without groups) would each
     * see the other member's frames as holes: that is why a group shares one state */
    seqacct_t sep[2];
    seqacct_reset(&sep[0], 0, NULL, NULL);
    seqacct_reset(&sep[1], 0, NULL, NULL);
    for (uint64_t k = 0; k < N; k++) seqacct_add(&sep[member_of(k, 256, g0) == 1 ? 0 : 1], k, k, 0);
    CHECK(sep[0].seq_gaps > 0 && sep[1].seq_gaps > 0, "per-port states see gaps (%llu, %llu)",
          (unsigned long long)sep[0].seq_gaps, (unsigned long long)sep[1].seq_gaps);

    /* a member that is slower: frame 5 (member A) arrives after 6..9 (member B) -> reordered, not lost */
    reset();
    for (uint64_t k = 0; k < 5; k++) arrive(0, 1, k);
    for (uint64_t k = 6; k < 10; k++) arrive(0, 3, k);
    arrive(0, 1, 5);
    for (uint64_t k = 10; k < 20; k++) arrive(0, (uint16_t)(k & 1 ? 3 : 1), k);
    CHECK(acct[0].received == 20 && acct[0].reordered == 1 && acct[0].duplicates == 0,
          "overtaken across members: rx %llu reordered %llu", (unsigned long long)acct[0].received,
          (unsigned long long)acct[0].reordered);
    int64_t fl, ll;
    seqacct_loss_times(&acct[0], 20, 0, 1900, &fl, &ll);
    CHECK(fl == -1 && ll == -1, "no loss time when every frame came back");
    /* a copy on both members (a flood) is a duplicate of the stream, not a second reception */
    arrive(0, 1, 20);
    arrive(0, 3, 20);
    CHECK(acct[0].received == 21 && acct[0].duplicates == 1, "copy on both members: dup %llu",
          (unsigned long long)acct[0].duplicates);
    CHECK(by_slot[0][0] + by_slot[0][1] == 22, "per-port counts include the copy");
    /* outside the group: misrouted, and the stream's frame is lost */
    arrive(0, 2, 21);
    CHECK(misrouted[0] == 1 && acct[0].received == 21 && mis_port[2] == 1, "port 2: misrouted, not received");
    /* streams stay apart: stream 1's frames on its own group */
    arrive(1, 0, 0);
    arrive(1, 2, 1);
    CHECK(acct[1].received == 2 && acct[0].received == 21 && by_slot[1][0] == 1 && by_slot[1][1] == 1,
          "stream 1 counted on its own group");

    /* the lcore rule */
    char err[512];
    int lc[RXG_MAX_PORTS];
    for (int i = 0; i < RXG_MAX_PORTS; i++) lc[i] = 1;
    CHECK(rxgroup_check_lcores(g0, 2, lc, err, sizeof(err)) == 0, "one lcore polls both");
    lc[3] = 2;
    err[0] = 0;
    CHECK(rxgroup_check_lcores(g0, 2, lc, err, sizeof(err)) == -1 && !strncmp(err, "rx_ports:", 9) &&
          strstr(err, "lcore 1") && strstr(err, "lcore 2") && strstr(err, "--rx-lcores"), "two lcores refused: %s", err);
    CHECK(rxgroup_check_lcores(g2, 1, lc, err, sizeof(err)) == 0, "a group of one port: no rule");
    const int g3[] = { 1, 3 };
    lc[3] = RXG_SPLIT;
    CHECK(rxgroup_check_lcores(g3, 2, lc, err, sizeof(err)) == -1 && strstr(err, "port 3") && strstr(err, "several"),
          "a port whose queues are split: %s", err);
    lc[3] = RXG_NOT_POLLED;
    CHECK(rxgroup_check_lcores(g3, 2, lc, err, sizeof(err)) == -1 && strstr(err, "not polled"), "unpolled: %s", err);
    multi_lcore_checks();
    return DONE();
}
