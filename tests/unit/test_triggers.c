/*
 * test_triggers: the trigger engine (agent/sampling/triggers.h). Idempotent apply,
 * every limit and rejection reason, criteria (status patterns, route globs,
 * method, durations), target resolution from process identities and the
 * raised set, deadlines through tick with an injected clock; claims
 * against a real PostgreSQL: two engines claiming concurrently for one
 * trigger row collect exactly max_requests, never a trace twice, and both
 * stop when the row turns Completed; a database that is away: bounded
 * queue, drops counted and decided.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "testdb.h"
#include "traceprof/log.h"
#include "triggers.h"

#define ST(x) TRACEPROF__CONTROL__V1__TRIGGER_STATE__TRIGGER_STATE_##x

typedef Traceprof__Control__V1__TriggerStatus tstatus;

static uint64_t fence_token; /* fencing_token of the sets apply() sends */
static uint64_t fence_seen;  /* the agent's highest, after a refusal */

static int64_t fake_now = 1700000000000; /* injected clock, ms */

static int64_t fake_clock(void *ctx)
{
	(void)ctx;
	return __atomic_load_n(&fake_now, __ATOMIC_SEQ_CST);
}

static int64_t real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What the callbacks saw. */
struct seen {
	pthread_mutex_t mu;	/* guards the rest */
	int raises;		/* on_raise calls */
	uint32_t tgids[16];	/* last tgids */
	size_t ntgids;		/* entries */
	unsigned hz;		/* last hz */
	int decisions;		/* on_decision calls */
	int kept;		/* of those, keep = true */
	int offcpus;		/* on_offcpu calls */
	uint32_t off_tgids[16]; /* last off-CPU tgids */
	size_t noff;		/* entries */
	uint32_t off_us;	/* last off-CPU threshold */
	int zcs;		/* on_zerocode calls */
	uint32_t zc_tgids[16];	/* last zero-code tgids */
	size_t nzc;		/* entries */
};

static void on_zerocode(void *ctx, const uint32_t *tgids, size_t n)
{
	struct seen *s = ctx;

	pthread_mutex_lock(&s->mu);
	s->zcs++;
	s->nzc = n < 16 ? n : 16;
	memcpy(s->zc_tgids, tgids, s->nzc * sizeof(*tgids));
	pthread_mutex_unlock(&s->mu);
}

static void on_offcpu(void *ctx, const uint32_t *tgids, size_t n, uint32_t min_us)
{
	struct seen *s = ctx;

	pthread_mutex_lock(&s->mu);
	s->offcpus++;
	s->noff = n < 16 ? n : 16;
	memcpy(s->off_tgids, tgids, s->noff * sizeof(*tgids));
	s->off_us = min_us;
	pthread_mutex_unlock(&s->mu);
}

static void on_raise(void *ctx, const uint32_t *tgids, size_t n, unsigned hz)
{
	struct seen *s = ctx;

	pthread_mutex_lock(&s->mu);
	s->raises++;
	s->ntgids = n < 16 ? n : 16;
	memcpy(s->tgids, tgids, s->ntgids * sizeof(*tgids));
	s->hz = hz;
	pthread_mutex_unlock(&s->mu);
}

static void on_decision(void *ctx, const uint8_t trace[16], const char *id, bool keep)
{
	struct seen *s = ctx;

	(void)trace;
	pthread_mutex_lock(&s->mu);
	s->decisions++;
	if (keep && id)
		s->kept++;
	pthread_mutex_unlock(&s->mu);
}

/* One trigger as a test writes it; unset fields are zero/NULL. */
struct spec {
	const char *id, *service;
	uint32_t pid;
	const char *tsvc, *cgroup, *container, *pod;
	uint32_t hz, max;
	int64_t deadline; /* 0: now + 5 min */
	const char *status, *route, *method;
	uint64_t min_us, max_us;
	bool no_targets;
	bool offcpu;	    /* offcpu */
	uint32_t offcpu_us; /* offcpu_threshold_us */
	bool zerocode;	    /* zero_code_http */
};

