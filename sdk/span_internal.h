/*
 * span_internal.h - what the request path (spans.c) and the exporter
 * thread with its start and stop (span_export.c) share. Internal to the SDK.
 */
#ifndef TRACEPROF_SDK_SPAN_INTERNAL_H
#define TRACEPROF_SDK_SPAN_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sdk_internal.h"
#include "span_queue.h"

/*
 * What every span reads and the request path never writes, on its own cache
 * line: the exporter's counters and the producers' counters are elsewhere,
 * so neither side's writes take this line from the other.
 */
struct tp_span_rp {
	_Alignas(64) _Atomic(struct queue *) queue; /* NULL until the first start */
	atomic_bool autostart;			    /* span_end should start the exporter */
	_Atomic int64_t rt_offset_ns;		    /* CLOCK_REALTIME - CLOCK_MONOTONIC, ns */
	_Atomic int64_t rt_offset_at_ns; /* CLOCK_MONOTONIC of its last refresh; 0: never */
};
extern TP_SDK_HIDDEN struct tp_span_rp tp_span_rp; /* spans.c */

/*
 * Counted by the request path (tp_span_st_error by both sides: rare
 * there). Spans queued are not counted there: every position claimed in a
 * queue is one, but for the WIDE_EXTRA positions of a span whose names did
 * not fit the table (counted in wide_positions), so spans_ended =
 * ended_before + the current queue's head - wide_positions, and a span
 * costs no atomic add of its own. ended_before holds the heads of queues
 * that a restart with another size replaced.
 */
struct tp_span_prod_stats {
	_Alignas(64) _Atomic uint64_t ended_before; /* positions claimed in replaced queues */
	_Atomic uint64_t full;			    /* spans dropped: queue full */
	_Atomic uint64_t wide_positions;	    /* extra positions of wide spans */
};
extern TP_SDK_HIDDEN struct tp_span_prod_stats tp_span_st_prod; /* spans.c */

/* Spans dropped on an error: counted by the exporter, and by span_end when a start fails. */
extern TP_SDK_HIDDEN _Atomic uint64_t tp_span_st_error; /* span_export.c */

/*
 * Re-anchors the request path's clock and refreshes the wall-clock offset
 * (spans.c). Called by the exporter at every poll and at start.
 */
TP_SDK_HIDDEN void tp_span_clock_refresh(void);

/*
 * Starts the exporter, with the last start's settings or the defaults, when
 * tp_span_rp.autostart says so and none runs (span_export.c; span_end
 * calls it). One try: autostart is cleared whether it starts or fails.
 * Returns 0 or a negative errno.
 */
TP_SDK_HIDDEN int tp_span_try_autostart(void);

/* Copies at most size - 1 bytes of src and a NUL; NULL gives "". */
static inline void copy_str(char *dst, const char *src, size_t size)
{
	size_t i = 0;

	if (src)
		for (; i < size - 1 && src[i]; i++)
			dst[i] = src[i];
	dst[i] = '\0';
}

#endif
