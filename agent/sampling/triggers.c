/*
 * triggers.c - see triggers.h; its files: triggers_internal.h.
 *
 * Workload: a handful of triggers (at most 64), thousands of processes,
 * up to thousands of finished requests a second. The processes are an
 * array sorted by pid (binary search); each trigger holds the sorted pids
 * it targets. A request is checked against the active triggers only, and
 * a match never waits for the database: it goes into a bounded FIFO that
 * one claim thread works through on its own libpq connection, retrying
 * with backoff while the database is away. One mutex guards everything
 * but the claim thread's connection.
 *
 * Idempotency: each trigger of the set is kept packed as it arrived; an
 * apply with the same generation and byte-equal triggers in the same order
 * changes nothing.
 */
#include "triggers.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <libpq-fe.h>

#include "traceprof/hex.h"
#include "traceprof/log.h"
#include "triggers_internal.h"

#define MAX_ID_LEN	128  /* bytes of a trigger id */
#define MAX_PATTERN_LEN 1024 /* bytes of a route glob */
#define MAX_METHOD_LEN	32   /* bytes of an HTTP method */

/* ---- patterns ---- */

int triggers_parse_status(const char *p, uint64_t bits[10])
{
	memset(bits, 0, 10 * sizeof(uint64_t));
	if (!p || !*p)
		return 0;
	for (;;) {
		char item[8];
		size_t n = 0;
		int lo, hi;

		while (*p == ' ')
			p++;
		while (*p && *p != ',' && *p != ' ' && n < sizeof(item) - 1)
			item[n++] = *p++;
		item[n] = 0;
		while (*p == ' ')
			p++;
		if (n != 3 || item[0] < '1' || item[0] > '5')
			return -EINVAL;
		if ((item[1] == 'x' || item[1] == 'X') && (item[2] == 'x' || item[2] == 'X')) {
			lo = (item[0] - '0') * 100;
			hi = lo + 99;
		} else if (item[1] >= '0' && item[1] <= '9' && item[2] >= '0' && item[2] <= '9') {
			lo = hi = atoi(item);
		} else {
			return -EINVAL;
		}
		for (int c = lo; c <= hi; c++)
			bits[c / 64] |= 1ull << (c % 64);
		if (!*p)
			return 0;
		if (*p != ',')
			return -EINVAL;
		p++;
	}
}

bool triggers_glob(const char *pat, const char *s)
{
	const char *star = NULL, *resume = NULL;

	while (*s) {
		if (*pat == '*') {
			star = pat++;
			resume = s;
		} else if (*pat == '?' || *pat == *s) {
			pat++;
			s++;
		} else if (star) {
			pat = star + 1;
			s = ++resume;
		} else {
			return false;
		}
	}
	while (*pat == '*')
		pat++;
	return *pat == 0;
}

/* ---- validation ---- */

static bool text_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

static bool list_ok(char **v, size_t n, const char *field, char *reason, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (!v[i][0] || !text_ok(v[i], 4096)) {
			snprintf(reason, len, "targets.%s: entry %zu is empty or not text", field,
				 i);
			return false;
		}
	return true;
}

