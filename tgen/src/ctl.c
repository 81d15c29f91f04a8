/* Control: newline-delimited JSON-RPC 2.0 over a Unix socket (and optional TCP with a token).
 * Runs on the main lcore as an ordinary thread sleeping in poll(). */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include <errno.h>
#include <poll.h>
#include <time.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <rte_ethdev.h>
#include "tgen.h"

#define MAX_LINE (1u << 20)
#define MAX_CLIENTS 16
#define UNIX_RESERVED 4                      /* slots only Unix-socket clients may use */
#define MAX_TCP_CLIENTS (MAX_CLIENTS - UNIX_RESERVED)

struct client {
    int fd;
    int is_tcp;
    int authed;
    char *buf;
    size_t len;
    double since_s;         /* accepted at (monotonic) */
    double last_s;          /* last bytes received at */
};

static double auth_timeout_s = CTL_AUTH_TIMEOUT_S, idle_timeout_s = CTL_IDLE_TIMEOUT_S;

static int unix_fd = -1, tcp_fd = -1;
static char unix_path[108];
static char tcp_token[256];
static struct client clients[MAX_CLIENTS];
static int ctl_exit;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void ctl_set_timeouts(double auth_s, double idle_s)
{
    auth_timeout_s = auth_s;
    idle_timeout_s = idle_s;
}

#define RFAIL(c, ...) do { e->code = (c); snprintf(e->msg, sizeof(e->msg), __VA_ARGS__); return NULL; } while (0)

int ctl_listen_unix(const char *path, char *err, size_t errlen)
{
    struct sockaddr_un a;
    if (strlen(path) >= sizeof(a.sun_path)) { snprintf(err, errlen, "--socket: path too long (max %zu)", sizeof(a.sun_path) - 1); return -1; }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) { snprintf(err, errlen, "--socket: socket(): %s", strerror(errno)); return -1; }
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    struct stat stt;
    if (lstat(path, &stt) == 0 && S_ISSOCK(stt.st_mode)) unlink(path);
    mode_t old = umask(0077);
    int rc = bind(fd, (struct sockaddr *)&a, sizeof(a));
    umask(old);
    if (rc) { snprintf(err, errlen, "--socket: bind %s: %s", path, strerror(errno)); close(fd); return -1; }
    chmod(path, 0600);
    if (listen(fd, 16)) { snprintf(err, errlen, "--socket: listen: %s", strerror(errno)); close(fd); return -1; }
    unix_fd = fd;
    snprintf(unix_path, sizeof(unix_path), "%s", path);
    return 0;
}

int ctl_listen_tcp(const char *hp, const char *token, char *err, size_t errlen)
{
    char host[128] = "127.0.0.1";
    const char *colon = strrchr(hp, ':');
    const char *portstr = hp;
    if (colon) {
        size_t hl = (size_t)(colon - hp);
        if (hl >= sizeof(host)) { snprintf(err, errlen, "--tcp: host too long"); return -1; }
        if (hl) { memcpy(host, hp, hl); host[hl] = 0; }
        portstr = colon + 1;
    }
    char *end;
    long port = strtol(portstr, &end, 10);
    if (*portstr == 0 || *end || port < 1 || port > 65535) { snprintf(err, errlen, "--tcp: '%s' is not HOST:PORT", hp); return -1; }
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) { snprintf(err, errlen, "--tcp: '%s' is not an IPv4 address", host); return -1; }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 16)) {
        snprintf(err, errlen, "--tcp: bind/listen %s:%ld: %s", host, port, strerror(errno));
        close(fd);
        return -1;
    }
    tcp_fd = fd;
    snprintf(tcp_token, sizeof(tcp_token), "%s", token);
    return 0;
}

void ctl_close(void)
{
    for (int i = 0; i < MAX_CLIENTS; i++) if (clients[i].fd > 0) { close(clients[i].fd); free(clients[i].buf); clients[i].fd = 0; }
    if (unix_fd >= 0) { close(unix_fd); unlink(unix_path); unix_fd = -1; }
    if (tcp_fd >= 0) { close(tcp_fd); tcp_fd = -1; }
}

/* ---- methods ---- */

