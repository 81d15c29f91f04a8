/* Loss over time: per-interval frames sent and received (see ivals.h). */
#include <string.h>
#include "ivals.h"

void ivals_start(ivals_t *iv, uint64_t interval_cyc, uint64_t start_cyc)
{
    memset(iv, 0, sizeof(*iv));
    iv->every_cyc = interval_cyc;
    iv->start_cyc = start_cyc;
    iv->next_cyc = start_cyc + interval_cyc;
}

/* full: merge pairs, double the interval */
static void halve(ivals_t *iv)
{
    unsigned m = 0;
    for (unsigned i = 0; i + 1 < iv->n; i += 2, m++) {
        iv->sent[m] = iv->sent[i] + iv->sent[i + 1];
        iv->recv[m] = iv->recv[i] + iv->recv[i + 1];
    }
    if (iv->n & 1) { iv->sent[m] = iv->sent[iv->n - 1]; iv->recv[m] = iv->recv[iv->n - 1]; m++; }
    iv->n = m;
    iv->every_cyc *= 2;
    iv->next_cyc = iv->start_cyc + (uint64_t)(iv->n + 1) * iv->every_cyc;
}

static void push(ivals_t *iv, uint64_t sent, uint64_t recv)
{
    if (iv->n == IVALS_MAX) halve(iv);
    iv->sent[iv->n] = sent >= iv->last_sent ? sent - iv->last_sent : 0;
    iv->recv[iv->n] = recv >= iv->last_recv ? recv - iv->last_recv : 0;
    iv->last_sent = sent > iv->last_sent ? sent : iv->last_sent;
    iv->last_recv = recv > iv->last_recv ? recv : iv->last_recv;
    iv->n++;
    iv->next_cyc = iv->start_cyc + (uint64_t)(iv->n + 1) * iv->every_cyc;
}

void ivals_tick(ivals_t *iv, uint64_t now, uint64_t sent, uint64_t recv)
{
    if (!iv->every_cyc) return;
    while (now >= iv->next_cyc) push(iv, sent, recv);
}

void ivals_finish(ivals_t *iv, uint64_t now, uint64_t sent, uint64_t recv)
{
    if (!iv->every_cyc) return;
    ivals_tick(iv, now, sent, recv);
    if (sent != iv->last_sent || recv != iv->last_recv) push(iv, sent, recv);
}

json_t *ivals_json(const ivals_t *iv, uint64_t tsc_hz)
{
    if (!iv->every_cyc || !tsc_hz) return NULL;
    json_t *o = json_object(), *s = json_array(), *r = json_array(), *l = json_array();
    for (unsigned i = 0; i < iv->n; i++) {
        json_array_append_new(s, json_integer((json_int_t)iv->sent[i]));
        json_array_append_new(r, json_integer((json_int_t)iv->recv[i]));
        json_array_append_new(l, json_integer((json_int_t)iv->sent[i] - (json_int_t)iv->recv[i]));
    }
    json_object_set_new(o, "interval_ms", json_real((double)iv->every_cyc * 1e3 / (double)tsc_hz));
    json_object_set_new(o, "sent", s);
    json_object_set_new(o, "received", r);
    json_object_set_new(o, "lost", l);
    return o;
}
