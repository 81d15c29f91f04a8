/* Receive groups (no DPDK): a stream's frames may come back on any port of its group (a LAG, an
 * OVS bond's members); they count for the stream on every port of the group, and loss,
 * duplicates, reordering and latency stay per stream.
 *
 * The lcore rule: a group of two or more ports is polled by ONE lcore (every RX queue of every
 * port of the group), so the stream's sequence state (one seqacct_t per stream and RX lcore) sees
 * all of the stream's frames in arrival order: a frame that overtakes another across members is
 * reordered, a copy that comes back on both members is a duplicate.  A group whose queues are
 * split over lcores is refused when the stream is defined (rxgroup_check_lcores); a single
 * rx_port may still spread its queues over lcores (their views are merged, as before).
 *
 * The RX path finds a frame's place in O(1): per trial stream a table of MAX_PORTS slots,
 * slot[port] = the port's index in the stream's group, -1 when the port is not in it. */
#ifndef TGEN_RXGROUP_H
#define TGEN_RXGROUP_H
#include <stddef.h>
#include <stdint.h>

#define RXG_MAX_PORTS 32      /* = MAX_PORTS of tgen.h */
#define MAX_RX_GROUP 8        /* ports in one receive group */

/* slot[0..RXG_MAX_PORTS-1] for a group of n ports (ports[i] < RXG_MAX_PORTS) */
void rxgroup_slots(const int *ports, int n, int8_t *slot);

/* Where a received test frame is counted.  ti: the trial's index of the frame's stream (-1: the
 * stream is not in the trial); accounting: the trial is learning/running/draining (not done);
 * slots: the trial's slot tables (RXG_MAX_PORTS per stream); port: the port the frame arrived on.
 * Only the port matters, not the queue or lcore: a stream's frames on any RX queue of any port of
 * its group are received (*slot = the port's index in the group), on any other port misrouted
 * (counted as lost for the stream). */
enum rx_class { RX_FOREIGN = 0, RX_LATE, RX_MISROUTED, RX_ACCOUNT };
static inline enum rx_class rx_classify(int32_t ti, int accounting, const int8_t *slots, uint16_t port,
                                        int *slot)
{
    if (ti < 0) return RX_FOREIGN;
    if (!accounting) return RX_LATE;
    int s = port < RXG_MAX_PORTS ? slots[(size_t)ti * RXG_MAX_PORTS + port] : -1;
    if (s < 0) return RX_MISROUTED;
    *slot = s;
    return RX_ACCOUNT;
}

/* port_lcore[p]: the lcore polling every RX queue of port p, RXG_NOT_POLLED when none does,
 * RXG_SPLIT when its queues are on several lcores.  Returns 0 when the group (n ports) may be
 * a receive group, else -1 with err = "rx_ports: why and the fix".  A group of one port is
 * always fine (that is a plain rx_port). */
#define RXG_NOT_POLLED (-1)
#define RXG_SPLIT (-2)
int rxgroup_check_lcores(const int *ports, int n, const int *port_lcore, char *err, size_t errlen);
#endif
