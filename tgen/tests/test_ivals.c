/* Loss over time: intervals close on time, a late tick does not lose counts, the sums equal the
 * totals, a full array merges pairs and doubles the interval. */
#include "harness.h"
#include "ivals.h"

int main(void)
{
    static ivals_t iv;
    ivals_start(&iv, 100, 1000);              /* 100 cycles per interval from cycle 1000 */
    ivals_tick(&iv, 1050, 10, 9);             /* inside the first interval: nothing closes */
    CHECK(iv.n == 0, "%s", "");
    ivals_tick(&iv, 1100, 20, 18);            /* the first closes */
    CHECK(iv.n == 1 && iv.sent[0] == 20 && iv.recv[0] == 18, "%s", "");
    ivals_tick(&iv, 1350, 80, 60);            /* late: closes 2nd (all counts), 3rd and 4th (0) */
    CHECK(iv.n == 3 && iv.sent[1] == 60 && iv.recv[1] == 42 && iv.sent[2] == 0, "%s", "");
    ivals_finish(&iv, 1370, 90, 90);          /* the partial last interval: the rest */
    CHECK(iv.n == 4 && iv.sent[3] == 10 && iv.recv[3] == 30, "%s", "");
    uint64_t s = 0, r = 0;
    for (unsigned i = 0; i < iv.n; i++) { s += iv.sent[i]; r += iv.recv[i]; }
    CHECK(s == 90 && r == 90, "%s", "");
    json_t *j = ivals_json(&iv, 1000);        /* 1000 Hz: 100 cycles = 100 ms */
    CHECK(j && json_real_value(json_object_get(j, "interval_ms")) == 100.0, "%s", "");
    CHECK(json_integer_value(json_array_get(json_object_get(j, "lost"), 0)) == 2, "%s", "");
    CHECK(json_integer_value(json_array_get(json_object_get(j, "lost"), 3)) == -20, "%s", "");
    json_decref(j);

    ivals_start(&iv, 10, 0);
    for (uint64_t t = 10; t <= 10 * (IVALS_MAX + 2); t += 10) ivals_tick(&iv, t, t, t / 2);
    CHECK(iv.every_cyc == 20 && iv.n <= IVALS_MAX, "%s", "");
    s = 0;
    for (unsigned i = 0; i < iv.n; i++) s += iv.sent[i];
    CHECK(s == iv.last_sent && iv.sent[0] == 20, "%s", "");

    ivals_start(&iv, 0, 0);                   /* off */
    ivals_tick(&iv, 100, 1, 1);
    CHECK(iv.n == 0 && ivals_json(&iv, 1000) == NULL, "%s", "");
    return DONE();
}
