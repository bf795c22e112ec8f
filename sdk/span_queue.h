/*
 * span_queue.h - the bounded span queue: a multi-producer single-consumer
 * ring of sequence-numbered slots, one cache line each (one
 * compare-and-swap claims a slot, a release store publishes it), and the
 * table of span names the slots point into. Many request threads produce
 * (spans.c), the exporter thread consumes (span_export.c). Internal to the
 * SDK; queue_claim and queue_len are inline, so the request path claims a
 * slot without a call.
 */
#ifndef TRACEPROF_SDK_SPAN_QUEUE_H
#define TRACEPROF_SDK_SPAN_QUEUE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "sdk_internal.h"

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/*
 * Names: each distinct (method, route) pair, as cut to TP_SPAN_METHOD_SIZE
 * and TP_SPAN_ROUTE_SIZE, gets an entry in a table that lives as long as
 * the process, and a span carries the entry's index. Routes are templates
 * (OpenTelemetry's http.route), so a service has tens of pairs; the table
 * holds NAMES_CAP. An entry is claimed with a compare-and-swap (free ->
 * busy), written, and published (busy -> ready, release); it never changes
 * again, so the exporter reads it without a lock. Two threads adding the
 * same pair at once may make two entries for it: harmless. Each thread
 * remembers the entries of its last few (method, route) pointers, checked
 * against the strings every time (a caller's buffer may hold another name
 * the next time). A pair that finds no entry within NAMES_PROBE slots (the
 * table is full) is sent in full, in WIDE_EXTRA more slots after the span.
 */
#define NAMES_CAP   1024 /* a power of two */
#define NAMES_PROBE 16
#define NAME_WIDE   0xffff /* the names follow the span in WIDE_EXTRA slots */
#define WIDE_EXTRA  3
#define NAME_CACHE  4 /* per thread, a power of two */
#define NAME_FREE   0
#define NAME_BUSY   1
#define NAME_READY  2

struct name_entry {
	_Atomic uint32_t state;		  /* NAME_FREE, NAME_BUSY, NAME_READY */
	uint32_t hash;			  /* of the cut strings */
	char method[TP_SPAN_METHOD_SIZE]; /* NUL-terminated */
	char route[TP_SPAN_ROUTE_SIZE];	  /* NUL-terminated */
};

/* The table; entries are added by the request path (spans.c). */
extern TP_SDK_HIDDEN struct name_entry tp_span_names[NAMES_CAP];

/*
 * One queue slot, one cache line: seq says whose turn it is (see
 * queue_claim); the span, its names by index. A producer filling one never
 * shares a line with the exporter reading its neighbour.
 */
struct slot {
	_Alignas(64) _Atomic uint64_t seq; /* pos + 1: the span of pos is in the slot */
	uint8_t trace_id[16];		   /* the trace */
	uint8_t span_id[8];		   /* this span */
	uint8_t parent_span_id[8];	   /* zero for a root span */
	int64_t start_unix_ns;		   /* wall-clock start */
	int64_t end_unix_ns;		   /* start + the CLOCK_MONOTONIC duration */
	int32_t status_code;		   /* HTTP status; 0 unknown */
	uint16_t name;			   /* tp_span_names[] index, or NAME_WIDE */
	uint8_t trace_flags;		   /* W3C trace flags */
};
_Static_assert(sizeof(struct slot) == 64, "a slot is one cache line");

/* The names of a NAME_WIDE span, in the payload of the WIDE_EXTRA slots after it. */
struct wide_names {
	char method[TP_SPAN_METHOD_SIZE];
	char route[TP_SPAN_ROUTE_SIZE];
};
#define WIDE_CHUNK (sizeof(struct slot) - sizeof(uint64_t)) /* payload bytes per extra slot */
_Static_assert(WIDE_EXTRA *WIDE_CHUNK >= sizeof(struct wide_names), "room for the names");

/* The bounded MPSC ring. */
struct queue {
	uint32_t cap;			    /* slots, a power of two */
	uint32_t mask;			    /* cap - 1: a position's slot without a division */
	struct slot *slots;		    /* cap slots, owned */
	_Alignas(64) _Atomic uint64_t head; /* next position to claim (producers) */
	_Alignas(64) _Atomic uint64_t tail; /* next position to read (the exporter) */
	/*
	 * A recent tail, on a line producers only read: a slot is free when
	 * its position is less than tail_hint + cap. A producer that finds the
	 * queue full by the hint reads tail and refreshes the hint (about once
	 * per lap), so producers never load a slot's line or the tail line
	 * that the exporter writes.
	 */
	_Alignas(64) _Atomic uint64_t tail_hint;
};

/* A queue of cap slots (a power of two), empty; NULL when out of memory. */
TP_SDK_HIDDEN struct queue *tp_span_queue_new(uint32_t cap);
/* Empties q; no other thread may use it meanwhile (the child after fork). */
TP_SDK_HIDDEN void tp_span_queue_reset(struct queue *q);
/* Takes the oldest span into *out (the exporter only); false when none is ready. */
TP_SDK_HIDDEN bool tp_span_queue_pop(struct queue *q, struct tp_span_rec *out);

/*
 * Claims n consecutive positions for a producer (1, or 1 + WIDE_EXTRA):
 * the first one's slot, or NULL when full. The slots are free because the
 * exporter has taken position pos + n - 1 - cap: the hint (or tail) read
 * with acquire says so. Nothing of the slot is read, so filling it costs
 * stores only, which do not wait for the line to arrive.
 */
static inline struct slot *queue_claim(struct queue *q, uint32_t n, uint64_t *pos_out)
{
	uint64_t pos = atomic_load_explicit(&q->head, memory_order_relaxed);

	for (;;) {
		uint64_t hint = atomic_load_explicit(&q->tail_hint, memory_order_acquire);

		/* signed: a stale pos may be behind the hint; the exchange then fails */
		if (unlikely((int64_t)(pos + n - 1 - hint) >= (int64_t)q->cap)) {
			uint64_t t = atomic_load_explicit(&q->tail, memory_order_acquire);

			if ((int64_t)(pos + n - 1 - t) >= (int64_t)q->cap) {
				if (atomic_load_explicit(&q->head, memory_order_relaxed) == pos)
					return NULL; /* the slot of pos - cap is still unread */
				pos = atomic_load_explicit(&q->head, memory_order_relaxed);
				continue;
			}
			/* concurrent producers may store an older tail: still a safe bound */
			atomic_store_explicit(&q->tail_hint, t, memory_order_release);
		}
		if (atomic_compare_exchange_weak_explicit(
			&q->head, &pos, pos + n, memory_order_relaxed, memory_order_relaxed)) {
			*pos_out = pos;
			return &q->slots[pos & q->mask];
		}
	}
}

static inline uint64_t queue_len(struct queue *q)
{
	uint64_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
	uint64_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);

	return h > t ? h - t : 0;
}

#endif
