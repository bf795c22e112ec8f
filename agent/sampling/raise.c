/*
 * raise.c - raised sampling in the agent (raise.h): the engine's raise
 * switches the sampler, its verdicts reach the hold through a bounded
 * ring, kept traces' rows go to the shipper in their own windows.
 */
#include "raise.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shipper.h"
#include "traceprof/log.h"
#include "triggers.h"
#include "zc_owners.h"

/* A kept trace's rows; the integration with the store writes them to trigger_samples. */
static void on_hold_rows(void *ctx, const char *trigger_id, const struct store_sample_row *row)
{
	struct raise *r = ctx;
	struct agg_window *w;

	r->hold_rows++;
	log_debug("trigger rows trigger=%s span=%016" PRIx64 " hz=%u stacks=%u", trigger_id,
		  row->span_id, row->hz, row->n);
	/* its own window with the stacks it needs: base windows may not carry them */
	w = agg_trigger_window(r->agg, trigger_id, row, 1);
	if (w)
		shipper_submit(r->shipper, w);
	else
		r->hold_rows_lost++;
}

int raise_init(struct raise *r, size_t hold_bytes)
{
	pthread_mutex_init(&r->raise_lock, NULL);
	pthread_mutex_init(&r->decide_lock, NULL);
	r->cpus_online = (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
	r->hold = hold_new(&(struct hold_opts){.max_bytes = hold_bytes}, on_hold_rows, r);
	return r->hold ? 0 : -ENOMEM;
}

void raise_free(struct raise *r)
{
	hold_free(r->hold);
	r->hold = NULL;
	pthread_mutex_destroy(&r->raise_lock);
	pthread_mutex_destroy(&r->decide_lock);
}

/*
 * The engine's raise: which processes are sampled at which raised rate.
 * Called from whichever thread changed the engine's state (the control
 * server's, the main loop's tick, the claim worker's), with the engine's
 * lock held; the sampler's switches are map updates and ioctls, serialized
 * by raise_lock. A rate at or below the base rate raises nothing: the base
 * events already sample those threads that often.
 */
/*
 * New targets' unwind tables are asked for by the main loop at once,
 * rather than at their first sample it reads (seconds later when the
 * ring fills slowly): a trigger wants their stacks now.
 */
static void queue_targets(struct raise *r, const uint32_t *tgids, size_t n)
{
	pthread_mutex_lock(&r->decide_lock);
	for (size_t i = 0; i < n && r->nnote < RAISE_NOTE_MAX; i++)
		r->note[r->nnote++] = tgids[i];
	pthread_mutex_unlock(&r->decide_lock);
	if (n)
		sampler_wake(r->sampler);
}

size_t raise_take_targets(struct raise *r, uint32_t *tgids, size_t max)
{
	size_t n;

	pthread_mutex_lock(&r->decide_lock);
	n = r->nnote < max ? r->nnote : max;
	memcpy(tgids, r->note, n * sizeof(*tgids));
	memmove(r->note, r->note + n, (r->nnote - n) * sizeof(*tgids));
	r->nnote -= n;
	pthread_mutex_unlock(&r->decide_lock);
	return n;
}

static void on_raise(void *ctx, const uint32_t *tgids, size_t n, unsigned hz)
{
	struct raise *r = ctx;
	unsigned want = hz > r->base_hz ? hz : 0;
	int err;

	pthread_mutex_lock(&r->raise_lock);
	if (!want || !n) {
		err = sampler_set_raised(r->sampler, 0);
		if (!err)
			err = sampler_set_raised_targets(r->sampler, NULL, 0);
	} else {
		/* targets first: raised events never run without their set */
		err = sampler_set_raised_targets(r->sampler, tgids, n);
		if (!err)
			err = sampler_set_raised(r->sampler, want);
	}
	if (err) {
		r->raise_errors++;
		log_warn("triggers: cannot raise sampling to %u Hz for %zu processes: %s", hz, n,
			 strerror(-err));
	} else {
		if (want && n)
			queue_targets(r, tgids, n);
		log_info("triggers: sampling %s", want && n ? "raised" : "back at the base rate");
		log_debug("triggers: raised hz=%u processes=%zu", want && n ? want : 0, n);
	}
	pthread_mutex_unlock(&r->raise_lock);
}

/* every threshold a trigger may carry is one the sampler accepts */
_Static_assert(TRIGGERS_OFFCPU_MIN_US >= SAMPLER_OFFCPU_MIN_US_LO &&
		   TRIGGERS_OFFCPU_MAX_US <= SAMPLER_OFFCPU_MIN_US_HI,
	       "trigger off-CPU thresholds within the sampler's");

/*
 * The engine's off-CPU set: the target processes of the active triggers
 * that ask for off-CPU capture, with the smallest threshold among them
 * (n 0: none). Called like on_raise; serialized by the same lock.
 */
static void on_offcpu(void *ctx, const uint32_t *tgids, size_t n, uint32_t min_us)
{
	struct raise *r = ctx;
	int err;

	pthread_mutex_lock(&r->raise_lock);
	err = sampler_set_offcpu_targets(r->sampler, tgids, n, min_us);
	if (err) {
		r->offcpu_errors++;
		log_warn("triggers: cannot capture off-CPU time of %zu processes: %s", n,
			 strerror(-err));
	} else {
		queue_targets(r, tgids, n);
		log_info("triggers: off-CPU capture %s", n ? "on for trigger targets" : "off");
		log_debug("triggers: off-CPU processes=%zu min_us=%u", n, min_us);
	}
	pthread_mutex_unlock(&r->raise_lock);
}

/*
 * The engine's verdict on one finished request of a target, from the
 * claim worker: queued for the main loop, which owns the hold.
 */
static void on_decision(void *ctx, const uint8_t trace_id[16], const char *trigger_id, bool keep)
{
	struct raise *r = ctx;
	struct raise_decision *d;
	bool first;

	pthread_mutex_lock(&r->decide_lock);
	if (r->ndecisions == RAISE_DECISIONS_MAX) {
		r->decisions_dropped++;
		pthread_mutex_unlock(&r->decide_lock);
		return;
	}
	d = &r->decisions[(r->decide_head + r->ndecisions) % RAISE_DECISIONS_MAX];
	memcpy(d->trace_id, trace_id, 16);
	d->keep = keep && trigger_id;
	snprintf(d->trigger_id, sizeof(d->trigger_id), "%s", d->keep ? trigger_id : "");
	first = r->ndecisions++ == 0;
	pthread_mutex_unlock(&r->decide_lock);
	/* the main loop reads the trace's samples still in the ring, then decides */
	if (first)
		sampler_wake(r->sampler);
}

/* Main loop: kept traces' raised samples become trigger rows, the others are dropped. */
void raise_apply_decisions(struct raise *r)
{
	for (;;) {
		struct raise_decision d;

		pthread_mutex_lock(&r->decide_lock);
		if (!r->ndecisions) {
			pthread_mutex_unlock(&r->decide_lock);
			return;
		}
		d = r->decisions[r->decide_head];
		r->decide_head = (r->decide_head + 1) % RAISE_DECISIONS_MAX;
		r->ndecisions--;
		pthread_mutex_unlock(&r->decide_lock);
		if (r->hold)
			hold_decide(r->hold, d.trace_id, d.keep ? d.trigger_id : NULL);
	}
}

void raise_expire(struct raise *r, int64_t now_us)
{
	hold_tick(r->hold, now_us);
}

/* Deadlines: every pass of the main loop (which wakes at the earliest one). */
void raise_tick(struct raise *r)
{
	if (r->trig)
		triggers_tick(r->trig);
}

/*
 * The sampler's figures, asked by the control thread when it answers a
 * status call (reading the BPF counters costs a per-CPU map copy: done on
 * demand, not every second). The sampler lives until after control stops.
 */
static void sampler_figures(void *ctx, struct triggers_sampler *ts)
{
	struct raise *r = ctx;
	struct sampler_stats ss = {0};

	sampler_get_stats(r->sampler, &ss);
	ts->running = true;
	ts->base_hz = r->base_hz;
	ts->cpus = r->cpus_online;
	ts->samples = ss.counters[TP_CNT_SAMPLES];
	ts->samples_raised = ss.counters[TP_CNT_RAISED];
	ts->samples_lost = ss.counters[TP_CNT_RINGBUF_FULL];
}

/*
 * The engine's zero-code set: the target processes of the active triggers
 * with spec.sampling.zeroCodeHTTP. Called like on_raise.
 */
static void on_zerocode(void *ctx, const uint32_t *tgids, size_t n)
{
	struct raise *r = ctx;

	pthread_mutex_lock(&r->raise_lock);
	if (!r->zc || zc_owners_set_triggers(r->zc, tgids, n) != 0) {
		r->zerocode_errors++;
		log_warn("triggers: cannot capture the HTTP requests of %zu processes", n);
	} else {
		queue_targets(r, tgids, n);
		log_info("triggers: zero-code HTTP %s", n ? "on for trigger targets" : "off");
	}
	pthread_mutex_unlock(&r->raise_lock);
}

void raise_trigger_opts(struct raise *r, struct triggers_opts *to)
{
	to->on_raise = on_raise;
	to->raise_ctx = r;
	to->on_offcpu = on_offcpu;
	to->offcpu_ctx = r;
	to->on_zerocode = on_zerocode;
	to->zerocode_ctx = r;
	to->on_decision = on_decision;
	to->decision_ctx = r;
	to->sampler_figures = sampler_figures;
	to->sampler_ctx = r;
}
