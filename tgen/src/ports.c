/* Port set-up, link and counters. */
#include <stdio.h>
#include <string.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_lcore.h>
#include <net/if.h>
#include "tgen.h"
#include "txoff.h"

static double link_speed(unsigned p)
{
    struct rte_eth_link l;
    memset(&l, 0, sizeof(l));
    if (rte_eth_link_get_nowait((uint16_t)p, &l) != 0) return 0;
    if (l.link_speed == RTE_ETH_SPEED_NUM_NONE || l.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN) return 0;
    return (double)l.link_speed * 1e6;
}

double port_link_speed_bps(unsigned p) { return link_speed(p); }

double port_speed_bps(unsigned p)
{
    if (g_ports[p].speed_decl > 0) return g_ports[p].speed_decl;
    return link_speed(p);
}

static void tag_clear(struct rte_mempool *mp, void *opaque, void *obj, unsigned idx)
{
    (void)mp; (void)opaque; (void)idx;
    *mbuf_tmpl_tag(obj) = 0;
}

/* the TX pools' dynamic field (tgen.h); without it (-1) TX copies every frame from the main pools */
static void tag_field_register(void)
{
    static const struct rte_mbuf_dynfield desc = { .name = "tgen_tmpl_tag", .size = sizeof(uint64_t),
                                                   .align = __alignof__(uint64_t) };
    int off = rte_mbuf_dynfield_register(&desc);
    if (off < 0) {
        fprintf(stderr, "tgen: no mbuf dynamic field for the TX pool (%s): every frame is copied whole\n", rte_strerror(rte_errno));
        return;
    }
    g_tmpl_tag_off = off;
}

/* a TX pool of n mbufs on socket sock, every tag clear (NULL, said on stderr, when it cannot be made) */
static struct rte_mempool *txpool_create(const char *name, size_t n, unsigned room, int sock)
{
    if (g_tmpl_tag_off < 0) return NULL;
    struct rte_mempool *mp = rte_pktmbuf_pool_create(name, (unsigned)n, 256, 0, (uint16_t)room, sock);
    if (!mp) {
        fprintf(stderr, "tgen: no TX pool of %zu mbufs on socket %d (%s): every frame is copied whole from the main pool\n",
                n, sock, rte_strerror(rte_errno));
        return NULL;
    }
    rte_mempool_obj_iter(mp, tag_clear, NULL);
    return mp;
}

/* One main pool (RX, small frames, learning frames) and one TX pool per NUMA socket of the ports:
 * the NIC fills its RX ring and reads its TX mbufs in its own socket's memory.  Ports on the main
 * lcore's socket, or of unknown socket, use g_pool / g_txpool; a port on another socket gets that
 * socket's pools, sized for that socket's ports (the main lcore's when they cannot be made, said
 * on stderr). */
static void socket_pools_create(unsigned room)
{
    static struct { struct rte_mempool *pool, *txpool; int made; } sp[RTE_MAX_NUMA_NODES];
    int main_sock = (int)rte_socket_id();
    for (unsigned p = 0; p < g_nports; p++) {
        struct port *pt = &g_ports[p];
        int sock = rte_eth_dev_socket_id((uint16_t)p);
        pt->socket = sock;
        pt->rx_pool = g_pool;
        pt->tx_pool = g_txpool;
        if (sock < 0 || sock == main_sock || sock >= RTE_MAX_NUMA_NODES) continue;
        if (!sp[sock].made) {
            sp[sock].made = 1;
            size_t n = 4096 + (size_t)rte_lcore_count() * 512, ntx = n;
            for (unsigned o = 0; o < g_nports; o++)
                if (rte_eth_dev_socket_id((uint16_t)o) == sock) {
                    n += (size_t)g_ports[o].rxq * (g_ports[o].rxd + BURST) + (size_t)g_ports[o].txq * (g_ports[o].txd + BURST);
                    ntx += (size_t)g_ports[o].txq * (g_ports[o].txd + 2 * BURST);
                }
            char name[32];
            snprintf(name, sizeof(name), "tgen_pool_s%d", sock);
            sp[sock].pool = rte_pktmbuf_pool_create(name, (unsigned)n, 256, 0, (uint16_t)room, sock);
            if (!sp[sock].pool)
                fprintf(stderr, "tgen: port %u is on NUMA socket %d, but no mbuf pool could be made there (%s): "
                        "it uses the pools on socket %d\n", p, sock, rte_strerror(rte_errno), main_sock);
            else {
                if (g_tmpl_tag_off >= 0) rte_mempool_obj_iter(sp[sock].pool, tag_clear, NULL);
                snprintf(name, sizeof(name), "tgen_txpool_s%d", sock);
                sp[sock].txpool = txpool_create(name, ntx, room, sock);
            }
        }
        if (sp[sock].pool) { pt->rx_pool = sp[sock].pool; pt->tx_pool = sp[sock].txpool; }
    }
}