/* Builds the messages on the heap, applies, frees them. */
static int apply(struct triggers *t, uint64_t gen, const struct spec *sp, size_t n, bool *changed,
		 int64_t now)
{
	Traceprof__Control__V1__ApplyTriggersRequest req =
	    TRACEPROF__CONTROL__V1__APPLY_TRIGGERS_REQUEST__INIT;
	Traceprof__Control__V1__Trigger *tr = calloc(n + 1, sizeof(*tr));
	Traceprof__Control__V1__Trigger **ptr = calloc(n + 1, sizeof(*ptr));
	Traceprof__Control__V1__Targets *tg = calloc(n + 1, sizeof(*tg));
	Traceprof__Control__V1__Criteria *cr = calloc(n + 1, sizeof(*cr));
	uint32_t *pids = calloc(n + 1, sizeof(*pids));
	char **strs = calloc(4 * (n + 1), sizeof(*strs));
	int rc;

	for (size_t i = 0; i < n; i++) {
		traceprof__control__v1__trigger__init(&tr[i]);
		traceprof__control__v1__targets__init(&tg[i]);
		traceprof__control__v1__criteria__init(&cr[i]);
		tr[i].id = (char *)sp[i].id;
		tr[i].service = (char *)(sp[i].service ? sp[i].service : "pay");
		tr[i].frequency_hz = sp[i].hz;
		tr[i].max_requests = sp[i].max;
		tr[i].offcpu = sp[i].offcpu;
		tr[i].offcpu_threshold_us = sp[i].offcpu_us;
		tr[i].zero_code_http = sp[i].zerocode;
		tr[i].deadline_unix_ms = sp[i].deadline ? sp[i].deadline : now + 300000;
		tr[i].targets = &tg[i];
		tr[i].criteria = &cr[i];
		if (sp[i].pid) {
			pids[i] = sp[i].pid;
			tg[i].pids = &pids[i];
			tg[i].n_pids = 1;
		}
		strs[4 * i] = (char *)sp[i].tsvc;
		strs[4 * i + 1] = (char *)sp[i].cgroup;
		strs[4 * i + 2] = (char *)sp[i].container;
		strs[4 * i + 3] = (char *)sp[i].pod;
		if (sp[i].tsvc)
			tg[i].services = &strs[4 * i], tg[i].n_services = 1;
		if (sp[i].cgroup)
			tg[i].cgroup_paths = &strs[4 * i + 1], tg[i].n_cgroup_paths = 1;
		if (sp[i].container)
			tg[i].container_ids = &strs[4 * i + 2], tg[i].n_container_ids = 1;
		if (sp[i].pod)
			tg[i].pod_uids = &strs[4 * i + 3], tg[i].n_pod_uids = 1;
		if (!sp[i].tsvc && !sp[i].cgroup && !sp[i].container && !sp[i].pod && !sp[i].pid &&
		    !sp[i].no_targets) {
			strs[4 * i] = "pay";
			tg[i].services = &strs[4 * i];
			tg[i].n_services = 1;
		}
		if (sp[i].status)
			cr[i].status = (char *)sp[i].status;
		if (sp[i].route)
			cr[i].route = (char *)sp[i].route;
		if (sp[i].method)
			cr[i].method = (char *)sp[i].method;
		cr[i].min_duration_us = sp[i].min_us;
		cr[i].max_duration_us = sp[i].max_us;
		ptr[i] = &tr[i];
	}
	req.generation = gen;
	req.fencing_token = fence_token;
	req.n_triggers = n;
	req.triggers = ptr;
	rc = triggers_apply(t, &req, changed, &fence_seen);
	free(tr);
	free(ptr);
	free(tg);
	free(cr);
	free(pids);
	free(strs);
	return rc;
}

/* Status of trigger id (copied into *out); false when not in the set. */
static bool status_of(struct triggers *t, const char *id, tstatus *out, char *reason, size_t rl)
{
	size_t n;
	tstatus **st = triggers_status(t, &n);
	bool found = false;

	for (size_t i = 0; i < n; i++)
		if (strcmp(st[i]->id, id) == 0 && !found) {
			*out = *st[i];
			snprintf(reason, rl, "%s", st[i]->reason);
			found = true;
		}
	triggers_status_free(st, n);
	return found;
}

static void expect_state(struct triggers *t, const char *id, int state, const char *reason_has)
{
	tstatus s;
	char reason[256];

	if (!status_of(t, id, &s, reason, sizeof(reason))) {
		CHECK(0, "%s: not in the status", id);
		return;
	}
	CHECK((int)s.state == state, "%s: state %d, expected %d (reason: %s)", id, s.state, state,
	      reason);
	if (reason_has)
		CHECK(strstr(reason, reason_has) != NULL, "%s: reason \"%s\" lacks \"%s\"", id,
		      reason, reason_has);
}

static struct triggers *engine(struct seen *s, bool claims, const char *conninfo, size_t queue)
{
	struct triggers_opts o = {
	    .conninfo = conninfo,
	    .no_claims = !claims,
	    .claim_queue = queue,
	    .now_ms = claims ? NULL : fake_clock,
	    .on_raise = on_raise,
	    .raise_ctx = s,
	    .on_offcpu = on_offcpu,
	    .offcpu_ctx = s,
	    .on_zerocode = on_zerocode,
	    .zerocode_ctx = s,
	    .on_decision = on_decision,
	    .decision_ctx = s,
	};

	return triggers_new(&o);
}