/* Checks one trigger; fills tr's derived fields. false with tr->reason set when invalid. */
static bool validate(struct trigger *tr, int64_t now, bool known)
{
	const pb_trigger *m = tr->msg;
	const Traceprof__Control__V1__Targets *tg = m->targets;
	const Traceprof__Control__V1__Criteria *cr = m->criteria;
	char *r = tr->reason;
	size_t rl = sizeof(tr->reason);

	if (!m->id[0] || strlen(m->id) > MAX_ID_LEN || !text_ok(m->id, MAX_ID_LEN)) {
		snprintf(r, rl, "id: empty, longer than %d bytes or not text", MAX_ID_LEN);
		return false;
	}
	if (!m->service[0]) {
		snprintf(r, rl, "service: empty (the limit of %d triggers per service needs it)",
			 TRIGGERS_MAX_PER_SERVICE);
		return false;
	}
	if (!tg || tg->n_pod_uids + tg->n_container_ids + tg->n_pids + tg->n_cgroup_paths +
			   tg->n_services ==
		       0) {
		snprintf(r, rl,
			 "targets: none given (pod_uids, container_ids, pids, "
			 "cgroup_paths or services)");
		return false;
	}
	if (!list_ok(tg->pod_uids, tg->n_pod_uids, "pod_uids", r, rl) ||
	    !list_ok(tg->container_ids, tg->n_container_ids, "container_ids", r, rl) ||
	    !list_ok(tg->cgroup_paths, tg->n_cgroup_paths, "cgroup_paths", r, rl) ||
	    !list_ok(tg->services, tg->n_services, "services", r, rl))
		return false;
	for (size_t i = 0; i < tg->n_pids; i++)
		if (tg->pids[i] == 0) {
			snprintf(r, rl, "targets.pids: 0 is not a process id");
			return false;
		}
	for (size_t i = 0; i < tg->n_cgroup_paths; i++)
		if (tg->cgroup_paths[i][0] != '/') {
			snprintf(r, rl, "targets.cgroup_paths: \"%.64s\" does not start with /",
				 tg->cgroup_paths[i]);
			return false;
		}
	if (m->frequency_hz > TRIGGERS_MAX_HZ) {
		snprintf(r, rl, "frequency_hz: %u is over %d", m->frequency_hz, TRIGGERS_MAX_HZ);
		return false;
	}
	tr->hz = m->frequency_hz ? m->frequency_hz : TRIGGERS_DEFAULT_HZ;
	if (m->max_requests > TRIGGERS_MAX_REQUESTS) {
		snprintf(r, rl, "max_requests: %u is over %d", m->max_requests,
			 TRIGGERS_MAX_REQUESTS);
		return false;
	}
	tr->max_requests = m->max_requests ? m->max_requests : TRIGGERS_DEFAULT_REQUESTS;
	if (m->offcpu && m->offcpu_threshold_us &&
	    (m->offcpu_threshold_us < TRIGGERS_OFFCPU_MIN_US ||
	     m->offcpu_threshold_us > TRIGGERS_OFFCPU_MAX_US)) {
		snprintf(r, rl, "offcpu_threshold_us: %u is outside %d..%d", m->offcpu_threshold_us,
			 TRIGGERS_OFFCPU_MIN_US, TRIGGERS_OFFCPU_MAX_US);
		return false;
	}
	tr->offcpu_us = !m->offcpu		 ? 0
			: m->offcpu_threshold_us ? m->offcpu_threshold_us
						 : TRIGGERS_OFFCPU_DEFAULT_US;
	tr->zerocode = m->zero_code_http;
	if (!known && m->deadline_unix_ms <= now) {
		snprintf(r, rl, "deadline_unix_ms: not in the future");
		return false;
	}
	if (m->deadline_unix_ms > tr->first_seen_ms + TRIGGERS_MAX_LIFE_MS) {
		snprintf(r, rl,
			 "deadline_unix_ms: more than 10 minutes after the agent first saw the "
			 "trigger");
		return false;
	}
	tr->status_any = true;
	if (cr) {
		if (cr->max_duration_us && cr->max_duration_us < cr->min_duration_us) {
			snprintf(r, rl, "criteria.max_duration_us: below min_duration_us");
			return false;
		}
		if (triggers_parse_status(cr->status, tr->status_bits) != 0) {
			snprintf(r, rl,
				 "criteria.status: \"%.40s\" is not a pattern like 5xx, 500, "
				 "4xx,5xx or 2xx,404",
				 cr->status);
			return false;
		}
		tr->status_any = !cr->status[0];
		if (!text_ok(cr->route, MAX_PATTERN_LEN)) {
			snprintf(r, rl, "criteria.route: longer than %d bytes or not text",
				 MAX_PATTERN_LEN);
			return false;
		}
		for (const char *c = cr->method; *c; c++)
			if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || *c == '-' ||
			      *c == '_') ||
			    c - cr->method >= MAX_METHOD_LEN) {
				snprintf(r, rl, "criteria.method: \"%.32s\" is not an HTTP method",
					 cr->method);
				return false;
			}
	}
	r[0] = 0;
	return true;
}

/* ---- the set ---- */

void trigger_free(struct trigger *tr)
{
	if (!tr)
		return;
	if (tr->msg)
		traceprof__control__v1__trigger__free_unpacked(tr->msg, NULL);
	free(tr->spec);
	free(tr->traces);
	free(tr->targets);
	free(tr);
}

struct trigger *find_trigger(struct triggers *t, const char *id)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->set[i]->state != ST(REJECTED) && strcmp(t->set[i]->msg->id, id) == 0)
			return t->set[i];
	return NULL;
}

/* Packs m; NULL on no memory. */
static uint8_t *pack_trigger(const pb_trigger *m, size_t *len)
{
	uint8_t *b;

	*len = traceprof__control__v1__trigger__get_packed_size(m);
	b = malloc(*len ? *len : 1);
	if (b)
		traceprof__control__v1__trigger__pack(m, b);
	return b;
}