int ports_init(char *err, size_t errlen)
{
    unsigned max_frame = 0;
    size_t need = 0, need_tx = 0;
    for (unsigned p = 0; p < g_nports; p++) {
        struct port *pt = &g_ports[p];
        unsigned f = pt->mtu + 18 + 4 + VXLAN_OVERHEAD;
        if (f > max_frame) max_frame = f;
        need += (size_t)pt->rxq * pt->rxd + (size_t)pt->txq * (pt->txd + BURST);
        need_tx += (size_t)pt->txq * (pt->txd + 2 * BURST);
    }
    need += 8192 + (size_t)rte_lcore_count() * 512;
    /* +64: the frame builder copies in 32-byte blocks past the frame end */
    unsigned room = RTE_PKTMBUF_HEADROOM + (max_frame < 2048 ? 2048 : max_frame) + 64;
    if (room > UINT16_MAX) room = UINT16_MAX;
    if (!g_pool) {
        g_pool = rte_pktmbuf_pool_create("tgen_pool", (unsigned)need, 256, 0, (uint16_t)room, (int)rte_socket_id());
        if (!g_pool) {
            snprintf(err, errlen, "cannot create mbuf pool of %zu mbufs x %u B: %s (more hugepages, or --mbufs/--no-huge -m)",
                     need, room, rte_strerror(rte_errno));
            return -1;
        }
    }
#ifndef TGEN_NO_TXPOOL
    tag_field_register();
    if (g_tmpl_tag_off >= 0) rte_mempool_obj_iter(g_pool, tag_clear, NULL);   /* main-pool mbufs carry the tag too (tgen.h) */
    if (!g_txpool) g_txpool = txpool_create("tgen_txpool", need_tx + 4096 + (size_t)rte_lcore_count() * 512, room, (int)rte_socket_id());
#else
    (void)need_tx; (void)txpool_create; (void)tag_field_register;
#endif
    socket_pools_create(room);
    for (unsigned p = 0; p < g_nports; p++) {
        struct port *pt = &g_ports[p];
        uint16_t id = (uint16_t)p;
        struct rte_eth_dev_info info;
        int rc = rte_eth_dev_info_get(id, &info);
        if (rc) { snprintf(err, errlen, "port %u: dev_info_get failed: %s", p, rte_strerror(-rc)); return -1; }
        snprintf(pt->driver, sizeof(pt->driver), "%s", info.driver_name ? info.driver_name : "?");
        /* virtio's TX frames are copied out by the vhost backend on another core: a main-pool mbuf
         * that core has just filled on RX is in its cache, a TX-pool mbuf's payload may not be */
        if (pt->tx_reuse < 0) pt->tx_reuse = strstr(pt->driver, "virtio") != NULL;
        if (pt->remote < 0)
            pt->remote = !(strstr(pt->driver, "memif") || strstr(pt->driver, "af_packet") ||
                           strstr(pt->driver, "ring") || strstr(pt->driver, "null"));
        /* the kernel interface's own TX counters say what it really sent (af_packet, af_xdp; a tap's
         * or a PCI NIC's interface counters mean something else or nothing) */
        pt->if_index = (strstr(pt->driver, "af_packet") || strstr(pt->driver, "af_xdp")) ? info.if_index : 0;
        pt->tx_offload_capa = info.tx_offload_capa;
        rte_eth_dev_get_name_by_port(id, pt->name);
        if (pt->rxq > info.max_rx_queues || pt->txq > info.max_tx_queues) {
            snprintf(err, errlen, "--port %u: rxq=%u txq=%u, but the device allows at most %u/%u", p, pt->rxq, pt->txq,
                     info.max_rx_queues, info.max_tx_queues);
            return -1;
        }
        /* TX offloads (txoff.h): checksums where the port computes them, fast free where every
         * mbuf on its queues can come from its socket's TX pool */
        txoff_in_t oi = { .ipv4_cksum = !!(info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM),
                          .udp_cksum = !!(info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_UDP_CKSUM),
                          .fast_free = !!(info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE),
                          .cksum_allowed = pt->cksum_allowed,
                          .one_pool = pt->tx_pool != NULL && g_tmpl_tag_off >= 0 && pt->tx_reuse <= 0 };
        txoff_out_t oo;
        txoff_decide(&oi, &oo);
        pt->cksum_hw = oo.cksum_hw;
        pt->fast_free = oo.fast_free;
        snprintf(pt->txoff_note, sizeof(pt->txoff_note), "%s", oo.note);
        struct rte_eth_conf conf;
        memset(&conf, 0, sizeof(conf));
        if (pt->cksum_hw) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
        if (pt->fast_free) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
        if (pt->mtu > 1500) conf.rxmode.mtu = pt->mtu;
        if (pt->rxq > 1) {
            uint64_t hf = (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP) & info.flow_type_rss_offloads;
            if (hf) {
                conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
                conf.rx_adv_conf.rss_conf.rss_hf = hf;
            }
        }
        rc = rte_eth_dev_configure(id, (uint16_t)pt->rxq, (uint16_t)pt->txq, &conf);
        if (rc) { snprintf(err, errlen, "port %u (%s): configure failed: %s", p, pt->name, rte_strerror(-rc)); return -1; }
        uint16_t rxd = (uint16_t)pt->rxd, txd = (uint16_t)pt->txd;
        rte_eth_dev_adjust_nb_rx_tx_desc(id, &rxd, &txd);
        pt->rxd = rxd;
        pt->txd = txd;
        for (unsigned q = 0; q < pt->rxq; q++) {
            rc = rte_eth_rx_queue_setup(id, (uint16_t)q, rxd, rte_eth_dev_socket_id(id), NULL, pt->rx_pool);
            if (rc) { snprintf(err, errlen, "port %u: rx queue %u setup failed: %s", p, q, rte_strerror(-rc)); return -1; }
        }
        for (unsigned q = 0; q < pt->txq; q++) {
            rc = rte_eth_tx_queue_setup(id, (uint16_t)q, txd, rte_eth_dev_socket_id(id), NULL);
            if (rc) { snprintf(err, errlen, "port %u: tx queue %u setup failed: %s", p, q, rte_strerror(-rc)); return -1; }
        }
        if (pt->mtu != 1500) {
            rc = rte_eth_dev_set_mtu(id, (uint16_t)pt->mtu);
            if (rc && rc != -ENOTSUP)
                fprintf(stderr, "tgen: port %u: set mtu %u: %s (continuing)\n", p, pt->mtu, rte_strerror(-rc));
        }
        rc = rte_eth_dev_start(id);
        if (rc) { snprintf(err, errlen, "port %u (%s): start failed: %s", p, pt->name, rte_strerror(-rc)); return -1; }
        pt->started = 1;
        if (pt->promisc) {
            rc = rte_eth_promiscuous_enable(id);
            if (rc && rc != -ENOTSUP) fprintf(stderr, "tgen: port %u: promiscuous: %s\n", p, rte_strerror(-rc));
        }
        struct rte_ether_addr a;
        rte_eth_macaddr_get(id, &a);
        memcpy(pt->mac, a.addr_bytes, 6);
        pt->used = 1;
        pt->id = id;
    }
    g_main_tags = 0;
    for (unsigned p = 0; p < g_nports; p++) if (g_ports[p].tx_reuse > 0) g_main_tags = g_tmpl_tag_off >= 0;
    /* the RX loop reads port.remote per queue (the workers' queues were assigned before) */
    for (unsigned w = 0; w < g_nworkers; w++)
        for (unsigned q = 0; q < g_workers[w].nrxq; q++) {
            struct rxq_ref *r = &g_workers[w].rxq[q];
            r->prefetch = g_ports[r->port].remote;
            r->pool = g_ports[r->port].rx_pool;
            r->txpool = g_ports[r->port].tx_pool;
        }
    return 0;
}

