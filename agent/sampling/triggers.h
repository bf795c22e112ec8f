/*
 * triggers.h - the trigger engine: the set of TraceProfileTriggers the
 * controller sent this node, which local processes each one targets, which
 * finished requests it keeps, and the claims that make "the next N
 * requests" exact cluster-wide. Independent of gRPC: the control server
 * (control.c) hands it the decoded ApplyTriggersRequest and asks it for
 * TriggerStatus messages; the agent hands it processes, request rows and a
 * tick. Design: docs/triggers.md.
 *
 * Data flow:
 *   triggers_apply()      set + generation -> validated triggers (Rejected
 *                         ones keep a reason naming the field)
 *   triggers_proc_add()   a process and its identity -> target sets ->
 *   triggers_proc_remove()  Pending / Active, on_raise(tgids, hz),
 *                         on_offcpu(tgids, min_us) for those asking off-CPU
 *   triggers_request()    a finished request of a target -> seen, matched,
 *                         a claim queued for the claim thread
 *   claim thread          SELECT traceprof.claim_request($1, $2) on its own
 *                         libpq connection -> claimed / Completed, and
 *                         on_decision(trace, trigger or NULL, keep)
 *   triggers_tick()       deadlines -> Expired (call at least once a second)
 *
 * Threads: every function is thread-safe (one mutex). on_raise is called
 * with that mutex held, in the order the changes happened: it must not
 * call into the engine. on_decision is called without it, from the thread
 * that decided (the caller of triggers_request() for requests that match
 * nothing, the claim thread for claims).
 */
#ifndef TRACEPROF_AGENT_TRIGGERS_H
#define TRACEPROF_AGENT_TRIGGERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "traceprof/control/v1/agent_control.pb-c.h"
#include "traceprof/trigger_spec.h"

/* the spec's bounds and defaults are include/traceprof/trigger_spec.h's */
#define TRIGGERS_MAX_SET	  64		      /* triggers per set; later ones Rejected */
#define TRIGGERS_MAX_PER_SERVICE  3		      /* Pending or Active triggers per service */
#define TRIGGERS_MAX_HZ		  TRIGGER_SPEC_HZ_MAX /* highest raised frequency */
#define TRIGGERS_DEFAULT_HZ	  TRIGGER_SPEC_HZ_DEFAULT	/* frequency_hz 0 */
#define TRIGGERS_MAX_REQUESTS	  TRIGGER_SPEC_REQUESTS_MAX	/* highest max_requests */
#define TRIGGERS_DEFAULT_REQUESTS TRIGGER_SPEC_REQUESTS_DEFAULT /* max_requests 0 */
/* a deadline is at most this after the trigger was first seen */
#define TRIGGERS_MAX_LIFE_MS TRIGGER_SPEC_TIMEOUT_MAX_MS
/* off-CPU threshold (µs): offcpu_threshold_us 0 is the default, out of bounds Rejected */
#define TRIGGERS_OFFCPU_DEFAULT_US TRIGGER_SPEC_OFFCPU_DEFAULT_US
#define TRIGGERS_OFFCPU_MIN_US	   TRIGGER_SPEC_OFFCPU_MIN_US
#define TRIGGERS_OFFCPU_MAX_US	   TRIGGER_SPEC_OFFCPU_MAX_US
#define TRIGGERS_CLAIM_QUEUE	   1024	 /* claims waiting for the database */
#define TRIGGERS_CLAIM_HOLD_MS	   60000 /* a claim is retried this long at most */

/* on_raise: the target processes of the active triggers and the raised Hz (0: none). */
typedef void (*triggers_raise_fn)(void *ctx, const uint32_t *tgids, size_t n, unsigned hz);
/*
 * on_offcpu: the target processes of the active triggers that ask for
 * off-CPU capture and the smallest threshold among them (µs); n 0 (and
 * min_us 0): none. Called like on_raise (lock held, in order), only when
 * the set or the threshold changed.
 */
typedef void (*triggers_offcpu_fn)(void *ctx, const uint32_t *tgids, size_t n, uint32_t min_us);
/*
 * on_zerocode: the target processes of the active triggers that ask for
 * zero-code HTTP/1.x capture (spec.sampling.zeroCodeHTTP); n 0: none.
 * Called like on_raise, only when the set changed.
 */
typedef void (*triggers_zerocode_fn)(void *ctx, const uint32_t *tgids, size_t n);
/* on_decision: one finished request of a target; trigger_id NULL when not kept. */
typedef void (*triggers_decision_fn)(void *ctx, const uint8_t trace_id[16], const char *trigger_id,
				     bool keep);

/* What the sampler reports; the engine adds what it raised. */
struct triggers_sampler {
	bool running;		 /* the sampler is attached */
	uint32_t base_hz;	 /* base frequency */
	uint32_t cpus;		 /* CPUs sampled */
	uint64_t samples;	 /* samples received */
	uint64_t samples_raised; /* of those, from the raised events */
	uint64_t samples_lost;	 /* lost (ring buffer full) */
};

struct triggers_opts {
	const char *conninfo;	      /* claims' database (libpq); NULL or "": PG* environment */
	bool no_claims;		      /* no database: matches are never claimed (tests) */
	size_t claim_queue;	      /* bound of waiting claims; 0 = TRIGGERS_CLAIM_QUEUE */
	int64_t (*now_ms)(void *ctx); /* Unix time in ms; NULL = CLOCK_REALTIME */
	void *clock_ctx;	      /* its argument */
	triggers_raise_fn on_raise;   /* may be NULL */
	void *raise_ctx;	      /* its argument */
	triggers_offcpu_fn on_offcpu; /* may be NULL */
	void *offcpu_ctx;	      /* its argument */
	triggers_zerocode_fn on_zerocode; /* may be NULL */
	void *zerocode_ctx;		  /* its argument */
	triggers_decision_fn on_decision; /* may be NULL */
	void *decision_ctx;		  /* its argument */
	/* asked for the sampler's figures when a status is built (any thread); may be NULL */
	void (*sampler_figures)(void *ctx, struct triggers_sampler *out);
	void *sampler_ctx; /* its argument */
};

