/*
 * triggers.c - see triggers.h.
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

#define ST(x)		TRACEPROF__CONTROL__V1__TRIGGER_STATE__TRIGGER_STATE_##x
#define MAX_ID_LEN	128  /* bytes of a trigger id */
#define MAX_PATTERN_LEN 1024 /* bytes of a route glob */
#define MAX_METHOD_LEN	32   /* bytes of an HTTP method */
#define BACKOFF_MIN_MS	100  /* first retry of a claim after a database error */
#define BACKOFF_MAX_MS	5000 /* longest wait between retries */
#define MAX_CANDIDATES	8    /* triggers one request may be claimed for, in set order */

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

static int64_t now_ms(struct triggers *t)
{
	struct timespec ts;

	if (t->o.now_ms)
		return t->o.now_ms(t->o.clock_ctx);
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Backoff waits run on the monotonic clock, whatever clock the engine was given. */
static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

/* ---- processes and targets ---- */

static struct proc_entry *proc_find(struct triggers *t, uint32_t pid, size_t *pos)
{
	size_t lo = 0, hi = t->nprocs;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (t->procs[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (pos)
		*pos = lo;
	return lo < t->nprocs && t->procs[lo].pid == pid ? &t->procs[lo] : NULL;
}

static bool in_list(char **v, size_t n, const char *s)
{
	if (!s || !*s)
		return false;
	for (size_t i = 0; i < n; i++)
		if (strcasecmp(v[i], s) == 0)
			return true;
	return false;
}

static bool cgroup_under(const char *cg, const char *dir)
{
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (n == 1)
		return cg[0] == '/';
	return strncmp(cg, dir, n) == 0 && (cg[n] == 0 || cg[n] == '/');
}

static bool proc_targeted(const pb_trigger *m, const struct proc_entry *p)
{
	const Traceprof__Control__V1__Targets *tg = m->targets;

	for (size_t i = 0; i < tg->n_pids; i++)
		if (tg->pids[i] == p->pid)
			return true;
	if (in_list(tg->container_ids, tg->n_container_ids, p->container) ||
	    in_list(tg->pod_uids, tg->n_pod_uids, p->pod))
		return true;
	if (p->service[0])
		for (size_t i = 0; i < tg->n_services; i++)
			if (strcmp(tg->services[i], p->service) == 0)
				return true;
	if (p->cgroup[0])
		for (size_t i = 0; i < tg->n_cgroup_paths; i++)
			if (cgroup_under(p->cgroup, tg->cgroup_paths[i]))
				return true;
	return false;
}

static bool live(const struct trigger *tr)
{
	return tr->state == ST(PENDING) || tr->state == ST(ACTIVE);
}

static size_t target_pos(const struct trigger *tr, uint32_t pid, bool *found)
{
	size_t lo = 0, hi = tr->ntargets;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (tr->targets[mid] < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < tr->ntargets && tr->targets[lo] == pid;
	return lo;
}

static int target_set(struct trigger *tr, uint32_t pid, bool on)
{
	bool found;
	size_t i = target_pos(tr, pid, &found);

	if (on == found)
		return 0;
	if (!on) {
		memmove(&tr->targets[i], &tr->targets[i + 1],
			(tr->ntargets - i - 1) * sizeof(*tr->targets));
		tr->ntargets--;
		return 0;
	}
	if (tr->ntargets == tr->targets_cap) {
		size_t cap = tr->targets_cap ? tr->targets_cap * 2 : 16;
		uint32_t *nt = realloc(tr->targets, cap * sizeof(*nt));

		if (!nt)
			return -ENOMEM;
		tr->targets = nt;
		tr->targets_cap = cap;
	}
	memmove(&tr->targets[i + 1], &tr->targets[i], (tr->ntargets - i) * sizeof(*tr->targets));
	tr->targets[i] = pid;
	tr->ntargets++;
	return 0;
}

static void update_state(struct triggers *t, struct trigger *tr)
{
	if (!live(tr))
		return;
	if (tr->ntargets) {
		if (tr->state != ST(ACTIVE))
			tr->active_since_ms = now_ms(t);
		tr->state = ST(ACTIVE);
		tr->reason[0] = 0;
	} else {
		tr->state = ST(PENDING);
		snprintf(tr->reason, sizeof(tr->reason), "no target process on this node");
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Recomputes the raised set; calls on_raise when it changed. Lock held. */
static void update_raise(struct triggers *t)
{
	size_t total = 0, n = 0;
	unsigned hz = 0;
	uint32_t *v;

	for (size_t i = 0; i < t->n; i++)
		if (t->set[i]->state == ST(ACTIVE))
			total += t->set[i]->ntargets;
	v = malloc((total ? total : 1) * sizeof(*v));
	if (!v)
		return; /* keeps the last raise; the next change retries */
	for (size_t i = 0; i < t->n; i++) {
		struct trigger *tr = t->set[i];

		if (tr->state != ST(ACTIVE))
			continue;
		memcpy(v + n, tr->targets, tr->ntargets * sizeof(*v));
		n += tr->ntargets;
		if (tr->hz > hz)
			hz = tr->hz;
	}
	qsort(v, n, sizeof(*v), cmp_u32);
	total = n;
	n = 0;
	for (size_t i = 0; i < total; i++)
		if (n == 0 || v[n - 1] != v[i])
			v[n++] = v[i];
	if (!n)
		hz = 0;
	if (n == t->nraised && hz == t->raised_hz && !memcmp(v, t->raised, n * sizeof(*v))) {
		free(v);
		return;
	}
	free(t->raised);
	t->raised = v;
	t->nraised = n;
	t->raised_hz = hz;
	log_debug("triggers: raise processes=%zu hz=%u", n, hz);
	if (t->o.on_raise)
		t->o.on_raise(t->o.raise_ctx, v, n, hz);
}

static void resolve_targets(struct triggers *t, struct trigger *tr)
{
	tr->ntargets = 0;
	if (!live(tr))
		return;
	for (size_t i = 0; i < t->nprocs; i++)
		if (proc_targeted(tr->msg, &t->procs[i]) && target_set(tr, t->procs[i].pid, true))
			log_warn("triggers: out of memory for the targets of %s", tr->msg->id);
	update_state(t, tr);
}

static void proc_entry_clear(struct proc_entry *p)
{
	free(p->service);
	free(p->container);
	free(p->pod);
	free(p->cgroup);
}

int triggers_proc_add(struct triggers *t, const struct triggers_proc *p)
{
	struct proc_entry e = {.pid = p->pid}, *old;
	size_t pos;

	e.service = strdup(p->service ? p->service : "");
	e.container = strdup(p->container_id ? p->container_id : "");
	e.pod = strdup(p->pod_uid ? p->pod_uid : "");
	e.cgroup = strdup(p->cgroup ? p->cgroup : "");
	if (!e.service || !e.container || !e.pod || !e.cgroup) {
		proc_entry_clear(&e);
		return -ENOMEM;
	}
	pthread_mutex_lock(&t->mu);
	old = proc_find(t, p->pid, &pos);
	if (old) {
		proc_entry_clear(old);
		*old = e;
	} else {
		if (t->nprocs == t->procs_cap) {
			size_t cap = t->procs_cap ? t->procs_cap * 2 : 256;
			struct proc_entry *np = realloc(t->procs, cap * sizeof(*np));

			if (!np) {
				pthread_mutex_unlock(&t->mu);
				proc_entry_clear(&e);
				return -ENOMEM;
			}
			t->procs = np;
			t->procs_cap = cap;
		}
		memmove(&t->procs[pos + 1], &t->procs[pos], (t->nprocs - pos) * sizeof(e));
		t->procs[pos] = e;
		t->nprocs++;
		old = &t->procs[pos];
	}
	for (size_t i = 0; i < t->n; i++) {
		struct trigger *tr = t->set[i];

		if (!live(tr))
			continue;
		target_set(tr, p->pid, proc_targeted(tr->msg, old));
		update_state(t, tr);
	}
	update_raise(t);
	pthread_mutex_unlock(&t->mu);
	return 0;
}

void triggers_proc_remove(struct triggers *t, uint32_t pid)
{
	struct proc_entry *e;
	size_t pos;

	pthread_mutex_lock(&t->mu);
	e = proc_find(t, pid, &pos);
	if (e) {
		proc_entry_clear(e);
		memmove(e, e + 1, (t->nprocs - pos - 1) * sizeof(*e));
		t->nprocs--;
		for (size_t i = 0; i < t->n; i++) {
			target_set(t->set[i], pid, false);
			update_state(t, t->set[i]);
		}
		update_raise(t);
	}
	pthread_mutex_unlock(&t->mu);
}

/* ---- the set ---- */

static void trigger_free(struct trigger *tr)
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

static struct trigger *find_trigger(struct triggers *t, const char *id)
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

/* ---- requests ---- */

/* Whether a request from src comes from a target of tr. */
static bool source_targeted(struct triggers *t, const struct trigger *tr,
			    const struct triggers_source *src)
{
	const Traceprof__Control__V1__Targets *tg = tr->msg->targets;
	bool found;

	if (src->pid) {
		target_pos(tr, src->pid, &found);
		if (found)
			return true;
	}
	if (in_list(tg->container_ids, tg->n_container_ids, src->container_id) ||
	    in_list(tg->pod_uids, tg->n_pod_uids, src->pod_uid))
		return true;
	if (!src->service || !*src->service)
		return false;
	for (size_t i = 0; i < tg->n_services; i++)
		if (strcmp(tg->services[i], src->service) == 0)
			return true;
	/* targets named by pid or cgroup: a target process with this service name */
	for (size_t i = 0; i < tr->ntargets; i++) {
		const struct proc_entry *p = proc_find(t, tr->targets[i], NULL);

		if (p && strcmp(p->service, src->service) == 0 &&
		    (!src->container_id || !*src->container_id || !p->container[0] ||
		     strcasecmp(src->container_id, p->container) == 0))
			return true;
	}
	return false;
}

static bool criteria_match(const struct trigger *tr, const struct triggers_request *r)
{
	const Traceprof__Control__V1__Criteria *cr = tr->msg->criteria;

	if (!cr)
		return true;
	if (r->duration_us < 0 || (uint64_t)r->duration_us < cr->min_duration_us)
		return false;
	if (cr->max_duration_us && (uint64_t)r->duration_us > cr->max_duration_us)
		return false;
	if (!tr->status_any && (r->status < 100 || r->status > 599 ||
				!(tr->status_bits[r->status / 64] & (1ull << (r->status % 64)))))
		return false;
	if (cr->route[0] && !triggers_glob(cr->route, r->route ? r->route : ""))
		return false;
	if (cr->method[0] && strcasecmp(cr->method, r->method ? r->method : "") != 0)
		return false;
	return true;
}

void triggers_request(struct triggers *t, const struct triggers_source *src,
		      const struct triggers_request *r)
{
	struct claim c = {0};
	bool target = false, queued = false;

	pthread_mutex_lock(&t->mu);
	t->stats.requests++;
	for (size_t i = 0; i < t->n; i++) {
		struct trigger *tr = t->set[i];

		if (tr->state != ST(ACTIVE) || !source_targeted(t, tr, src))
			continue;
		target = true;
		tr->seen++;
		/* begun before sampling was raised: not profiled at the trigger's rate throughout
		 */
		if (r->start_us && r->start_us / 1000 < tr->active_since_ms)
			continue;
		if (!criteria_match(tr, r))
			continue;
		tr->matched++;
		if (c.nids < MAX_CANDIDATES && !t->o.no_claims)
			c.ids[c.nids++] = strdup(tr->msg->id);
	}
	if (target)
		t->stats.requests_target++;
	if (c.nids) {
		if (t->qlen == t->qcap) {
			t->stats.claims_dropped++;
		} else {
			memcpy(c.trace, r->trace_id, 16);
			c.queued_ms = now_ms(t);
			t->q[(t->qhead + t->qlen) % t->qcap] = c;
			t->qlen++;
			t->stats.claims_queued++;
			queued = true;
			pthread_cond_signal(&t->cv);
		}
	}
	pthread_mutex_unlock(&t->mu);
	if (!queued)
		for (size_t i = 0; i < c.nids; i++)
			free(c.ids[i]);
	if (target && !queued && t->o.on_decision)
		t->o.on_decision(t->o.decision_ctx, r->trace_id, NULL, false);
}

/* ---- the claim thread ---- */

static void claim_clear(struct claim *c)
{
	for (size_t i = 0; i < c->nids; i++)
		free(c->ids[i]);
	c->nids = 0;
}

enum claim_result { CLAIM_KEPT, CLAIM_NOT_KEPT, CLAIM_RETRY };

/* Marks a trigger Completed or Expired from the database's view. Lock held. */
static void stop_trigger(struct triggers *t, const char *id, pb_state st, const char *why)
{
	struct trigger *tr = find_trigger(t, id);

	if (!tr || !live(tr))
		return;
	tr->state = st;
	snprintf(tr->reason, sizeof(tr->reason), "%s", why);
	log_info("triggers: %s %s", id, why);
	update_raise(t);
}

/* After a NULL claim: looks at the row's phase and stops the trigger when it ended. */
static void check_phase(struct triggers *t, PGconn *conn, const char *id)
{
	const char *params[1] = {id};
	PGresult *res = PQexecParams(conn,
				     "SELECT phase FROM traceprof.trace_profile_triggers "
				     "WHERE trigger_id = $1",
				     1, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
		const char *phase = PQgetvalue(res, 0, 0);

		pthread_mutex_lock(&t->mu);
		if (strcmp(phase, "Completed") == 0)
			stop_trigger(t, id, ST(COMPLETED), "max_requests claimed (cluster-wide)");
		else if (strcmp(phase, "Expired") == 0)
			stop_trigger(t, id, ST(EXPIRED), "expired (database)");
		pthread_mutex_unlock(&t->mu);
	}
	PQclear(res);
}

static enum claim_result claim_one(struct triggers *t, PGconn **conn, struct claim *c,
				   const char **kept_id)
{
	char hex[33];

	tp_hex_encode(c->trace, 16, hex);
	hex[32] = 0;
	while (c->next < c->nids) {
		const char *id = c->ids[c->next];
		const char *params[2] = {id, hex};
		struct trigger *tr;
		PGresult *res;
		bool active;

		pthread_mutex_lock(&t->mu);
		tr = find_trigger(t, id);
		active = tr && tr->state == ST(ACTIVE);
		if (!active)
			t->stats.claims_skipped++;
		pthread_mutex_unlock(&t->mu);
		if (!active) {
			c->next++;
			continue;
		}
		if (!*conn) {
			*conn = PQconnectdb(t->conninfo ? t->conninfo : "");
			t->stats.db_connects++;
			if (PQstatus(*conn) != CONNECTION_OK) {
				log_debug("triggers: claim database: %s", PQerrorMessage(*conn));
				PQfinish(*conn);
				*conn = NULL;
				return CLAIM_RETRY;
			}
		}
		res = PQexecParams(*conn, "SELECT traceprof.claim_request($1, $2::uuid)", 2, NULL,
				   params, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
			bool down = PQstatus(*conn) != CONNECTION_OK;

			pthread_mutex_lock(&t->mu);
			t->stats.claim_errors++;
			pthread_mutex_unlock(&t->mu);
			log_warn("triggers: claim for %s failed: %s", id,
				 PQresultErrorMessage(res));
			PQclear(res);
			if (down) {
				PQfinish(*conn);
				*conn = NULL;
				return CLAIM_RETRY;
			}
			c->next++; /* the statement itself failed: not this trigger */
			continue;
		}
		if (PQgetisnull(res, 0, 0)) {
			PQclear(res);
			pthread_mutex_lock(&t->mu);
			t->stats.claims_null++;
			pthread_mutex_unlock(&t->mu);
			check_phase(t, *conn, id);
			c->next++;
			continue;
		}
		{
			long count = atol(PQgetvalue(res, 0, 0));

			PQclear(res);
			pthread_mutex_lock(&t->mu);
			t->stats.claims_ok++;
			tr = find_trigger(t, id);
			if (tr) {
				tr->claimed++;
				if (tr->ntraces == tr->traces_cap) {
					size_t cap = tr->traces_cap ? tr->traces_cap * 2 : 16;
					char(*nt)[33] = realloc(tr->traces, cap * sizeof(*nt));

					if (nt) {
						tr->traces = nt;
						tr->traces_cap = cap;
					}
				}
				if (tr->ntraces < tr->traces_cap &&
				    tr->ntraces < TRIGGERS_MAX_REQUESTS)
					memcpy(tr->traces[tr->ntraces++], hex, 33);
				if (count >= (long)tr->max_requests)
					stop_trigger(t, id, ST(COMPLETED),
						     "max_requests claimed (cluster-wide)");
			}
			pthread_mutex_unlock(&t->mu);
			*kept_id = id;
			return CLAIM_KEPT;
		}
	}
	return CLAIM_NOT_KEPT;
}

/* Whether any candidate of c is still active. Lock held. */
static bool claim_alive(struct triggers *t, const struct claim *c)
{
	for (size_t i = c->next; i < c->nids; i++) {
		struct trigger *tr = find_trigger(t, c->ids[i]);

		if (tr && tr->state == ST(ACTIVE))
			return true;
	}
	return false;
}

static void *claim_thread(void *arg)
{
	struct triggers *t = arg;
	PGconn *conn = NULL;

	pthread_setname_np(pthread_self(), "tp-claims");
	pthread_mutex_lock(&t->mu);
	for (;;) {
		struct claim *c;
		const char *kept = NULL;
		enum claim_result res;
		int64_t now;

		while (!t->stopping && t->qlen == 0)
			pthread_cond_wait(&t->cv, &t->mu);
		if (t->stopping)
			break;
		now = mono_ms();
		if (now < t->next_try_ms) {
			struct timespec ts;
			int64_t until = t->next_try_ms;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec = until / 1000;
			ts.tv_nsec = (until % 1000) * 1000000;
			pthread_cond_timedwait(&t->cv, &t->mu, &ts);
			continue;
		}
		c = &t->q[t->qhead]; /* only this thread removes entries: c stays valid */
		pthread_mutex_unlock(&t->mu);
		res = claim_one(t, &conn, c, &kept);
		pthread_mutex_lock(&t->mu);
		if (res == CLAIM_RETRY) {
			if (claim_alive(t, c) &&
			    now_ms(t) - c->queued_ms < TRIGGERS_CLAIM_HOLD_MS) {
				t->backoff_ms = t->backoff_ms ? t->backoff_ms * 2 : BACKOFF_MIN_MS;
				if (t->backoff_ms > BACKOFF_MAX_MS)
					t->backoff_ms = BACKOFF_MAX_MS;
				t->next_try_ms = mono_ms() + t->backoff_ms;
				continue;
			}
			t->stats.claims_abandoned++;
			res = CLAIM_NOT_KEPT;
		} else {
			t->backoff_ms = 0;
		}
		{
			struct claim done = *c;

			t->qhead = (t->qhead + 1) % t->qcap;
			t->qlen--;
			pthread_mutex_unlock(&t->mu);
			if (t->o.on_decision)
				t->o.on_decision(t->o.decision_ctx, done.trace,
						 res == CLAIM_KEPT ? kept : NULL,
						 res == CLAIM_KEPT);
			claim_clear(&done);
			pthread_mutex_lock(&t->mu);
		}
	}
	pthread_mutex_unlock(&t->mu);
	PQfinish(conn);
	return NULL;
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