static bool same_set(struct triggers *t, const Traceprof__Control__V1__ApplyTriggersRequest *req)
{
	if (!t->applied || req->generation != t->generation || req->n_triggers != t->n)
		return false;
	for (size_t i = 0; i < t->n; i++) {
		size_t len;
		uint8_t *b = pack_trigger(req->triggers[i], &len);
		bool eq = b && len == t->set[i]->spec_len && !memcmp(b, t->set[i]->spec, len);

		free(b);
		if (!eq)
			return false;
	}
	return true;
}

/* Index of the trigger with this id in the current set, or -1. Lock held. */
static long old_index(struct triggers *t, const char *id)
{
	for (size_t j = 0; j < t->n; j++)
		if (strcmp(t->set[j]->msg->id, id) == 0)
			return (long)j;
	return -1;
}

/*
 * Builds the new trigger for m; old is the trigger with its id in the set
 * in force (read only here: its claimed trace ids move over at commit).
 * Returns NULL on no memory.
 */
static struct trigger *build_trigger(struct trigger **set, size_t i, const pb_trigger *m,
				     const struct trigger *old, int64_t now)
{
	struct trigger *tr = calloc(1, sizeof(*tr));
	size_t per_service = 0;
	bool dup = false;

	if (!tr)
		return NULL;
	tr->spec = pack_trigger(m, &tr->spec_len);
	if (tr->spec)
		tr->msg = traceprof__control__v1__trigger__unpack(NULL, tr->spec_len, tr->spec);
	if (!tr->msg) {
		trigger_free(tr);
		return NULL;
	}
	for (size_t j = 0; j < i; j++)
		if (strcmp(set[j]->msg->id, m->id) == 0)
			dup = true;
	if (dup)
		old = NULL;
	tr->first_seen_ms = old ? old->first_seen_ms : now;
	if (old) {
		tr->seen = old->seen;
		tr->matched = old->matched;
		tr->claimed = old->claimed;
	}
	if (old && (old->state == ST(COMPLETED) || old->state == ST(EXPIRED))) {
		validate(tr, now, true); /* derived fields only */
		tr->state = old->state;	 /* terminal while the id stays */
		memcpy(tr->reason, old->reason, sizeof(tr->reason));
		return tr;
	}
	tr->state = ST(REJECTED);
	if (i >= TRIGGERS_MAX_SET) {
		snprintf(tr->reason, sizeof(tr->reason), "triggers: more than %d in the set",
			 TRIGGERS_MAX_SET);
		return tr;
	}
	if (dup) {
		snprintf(tr->reason, sizeof(tr->reason), "id: \"%.64s\" appears twice in the set",
			 m->id);
		return tr;
	}
	if (!validate(tr, now, old != NULL))
		return tr;
	if (old && tr->msg->deadline_unix_ms <= now) {
		tr->state = ST(EXPIRED);
		snprintf(tr->reason, sizeof(tr->reason), "deadline passed");
		return tr;
	}
	for (size_t j = 0; j < i; j++)
		if (live(set[j]) && strcmp(set[j]->msg->service, m->service) == 0)
			per_service++;
	if (per_service >= TRIGGERS_MAX_PER_SERVICE) {
		snprintf(tr->reason, sizeof(tr->reason),
			 "service: %.64s already has %d active triggers earlier in the set",
			 m->service, TRIGGERS_MAX_PER_SERVICE);
		return tr;
	}
	tr->state = ST(PENDING);
	return tr;
}