void ports_fill_info(portinfo_t *pi)
{
    for (unsigned p = 0; p < MAX_PORTS; p++) {
        memset(&pi[p], 0, sizeof(pi[p]));
        if (p >= g_nports) continue;
        pi[p].exists = 1;
        memcpy(pi[p].mac, g_ports[p].mac, 6);
        pi[p].speed_bps = port_speed_bps(p);
        pi[p].mtu = g_ports[p].mtu;
    }
}

json_t *port_list_json(void)
{
    json_t *a = json_array();
    for (unsigned p = 0; p < g_nports; p++) {
        struct port *pt = &g_ports[p];
        struct rte_eth_link l;
        memset(&l, 0, sizeof(l));
        rte_eth_link_get_nowait((uint16_t)p, &l);
        char mac[18];
        fmt_mac(pt->mac, mac);
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer(p));
        json_object_set_new(o, "name", json_string(pt->name));
        json_object_set_new(o, "driver", json_string(pt->driver));
        json_object_set_new(o, "mac", json_string(mac));
        json_object_set_new(o, "link_up", json_boolean(l.link_status));
        json_object_set_new(o, "link_speed_bps", json_real(link_speed(p)));
        json_object_set_new(o, "speed_bps", json_real(port_speed_bps(p)));
        json_object_set_new(o, "rxq", json_integer(pt->rxq));
        json_object_set_new(o, "txq", json_integer(pt->txq));
        json_object_set_new(o, "rxd", json_integer(pt->rxd));
        json_object_set_new(o, "txd", json_integer(pt->txd));
        json_object_set_new(o, "mtu", json_integer(pt->mtu));
        json_object_set_new(o, "promisc", json_boolean(rte_eth_promiscuous_get((uint16_t)p) == 1));
        json_object_set_new(o, "rx", json_boolean(pt->rx_poll));
        json_object_set_new(o, "tx_reuse", json_boolean(pt->tx_reuse > 0));
        json_object_set_new(o, "prefetch", json_boolean(pt->remote));
        /* the worker lcore of each TX queue and of each polled RX queue */
        json_t *tl = json_array(), *rl = json_array();
        for (unsigned q = 0; q < pt->txq; q++) json_array_append_new(tl, json_integer(g_workers[pt->tx_lcore[q]].lcore));
        for (unsigned q = 0; q < pt->rxq; q++)
            if (pt->rxq_worker[q] >= 0) json_array_append_new(rl, json_integer(g_workers[pt->rxq_worker[q]].lcore));
        json_object_set_new(o, "tx_lcores", tl);
        json_object_set_new(o, "rx_lcores", rl);
        /* NUMA: the port's socket and its pools' (socket_pools_create) */
        json_object_set_new(o, "socket", json_integer(pt->socket));
        json_object_set_new(o, "pool_socket", json_integer(pt->rx_pool ? pt->rx_pool->socket_id : -1));
        json_object_set_new(o, "tx_pool_socket", json_integer(pt->tx_pool ? pt->tx_pool->socket_id : -1));
        /* TX offloads the port offers and those tgen enabled (txoff.h), with what is done in
         * software instead and why */
        json_t *off = json_array(), *used = json_array();
        uint64_t on = (pt->cksum_hw ? RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM : 0) |
                      (pt->fast_free ? RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE : 0);
        for (unsigned b = 0; b < 64; b++) {
            if (pt->tx_offload_capa & (1ULL << b)) json_array_append_new(off, json_string(rte_eth_dev_tx_offload_name(1ULL << b)));
            if (on & (1ULL << b)) json_array_append_new(used, json_string(rte_eth_dev_tx_offload_name(1ULL << b)));
        }
        json_object_set_new(o, "tx_offloads_offered", off);
        json_object_set_new(o, "tx_offloads_used", used);
        json_object_set_new(o, "tx_cksum", json_string(pt->cksum_hw ? "offload" : "software"));
        json_object_set_new(o, "tx_offload_note", pt->txoff_note[0] ? json_string(pt->txoff_note) : json_null());
        json_array_append_new(a, o);
    }
    return a;
}

