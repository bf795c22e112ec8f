/*
 * raise.h - raised sampling in the agent (docs/triggers.md): the glue
 * between the trigger engine, the sampler and the hold.
 *
 * The engine's raise (on whichever thread changed its state) switches the
 * sampler's raised events and their target set, and its off-CPU set (the
 * targets of active triggers with spec.sampling.offCPU) the sampler's
 * off-CPU targets. Raised samples are held
 * per trace (raise_hold, on the main loop) until the engine's verdict on
 * the request, which the claim worker queues in a bounded ring
 * (on_decision) for the main loop to apply (raise_apply_decisions): a kept
 * trace's samples become trigger rows in their own windows, queued for the
 * database; the others are dropped.
 */
#ifndef TRACEPROF_AGENT_RAISE_H
#define TRACEPROF_AGENT_RAISE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aggregate.h"
#include "hold.h"
#include "sampler.h"

struct shipper;
struct triggers;
struct triggers_opts;
struct zc_owners;

/* Targets queued for raise_take_targets (the sampler's largest target set). */
#define RAISE_NOTE_MAX TP_MAX_RAISED_TARGETS

/* The trigger engine's verdict on one request, on its way to the main loop. */
#define RAISE_DECISIONS_MAX 4096
struct raise_decision {
	uint8_t trace_id[16];
	bool keep;	      /* claimed: keep its raised samples */
	char trigger_id[201]; /* for keep */
};

struct raise {
	/* borrowed: set by the agent, alive until raise_free */
	struct sampler *sampler;
	struct agg *agg;	     /* builds the kept traces' windows */
	struct shipper *shipper;     /* queues them */
	struct triggers *trig;	     /* ticked by raise_tick, or NULL */
	struct zc_owners *zc;	     /* the triggers' zero-code targets go there, or NULL */
	unsigned base_hz;	     /* the base sampling rate */
	uint32_t cpus_online;	     /* at start: sysconf reads sysfs every call */
	struct hold *hold;	     /* raised samples per trace, until decided */
	pthread_mutex_t raise_lock;  /* serializes on_raise's sampler switches */
	pthread_mutex_t decide_lock; /* guards the decisions ring */
	struct raise_decision decisions[RAISE_DECISIONS_MAX]; /* claim worker -> main loop */
	size_t decide_head;				      /* oldest queued decision */
	size_t ndecisions;				      /* queued */
	/*
	 * Processes that became raised or off-CPU targets, for the main loop
	 * to ask their unwind tables for at once (raise_take_targets), under
	 * decide_lock; beyond RAISE_NOTE_MAX they wait for their first sample.
	 */
	uint32_t note[RAISE_NOTE_MAX];
	size_t nnote;
	/* counters (stats file) */
	uint64_t raised;	    /* samples of the raised events received */
	uint64_t raised_unheld;	    /* of those, refused by the hold */
	uint64_t hold_rows;	    /* rows of kept traces */
	uint64_t hold_rows_lost;    /* of those, not queued (no memory, bad id) */
	uint64_t raise_errors;	    /* raises the sampler refused */
	uint64_t offcpu_errors;	    /* off-CPU target sets the sampler refused */
	uint64_t zerocode_errors;   /* zero-code target sets not applied (no memory) */
	uint64_t decisions_dropped; /* ring full: those traces' holds expire */
};

/*
 * On a zeroed r with sampler and base_hz set: the hold (hold_bytes bound)
 * and the locks. -ENOMEM.
 */
int raise_init(struct raise *r, size_t hold_bytes);
void raise_free(struct raise *r);

/* The engine's callbacks (raise, decision, sampler figures), with r as their argument. */
void raise_trigger_opts(struct raise *r, struct triggers_opts *to);

/*
 * A sample of the raised events (flag TP_SAMPLE_RAISED): held under its
 * trace until the engine decides. Returns whether it also goes into the
 * continuous profile: only the BASE subsample, at the base Hz, so a
 * trigger never inflates it.
 */
static inline bool raise_hold(struct raise *r, struct agg_sample *as, unsigned flags)
{
	r->raised++;
	if (hold_add(r->hold, as) != 0)
		r->raised_unheld++;
	as->hz = (uint16_t)r->base_hz;
	return flags & TP_SAMPLE_BASE;
}

/* Main loop: applies the queued verdicts to the hold. */
void raise_apply_decisions(struct raise *r);
/*
 * Main loop: the processes that became targets since the last call, at
 * most max into tgids; returns how many.
 */
size_t raise_take_targets(struct raise *r, uint32_t *tgids, size_t max);
/* Main loop: held traces without a verdict expire (now_us: realtime). */
void raise_expire(struct raise *r, int64_t now_us);
/* Main loop, every pass: the engine's deadlines (it wakes the loop at the earliest). */
void raise_tick(struct raise *r);

#endif