int triggers_apply(struct triggers *t, const Traceprof__Control__V1__ApplyTriggersRequest *req,
		   bool *changed, uint64_t *fence)
{
	size_t n = req->n_triggers;
	struct trigger **set;
	int64_t now;

	*changed = false;
	pthread_mutex_lock(&t->mu);
	t->stats.applies++;
	if (req->fencing_token < t->fence || (t->fence && !req->fencing_token)) {
		*fence = t->fence;
		t->stats.applies_fenced++;
		pthread_mutex_unlock(&t->mu);
		return -ESTALE;
	}
	t->fence = req->fencing_token;
	if (same_set(t, req)) {
		pthread_mutex_unlock(&t->mu);
		return 0;
	}
	now = now_ms(t);
	set = calloc(n ? n : 1, sizeof(*set));
	for (size_t i = 0; set && i < n; i++) {
		long j = old_index(t, req->triggers[i]->id);

		set[i] = build_trigger(set, i, req->triggers[i], j >= 0 ? t->set[j] : NULL, now);
		if (!set[i]) {
			for (size_t k = 0; k < i; k++)
				trigger_free(set[k]);
			free(set);
			set = NULL;
		}
	}
	if (!set) {
		pthread_mutex_unlock(&t->mu);
		log_warn("triggers: out of memory applying generation %llu",
			 (unsigned long long)req->generation);
		return -ENOMEM;
	}
	/* commit: claimed trace ids move over, the old set goes */
	for (size_t i = 0; i < n; i++) {
		long j = old_index(t, set[i]->msg->id);
		bool first = true;

		for (size_t k = 0; k < i; k++)
			if (strcmp(set[k]->msg->id, set[i]->msg->id) == 0)
				first = false;
		if (j >= 0 && first) {
			set[i]->traces = t->set[j]->traces;
			set[i]->ntraces = t->set[j]->ntraces;
			set[i]->traces_cap = t->set[j]->traces_cap;
			t->set[j]->traces = NULL;
		}
	}
	for (size_t j = 0; j < t->n; j++)
		trigger_free(t->set[j]);
	free(t->set);
	t->set = set;
	t->n = n;
	for (size_t i = 0; i < n; i++)
		resolve_targets(t, set[i]);
	t->generation = req->generation;
	t->applied = true;
	t->stats.applies_changed++;
	*changed = true;
	update_raise(t);
	pthread_mutex_unlock(&t->mu);
	log_info("triggers: generation %llu applied, %zu triggers, term %llu",
		 (unsigned long long)req->generation, n, (unsigned long long)req->fencing_token);
	return 0;
}

uint64_t triggers_generation(struct triggers *t)
{
	uint64_t g;

	pthread_mutex_lock(&t->mu);
	g = t->generation;
	pthread_mutex_unlock(&t->mu);
	return g;
}

void triggers_tick(struct triggers *t)
{
	int64_t now;
	bool any = false;

	pthread_mutex_lock(&t->mu);
	now = now_ms(t);
	for (size_t i = 0; i < t->n; i++) {
		struct trigger *tr = t->set[i];

		if (live(tr) && tr->msg->deadline_unix_ms <= now) {
			tr->state = ST(EXPIRED);
			snprintf(tr->reason, sizeof(tr->reason), "deadline passed");
			log_info("triggers: %s expired", tr->msg->id);
			any = true;
		}
	}
	if (any)
		update_raise(t);
	pthread_mutex_unlock(&t->mu);
}

int64_t triggers_next_deadline_ms(struct triggers *t)
{
	int64_t next = INT64_MAX;

	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; i < t->n; i++)
		if (live(t->set[i]) && t->set[i]->msg->deadline_unix_ms < next)
			next = t->set[i]->msg->deadline_unix_ms;
	pthread_mutex_unlock(&t->mu);
	return next;
}

/* ---- life cycle, status ---- */

struct triggers *triggers_new(const struct triggers_opts *opts)
{
	struct triggers *t = calloc(1, sizeof(*t));
	int rc;

