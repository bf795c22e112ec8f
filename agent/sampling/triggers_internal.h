/*
 * triggers_internal.h - the trigger engine's state, shared by its files
 * (not part of its interface, triggers.h):
 *
 *   triggers.c          patterns, validation, the set (apply, tick), life cycle, status
 *   triggers_targets.c  processes and targets (the raise), finished requests against criteria
 *   triggers_claims.c   the claim thread: matches claimed in the database, verdicts
 *
 * One mutex (struct triggers.mu) guards everything but the claim thread's
 * connection; functions below that touch the state are called with it held.
 */
#ifndef TRACEPROF_AGENT_TRIGGERS_INTERNAL_H
#define TRACEPROF_AGENT_TRIGGERS_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "triggers.h"

#define ST(x)	       TRACEPROF__CONTROL__V1__TRIGGER_STATE__TRIGGER_STATE_##x
#define MAX_CANDIDATES 8 /* triggers one request may be claimed for, in set order */

typedef Traceprof__Control__V1__Trigger pb_trigger;
typedef Traceprof__Control__V1__TriggerState pb_state;

struct trigger {
	pb_trigger *msg;	  /* the trigger as received (unpacked copy) */
	uint8_t *spec;		  /* its packed bytes, for idempotency */
	size_t spec_len;	  /* bytes in spec */
	pb_state state;		  /* Pending, Active, Completed, Expired, Rejected */
	char reason[256];	  /* why Rejected / Pending / stopped */
	uint64_t seen;		  /* finished requests of its targets */
	uint64_t matched;	  /* of those, matching its criteria */
	uint64_t claimed;	  /* of those, claimed by this agent */
	char (*traces)[33];	  /* trace ids claimed here (hex), max_requests entries */
	size_t ntraces;		  /* entries used */
	size_t traces_cap;	  /* entries allocated */
	uint64_t status_bits[10]; /* accepted HTTP status codes (bit per code) */
	bool status_any;	  /* no status pattern */
	unsigned hz;		  /* raised frequency */
	uint32_t offcpu_us;	  /* off-CPU threshold (µs) while Active; 0: no off-CPU capture */
	bool zerocode;		  /* zero-code HTTP/1.x capture of its targets while Active */
	unsigned max_requests;	  /* requests to collect cluster-wide */
	int64_t first_seen_ms;	  /* when this agent first saw the id */
	int64_t active_since_ms;  /* when it last became Active here (sampling raised) */
	uint32_t *targets;	  /* target pids, sorted */
	size_t ntargets;	  /* entries used */
	size_t targets_cap;	  /* entries allocated */
};

struct proc_entry {
	uint32_t pid;	 /* tgid */
	char *service;	 /* service name */
	char *container; /* container id or "" */
	char *pod;	 /* pod UID or "" */
	char *cgroup;	 /* cgroup v2 path or "" */
};

struct claim {
	uint8_t trace[16];	   /* the request's trace id */
	char *ids[MAX_CANDIDATES]; /* triggers it may be claimed for, in order (owned) */
	size_t nids;		   /* entries in ids */
	size_t next;		   /* the candidate to try next */
	int64_t queued_ms;	   /* when it was queued (hold time) */
};

struct triggers {
	struct triggers_opts o;	     /* options (conninfo copied below) */
	char *conninfo;		     /* owned copy, or NULL */
	pthread_mutex_t mu;	     /* guards everything below */
	pthread_cond_t cv;	     /* claim queue / stop */
	struct trigger **set;	     /* the set, in set order */
	size_t n;		     /* triggers in set */
	uint64_t generation;	     /* generation in force */
	uint64_t fence;		     /* highest fencing token applied (0: none yet) */
	bool applied;		     /* a set was applied */
	struct proc_entry *procs;    /* processes, sorted by pid */
	size_t nprocs;		     /* entries used */
	size_t procs_cap;	     /* entries allocated */
	uint32_t *raised;	     /* last on_raise tgids */
	size_t nraised;		     /* entries */
	unsigned raised_hz;	     /* last on_raise hz */
	uint32_t *offcpu;	     /* last on_offcpu tgids */
	size_t noffcpu;		     /* entries */
	uint32_t offcpu_us;	     /* last on_offcpu threshold (0: none) */
	uint32_t *zerocode;	     /* last on_zerocode tgids */
	size_t nzerocode;	     /* entries */
	unsigned zerocode_on;	     /* 1 while nzerocode > 0 (replace_set's parameter) */
	struct claim *q;	     /* claim ring */
	size_t qhead;		     /* oldest entry */
	size_t qlen;		     /* entries queued (the head may be in flight) */
	size_t qcap;		     /* ring size */
	int64_t next_try_ms;	     /* the head is retried no earlier than this */
	int backoff_ms;		     /* current retry wait */
	bool stopping;		     /* triggers_free() asked the thread to end */
	bool thread_started;	     /* claim thread runs */
	pthread_t thread;	     /* the claim thread */
	struct triggers_sampler smp; /* sampler figures for GetStatus */
	struct triggers_stats stats; /* counters */
};

static inline int64_t now_ms(struct triggers *t)
{
	struct timespec ts;

	if (t->o.now_ms)
		return t->o.now_ms(t->o.clock_ctx);
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Backoff waits run on the monotonic clock, whatever clock the engine was given. */
static inline int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline bool live(const struct trigger *tr)
{
	return tr->state == ST(PENDING) || tr->state == ST(ACTIVE);
}

/* triggers_targets.c */
struct proc_entry *proc_find(struct triggers *t, uint32_t pid, size_t *pos);
bool in_list(char **v, size_t n, const char *s);
size_t target_pos(const struct trigger *tr, uint32_t pid, bool *found);
void update_raise(struct triggers *t);
void resolve_targets(struct triggers *t, struct trigger *tr);
void proc_entry_clear(struct proc_entry *p);
/* triggers.c */
struct trigger *find_trigger(struct triggers *t, const char *id);
void trigger_free(struct trigger *tr);
/* triggers_claims.c */
void claim_clear(struct claim *c);
void *claim_thread(void *arg);

#endif