static int get_id_param(json_t *p, const char *k, int *id, rpc_err_t *e, int required)
{
    json_t *j = p ? json_object_get(p, k) : NULL;
    if (!j || json_is_null(j)) {
        if (required) { e->code = -32602; snprintf(e->msg, sizeof(e->msg), "%s: required", k); return -1; }
        *id = -1;
        return 0;
    }
    if (!json_is_integer(j) || json_integer_value(j) < 0 || json_integer_value(j) > 1000000) {
        e->code = -32602; snprintf(e->msg, sizeof(e->msg), "%s: must be a non-negative integer", k); return -1;
    }
    *id = (int)json_integer_value(j);
    return 0;
}

static int check_idle(rpc_err_t *e)
{
    if (trial_active()) { e->code = -32000; snprintf(e->msg, sizeof(e->msg), "state: not allowed while a trial is %s", phase_name[g_phase]); return -1; }
    return 0;
}

static void assign_txq(struct stream *s)
{
    unsigned n = 0;
    for (unsigned i = 0; i < MAX_STREAM_ID; i++)
        if (g_streams[i] && g_streams[i] != s && g_streams[i]->sc.port == s->sc.port) n++;
    s->txq = (uint16_t)(n % g_ports[s->sc.port].txq);
}

static json_t *do_stream_parse(json_t *input, uint16_t id, struct stream **out, rpc_err_t *e)
{
    static portinfo_t pi[MAX_PORTS];
    ports_fill_info(pi);
    struct stream *s = calloc(1, sizeof(*s));
    if (!s) RFAIL(-32603, "out of memory");
    int rc = streamcfg_parse(input, pi, (int)g_nports, id, &s->sc, e->msg, sizeof(e->msg));
    if (!rc) {
        int lc[MAX_PORTS];
        for (unsigned q = 0; q < MAX_PORTS; q++) lc[q] = q < g_nports ? g_ports[q].rx_lcore : RXG_NOT_POLLED;
        rc = rxgroup_check_lcores(s->sc.rx_ports, s->sc.n_rx_ports, lc, e->msg, sizeof(e->msg));
    }
    if (rc || stream_build(s, e->msg, sizeof(e->msg))) {
        e->code = rc == -2 ? -32001 : -32602;
        stream_free(s);
        return NULL;
    }
    s->input = json_incref(input);
    *out = s;
    return streamcfg_to_json(&s->sc);
}

static json_t *m_stream_add(json_t *p, rpc_err_t *e)
{
    if (check_idle(e)) return NULL;
    if (!p || !json_is_object(p)) RFAIL(-32602, "params: must be a stream object");
    if (json_object_get(p, "id")) RFAIL(-32602, "id: stream.add assigns the id; use stream.modify to change a stream");
    int id = -1;
    for (int i = 0; i < MAX_STREAM_ID; i++) if (!g_streams[i]) { id = i; break; }
    if (id < 0) RFAIL(-32000, "streams: all %d stream ids are in use", MAX_STREAM_ID);
    json_t *copy = json_deep_copy(p);
    struct stream *s = NULL;
    json_t *r = do_stream_parse(copy, (uint16_t)id, &s, e);
    json_decref(copy);
    if (!r) return NULL;
    json_decref(r);
    g_streams[id] = s;
    assign_txq(s);
    return json_pack("{si}", "stream_id", id);
}

static json_t *m_stream_modify(json_t *p, rpc_err_t *e)
{
    int id;
    if (check_idle(e) || get_id_param(p, "id", &id, e, 1)) return NULL;
    if (id >= MAX_STREAM_ID || !g_streams[id]) RFAIL(-32001, "id: no stream %d", id);
    json_t *merged = json_deep_copy(g_streams[id]->input);
    json_object_update(merged, p);
    json_object_del(merged, "id");
    struct stream *s = NULL;
    json_t *r = do_stream_parse(merged, (uint16_t)id, &s, e);
    json_decref(merged);
    if (!r) return NULL;
    stream_free(g_streams[id]);
    g_streams[id] = s;
    assign_txq(s);
    return r;
}

static json_t *m_stream_remove(json_t *p, rpc_err_t *e)
{
    if (check_idle(e)) return NULL;
    json_t *all = p ? json_object_get(p, "all") : NULL;
    if (all && json_is_true(all)) {
        for (int i = 0; i < MAX_STREAM_ID; i++) if (g_streams[i]) { stream_free(g_streams[i]); g_streams[i] = NULL; }
        return json_pack("{sb}", "ok", 1);
    }
    int id;
    if (get_id_param(p, "id", &id, e, 1)) return NULL;
    if (id >= MAX_STREAM_ID || !g_streams[id]) RFAIL(-32001, "id: no stream %d", id);
    stream_free(g_streams[id]);
    g_streams[id] = NULL;
    return json_pack("{sb}", "ok", 1);
}