/* A process of the node, as the agent knows it. Strings are copied; "" when unknown. */
struct triggers_proc {
	uint32_t pid;		  /* tgid */
	const char *service;	  /* service name (identity.c) */
	const char *container_id; /* 64 hex digits or "" */
	const char *pod_uid;	  /* Kubernetes pod UID or "" */
	const char *cgroup;	  /* cgroup v2 path ("/system.slice/x.service") or "" */
};

/* Where a finished request came from. Strings borrowed for the call; NULL = unknown. */
struct triggers_source {
	const char *service;	  /* service.name of the span's resource */
	uint32_t pid;		  /* process id when known, else 0 */
	const char *container_id; /* container.id, or NULL */
	const char *pod_uid;	  /* k8s.pod.uid, or NULL */
};

/* One finished request. */
struct triggers_request {
	uint8_t trace_id[16]; /* W3C trace id */
	int64_t start_us;     /* its start, Unix µs; 0 unknown. A request that began before
				 its trigger became active here is not a candidate */
	int64_t duration_us;  /* its duration */
	int status;	      /* HTTP status, 0 when unknown (never matches a status pattern) */
	const char *route;    /* route or path, or NULL */
	const char *method;   /* HTTP method, or NULL */
};

/* Counters of the engine (stats file). */
struct triggers_stats {
	uint64_t applies;	   /* ApplyTriggers handled */
	uint64_t applies_changed;  /* of those, that changed the set */
	uint64_t applies_fenced;   /* of those, refused: older fencing token than applied */
	uint64_t requests;	   /* requests handed in */
	uint64_t requests_target;  /* of those, from a target of an active trigger */
	uint64_t claims_queued;	   /* claims queued */
	uint64_t claims_dropped;   /* refused: queue full */
	uint64_t claims_abandoned; /* gave up: trigger stopped or hold time passed while retrying */
	uint64_t claims_ok;	   /* claimed */
	uint64_t claims_null;	   /* claim_request() returned NULL */
	uint64_t claims_skipped;   /* not tried: the trigger had ended here before its turn */
	uint64_t claim_errors;	   /* failed statements (each retry counts) */
	uint64_t db_connects;	   /* connections opened by the claim thread */
	uint64_t claims_pending;   /* claims queued or in flight now */
};

struct triggers;

/* Starts the engine (and its claim thread). NULL with errno on failure. */
struct triggers *triggers_new(const struct triggers_opts *opts);
/* Stops the claim thread (queued claims are decided "not kept") and frees; NULL is a no-op. */
void triggers_free(struct triggers *t);

/*
 * Replaces the set with req's triggers. Idempotent: the same generation
 * and the same triggers leave *changed false and touch nothing. Triggers
 * whose id stays keep their counters and terminal state (Completed,
 * Expired); the others are removed. A bad or over-limit trigger is
 * Rejected with a reason naming the field; the rest is applied. A set
 * whose fencing_token is below the highest applied (or 0 after one with a
 * token) is refused with -ESTALE and *fence set to that highest token.
 * Returns 0, -ESTALE or -ENOMEM (the old set stays).
 */
int triggers_apply(struct triggers *t, const Traceprof__Control__V1__ApplyTriggersRequest *req,
		   bool *changed, uint64_t *fence);
/* The generation in force (0 before the first apply). */
uint64_t triggers_generation(struct triggers *t);

/* A process appeared or changed identity (replaces the entry of its pid). Returns 0 or -ENOMEM. */
int triggers_proc_add(struct triggers *t, const struct triggers_proc *p);
/* A process ended. */
void triggers_proc_remove(struct triggers *t, uint32_t pid);

/* A finished request (from OTLP). Never blocks on the database. */
void triggers_request(struct triggers *t, const struct triggers_source *src,
		      const struct triggers_request *r);

/* Deadlines: call at least once a second, and at triggers_next_deadline_ms(). */
void triggers_tick(struct triggers *t);
/* The earliest deadline (Unix ms) of a Pending or Active trigger; INT64_MAX when none. */
int64_t triggers_next_deadline_ms(struct triggers *t);

/* The sampler's figures for GetStatus (copied), for an engine without opts.sampler_figures. */
void triggers_set_sampler(struct triggers *t, const struct triggers_sampler *s);

/*
 * Status of every trigger of the set, in set order: a new array of *n new
 * messages (free with triggers_status_free). Returns NULL with *n 0 when
 * the set is empty or memory ran out.
 */
Traceprof__Control__V1__TriggerStatus **triggers_status(struct triggers *t, size_t *n);
void triggers_status_free(Traceprof__Control__V1__TriggerStatus **st, size_t n);
/* Sampler health: the sampler's figures (asked now, or as set) plus the raised Hz and processes. */
void triggers_sampler_health(struct triggers *t, Traceprof__Control__V1__SamplerHealth *out);

void triggers_get_stats(struct triggers *t, struct triggers_stats *out);

/* ---- exposed for tests ---- */

/* Parses a status pattern ("5xx", "500", "4xx,5xx", "2xx,404"; "" = any) into bits[10]. */
int triggers_parse_status(const char *pattern, uint64_t bits[10]);
/* Glob with '*' (any run, also empty) and '?' (one byte). */
bool triggers_glob(const char *pattern, const char *text);

#endif
