/* tiny test harness: CHECK(cond, fmt...) counts passes/failures; DONE() prints the closing line */
#ifndef TGEN_HARNESS_H
#define TGEN_HARNESS_H
#include <stdio.h>
static int h_pass, h_fail;
#define CHECK(c, ...) do { if (c) h_pass++; else { h_fail++; fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #c); fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } } while (0)
#define DONE() (printf("%d passed, %d failed\n", h_pass, h_fail), h_fail ? 1 : 0)
#endif