static json_t *m_stream_list(json_t *p, rpc_err_t *e)
{
    json_t *a = json_array();
    for (int i = 0; i < MAX_STREAM_ID; i++) {
        if (!g_streams[i]) continue;
        json_t *o = streamcfg_to_json(&g_streams[i]->sc);
        json_object_set_new(o, "txq", json_integer(g_streams[i]->txq));
        json_array_append_new(a, o);
    }
    return a;
}

static json_t *per_port(json_t *p, rpc_err_t *e, json_t *(*f)(unsigned), const char *key)
{
    int port;
    if (get_id_param(p, "port", &port, e, 0)) return NULL;
    if (port >= 0) {
        if ((unsigned)port >= g_nports) RFAIL(-32001, "port: unknown port %d (%u ports)", port, g_nports);
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer(port));
        json_object_set_new(o, key, f((unsigned)port));
        return o;
    }
    json_t *a = json_array();
    for (unsigned q = 0; q < g_nports; q++) {
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer(q));
        json_object_set_new(o, key, f(q));
        json_array_append_new(a, o);
    }
    return a;
}

json_t *rpc_dispatch(const char *m, json_t *p, int *authed, int is_tcp, rpc_err_t *e)
{
    e->code = 0;
    e->msg[0] = 0;
    if (p && json_is_null(p)) p = NULL;
    if (p && !json_is_object(p)) {
        if (json_is_array(p) && json_array_size(p) == 0) p = NULL;
        else RFAIL(-32602, "params: must be an object");
    }
    if (!strcmp(m, "auth")) {
        json_t *t = p ? json_object_get(p, "token") : NULL;
        if (!is_tcp) return json_pack("{sb}", "ok", 1);
        if (!t || !json_is_string(t)) RFAIL(-32602, "token: required (string)");
        const char *a = json_string_value(t);
        size_t la = strlen(a), lb = strlen(tcp_token);
        unsigned diff = (unsigned)(la ^ lb);
        for (size_t i = 0; i < la; i++) diff |= (unsigned char)a[i] ^ (unsigned char)tcp_token[i % (lb ? lb : 1)];
        if (diff || lb == 0) RFAIL(-32003, "token: wrong token");
        *authed = 1;
        return json_pack("{sb}", "ok", 1);
    }
    if (is_tcp && !*authed) RFAIL(-32003, "not authenticated: send auth {token} first");
    if (!strcmp(m, "ping")) return json_pack("{sbsssIsIsO}", "pong", 1, "version", TGEN_VERSION, "tsc_hz", (json_int_t)g_tsc_hz,
                                             "tsc_hz_dpdk", (json_int_t)g_tsc_hz_dpdk, "tsc_calibration", g_tsc_cal);
    if (!strcmp(m, "ports.list")) return port_list_json();
    if (!strcmp(m, "port.stats")) return per_port(p, e, port_stats_json, "stats");
    if (!strcmp(m, "port.xstats")) return per_port(p, e, port_xstats_json, "xstats");
    if (!strcmp(m, "stats.reset")) {
        int port;
        if (get_id_param(p, "port", &port, e, 0)) return NULL;
        if (port >= 0 && (unsigned)port >= g_nports) RFAIL(-32001, "port: unknown port %d", port);
        for (unsigned q = 0; q < g_nports; q++)
            if (port < 0 || (unsigned)port == q) { rte_eth_stats_reset((uint16_t)q); rte_eth_xstats_reset((uint16_t)q); }
        return json_pack("{sb}", "ok", 1);
    }
    if (!strcmp(m, "stream.add")) return m_stream_add(p, e);
    if (!strcmp(m, "stream.modify")) return m_stream_modify(p, e);
    if (!strcmp(m, "stream.remove")) return m_stream_remove(p, e);
    if (!strcmp(m, "stream.list")) return m_stream_list(p, e);
    if (!strcmp(m, "stream.stats")) {
        int id;
        if (get_id_param(p, "id", &id, e, 0)) return NULL;
        return trial_stream_stats(id, e);
    }
    if (!strcmp(m, "trial.start")) {
        if (trial_start(p, e)) return NULL;
        json_t *ids = json_array();
        for (unsigned i = 0; i < g_trial->nstreams; i++) json_array_append_new(ids, json_integer(g_trial->ts[i].sid));
        return json_pack("{sbso}", "ok", 1, "streams", ids);
    }
    if (!strcmp(m, "trial.status")) return trial_status();
    if (!strcmp(m, "trial.stop")) { trial_stop(); return json_pack("{sb}", "ok", 1); }
    if (!strcmp(m, "trial.result")) return trial_result(e);
    if (!strcmp(m, "shutdown")) { ctl_exit = 1; trial_shutdown(); return json_pack("{sb}", "ok", 1); }
    RFAIL(-32601, "method not found: %.80s", m);
}