static void test_patterns(void)
{
	uint64_t b[10];

	CHECK(triggers_parse_status("5xx", b) == 0 && (b[500 / 64] >> (500 % 64) & 1) &&
		  (b[599 / 64] >> (599 % 64) & 1) && !(b[404 / 64] >> (404 % 64) & 1),
	      "5xx");
	CHECK(triggers_parse_status("2xx,404", b) == 0 && (b[404 / 64] >> (404 % 64) & 1) &&
		  (b[201 / 64] >> (201 % 64) & 1) && !(b[405 / 64] >> (405 % 64) & 1),
	      "2xx,404");
	CHECK(triggers_parse_status("4xx, 5XX", b) == 0, "blanks and upper case");
	CHECK(triggers_parse_status("500", b) == 0 && (b[500 / 64] >> (500 % 64) & 1) &&
		  !(b[501 / 64] >> (501 % 64) & 1),
	      "500");
	CHECK(triggers_parse_status("", b) == 0, "empty = any");
	const char *bad[] = {"6xx",  "5x",  "50",  "5000", "5xx,",
			     ",5xx", "abc", "5x0", "099",  "5xx;4xx"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(triggers_parse_status(bad[i], b) != 0, "\"%s\" accepted", bad[i]);

	CHECK(triggers_glob("/api/pay*", "/api/pay"), "star empty");
	CHECK(triggers_glob("/api/pay*", "/api/payment/42"), "star run");
	CHECK(!triggers_glob("/api/pay*", "/api/pa"), "short");
	CHECK(triggers_glob("/a?c", "/abc") && !triggers_glob("/a?c", "/ac"), "question mark");
	CHECK(triggers_glob("*/items/*/price", "/v1/items/7/price"), "two stars");
	CHECK(!triggers_glob("*/items/*/price", "/v1/items/7/cost"), "two stars, no match");
	CHECK(triggers_glob("*", ""), "star on empty");
	CHECK(!triggers_glob("/x", "/x/y"), "exact");
}

static void test_validation(void)
{
	struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct triggers *t = engine(&s, false, NULL, 0);
	int64_t now = fake_now;
	bool changed;
	struct spec sp[] = {
	    {.id = "ok"},
	    {.id = ""},
	    {.id = "nosvc", .service = ""},
	    {.id = "notargets", .no_targets = true},
	    {.id = "pid0", .pid = 0, .tsvc = NULL, .cgroup = "relative"},
	    {.id = "hz", .hz = 101},
	    {.id = "max", .max = 1001},
	    {.id = "past", .deadline = now - 1},
	    {.id = "far", .deadline = now + 10 * 60000 + 1},
	    {.id = "dur", .min_us = 2000, .max_us = 1000},
	    {.id = "status", .status = "5xy"},
	    {.id = "method", .method = "GE T"},
	    {.id = "route", .route = "/a\x01"},
	    {.id = "ok"},
	};
	size_t n = sizeof(sp) / sizeof(sp[0]);

	CHECK(apply(t, 1, sp, n, &changed, now) == 0 && changed, "apply");
	expect_state(t, "ok", ST(PENDING), "no target process");
	expect_state(t, "", ST(REJECTED), "id:");
	expect_state(t, "nosvc", ST(REJECTED), "service:");
	expect_state(t, "notargets", ST(REJECTED), "targets:");
	expect_state(t, "pid0", ST(REJECTED), "targets.cgroup_paths");
	expect_state(t, "hz", ST(REJECTED), "frequency_hz");
	expect_state(t, "max", ST(REJECTED), "max_requests");
	expect_state(t, "past", ST(REJECTED), "deadline_unix_ms: not in the future");
	expect_state(t, "far", ST(REJECTED), "deadline_unix_ms: more than 10 minutes");
	expect_state(t, "dur", ST(REJECTED), "criteria.max_duration_us");
	expect_state(t, "status", ST(REJECTED), "criteria.status");
	expect_state(t, "method", ST(REJECTED), "criteria.method");
	expect_state(t, "route", ST(REJECTED), "criteria.route");
	{
		/* the duplicate id: the second "ok" is rejected, the first is not */
		size_t k;
		tstatus **st = triggers_status(t, &k);

		CHECK(k == n, "status has %zu of %zu", k, n);
		CHECK(k == n && st[n - 1]->state == ST(REJECTED) &&
			  strstr(st[n - 1]->reason, "twice"),
		      "duplicate id not rejected");
		CHECK(k == n && st[0]->state == ST(PENDING), "first of the duplicates rejected");
		triggers_status_free(st, k);
	}

	/* a pid 0 target on its own */
	{
		Traceprof__Control__V1__ApplyTriggersRequest req =
		    TRACEPROF__CONTROL__V1__APPLY_TRIGGERS_REQUEST__INIT;
		Traceprof__Control__V1__Trigger tr = TRACEPROF__CONTROL__V1__TRIGGER__INIT;
		Traceprof__Control__V1__Targets tg = TRACEPROF__CONTROL__V1__TARGETS__INIT;
		Traceprof__Control__V1__Trigger *p = &tr;
		uint32_t zero = 0;

		tr.id = "p0";
		tr.service = "pay";
		tr.targets = &tg;
		tr.deadline_unix_ms = now + 1000;
		tg.pids = &zero;
		tg.n_pids = 1;
		req.generation = 2;
		req.n_triggers = 1;
		req.triggers = &p;
		triggers_apply(t, &req, &changed, &fence_seen);
		expect_state(t, "p0", ST(REJECTED), "targets.pids");
	}

	/* at most 3 per service in set order; at most 64 per set */
	{
		struct spec many[70];
		char ids[70][16];

		memset(many, 0, sizeof(many));
		for (int i = 0; i < 70; i++) {
			snprintf(ids[i], sizeof(ids[i]), "t%d", i);
			many[i].id = ids[i];
			many[i].service = i < 5 ? "pay" : ids[i];
		}
		apply(t, 3, many, 70, &changed, now);
		expect_state(t, "t0", ST(PENDING), NULL);
		expect_state(t, "t2", ST(PENDING), NULL);
		expect_state(t, "t3", ST(REJECTED), "service: pay");
		expect_state(t, "t4", ST(REJECTED), "service: pay");
		expect_state(t, "t63", ST(PENDING), NULL);
		expect_state(t, "t64", ST(REJECTED), "more than 64");
		expect_state(t, "t69", ST(REJECTED), "more than 64");
	}
	triggers_free(t);
}

static void test_targets_and_idempotency(void)
{
	struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct triggers *t = engine(&s, false, NULL, 0);
	int64_t now = fake_now;
	bool changed;
	struct spec sp[] = {
	    {.id = "bysvc", .service = "pay", .tsvc = "pay", .hz = 0},
	    {.id = "bycg", .service = "web", .cgroup = "/system.slice", .hz = 50},
	    {.id = "bypid", .service = "db", .pid = 300, .hz = 77},
	    {.id = "bypod", .service = "q", .pod = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"},
	    {.id = "byctr", .service = "r", .container = "abc123"},
	};
	struct triggers_proc p1 = {100, "pay", "", "", "/kubepods/x"};
	struct triggers_proc p2 = {200, "web", "", "", "/system.slice/web.service"};
	struct triggers_proc p2b = {201, "web", "", "", "/system.slicex/web.service"};
	struct triggers_proc p3 = {300, "db", "", "", ""};
	struct triggers_proc p4 = {400, "q", "", "1b4e28ba-2fa1-11d2-883f-0016d3cca427", ""};
	struct triggers_proc p5 = {500, "r", "ABC123", "", ""};
	tstatus st;
	char reason[256];
	int raises;

	CHECK(apply(t, 7, sp, 5, &changed, now) == 0 && changed, "first apply changes");
	for (int i = 0; i < 5; i++)
		expect_state(t, sp[i].id, ST(PENDING), "no target process");
	CHECK(s.raises == 0 || s.hz == 0, "raised with no targets");
	triggers_proc_add(t, &p1);
	expect_state(t, "bysvc", ST(ACTIVE), NULL);
	CHECK(s.hz == 99 && s.ntgids == 1 && s.tgids[0] == 100, "raise: hz %u n %zu", s.hz,
	      s.ntgids);
	triggers_proc_add(t, &p2);
	triggers_proc_add(t, &p2b);
	triggers_proc_add(t, &p3);
	triggers_proc_add(t, &p4);
	triggers_proc_add(t, &p5);
	for (int i = 0; i < 5; i++)
		expect_state(t, sp[i].id, ST(ACTIVE), NULL);
	CHECK(s.ntgids == 5 && s.tgids[0] == 100 && s.tgids[1] == 200 && s.tgids[2] == 300 &&
		  s.tgids[3] == 400 && s.tgids[4] == 500,
	      "raised set: %zu tgids", s.ntgids);
	CHECK(s.hz == 99, "raised hz %u: the highest of the active triggers", s.hz);
	CHECK(status_of(t, "bycg", &st, reason, sizeof(reason)) && st.target_processes == 1 &&
		  st.frequency_hz == 50,
	      "bycg: %u targets at %u Hz (a sibling prefix is not under the cgroup)",
	      st.target_processes, st.frequency_hz);

	/* same generation, same set: nothing changes, nothing is called */
	raises = s.raises;
	CHECK(apply(t, 7, sp, 5, &changed, now) == 0 && !changed, "re-apply changed");
	CHECK(s.raises == raises, "re-apply raised again");
	/* requests count on the engine; a new generation with the same ids keeps them */
	{
		struct triggers_source src = {.service = "pay"};
		struct triggers_request r = {.trace_id = {1}, .duration_us = 5};

		triggers_request(t, &src, &r);
		triggers_request(t, &src, &r);
	}
	CHECK(apply(t, 8, sp, 5, &changed, now) == 0 && changed, "new generation");
	CHECK(status_of(t, "bysvc", &st, reason, sizeof(reason)) && st.requests_seen == 2,
	      "counters lost on re-apply: seen %llu", (unsigned long long)st.requests_seen);
	CHECK(triggers_generation(t) == 8, "generation");
	/* a trigger leaving the set is removed; processes leaving lower the raise */
	CHECK(apply(t, 9, sp, 1, &changed, now) == 0 && changed, "smaller set");
	CHECK(!status_of(t, "bycg", &st, reason, sizeof(reason)), "removed trigger still there");
	CHECK(s.ntgids == 1 && s.tgids[0] == 100 && s.hz == 99, "raise after removal: %zu",
	      s.ntgids);
	triggers_proc_remove(t, 100);
	expect_state(t, "bysvc", ST(PENDING), NULL);
	CHECK(s.ntgids == 0 && s.hz == 0, "raise after the process left: n %zu hz %u", s.ntgids,
	      s.hz);

	/* deadline: Expired within a tick, raise off */
	triggers_proc_add(t, &p1);
	CHECK(s.hz == 99, "raised again");
	CHECK(triggers_next_deadline_ms(t) == now + 300000, "next deadline %lld, want %lld",
	      (long long)triggers_next_deadline_ms(t), (long long)(now + 300000));
	__atomic_store_n(&fake_now, now + 300000, __ATOMIC_SEQ_CST);
	triggers_tick(t);
	expect_state(t, "bysvc", ST(EXPIRED), "deadline");
	CHECK(s.hz == 0 && s.ntgids == 0, "expired trigger still raises");
	CHECK(triggers_next_deadline_ms(t) == INT64_MAX, "an expired trigger's deadline is next");
	/* terminal while the id stays */
	CHECK(apply(t, 10, sp, 1, &changed, now) == 0, "re-apply after expiry");
	expect_state(t, "bysvc", ST(EXPIRED), NULL);
	__atomic_store_n(&fake_now, now, __ATOMIC_SEQ_CST);
	triggers_free(t);
}

/*
 * Off-CPU capture: the targets of the Active triggers that ask for it,
 * with the smallest threshold among them, reach on_offcpu; a trigger
 * without it does not; one that ends (left the set, expired, its process
 * gone) takes its targets out; a bad threshold is Rejected; a trigger
 * without a target says off-CPU capture waits for one.
 */
static void test_offcpu(void)
{
	struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct triggers *t = engine(&s, false, NULL, 0);
	int64_t now = fake_now;
	bool changed;
	struct spec sp[] = {
	    {.id = "a", .service = "pay", .tsvc = "pay", .offcpu = true, .offcpu_us = 5000},
	    {.id = "b", .service = "inv", .tsvc = "inv", .offcpu = true}, /* default 1 ms */
	    {.id = "c", .service = "ship", .tsvc = "ship"},		  /* no off-CPU */
	    {.id = "d", .service = "none", .tsvc = "none", .offcpu = true, .offcpu_us = 20},
	    {.id = "low", .service = "x", .tsvc = "x", .offcpu = true, .offcpu_us = 9},
	    {.id = "high", .service = "y", .tsvc = "y", .offcpu = true, .offcpu_us = 10000001},
	    {.id = "ign", .service = "z", .tsvc = "z", .offcpu_us = 9}, /* no offcpu: not read */
	};
	struct triggers_proc pa = {100, "pay", "", "", ""}, pb = {200, "inv", "", "", ""};
	struct triggers_proc pc = {300, "ship", "", "", ""};

	CHECK(apply(t, 1, sp, 7, &changed, now) == 0 && changed, "apply");
	expect_state(t, "low", ST(REJECTED), "offcpu_threshold_us: 9 is outside 10..10000000");
	expect_state(t, "high", ST(REJECTED), "offcpu_threshold_us");
	expect_state(t, "ign", ST(PENDING), NULL);
	expect_state(t, "d", ST(PENDING),
		     "no target process on this node: no off-CPU capture until one appears");
	expect_state(t, "c", ST(PENDING), "no target process on this node");
	CHECK(s.noff == 0, "off-CPU targets before any process: %zu", s.noff);
	triggers_proc_add(t, &pa);
	triggers_proc_add(t, &pb);
	triggers_proc_add(t, &pc);
	CHECK(s.ntgids == 3, "raised set %zu", s.ntgids);
	CHECK(s.noff == 2 && s.off_tgids[0] == 100 && s.off_tgids[1] == 200 && s.off_us == 1000,
	      "off-CPU set: n %zu [%u %u] min %u us", s.noff, s.off_tgids[0], s.off_tgids[1],
	      s.off_us);
	/* b leaves the set: a's own threshold */
	{
		struct spec ac[] = {sp[0], sp[2]};

		CHECK(apply(t, 2, ac, 2, &changed, now) == 0 && changed, "apply a, c");
	}
	CHECK(s.noff == 1 && s.off_tgids[0] == 100 && s.off_us == 5000,
	      "off-CPU set after b left: n %zu min %u us", s.noff, s.off_us);
	/* a's process gone: nothing; back: again */
	triggers_proc_remove(t, 100);
	CHECK(s.noff == 0 && s.off_us == 0, "off-CPU set after the process left: %zu", s.noff);
	triggers_proc_add(t, &pa);
	CHECK(s.noff == 1 && s.off_us == 5000, "off-CPU set back: %zu", s.noff);
	/* a expires: cleared, while c (no off-CPU) never was in it */
	__atomic_store_n(&fake_now, now + 300000, __ATOMIC_SEQ_CST);
	triggers_tick(t);
	expect_state(t, "a", ST(EXPIRED), "deadline");
	CHECK(s.noff == 0 && s.off_us == 0, "expired trigger still captures off-CPU: %zu", s.noff);
	CHECK(s.ntgids == 0, "raised after expiry: %zu", s.ntgids);
	__atomic_store_n(&fake_now, now, __ATOMIC_SEQ_CST);
	triggers_free(t);
}

/*
 * Zero-code capture: the targets of the Active triggers with
 * zero_code_http reach on_zerocode, those of others do not; the set
 * follows triggers leaving, processes going and expiry; an unchanged set
 * is not announced again.
 */
static void test_zerocode(void)
{
	struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct triggers *t = engine(&s, false, NULL, 0);
	int64_t now = fake_now;
	bool changed;
	int calls;
	struct spec sp[] = {
	    {.id = "a", .service = "pay", .tsvc = "pay", .zerocode = true},
	    {.id = "b", .service = "inv", .tsvc = "inv", .zerocode = true, .offcpu = true},
	    {.id = "c", .service = "ship", .tsvc = "ship"}, /* no zero-code */
	};
	struct triggers_proc pa = {100, "pay", "", "", ""}, pb = {200, "inv", "", "", ""};
	struct triggers_proc pc = {300, "ship", "", "", ""}, pa2 = {101, "pay", "", "", ""};

	CHECK(apply(t, 1, sp, 3, &changed, now) == 0 && changed, "apply");
	CHECK(s.nzc == 0, "zero-code targets before any process: %zu", s.nzc);
	triggers_proc_add(t, &pa);
	triggers_proc_add(t, &pb);
	triggers_proc_add(t, &pc);
	triggers_proc_add(t, &pa2);
	CHECK(s.ntgids == 4, "raised set %zu", s.ntgids);
	CHECK(s.nzc == 3 && s.zc_tgids[0] == 100 && s.zc_tgids[1] == 101 && s.zc_tgids[2] == 200,
	      "zero-code set: n %zu [%u %u %u]", s.nzc, s.zc_tgids[0], s.zc_tgids[1],
	      s.zc_tgids[2]);
	calls = s.zcs;
	CHECK(apply(t, 2, sp, 3, &changed, now) == 0, "the same set again");
	CHECK(s.zcs == calls, "an unchanged set is not announced again (%d calls)", s.zcs - calls);
	{
		struct spec bc[] = {sp[1], sp[2]};

		CHECK(apply(t, 3, bc, 2, &changed, now) == 0 && changed, "a leaves");
	}
	CHECK(s.nzc == 1 && s.zc_tgids[0] == 200, "zero-code set after a left: n %zu", s.nzc);
	triggers_proc_remove(t, 200);
	CHECK(s.nzc == 0, "zero-code set after its process left: %zu", s.nzc);
	triggers_proc_add(t, &pb);
	CHECK(s.nzc == 1, "zero-code set back: %zu", s.nzc);
	__atomic_store_n(&fake_now, now + 300000, __ATOMIC_SEQ_CST);
	triggers_tick(t);
	expect_state(t, "b", ST(EXPIRED), "deadline");
	CHECK(s.nzc == 0, "an expired trigger still captures requests: %zu", s.nzc);
	__atomic_store_n(&fake_now, now, __ATOMIC_SEQ_CST);
	triggers_free(t);
}

/*
 * Fencing: a set from a controller that no longer leads (an older term)
 * changes nothing; 0 (no leader election) only until a term was seen.
 */
static void test_fencing(void)
{
	struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct triggers *t = engine(&s, false, NULL, 0);
	struct spec a[] = {{.id = "a", .service = "pay", .tsvc = "pay"}};
	struct spec b[] = {{.id = "b", .service = "pay", .tsvc = "pay"}};
	struct triggers_stats st;
	tstatus ts;
	char reason[256];
	bool changed;

	fence_token = 0;
	CHECK(apply(t, 1, a, 1, &changed, fake_now) == 0 && changed, "unfenced set applied");
	fence_token = 5;
	CHECK(apply(t, 2, b, 1, &changed, fake_now) == 0 && changed, "term 5 applied");
	fence_token = 4;
	CHECK(apply(t, 3, a, 1, &changed, fake_now) == -ESTALE && !changed && fence_seen == 5,
	      "term 4 after term 5: refused, fence %llu", (unsigned long long)fence_seen);
	CHECK(status_of(t, "b", &ts, reason, sizeof(reason)) &&
		  !status_of(t, "a", &ts, reason, sizeof(reason)) && triggers_generation(t) == 2,
	      "the refused set changed nothing");
	fence_token = 0;
	CHECK(apply(t, 4, a, 1, &changed, fake_now) == -ESTALE, "no term after term 5: refused");
	fence_token = 5;
	CHECK(apply(t, 5, a, 1, &changed, fake_now) == 0 && changed, "the same term goes on");
	fence_token = 6;
	CHECK(apply(t, 6, b, 1, &changed, fake_now) == 0 && changed, "a newer term takes over");
	triggers_get_stats(t, &st);
	CHECK(st.applies_fenced == 2, "2 refusals counted (%llu)",
	      (unsigned long long)st.applies_fenced);
	fence_token = 0;
	triggers_free(t);
}

static void test_criteria(void)
{
	struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct triggers *t = engine(&s, false, NULL, 0);
	struct spec sp[] = {{.id = "c",
			     .tsvc = "pay",
			     .min_us = 1000,
			     .max_us = 9000,
			     .status = "5xx,404",
			     .route = "/api/pay*",
			     .method = "POST"}};
	struct triggers_proc p = {42, "pay", "", "", ""};
	struct triggers_source src = {.service = "pay"}, other = {.service = "web"},
			       bypid = {.service = "", .pid = 42};
	struct {
		int64_t dur;
		int status;
		const char *route, *method;
		bool match;
	} cases[] = {
	    {5000, 503, "/api/pay/1", "POST", true}, {5000, 404, "/api/pay", "post", true},
	    {1000, 500, "/api/pay", "POST", true},   {9000, 500, "/api/pay", "POST", true},
	    {999, 500, "/api/pay", "POST", false},   {9001, 500, "/api/pay", "POST", false},
	    {5000, 200, "/api/pay", "POST", false},  {5000, 405, "/api/pay", "POST", false},
	    {5000, 0, "/api/pay", "POST", false},    {5000, 500, "/api/pa", "POST", false},
	    {5000, 500, NULL, "POST", false},	     {5000, 500, "/api/pay", "GET", false},
	    {5000, 500, "/api/pay", NULL, false},
	};
	size_t n = sizeof(cases) / sizeof(cases[0]), want = 0;
	bool changed;
	tstatus st;
	char reason[256];

	apply(t, 1, sp, 1, &changed, fake_now);
	triggers_proc_add(t, &p);
	for (size_t i = 0; i < n; i++) {
		struct triggers_request r = {.duration_us = cases[i].dur,
					     .status = cases[i].status,
					     .route = cases[i].route,
					     .method = cases[i].method};
		uint64_t before;

		r.trace_id[0] = (uint8_t)(i + 1);
		status_of(t, "c", &st, reason, sizeof(reason));
		before = st.requests_matched;
		triggers_request(t, &src, &r);
		status_of(t, "c", &st, reason, sizeof(reason));
		CHECK((st.requests_matched - before == 1) == cases[i].match,
		      "case %zu: dur %lld status %d route %s method %s: match %d", i,
		      (long long)cases[i].dur, cases[i].status,
		      cases[i].route ? cases[i].route : "(null)",
		      cases[i].method ? cases[i].method : "(null)", !cases[i].match);
		want += cases[i].match;
	}
	CHECK(st.requests_seen == n && st.requests_matched == want, "seen %llu matched %llu",
	      (unsigned long long)st.requests_seen, (unsigned long long)st.requests_matched);
	CHECK(s.decisions == (int)n && s.kept == 0, "decisions %d kept %d", s.decisions, s.kept);
	/* a request of another service is no target's; one by pid is */
	{
		struct triggers_request r = {.trace_id = {9}, .duration_us = 5000};

		triggers_request(t, &other, &r);
		triggers_request(t, &bypid, &r);
	}
	status_of(t, "c", &st, reason, sizeof(reason));
	CHECK(st.requests_seen == n + 1, "seen %llu after other/pid sources",
	      (unsigned long long)st.requests_seen);
	CHECK(s.decisions == (int)n + 1, "a non-target request was decided");
	triggers_free(t);
}

/* ---- claims against PostgreSQL ---- */

static void insert_trigger(PGconn *conn, const char *id, const char *phase, int max)
{
	char sql[512];

	snprintf(sql, sizeof(sql),
		 "INSERT INTO traceprof.trace_profile_triggers (trigger_id, name, phase, "
		 "max_requests, deadline) VALUES ('%s', '%s', '%s', %d, now() + interval '5 "
		 "minutes')",
		 id, id, phase, max);
	PQclear(testdb_exec(conn, sql));
}

static bool wait_drained(struct triggers *t, int ms)
{
	struct triggers_stats st;

	for (int i = 0; i < ms / 10; i++) {
		triggers_get_stats(t, &st);
		if (st.claims_pending == 0)
			return true;
		usleep(10000);
	}
	return false;
}

struct feeder {
	struct triggers *t; /* engine */
	int base;	    /* first trace number */
	int n;		    /* requests */
};

static void *feed(void *arg)
{
	struct feeder *f = arg;
	struct triggers_source src = {.service = "pay"};

	for (int i = 0; i < f->n; i++) {
		/* every fourth trace is the same in both feeders */
		int k = i % 4 == 0 ? 100000 + i : f->base + i;
		struct triggers_request r = {.duration_us = 5000, .status = 500};

		r.trace_id[12] = (uint8_t)(k >> 24);
		r.trace_id[13] = (uint8_t)(k >> 16);
		r.trace_id[14] = (uint8_t)(k >> 8);
		r.trace_id[15] = (uint8_t)k;
		triggers_request(f->t, &src, &r);
	}
	return NULL;
}

static void test_claims(void)
{
	char ci[4200];
	PGconn *conn;
	struct seen sa = {.mu = PTHREAD_MUTEX_INITIALIZER}, sb = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct triggers *a, *b;
	struct spec sp[] = {{.id = "race", .tsvc = "pay", .max = 7, .status = "5xx"}};
	struct triggers_proc p = {4242, "pay", "", "", ""};
	struct feeder fa, fb;
	pthread_t ta, tb;
	tstatus st;
	char reason[256];
	bool changed;
	uint64_t claimed = 0;

	if (testdb_create("test_triggers", ci, sizeof(ci)) != 0) {
		CHECK(0, "cannot create the test database");
		return;
	}
	conn = testdb_connect(ci);
	insert_trigger(conn, "race", "Active", 7);
	a = engine(&sa, true, ci, 0);
	b = engine(&sb, true, ci, 0);
	CHECK(a && b, "engines");
	apply(a, 1, sp, 1, &changed, real_ms());
	apply(b, 1, sp, 1, &changed, real_ms());
	triggers_proc_add(a, &p);
	triggers_proc_add(b, &p);
	fa = (struct feeder){a, 1000, 40};
	fb = (struct feeder){b, 2000, 40};
	pthread_create(&ta, NULL, feed, &fa);
	pthread_create(&tb, NULL, feed, &fb);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	CHECK(wait_drained(a, 20000) && wait_drained(b, 20000), "claims not drained");
	CHECK(testdb_scalar(conn, "SELECT collected_requests FROM traceprof.trace_profile_triggers "
				  "WHERE trigger_id = 'race'") == 7,
	      "collected_requests is not max_requests");
	CHECK(testdb_scalar(conn, "SELECT count(DISTINCT t) FROM traceprof.trace_profile_triggers, "
				  "unnest(trace_ids) t WHERE trigger_id = 'race'") == 7,
	      "a trace claimed twice");
	for (int i = 0; i < 2; i++) {
		struct triggers *t = i ? b : a;

		CHECK(status_of(t, "race", &st, reason, sizeof(reason)), "status");
		CHECK(st.state == ST(COMPLETED), "engine %d: state %d (%s), not Completed", i,
		      st.state, reason);
		CHECK(st.n_claimed_trace_ids == st.requests_claimed,
		      "trace ids %zu != claimed %llu", st.n_claimed_trace_ids,
		      (unsigned long long)st.requests_claimed);
		claimed += st.requests_claimed;
	}
	CHECK(claimed == 7, "engines claimed %llu together, max_requests 7",
	      (unsigned long long)claimed);
	CHECK(sa.kept + sb.kept == 7, "kept decisions %d + %d", sa.kept, sb.kept);
	CHECK(sa.decisions == 40 && sb.decisions == 40, "decisions %d, %d (one per request)",
	      sa.decisions, sb.decisions);
	CHECK(sa.hz == 0 && sb.hz == 0, "completed triggers still raise: %u %u", sa.hz, sb.hz);
	/* every queued claim is answered once: claimed, NULL, or skipped (ended here first) */
	for (int i = 0; i < 2; i++) {
		struct triggers_stats ts;

		triggers_get_stats(i ? b : a, &ts);
		CHECK(ts.claims_ok + ts.claims_null + ts.claims_skipped + ts.claims_abandoned ==
			  ts.claims_queued,
		      "engine %d: queued %llu, ok %llu null %llu skipped %llu abandoned %llu", i,
		      (unsigned long long)ts.claims_queued, (unsigned long long)ts.claims_ok,
		      (unsigned long long)ts.claims_null, (unsigned long long)ts.claims_skipped,
		      (unsigned long long)ts.claims_abandoned);
		CHECK(ts.claims_queued <= ts.claims_ok || ts.claims_null + ts.claims_skipped > 0,
		      "engine %d: claims past the count not counted", i);
	}

	/* NULL from claim_request: the row's phase decides */
	insert_trigger(conn, "gone", "Expired", 5);
	{
		struct spec g[] = {{.id = "gone", .tsvc = "pay"}};
		struct triggers_request r = {.trace_id = {0xab}, .duration_us = 1};
		struct triggers_source src = {.service = "pay"};

		apply(a, 2, g, 1, &changed, real_ms());
		expect_state(a, "gone", ST(ACTIVE), NULL);
		triggers_request(a, &src, &r);
		wait_drained(a, 10000);
		expect_state(a, "gone", ST(EXPIRED), "database");
	}
	triggers_free(a);
	triggers_free(b);

	/* database away: bounded queue, drops counted and decided, retried while active */
	{
		struct seen sc = {.mu = PTHREAD_MUTEX_INITIALIZER};
		struct triggers *c =
		    engine(&sc, true, "host=127.0.0.1 port=1 connect_timeout=1", 4);
		struct triggers_source src = {.service = "pay"};
		struct triggers_stats cs;
		struct spec d[] = {{.id = "down", .tsvc = "pay"}};

		apply(c, 1, d, 1, &changed, real_ms());
		triggers_proc_add(c, &p);
		for (int i = 0; i < 10; i++) {
			struct triggers_request r = {.trace_id = {(uint8_t)(i + 1)},
						     .duration_us = 1};

			triggers_request(c, &src, &r);
		}
		triggers_get_stats(c, &cs);
		CHECK(cs.claims_queued == 4 && cs.claims_dropped == 6, "queued %llu dropped %llu",
		      (unsigned long long)cs.claims_queued, (unsigned long long)cs.claims_dropped);
		pthread_mutex_lock(&sc.mu);
		CHECK(sc.decisions == 6 && sc.kept == 0, "dropped claims decided: %d",
		      sc.decisions);
		pthread_mutex_unlock(&sc.mu);
		usleep(300000);
		triggers_get_stats(c, &cs);
		CHECK(cs.claims_pending == 4 && cs.db_connects >= 2,
		      "retrying: pending %llu connects %llu", (unsigned long long)cs.claims_pending,
		      (unsigned long long)cs.db_connects);
		triggers_free(c);
		CHECK(sc.decisions == 10, "every request decided once: %d", sc.decisions);
	}
	PQfinish(conn);
}

int main(void)
{
	log_set_level(TP_LOG_WARN);
	test_patterns();
	test_validation();
	test_targets_and_idempotency();
	test_offcpu();
	test_zerocode();
	test_fencing();
	test_criteria();
	test_claims();
	return check_done();
}