json_t *port_stats_json(unsigned p)
{
    struct rte_eth_stats s;
    memset(&s, 0, sizeof(s));
    rte_eth_stats_get((uint16_t)p, &s);
    json_t *o = json_object();
    json_object_set_new(o, "ipackets", json_integer((json_int_t)s.ipackets));
    json_object_set_new(o, "opackets", json_integer((json_int_t)s.opackets));
    json_object_set_new(o, "ibytes", json_integer((json_int_t)s.ibytes));
    json_object_set_new(o, "obytes", json_integer((json_int_t)s.obytes));
    json_object_set_new(o, "imissed", json_integer((json_int_t)s.imissed));
    json_object_set_new(o, "ierrors", json_integer((json_int_t)s.ierrors));
    json_object_set_new(o, "oerrors", json_integer((json_int_t)s.oerrors));
    json_object_set_new(o, "rx_nombuf", json_integer((json_int_t)s.rx_nombuf));
    return o;
}

json_t *port_xstats_json(unsigned p)
{
    json_t *o = json_object();
    int n = rte_eth_xstats_get_names((uint16_t)p, NULL, 0);
    if (n <= 0) return o;
    struct rte_eth_xstat_name *names = calloc((size_t)n, sizeof(*names));
    struct rte_eth_xstat *vals = calloc((size_t)n, sizeof(*vals));
    if (names && vals && rte_eth_xstats_get_names((uint16_t)p, names, (unsigned)n) == n) {
        int m = rte_eth_xstats_get((uint16_t)p, vals, (unsigned)n);
        for (int i = 0; i < m && i < n; i++)
            if (vals[i].id < (uint64_t)n)
                json_object_set_new(o, names[vals[i].id].name, json_integer((json_int_t)vals[i].value));
    }
    free(names);
    free(vals);
    return o;
}

