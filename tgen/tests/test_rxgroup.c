/* Receive groups: classification by port, one sequence state per stream across the group's ports
 * (as worker.c keeps it), the lcore rule. */
#include <string.h>
#include "harness.h"
#include "seq.h"
#include "rxgroup.h"

/* what worker.c does with one arriving test frame of trial stream ti on `port` */
static seqacct_t acct[3];
static uint64_t by_slot[3][MAX_RX_GROUP], misrouted[3];
static int8_t slots[3 * RXG_MAX_PORTS];

static void arrive(int32_t ti, uint16_t port, uint64_t seq)
{
    int slot = -1;
    switch (rx_classify(ti, 1, slots, port, &slot)) {
    case RX_MISROUTED: misrouted[ti]++; return;
    case RX_ACCOUNT: by_slot[ti][slot]++; seqacct_add(&acct[ti], seq, seq * 100, 1000); return;
    default: return;
    }
}

static void reset(void)
{
    for (int i = 0; i < 3; i++) seqacct_reset(&acct[i], 0, NULL, NULL);
    memset(by_slot, 0, sizeof(by_slot));
    memset(misrouted, 0, sizeof(misrouted));
}

/* a bond's member choice: a hash of the flow (frame k carries flow k % flows) */
static uint16_t member_of(uint64_t seq, unsigned flows, const int *group)
{
    uint32_t f = (uint32_t)(seq % flows);
    uint32_t h = f * 2654435761u;
    return (uint16_t)group[(h >> 16) & 1];
}

int main(void)
{
    /* trial streams: 0: port 0 -> group {1, 3} (a bond's members); 1: port 1 -> group {0, 2};
     * 2: port 0 -> plain rx_port 1 (a group of one) */
    const int g0[] = { 1, 3 }, g1[] = { 0, 2 }, g2[] = { 1 };
    rxgroup_slots(g0, 2, slots);
    rxgroup_slots(g1, 2, slots + RXG_MAX_PORTS);
    rxgroup_slots(g2, 1, slots + 2 * RXG_MAX_PORTS);
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
    CHECK(misrouted[0] == 1 && acct[0].received == 21, "port 2: misrouted, not received");
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
    return DONE();
}
