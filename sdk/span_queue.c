/*
 * span_queue.c - the bounded span queue (span_queue.h): its allocation,
 * its reset, and the exporter's side, taking spans out.
 */
#include <stdlib.h>
#include <string.h>

#include "span_queue.h"

void tp_span_queue_reset(struct queue *q)
{
	for (uint32_t i = 0; i < q->cap; i++)
		atomic_store_explicit(&q->slots[i].seq, 0, memory_order_relaxed);
	atomic_store(&q->head, 0);
	atomic_store(&q->tail, 0);
	atomic_store(&q->tail_hint, 0);
}

struct queue *tp_span_queue_new(uint32_t cap)
{
	struct queue *q = aligned_alloc(64, sizeof(*q));

	if (!q)
		return NULL;
	memset(q, 0, sizeof(*q));
	q->cap = cap;
	q->mask = cap - 1;
	q->slots = aligned_alloc(_Alignof(struct slot), (size_t)cap * sizeof(*q->slots));
	if (!q->slots) {
		free(q);
		return NULL;
	}
	memset(q->slots, 0, (size_t)cap * sizeof(*q->slots));
	tp_span_queue_reset(q);
	return q;
}

/*
 * Takes the oldest span into *out (the exporter only); false when none is
 * ready. Its names come from the table (published before the span, whose
 * seq was read with acquire) or from the slots after it.
 */
bool tp_span_queue_pop(struct queue *q, struct tp_span_rec *out)
{
	uint64_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed), next = pos + 1;
	const struct slot *s = &q->slots[pos & q->mask];

	if (atomic_load_explicit(&s->seq, memory_order_acquire) != pos + 1)
		return false;
	memcpy(out->trace_id, s->trace_id, 16);
	memcpy(out->span_id, s->span_id, 8);
	memcpy(out->parent_span_id, s->parent_span_id, 8);
	out->trace_flags = s->trace_flags;
	out->start_unix_ns = s->start_unix_ns;
	out->end_unix_ns = s->end_unix_ns;
	out->status_code = s->status_code;
	if (likely(s->name < NAMES_CAP)) {
		memcpy(out->method, tp_span_names[s->name].method, sizeof(out->method));
		memcpy(out->route, tp_span_names[s->name].route, sizeof(out->route));
	} else {
		struct wide_names w;

		for (size_t k = 0; k < WIDE_EXTRA; k++) {
			size_t off = k * WIDE_CHUNK, len = sizeof(w) - off;

			if (off >= sizeof(w))
				break;
			memcpy((char *)&w + off,
			       (const char *)&q->slots[(pos + 1 + k) & q->mask] + 8,
			       len < WIDE_CHUNK ? len : WIDE_CHUNK);
		}
		memcpy(out->method, w.method, sizeof(out->method));
		memcpy(out->route, w.route, sizeof(out->route));
		out->method[sizeof(out->method) - 1] = out->route[sizeof(out->route) - 1] = '\0';
		next = pos + 1 + WIDE_EXTRA;
	}
	/* release: the copy is done before a producer, seeing tail, reuses the slots */
	atomic_store_explicit(&q->tail, next, memory_order_release);
	return true;
}
