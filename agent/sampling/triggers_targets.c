/*
 * triggers_targets.c - the trigger engine's processes and targets (which
 * processes each trigger raises, and the raise itself) and finished
 * requests checked against the triggers' criteria, queued for a claim.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "traceprof/hex.h"
#include "traceprof/log.h"
#include "triggers_internal.h"

/* ---- processes and targets ---- */

struct proc_entry *proc_find(struct triggers *t, uint32_t pid, size_t *pos)
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

bool in_list(char **v, size_t n, const char *s)
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

size_t target_pos(const struct trigger *tr, uint32_t pid, bool *found)
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
		snprintf(tr->reason, sizeof(tr->reason), "no target process on this node%s",
			 tr->offcpu_us ? ": no off-CPU capture until one appears" : "");
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Which Active triggers' targets a set holds. */
enum target_set { SET_RAISED, SET_OFFCPU, SET_ZEROCODE };

static bool in_set(const struct trigger *tr, enum target_set which)
{
	if (tr->state != ST(ACTIVE))
		return false;
	return which == SET_RAISED || (which == SET_OFFCPU && tr->offcpu_us) ||
	       (which == SET_ZEROCODE && tr->zerocode);
}

/*
 * The targets of the Active triggers of a set (all of them, those asking
 * for off-CPU capture, or those asking for zero-code capture), sorted and
 * unique, in a new array (the caller frees it; NULL on -ENOMEM); with the
 * highest Hz and the smallest off-CPU threshold among those triggers (0
 * when none).
 */
static uint32_t *active_targets(struct triggers *t, enum target_set which, size_t *n, unsigned *hz,
				uint32_t *min_us)
{
	size_t total = 0, k = 0;
	uint32_t *v;

	*hz = 0;
	*min_us = 0;
	for (size_t i = 0; i < t->n; i++)
		if (in_set(t->set[i], which))
			total += t->set[i]->ntargets;
	v = malloc((total ? total : 1) * sizeof(*v));
	if (!v)
		return NULL;
	for (size_t i = 0; i < t->n; i++) {
		struct trigger *tr = t->set[i];

		if (!in_set(tr, which))
			continue;
		memcpy(v + k, tr->targets, tr->ntargets * sizeof(*v));
		k += tr->ntargets;
		if (tr->hz > *hz)
			*hz = tr->hz;
		if (tr->offcpu_us && (!*min_us || tr->offcpu_us < *min_us))
			*min_us = tr->offcpu_us;
	}
	qsort(v, k, sizeof(*v), cmp_u32);
	*n = 0;
	for (size_t i = 0; i < k; i++)
		if (*n == 0 || v[*n - 1] != v[i])
			v[(*n)++] = v[i];
	return v;
}

/*
 * Replaces the set *cur (*ncur processes, *param its rate or threshold)
 * with v (n, param), taking v; false, v freed, when nothing changed.
 */
static bool replace_set(uint32_t **cur, size_t *ncur, unsigned *cur_param, uint32_t *v, size_t n,
			unsigned param)
{
	if (n == *ncur && param == *cur_param && (!n || !memcmp(v, *cur, n * sizeof(*v)))) {
		free(v);
		return false;
	}
	free(*cur);
	*cur = v;
	*ncur = n;
	*cur_param = param;
	return true;
}

/*
 * Recomputes one set (which) and, when it or its parameter changed (the
 * raised Hz, the smallest off-CPU threshold), calls its callback. A set
 * that cannot be computed (no memory) keeps the last one: the next change
 * retries. Lock held.
 */
static void update_set(struct triggers *t, enum target_set which)
{
	static const char *const what[] = {"raise", "off-CPU", "zero-code"};
	uint32_t **cur = which == SET_RAISED   ? &t->raised
			 : which == SET_OFFCPU ? &t->offcpu
					       : &t->zerocode;
	size_t *ncur = which == SET_RAISED   ? &t->nraised
		       : which == SET_OFFCPU ? &t->noffcpu
					     : &t->nzerocode;
	unsigned *param = which == SET_RAISED	? &t->raised_hz
			  : which == SET_OFFCPU ? &t->offcpu_us
						: &t->zerocode_on;
	size_t n;
	unsigned hz;
	uint32_t min_us, *v = active_targets(t, which, &n, &hz, &min_us);
	unsigned p = !n ? 0 : which == SET_RAISED ? hz : which == SET_OFFCPU ? min_us : 1;

	if (!v || !replace_set(cur, ncur, param, v, n, p))
		return;
	log_debug("triggers: %s processes=%zu param=%u", what[which], n, p);
	if (which == SET_RAISED && t->o.on_raise)
		t->o.on_raise(t->o.raise_ctx, v, n, p);
	else if (which == SET_OFFCPU && t->o.on_offcpu)
		t->o.on_offcpu(t->o.offcpu_ctx, v, n, p);
	else if (which == SET_ZEROCODE && t->o.on_zerocode)
		t->o.on_zerocode(t->o.zerocode_ctx, v, n);
}

/* Recomputes the raised, off-CPU and zero-code sets; calls their callbacks when changed. Lock
 * held. */
void update_raise(struct triggers *t)
{
	update_set(t, SET_RAISED);
	update_set(t, SET_OFFCPU);
	update_set(t, SET_ZEROCODE);
}

void resolve_targets(struct triggers *t, struct trigger *tr)
{
	tr->ntargets = 0;
	if (!live(tr))
		return;
	for (size_t i = 0; i < t->nprocs; i++)
		if (proc_targeted(tr->msg, &t->procs[i]) && target_set(tr, t->procs[i].pid, true))
			log_warn("triggers: out of memory for the targets of %s", tr->msg->id);
	update_state(t, tr);
}

void proc_entry_clear(struct proc_entry *p)
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