/* ---- framing ---- */

static void send_line(int fd, json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);
    if (!s) return;
    size_t n = strlen(s);
    s[n] = '\n';
    size_t off = 0;
    while (off < n + 1) {
        ssize_t w = send(fd, s + off, n + 1 - off, MSG_NOSIGNAL);
        if (w < 0) { if (errno == EINTR) continue; break; }
        off += (size_t)w;
    }
    free(s);
}

static json_t *err_obj(json_t *id, int code, const char *msg)
{
    json_t *e = json_object();
    json_object_set_new(e, "code", json_integer(code));
    json_object_set_new(e, "message", json_string(msg));
    /* field name = message prefix before ':' if it looks like a field path */
    const char *c = strchr(msg, ':');
    if (c && c != msg && (size_t)(c - msg) < 80 && !memchr(msg, ' ', (size_t)(c - msg))) {
        json_t *d = json_object();
        json_object_set_new(d, "field", json_stringn(msg, (size_t)(c - msg)));
        json_object_set_new(e, "data", d);
    }
    json_t *r = json_object();
    json_object_set_new(r, "jsonrpc", json_string("2.0"));
    json_object_set_new(r, "id", id ? json_incref(id) : json_null());
    json_object_set_new(r, "error", e);
    return r;
}

static void handle_line(struct client *c, const char *line, size_t len)
{
    json_error_t je;
    while (len && (line[len - 1] == '\r' || line[len - 1] == ' ')) len--;
    if (len == 0) return;
    json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    json_t *resp = NULL;
    if (!req) {
        char m[300];
        snprintf(m, sizeof(m), "parse error: %s", je.text);
        resp = err_obj(NULL, -32700, m);
        send_line(c->fd, resp);
        json_decref(resp);
        return;
    }
    json_t *id = json_is_object(req) ? json_object_get(req, "id") : NULL;
    if (id && !(json_is_string(id) || json_is_integer(id) || json_is_real(id) || json_is_null(id))) id = NULL;
    int notify = json_is_object(req) && !json_object_get(req, "id");
    if (json_is_array(req)) {
        resp = err_obj(NULL, -32600, "invalid request: batches are not supported");
    } else if (!json_is_object(req)) {
        resp = err_obj(NULL, -32600, "invalid request: not a JSON object");
    } else {
        json_t *ver = json_object_get(req, "jsonrpc"), *meth = json_object_get(req, "method");
        json_t *params = json_object_get(req, "params");
        if (!ver || !json_is_string(ver) || strcmp(json_string_value(ver), "2.0"))
            resp = err_obj(id, -32600, "invalid request: jsonrpc must be \"2.0\"");
        else if (!meth || !json_is_string(meth))
            resp = err_obj(id, -32600, "invalid request: method must be a string");
        else if (json_object_get(req, "id") && !id)
            resp = err_obj(NULL, -32600, "invalid request: id must be a string, number or null");
        else {
            rpc_err_t e;
            json_t *res = rpc_dispatch(json_string_value(meth), params, &c->authed, c->is_tcp, &e);
            if (res) {
                resp = json_object();
                json_object_set_new(resp, "jsonrpc", json_string("2.0"));
                json_object_set_new(resp, "id", json_incref(id));
                json_object_set_new(resp, "result", res);
            } else {
                resp = err_obj(id, e.code ? e.code : -32603, e.msg[0] ? e.msg : "internal error");
            }
        }
    }
    if (!notify && resp) send_line(c->fd, resp);
    json_decref(resp);
    json_decref(req);
}

static void drop_client(struct client *c)
{
    close(c->fd);
    free(c->buf);
    memset(c, 0, sizeof(*c));
}

