/*
 * hold.h - the raised samples of in-flight requests, held per trace until
 * the request's fate is known (docs/triggers.md, "Raised sampling without
 * counting a sample twice").
 *
 * Data flow: the agent hands every raised sample (TP_SAMPLE_RAISED, with
 * its trace id and stack id) to hold_add(), which counts it per trace under
 * (source, span, stack, Hz). When the trigger engine knows a request's
 * fate it calls hold_decide(): kept (a trigger id) emits the trace's counts
 * as store sample rows through the on_rows callback, one row per (source,
 * span, Hz) with its stacks and counts; dropped (NULL) forgets them.
 * hold_tick() drops traces without a decision timeout_us after their last
 * sample. The memory held is bounded (max_bytes): past it the traces whose
 * last sample is oldest are dropped. Every drop is counted.
 *
 * Workload: hundreds of raised samples per second per node, a few hundred
 * traces in flight, a few hundred distinct stacks per trace; a trace's
 * counts are a small array searched from the end (hot stacks repeat).
 *
 * Not thread-safe: one thread adds, decides and ticks. int functions return
 * 0 (or a count) or -errno.
 */
#ifndef TRACEPROF_AGENT_HOLD_H
#define TRACEPROF_AGENT_HOLD_H

#include <stddef.h>
#include <stdint.h>

#include "aggregate.h" /* struct agg_sample */
#include "traceprof/store.h"

#define HOLD_DEFAULT_BYTES	(16u << 20)	 /* max_bytes when 0 */
#define HOLD_DEFAULT_TIMEOUT_US (60 * 1000000LL) /* timeout_us when 0 */
#define HOLD_BUCKET_US		(60 * 1000000LL) /* rows' bucket: the first sample's minute */

struct hold_opts {
	size_t max_bytes;   /* memory for held traces; 0: HOLD_DEFAULT_BYTES */
	int64_t timeout_us; /* undecided trace dropped this long after its last sample; 0: 60 s */
};

/*
 * A kept trace's rows, one call per (source, span, Hz). trigger_id and row
 * (with its stacks and counts) are borrowed for the call.
 */
typedef void (*hold_rows_fn)(void *ctx, const char *trigger_id, const struct store_sample_row *row);

struct hold_stats {
	uint64_t samples;	  /* samples added */
	uint64_t samples_refused; /* not added: no trace id, bad Hz, or larger than the bound */
	uint64_t traces;	  /* traces started */
	uint64_t traces_kept;	  /* decided: kept (rows emitted) */
	uint64_t traces_dropped;  /* decided: dropped */
	uint64_t traces_evicted;  /* dropped, oldest beyond max_bytes */
	uint64_t traces_expired;  /* dropped, no decision within timeout_us */
	uint64_t decide_unknown;  /* decisions for a trace not held */
	uint64_t samples_kept;	  /* samples in emitted rows */
	uint64_t samples_lost;	  /* samples of dropped, evicted and expired traces */
	uint64_t rows;		  /* rows emitted */
	uint64_t held_traces;	  /* traces held now */
	uint64_t held_bytes;	  /* bytes held now */
};

struct hold;

/* A new, empty hold (opts NULL: defaults); NULL with errno set. Free with hold_free. */
struct hold *hold_new(const struct hold_opts *opts, hold_rows_fn on_rows, void *ctx);
/* Frees h and what it holds (no rows emitted); NULL is a no-op. */
void hold_free(struct hold *h);

/*
 * Counts one raised sample under its trace (s->trace_id not all zero, s->hz
 * 1..1000). -EINVAL for an untagged sample or a bad Hz, -ENOSPC when the
 * trace alone would exceed max_bytes, -ENOMEM; all counted in
 * samples_refused.
 */
int hold_add(struct hold *h, const struct agg_sample *s);
/*
 * The fate of trace trace_id: trigger_id kept (its rows go to on_rows
 * tagged with trigger_id), NULL dropped. Either way the trace is
 * forgotten. Returns the number of its samples, or -ENOENT when it is not
 * held (never sampled, decided already, expired or evicted).
 */
int hold_decide(struct hold *h, const uint8_t trace_id[16], const char *trigger_id);
/* Drops the traces whose last sample is timeout_us or more before now_us (CLOCK_REALTIME µs). */
void hold_tick(struct hold *h, int64_t now_us);

void hold_get_stats(const struct hold *h, struct hold_stats *st);

#endif