/* /proc/self/net/dev (this process's network namespace): "  name: rx_bytes rx_packets rx_errs
 * rx_drop rx_fifo rx_frame rx_compressed rx_multicast tx_bytes tx_packets tx_errs tx_drop ..." */
static int iface_tx(const char *ifname, uint64_t *pk, uint64_t *drop, uint64_t *errs)
{
    FILE *f = fopen("/proc/self/net/dev", "r");
    if (!f) return -1;
    char line[512];
    int found = -1;
    size_t n = strlen(ifname);
    while (fgets(line, sizeof(line), f)) {
        char *s = line;
        while (*s == ' ') s++;
        if (strncmp(s, ifname, n) || s[n] != ':') continue;
        unsigned long long v[12];
        if (sscanf(s + n + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
                   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11]) == 12) {
            *pk = v[9];
            *errs = v[10];
            *drop = v[11];
            found = 0;
        }
        break;
    }
    fclose(f);
    return found;
}

void port_tx_counters(unsigned p, struct port_txc *c)
{
    memset(c, 0, sizeof(*c));
    struct rte_eth_stats s;
    memset(&s, 0, sizeof(s));
    if (rte_eth_stats_get((uint16_t)p, &s) == 0) {
        c->pmd_ok = 1;
        c->opackets = s.opackets;
        c->oerrors = s.oerrors;
    }
    if (g_ports[p].if_index && if_indextoname(g_ports[p].if_index, c->ifname) &&
        iface_tx(c->ifname, &c->if_tx_packets, &c->if_tx_dropped, &c->if_tx_errors) == 0)
        c->if_ok = 1;
}

void ports_close(void)
{
    for (unsigned p = 0; p < g_nports; p++) {
        if (g_ports[p].started) {
            rte_eth_dev_stop((uint16_t)p);
            rte_eth_dev_close((uint16_t)p);
            g_ports[p].started = 0;
        }
    }
}
