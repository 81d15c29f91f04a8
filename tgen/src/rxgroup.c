#include "rxgroup.h"
#include <stdio.h>
#include <string.h>

void rxgroup_slots(const int *ports, int n, int8_t *slot)
{
    memset(slot, -1, RXG_MAX_PORTS);
    for (int i = 0; i < n && i < MAX_RX_GROUP; i++)
        if (ports[i] >= 0 && ports[i] < RXG_MAX_PORTS) slot[ports[i]] = (int8_t)i;
}

int rxgroup_check_lcores(const int *ports, int n, const int *port_lcore, char *err, size_t errlen)
{
    if (n < 2) return 0;
    for (int i = 0; i < n; i++) {
        int l = port_lcore[ports[i]];
        if (l == RXG_NOT_POLLED) {
            snprintf(err, errlen, "rx_ports: port %d is not polled (its --port option says rx=0); every "
                     "port of a receive group must be", ports[i]);
            return -1;
        }
        if (l == RXG_SPLIT) {
            snprintf(err, errlen, "rx_ports: port %d's RX queues are polled by several lcores; a receive "
                     "group's ports must all be polled by one lcore, so the stream's sequence state sees "
                     "every frame (give --rx-lcores one lcore, or rxq=1 on the group's ports)", ports[i]);
            return -1;
        }
    }
    for (int i = 1; i < n; i++) {
        if (port_lcore[ports[i]] != port_lcore[ports[0]]) {
            snprintf(err, errlen, "rx_ports: port %d is polled by lcore %d and port %d by lcore %d; a "
                     "receive group's ports must all be polled by one lcore, so the stream's sequence state "
                     "sees every frame (give --rx-lcores one lcore)", ports[0], port_lcore[ports[0]],
                     ports[i], port_lcore[ports[i]]);
            return -1;
        }
    }
    return 0;
}