	if (!t)
		return NULL;
	t->o = *opts;
	t->qcap = opts->claim_queue ? opts->claim_queue : TRIGGERS_CLAIM_QUEUE;
	t->q = calloc(t->qcap, sizeof(*t->q));
	if (opts->conninfo && opts->conninfo[0])
		t->conninfo = strdup(opts->conninfo);
	if (!t->q || (opts->conninfo && opts->conninfo[0] && !t->conninfo)) {
		errno = ENOMEM;
		goto out_free;
	}
	pthread_mutex_init(&t->mu, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&t->cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (!opts->no_claims) {
		rc = pthread_create(&t->thread, NULL, claim_thread, t);
		if (rc) {
			errno = rc;
			goto out_destroy;
		}
		t->thread_started = true;
	}
	return t;

out_destroy:
	pthread_cond_destroy(&t->cv);
	pthread_mutex_destroy(&t->mu);
out_free:
	free(t->q);
	free(t->conninfo);
	free(t);
	return NULL;
}

void triggers_free(struct triggers *t)
{
	if (!t)
		return;
	if (t->thread_started) {
		pthread_mutex_lock(&t->mu);
		t->stopping = true;
		pthread_cond_broadcast(&t->cv);
		pthread_mutex_unlock(&t->mu);
		pthread_join(t->thread, NULL);
	}
	for (; t->qlen; t->qlen--, t->qhead = (t->qhead + 1) % t->qcap) {
		struct claim *c = &t->q[t->qhead];

		if (t->o.on_decision)
			t->o.on_decision(t->o.decision_ctx, c->trace, NULL, false);
		claim_clear(c);
	}
	for (size_t i = 0; i < t->n; i++)
		trigger_free(t->set[i]);
	free(t->set);
	for (size_t i = 0; i < t->nprocs; i++)
		proc_entry_clear(&t->procs[i]);
	free(t->procs);
	free(t->raised);
	free(t->offcpu);
	free(t->zerocode);
	free(t->q);
	free(t->conninfo);
	pthread_cond_destroy(&t->cv);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

void triggers_set_sampler(struct triggers *t, const struct triggers_sampler *s)
{
	pthread_mutex_lock(&t->mu);
	t->smp = *s;
	pthread_mutex_unlock(&t->mu);
}

void triggers_sampler_health(struct triggers *t, Traceprof__Control__V1__SamplerHealth *out)
{
	struct triggers_sampler now;

	traceprof__control__v1__sampler_health__init(out);
	if (t->o.sampler_figures) { /* asked outside the lock: it reads BPF maps */
		memset(&now, 0, sizeof(now));
		t->o.sampler_figures(t->o.sampler_ctx, &now);
		triggers_set_sampler(t, &now);
	}
	pthread_mutex_lock(&t->mu);
	out->running = t->smp.running;
	out->base_hz = t->smp.base_hz;
	out->cpus = t->smp.cpus;
	out->samples = t->smp.samples;
	out->samples_raised = t->smp.samples_raised;
	out->samples_lost = t->smp.samples_lost;
	out->raised_hz = t->raised_hz;
	out->raised_processes = (uint32_t)t->nraised;
	pthread_mutex_unlock(&t->mu);
}

static void status_free_one(Traceprof__Control__V1__TriggerStatus *s)
{
	if (!s)
		return;
	free(s->id);
	free(s->reason);
	for (size_t j = 0; j < s->n_claimed_trace_ids; j++)
		free(s->claimed_trace_ids[j]);
	free(s->claimed_trace_ids);
	free(s);
}

void triggers_status_free(Traceprof__Control__V1__TriggerStatus **st, size_t n)
{
	if (!st)
		return;
	for (size_t i = 0; i < n; i++)
		status_free_one(st[i]);
	free(st);
}

static Traceprof__Control__V1__TriggerStatus *status_of(const struct trigger *tr)
{
	Traceprof__Control__V1__TriggerStatus *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	traceprof__control__v1__trigger_status__init(s);
	s->id = strdup(tr->msg->id);
	s->reason = strdup(tr->reason);
	s->claimed_trace_ids = calloc(tr->ntraces ? tr->ntraces : 1, sizeof(char *));
	if (!s->id || !s->reason || !s->claimed_trace_ids)
		goto out_free;
	for (size_t i = 0; i < tr->ntraces; i++) {
		s->claimed_trace_ids[i] = strdup(tr->traces[i]);
		if (!s->claimed_trace_ids[i])
			goto out_free;
		s->n_claimed_trace_ids++;
	}
	s->state = tr->state;
	s->requests_seen = tr->seen;
	s->requests_matched = tr->matched;
	s->requests_claimed = tr->claimed;
	s->target_processes = live(tr) ? (uint32_t)tr->ntargets : 0;
	s->frequency_hz = tr->state == ST(ACTIVE) ? tr->hz : 0;
	return s;

out_free:
	status_free_one(s);
	return NULL;
}

Traceprof__Control__V1__TriggerStatus **triggers_status(struct triggers *t, size_t *n)
{
	Traceprof__Control__V1__TriggerStatus **st = NULL;

	*n = 0;
	pthread_mutex_lock(&t->mu);
	if (t->n)
		st = calloc(t->n, sizeof(*st));
	for (size_t i = 0; st && i < t->n; i++) {
		st[i] = status_of(t->set[i]);
		if (!st[i]) {
			triggers_status_free(st, i);
			st = NULL;
			break;
		}
	}
	if (st)
		*n = t->n;
	pthread_mutex_unlock(&t->mu);
	return st;
}

void triggers_get_stats(struct triggers *t, struct triggers_stats *out)
{
	pthread_mutex_lock(&t->mu);
	*out = t->stats;
	out->claims_pending = t->qlen;
	pthread_mutex_unlock(&t->mu);
}