static void client_read(struct client *c)
{
    if (!c->buf) c->buf = malloc(MAX_LINE + 1);
    if (!c->buf) { drop_client(c); return; }
    ssize_t n = recv(c->fd, c->buf + c->len, MAX_LINE + 1 - c->len, 0);
    if (n <= 0) { if (n < 0 && (errno == EINTR || errno == EAGAIN)) return; drop_client(c); return; }
    c->last_s = mono_s();
    c->len += (size_t)n;
    size_t start = 0;
    for (size_t i = c->len - (size_t)n; i < c->len; i++) {
        if (c->buf[i] == '\n') {
            handle_line(c, c->buf + start, i - start);
            if (c->fd <= 0) return;
            start = i + 1;
        }
    }
    if (start) { memmove(c->buf, c->buf + start, c->len - start); c->len -= start; }
    if (c->len > MAX_LINE) {
        json_t *r = err_obj(NULL, -32600, "invalid request: line longer than 1 MiB; closing the connection");
        send_line(c->fd, r);
        json_decref(r);
        drop_client(c);
    }
}

/* tell a client why it is being closed (id null: not an answer to a request), then close.
 * Best effort and never blocking: a peer that does not read must not stall the control loop. */
static void refuse(int fd, int code, const char *msg)
{
    json_t *r = err_obj(NULL, code, msg);
    char *s = json_dumps(r, JSON_COMPACT);
    json_decref(r);
    if (s) {
        size_t n = strlen(s);
        s[n] = '\n';
        ssize_t w = send(fd, s, n + 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)w;
        free(s);
    }
    close(fd);
}

static void accept_on(int lfd, int is_tcp)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) return;
    struct timeval tv = { .tv_sec = 5, .tv_usec = 0 };
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int ntcp = 0, slot = -1;
    for (int i = 0; i < MAX_CLIENTS; i++) {
        if (clients[i].fd > 0) ntcp += clients[i].is_tcp;
        else if (slot < 0) slot = i;
    }
    if (slot < 0 || (is_tcp && ntcp >= MAX_TCP_CLIENTS)) {
        char m[160];
        snprintf(m, sizeof(m), "connections: all %d %s client slots are in use; closing the connection",
                 is_tcp ? MAX_TCP_CLIENTS : MAX_CLIENTS, is_tcp ? "TCP" : "control");
        refuse(fd, -32000, m);
        return;
    }
    struct client *c = &clients[slot];
    c->fd = fd;
    c->is_tcp = is_tcp;
    c->authed = !is_tcp;
    c->len = 0;
    c->since_s = c->last_s = mono_s();
}

/* TCP clients that did not authenticate in time, or stayed silent too long, give their slot back */
static void evict_idle_clients(void)
{
    double now = mono_s();
    for (int i = 0; i < MAX_CLIENTS; i++) {
        struct client *c = &clients[i];
        if (c->fd <= 0 || !c->is_tcp) continue;
        char m[160];
        if (!c->authed && now - c->since_s >= auth_timeout_s)
            snprintf(m, sizeof(m), "not authenticated within %g s (send auth {token} first); closing the connection", auth_timeout_s);
        else if (idle_timeout_s > 0 && now - c->last_s >= idle_timeout_s)
            snprintf(m, sizeof(m), "idle: no request for %g s; closing the connection", idle_timeout_s);
        else
            continue;
        free(c->buf);
        int fd = c->fd;
        memset(c, 0, sizeof(*c));
        refuse(fd, -32003, m);
    }
}

void ctl_loop(void)
{
    while (!ctl_exit && !__atomic_load_n(&g_quit, __ATOMIC_ACQUIRE)) {
        struct pollfd pf[MAX_CLIENTS + 2];
        int map[MAX_CLIENTS + 2];
        int n = 0;
        if (unix_fd >= 0) { pf[n].fd = unix_fd; pf[n].events = POLLIN; map[n++] = -1; }
        if (tcp_fd >= 0) { pf[n].fd = tcp_fd; pf[n].events = POLLIN; map[n++] = -2; }
        for (int i = 0; i < MAX_CLIENTS; i++)
            if (clients[i].fd > 0) { pf[n].fd = clients[i].fd; pf[n].events = POLLIN; map[n++] = i; }
        int timeout = trial_active() ? 2 : 100;
        int r = poll(pf, (nfds_t)n, timeout);
        if (r > 0) {
            for (int i = 0; i < n; i++) {
                if (!pf[i].revents) continue;
                if (map[i] == -1) accept_on(unix_fd, 0);
                else if (map[i] == -2) accept_on(tcp_fd, 1);
                else if (clients[map[i]].fd > 0) {
                    if (pf[i].revents & (POLLIN | POLLHUP | POLLERR)) client_read(&clients[map[i]]);
                }
                if (ctl_exit) break;
            }
        }
        evict_idle_clients();
        trial_tick();
    }
}
