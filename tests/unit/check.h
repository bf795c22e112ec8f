/*
 * check.h - the smallest test harness: CHECK() records a failure with its
 * location and goes on; check_done() prints "N passed, N failed" and gives
 * the exit status for ctest.
 */
#ifndef TRACEPROF_CHECK_H
#define TRACEPROF_CHECK_H

#include <stdio.h>

extern int check_passed; /* checks that held */
extern int check_failed; /* checks that did not */

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (cond) {                                                                        \
			check_passed++;                                                            \
		} else {                                                                           \
			check_failed++;                                                            \
			fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond);            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
		}                                                                                  \
	} while (0)

int check_done(void);
/*
 * 77 (ctest's skip) with the reason printed when the BPF sampler cannot
 * load here (not root, no kernel BTF); 0 when it can.
 */
int check_skip_without_bpf(void);

#endif
