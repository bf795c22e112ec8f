/*
 * local.c - the controller's local mode (see local.h).
 *
 * One loop: inotify on the triggers directory (a file closed after writing,
 * renamed in or removed is picked up after 10 ms, so a burst of writes
 * makes one pass; a file only created waits 250 ms for its writer to close
 * it, so a half-written manifest is not reported), a periodic tick
 * (--interval, 1 s), and signals through a signalfd. Every pass is level
 * triggered and starts from current state only: it looks at every manifest
 * (manifest_dir.c: one fstatat each, and a parse only for a new or changed
 * file), brings the trigger table in line (triggers_db.c), builds the complete
 * desired set from the table's Active rows, sends it to every agent
 * (ApplyTriggers, idempotent), reads their status (GetStatus), logs phase
 * transitions and writes the status file. Event payloads are never used
 * beyond "something changed". An unreachable database or agent is logged
 * once per outage and retried on every pass; the rest keeps working.
 */
#include "local.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "jsonbuf.h"
#include "manifest.h"
#include "manifest_dir.h"
#include "traceprof/log.h"
#include "triggers_db.h"

#define DEBOUNCE_MS    10  /* after a complete change: close, rename, removal */
#define CREATE_WAIT_MS 250 /* after a creation not yet closed by its writer */

struct phase_seen {
	char *id;    /* trigger id */
	char *phase; /* phase last logged */
};

struct parsed_spec {
	char *id;		   /* trigger id */
	char *spec;		   /* the row's spec text it was parsed from */
	struct manifest_trigger t; /* the spec parsed */
	bool moved;		   /* taken over by the next build: the fields are not ours */
};

struct state {
	const struct local_config *cfg;		   /* flags */
	char status_path[PATH_MAX];		   /* status file */
	struct ctl_db db;			   /* the database */
	struct ctl_agent agents[LOCAL_MAX_AGENTS]; /* one per --agent */
	struct trigger_rows rows;  /* current rows, from the last pass that reached the database */
	struct ctl_set set;	   /* the desired set */
	char **errors;		   /* manifest errors of the last pass (logged once each) */
	size_t n_errors;	   /* entries of errors */
	struct phase_seen *phases; /* phases last logged */
	size_t n_phases;	   /* entries of phases */
	bool rows_loaded;	   /* the table was read at least once: the desired set is known */
	struct manifest_dir dir;   /* the directory's files, cached between passes */
	uint64_t built_from;	   /* rows_signature() of the rows the desired set was built from */
	bool built;		   /* built_from is set */
	struct parsed_spec *specs; /* the Active rows' specs as last parsed, sorted by id */
	size_t n_specs;		   /* entries of specs */
	bool status_write_failed;  /* the last status file write failed (logged once) */
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Logs the errors that are new since the last pass; keeps the list (sorted). */
static void log_new_errors(struct state *s, const struct manifest_list *m)
{
	char **now = calloc(m->n_errors ? m->n_errors : 1, sizeof(*now));
	size_t n = 0;

	for (size_t i = 0; i < m->n_errors; i++) {
		const char *msg = m->errors[i].message;

		if (!bsearch(&msg, s->errors, s->n_errors, sizeof(*s->errors), cmp_str))
			log_error("invalid manifest: %s", msg);
		if (now && (now[n] = strdup(msg)))
			n++;
	}
	for (size_t j = 0; j < s->n_errors; j++)
		free(s->errors[j]);
	free(s->errors);
	if (n)
		qsort(now, n, sizeof(*now), cmp_str);
	s->errors = now;
	s->n_errors = n;
}

/*
 * What the desired set is built from, as one number: the id, phase, spec,
 * limit and deadline of every row. The same number twice in a row means
 * the same set, so 10,000 rows are not parsed again every pass.
 */
static uint64_t rows_signature(const struct trigger_rows *rows)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */

	for (size_t i = 0; i < rows->n; i++) {
		const struct trigger_row *r = &rows->v[i];
		const char *parts[3] = {r->id, r->phase, r->spec};
		int64_t nums[2] = {r->max_requests, r->deadline_ms};

		for (int k = 0; k < 3; k++)
			for (const unsigned char *p = (const unsigned char *)parts[k];; p++) {
				h = (h ^ *p) * 1099511628211ULL;
				if (!*p)
					break;
			}
		for (int k = 0; k < 2; k++)
			for (size_t b = 0; b < sizeof(nums[k]); b++)
				h = (h ^ ((uint64_t)nums[k] >> (8 * b) & 0xff)) * 1099511628211ULL;
	}
	return h ^ rows->n;
}

/* The desired set: every Active row. A new generation when it changed. */
static int cmp_spec(const void *a, const void *b)
{
	return strcmp(((const struct parsed_spec *)a)->id, ((const struct parsed_spec *)b)->id);
}

static void specs_free(struct parsed_spec *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i].moved)
			continue;
		free(v[i].id);
		free(v[i].spec);
		manifest_trigger_clear(&v[i].t);
	}
	free(v);
}

/*
 * The row's spec parsed, from the last build when the row's spec text is
 * the same (moved into next), else parsed now. Returns NULL after logging
 * when the spec is not valid.
 */
static const struct manifest_trigger *row_spec(struct state *s, const struct trigger_row *r,
					       struct parsed_spec *next, size_t *n_next)
{
	static const struct manifest_opts opts = {.local = true};
	struct parsed_spec key = {.id = r->id}, *old, *p = &next[*n_next];
	char err[512];

	old = bsearch(&key, s->specs, s->n_specs, sizeof(*s->specs), cmp_spec);
	if (old && !old->moved && strcmp(old->spec, r->spec) == 0) {
		*p = *old;
		old->moved = true; /* its id stays readable for the searches to come */
		(*n_next)++;
		return &p->t;
	}
	memset(p, 0, sizeof(*p));
	if (manifest_spec_from_json(&p->t, r->namespace_, r->name, r->spec, &opts, err,
				    sizeof(err))) {
		log_warn("trigger spec in the table is not valid, not sent to agents id=%s: %s",
			 r->id, err);
		return NULL;
	}
	p->id = strdup(r->id);
	p->spec = strdup(r->spec);
	if (!p->id || !p->spec) {
		free(p->id);
		free(p->spec);
		manifest_trigger_clear(&p->t);
		return NULL;
	}
	(*n_next)++;
	return &p->t;
}

/*
 * The desired set: every Active row. A new generation when it changed. A
 * row's spec is parsed only when it is new or its text changed, so a new
 * trigger among 5,000 costs one parse, not 5,000.
 */
static void build_desired(struct state *s)
{
	uint64_t sig = rows_signature(&s->rows);
	struct parsed_spec *next;
	size_t n_next = 0;

	if (s->built && sig == s->built_from)
		return;
	next = calloc(s->rows.n ? s->rows.n : 1, sizeof(*next));
	ctl_set_clear_triggers(&s->set);
	s->set.req.triggers = calloc(s->rows.n ? s->rows.n : 1, sizeof(*s->set.req.triggers));
	if (!s->set.req.triggers || !next) {
		free(next);
		return;
	}
	for (size_t i = 0; i < s->rows.n; i++) {
		const struct trigger_row *r = &s->rows.v[i];
		const struct manifest_trigger *t;
		Traceprof__Control__V1__Trigger *p;

		if (strcmp(r->phase, "Active") != 0 || !(t = row_spec(s, r, next, &n_next)))
			continue;
		p = manifest_to_proto(t, r->id, r->deadline_ms);
		/* the row is authoritative for limits: maxRequests never below collected */
		if (p)
			p->max_requests = (uint32_t)r->max_requests;
		if (p)
			s->set.req.triggers[s->set.req.n_triggers++] = p;
	}
	specs_free(s->specs, s->n_specs);
	if (n_next)
		qsort(next, n_next, sizeof(*next), cmp_spec);
	s->specs = next;
	s->n_specs = n_next;
	s->built = true;
	s->built_from = sig;
	if (ctl_set_commit(&s->set))
		log_debug("desired set changed generation=%llu triggers=%zu",
			  (unsigned long long)s->set.req.generation, s->set.req.n_triggers);
}

/* A trigger an agent refused turns Rejected, with the agent's reason. */
static void apply_agent_rejections(struct state *s)
{
	for (size_t i = 0; i < s->rows.n; i++) {
		struct trigger_row *r = &s->rows.v[i];

		if (strcmp(r->phase, "Active") != 0)
			continue;
		for (size_t k = 0; k < s->cfg->n_agents; k++) {
			const Traceprof__Control__V1__TriggerStatus *ts =
			    ctl_agent_trigger(&s->agents[k], r->id);
			char reason[512], *p;

			if (!ts ||
			    ts->state !=
				TRACEPROF__CONTROL__V1__TRIGGER_STATE__TRIGGER_STATE_REJECTED)
				continue;
			snprintf(reason, sizeof(reason), "agent %s: %s", s->agents[k].addr,
				 ts->reason && *ts->reason ? ts->reason : "rejected");
			if (!s->db.conn || triggers_db_reject(s->db.conn, r->id, reason))
				break;
			if ((p = strdup(reason))) {
				free(r->reason);
				r->reason = p;
			}
			if ((p = strdup("Rejected"))) {
				free(r->phase);
				r->phase = p;
			}
			break;
		}
	}
}

static int cmp_phase(const void *a, const void *b)
{
	return strcmp(((const struct phase_seen *)a)->id, ((const struct phase_seen *)b)->id);
}

static void log_transitions(struct state *s)
{
	struct phase_seen *now = calloc(s->rows.n ? s->rows.n : 1, sizeof(*now));
	size_t n = 0;

	for (size_t i = 0; i < s->rows.n; i++) {
		const struct trigger_row *r = &s->rows.v[i];
		struct phase_seen key = {.id = r->id}, *seen;
		const char *was;

		seen = bsearch(&key, s->phases, s->n_phases, sizeof(*s->phases), cmp_phase);
		was = seen ? seen->phase : NULL;
		if (!was || strcmp(was, r->phase) != 0)
			log_info("trigger %s id=%s service=%s collected=%d/%d was=%s%s%s", r->phase,
				 r->id, r->service, r->collected, r->max_requests, was ? was : "-",
				 *r->reason ? " reason=" : "", r->reason);
		if (now) {
			now[n].id = strdup(r->id);
			now[n].phase = strdup(r->phase);
			if (now[n].id && now[n].phase)
				n++;
			else {
				free(now[n].id);
				free(now[n].phase);
			}
		}
	}
	for (size_t j = 0; j < s->n_phases; j++) {
		free(s->phases[j].id);
		free(s->phases[j].phase);
	}
	free(s->phases);
	if (n)
		qsort(now, n, sizeof(*now), cmp_phase);
	s->phases = now;
	s->n_phases = n;
}

/* Which file defines a trigger: m's triggers and errors sorted by (namespace, name). */
struct file_index {
	const struct manifest_list *m; /* the pass's manifests */
	size_t *items;		       /* indexes of m->items, sorted */
	size_t *errors;		       /* indexes of m->errors, sorted */
};

static const struct manifest_list *index_list;

static int cmp_error(const void *a, const void *b)
{
	const struct manifest_error *p = &index_list->errors[*(const size_t *)a];
	const struct manifest_error *q = &index_list->errors[*(const size_t *)b];
	int c = strcmp(p->namespace_, q->namespace_);

	if (!c)
		c = strcmp(p->name, q->name);
	if (!c)
		c = *(const size_t *)a < *(const size_t *)b ? -1 : 1;
	return c;
}

static void file_index_build(struct file_index *fi, const struct manifest_list *m)
{
	fi->m = m;
	fi->items = calloc(m->n ? m->n : 1, sizeof(*fi->items));
	fi->errors = calloc(m->n_errors ? m->n_errors : 1, sizeof(*fi->errors));
	if (!fi->items || !fi->errors)
		return;
	manifest_list_sort_by_name(m, fi->items);
	for (size_t i = 0; i < m->n_errors; i++)
		fi->errors[i] = i;
	index_list = m;
	qsort(fi->errors, m->n_errors, sizeof(*fi->errors), cmp_error);
}

static void file_index_free(struct file_index *fi)
{
	free(fi->items);
	free(fi->errors);
}

static const char *file_of(const struct file_index *fi, const char *ns, const char *name)
{
	const struct manifest_list *m = fi->m;
	size_t lo = 0, hi = m->n;

	if (!fi->items || !fi->errors)
		return NULL;
	while (lo < hi) { /* the first (namespace, name) not below the key */
		size_t mid = (lo + hi) / 2;
		const struct manifest_trigger *t = &m->items[fi->items[mid]];
		int c = strcmp(t->namespace_, ns);

		if (!c)
			c = strcmp(t->name, name);
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < m->n && strcmp(m->items[fi->items[lo]].namespace_, ns) == 0 &&
	    strcmp(m->items[fi->items[lo]].name, name) == 0)
		return m->items[fi->items[lo]].file;
	lo = 0, hi = m->n_errors;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct manifest_error *e = &m->errors[fi->errors[mid]];
		int c = strcmp(e->namespace_, ns);

		if (!c)
			c = strcmp(e->name, name);
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < m->n_errors && strcmp(m->errors[fi->errors[lo]].namespace_, ns) == 0 &&
	    strcmp(m->errors[fi->errors[lo]].name, name) == 0)
		return m->errors[fi->errors[lo]].file;
	return NULL;
}

/*
 * The trigger's target processes summed over the agents that report it,
 * and a message when an Active trigger targets nothing: every agent
 * reached has it in force and none has a process of it (a service name
 * no process has, pids that are gone). The trigger stays Active (a
 * process may still start before the deadline); the message says why
 * nothing is collected.
 */
static void json_targets(struct state *s, struct jsonbuf *b, const struct trigger_row *r)
{
	unsigned long long sum = 0;
	size_t reporting = 0, reached = 0;
	char msg[320];

	for (size_t k = 0; k < s->cfg->n_agents; k++) {
		const Traceprof__Control__V1__TriggerStatus *ts =
		    ctl_agent_trigger(&s->agents[k], r->id);

		if (s->agents[k].down || !s->agents[k].status)
			continue;
		reached++;
		if (!ts)
			continue;
		reporting++;
		sum += ts->target_processes;
	}
	jsonbuf_printf(b, "], \"targetProcesses\": %llu, \"message\": ", sum);
	if (strcmp(r->phase, "Active") == 0 && reached && reporting == reached && !sum) {
		const Traceprof__Control__V1__Trigger *tr = ctl_set_trigger(&s->set, r->id);

		snprintf(msg, sizeof(msg), "no target process on any agent (service %s)%s",
			 r->service, tr && tr->offcpu ? CTL_NO_TARGET_OFFCPU : "");
		jsonbuf_str(b, msg);
	} else {
		jsonbuf_str(b, NULL);
	}
}

static void json_trigger(struct state *s, struct jsonbuf *b, const struct file_index *fi,
			 const struct trigger_row *r)
{
	const char *ids = r->trace_ids;

	jsonbuf_printf(b, "{\"id\": ");
	jsonbuf_str(b, r->id);
	jsonbuf_printf(b, ", \"namespace\": ");
	jsonbuf_str(b, r->namespace_);
	jsonbuf_printf(b, ", \"name\": ");
	jsonbuf_str(b, r->name);
	jsonbuf_printf(b, ", \"file\": ");
	jsonbuf_str(b, file_of(fi, r->namespace_, r->name));
	jsonbuf_printf(b, ", \"service\": ");
	jsonbuf_str(b, r->service);
	jsonbuf_printf(b, ", \"phase\": ");
	jsonbuf_str(b, r->phase);
	jsonbuf_printf(b, ", \"reason\": ");
	jsonbuf_str(b, *r->reason ? r->reason : NULL);
	jsonbuf_printf(b, ", \"collectedRequests\": %d, \"maxRequests\": %d, \"frequencyHz\": %d",
		       r->collected, r->max_requests, r->frequency_hz);
	jsonbuf_printf(b, ", \"deadline\": ");
	jsonbuf_str(b, r->deadline);
	jsonbuf_printf(b, ", \"traceIDs\": [");
	while (*ids) {
		const char *comma = strchr(ids, ',');
		size_t n = comma ? (size_t)(comma - ids) : strlen(ids);

		jsonbuf_printf(b, "%s\"%.*s\"", ids == r->trace_ids ? "" : ", ", (int)n, ids);
		ids += n + (comma ? 1 : 0);
	}
	json_targets(s, b, r);
	jsonbuf_printf(b, ", \"agents\": [");
	for (size_t k = 0, out = 0; k < s->cfg->n_agents; k++) {
		const Traceprof__Control__V1__TriggerStatus *ts =
		    ctl_agent_trigger(&s->agents[k], r->id);

		if (!ts)
			continue;
		jsonbuf_printf(b, "%s{\"address\": ", out++ ? ", " : "");
		jsonbuf_str(b, s->agents[k].addr);
		jsonbuf_printf(b, ", \"state\": \"%s\", \"reason\": ", ctl_state_name(ts->state));
		jsonbuf_str(b, ts->reason && *ts->reason ? ts->reason : NULL);
		jsonbuf_printf(b,
			       ", \"targetProcesses\": %u, \"requestsSeen\": %llu, "
			       "\"requestsMatched\": %llu, \"requestsClaimed\": %llu}",
			       ts->target_processes, (unsigned long long)ts->requests_seen,
			       (unsigned long long)ts->requests_matched,
			       (unsigned long long)ts->requests_claimed);
	}
	jsonbuf_printf(b, "]}");
}

/* The status file, replaced atomically (write a temporary file, rename). */
static void write_status(struct state *s, const struct manifest_list *m)
{
	const struct manifest_dir_stats *ds = &s->dir.stats;
	struct file_index fi = {0};
	struct jsonbuf b = {0};
	char tmp[PATH_MAX + 8], stamp[32];
	time_t t = time(NULL);
	struct tm tm;
	char *text;
	FILE *f = NULL;
	int fd;
	bool ok;

	gmtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	jsonbuf_printf(&b, "{\n  \"updated\": \"%s\",\n  \"triggersDir\": ", stamp);
	jsonbuf_str(&b, s->cfg->triggers_dir);
	jsonbuf_printf(&b, ",\n  \"database\": {\"reachable\": %s, \"error\": ",
		       s->db.down ? "false" : "true");
	jsonbuf_str(&b, s->db.down ? s->db.error : NULL);
	jsonbuf_printf(&b, "},\n  \"agents\": [");
	for (size_t k = 0; k < s->cfg->n_agents; k++) {
		const struct ctl_agent *a = &s->agents[k];

		jsonbuf_printf(&b, "%s\n    {\"address\": ", k ? "," : "");
		jsonbuf_str(&b, a->addr);
		jsonbuf_printf(&b, ", \"reachable\": %s, \"generation\": %llu, \"error\": ",
			       a->down || !a->status ? "false" : "true",
			       (unsigned long long)a->generation);
		jsonbuf_str(&b, a->down ? a->error : NULL);
		jsonbuf_printf(&b, "}");
	}
	jsonbuf_printf(&b, "%s],\n  \"generation\": %llu,\n  \"triggers\": [",
		       s->cfg->n_agents ? "\n  " : "", (unsigned long long)s->set.req.generation);
	file_index_build(&fi, m);
	for (size_t i = 0; i < s->rows.n; i++) {
		jsonbuf_printf(&b, "%s\n    ", i ? "," : "");
		json_trigger(s, &b, &fi, &s->rows.v[i]);
	}
	file_index_free(&fi);
	jsonbuf_printf(&b, "%s],\n  \"errors\": [", s->rows.n ? "\n  " : "");
	for (size_t i = 0; i < m->n_errors; i++) {
		jsonbuf_printf(&b, "%s\n    {\"file\": ", i ? "," : "");
		jsonbuf_str(&b, m->errors[i].file);
		jsonbuf_printf(&b, ", \"document\": %d, \"message\": ", m->errors[i].doc);
		jsonbuf_str(&b, m->errors[i].message);
		jsonbuf_printf(&b, "}");
	}
	jsonbuf_printf(&b,
		       "%s],\n  \"manifestFiles\": {\"files\": %llu, \"parsed\": %llu, "
		       "\"parsedLastPass\": %llu, \"deferred\": %llu, \"refused\": %llu, "
		       "\"refusedNow\": %llu, \"overLimit\": %llu, \"notQuoted\": %llu}\n}\n",
		       m->n_errors ? "\n  " : "", (unsigned long long)ds->files,
		       (unsigned long long)ds->parsed, (unsigned long long)ds->parsed_last,
		       (unsigned long long)ds->deferred, (unsigned long long)ds->refused,
		       (unsigned long long)ds->refused_now, (unsigned long long)ds->over_limit,
		       (unsigned long long)ds->not_excerpted);
	text = jsonbuf_take(&b);
	if (!text)
		return;
	/*
	 * A new file of a unique name (O_EXCL: a link planted at the name is
	 * never followed), readable by others like the file it replaces; rename
	 * replaces whatever is at the status path, a link included.
	 */
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", s->status_path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd >= 0 && (fchmod(fd, 0644) || !(f = fdopen(fd, "w")))) {
		close(fd);
		unlink(tmp);
		fd = -1;
	}
	ok = f && fputs(text, f) >= 0;
	if (f)
		ok = (fflush(f) == 0) & ok & (fclose(f) == 0);
	ok = ok && rename(tmp, s->status_path) == 0;
	if (!ok) {
		if (!s->status_write_failed)
			log_error("cannot write the status file %s: %s", s->status_path,
				  strerror(errno));
		if (f)
			unlink(tmp);
	} else if (s->status_write_failed) {
		log_info("status file written again path=%s", s->status_path);
	}
	s->status_write_failed = !ok;
	free(text);
}

/* One reconcile pass. Returns true when everything was reachable and valid. */
static bool reconcile(struct state *s)
{
	struct manifest_list m = {0};
	bool clean = true;

	manifest_dir_scan(&s->dir, s->cfg->triggers_dir, &m);
	manifest_list_drop_duplicates(&m);
	log_new_errors(s, &m);
	if (ctl_db_ensure(&s->db)) {
		struct trigger_rows rows;

		if (triggers_db_sync(s->db.conn, &m, m.broken_files == 0, NULL) ||
		    triggers_db_load(s->db.conn, &rows)) {
			ctl_db_lost(&s->db);
			clean = false;
		} else {
			trigger_rows_free(&s->rows);
			s->rows = rows;
			s->rows_loaded = true;
		}
	} else {
		clean = false;
	}
	build_desired(s);
	/* never send a set before the table was read: it would clear the agents */
	for (size_t k = 0; s->rows_loaded && k < s->cfg->n_agents; k++) {
		ctl_agent_program(&s->agents[k], &s->cfg->auth, &s->set.req);
		clean = clean && !s->agents[k].down;
	}
	apply_agent_rejections(s);
	log_transitions(s);
	write_status(s, &m);
	clean = clean && m.n_errors == 0;
	manifest_list_free(&m);
	return clean;
}

static int watch_dir(int ifd, const char *dir)
{
	return inotify_add_watch(ifd, dir,
				 IN_CREATE | IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM |
				     IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR);
}

/*
 * Reads the pending events. Returns the delay before the pass they call
 * for: DEBOUNCE_MS for a complete change of a manifest (or of the directory
 * itself), CREATE_WAIT_MS when a manifest was only created so far, -1 when
 * none concerns a manifest.
 */
static int drain_inotify(int ifd, bool *lost_watch)
{
	char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
	int delay = -1;
	ssize_t n;

	while ((n = read(ifd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			int d = -1;

			if (ev->mask & (IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED))
				d = DEBOUNCE_MS;
			if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED))
				*lost_watch = true;
			if (ev->len && manifest_dir_is_manifest_name(ev->name))
				d = ev->mask == IN_CREATE ? CREATE_WAIT_MS : DEBOUNCE_MS;
			if (d >= 0 && (delay < 0 || d < delay))
				delay = d;
			p += sizeof(*ev) + ev->len;
		}
	}
	return delay;
}

static void state_free(struct state *s)
{
	for (size_t k = 0; k < s->cfg->n_agents; k++)
		ctl_agent_clear(&s->agents[k]);
	ctl_set_free(&s->set);
	trigger_rows_free(&s->rows);
	for (size_t j = 0; j < s->n_errors; j++)
		free(s->errors[j]);
	free(s->errors);
	for (size_t j = 0; j < s->n_phases; j++) {
		free(s->phases[j].id);
		free(s->phases[j].phase);
	}
	free(s->phases);
	ctl_db_close(&s->db);
	manifest_dir_free(&s->dir);
	specs_free(s->specs, s->n_specs);
}

int local_run(const struct local_config *cfg)
{
	struct state s = {.cfg = cfg};
	int ifd = -1, sfd = -1, wd, rc = 0;
	int64_t next_tick = 0, rescan_at = 0;
	sigset_t mask;

	ctl_set_init(&s.set);
	s.db.conninfo = cfg->db;
	if (cfg->status_file)
		snprintf(s.status_path, sizeof(s.status_path), "%s", cfg->status_file);
	else
		snprintf(s.status_path, sizeof(s.status_path), "%s/%s", cfg->triggers_dir,
			 LOCAL_STATUS_DEFAULT);
	for (size_t k = 0; k < cfg->n_agents; k++)
		snprintf(s.agents[k].addr, sizeof(s.agents[k].addr), "%s", cfg->agents[k]);
	if (cfg->once) {
		bool clean;

		do /* every file read, even past the per-pass bound */
			clean = reconcile(&s);
		while (s.dir.stats.deferred);
		rc = clean ? 0 : 1;
		goto out;
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (sfd < 0 || ifd < 0) {
		log_error("cannot set up the event loop: %s", strerror(errno));
		rc = 2;
		goto out;
	}
	wd = watch_dir(ifd, cfg->triggers_dir);
	if (wd < 0)
		log_warn("cannot watch %s, relying on the %d ms tick: %s", cfg->triggers_dir,
			 cfg->interval_ms, strerror(errno));
	log_info("watching triggers dir=%s agents=%zu status=%s", cfg->triggers_dir, cfg->n_agents,
		 s.status_path);
	for (;;) {
		struct pollfd fds[2] = {{.fd = sfd, .events = POLLIN},
					{.fd = ifd, .events = POLLIN}};
		int64_t now = ctl_now_ms(CLOCK_MONOTONIC), wake;
		struct signalfd_siginfo si;
		bool lost = false;

		if (now >= next_tick || (rescan_at && now >= rescan_at)) {
			if (wd < 0 && (wd = watch_dir(ifd, cfg->triggers_dir)) >= 0)
				log_info("watching triggers dir=%s again", cfg->triggers_dir);
			reconcile(&s);
			rescan_at = 0;
			now = ctl_now_ms(CLOCK_MONOTONIC);
			next_tick = now + cfg->interval_ms;
			/* files left for the next pass (the per-pass bound): read them soon */
			if (s.dir.stats.deferred)
				rescan_at = now + DEBOUNCE_MS;
		}
		wake = rescan_at && rescan_at < next_tick ? rescan_at : next_tick;
		if (poll(fds, 2, wake > now ? (int)(wake - now) : 0) < 0 && errno != EINTR) {
			log_error("poll: %s", strerror(errno));
			rc = 1;
			break;
		}
		if (fds[0].revents & POLLIN && read(sfd, &si, sizeof(si)) == sizeof(si)) {
			if (si.ssi_signo == SIGHUP) {
				rescan_at = ctl_now_ms(CLOCK_MONOTONIC);
				continue;
			}
			log_info("stopping on signal %u", si.ssi_signo);
			break;
		}
		if (fds[1].revents & POLLIN) {
			int d = drain_inotify(ifd, &lost);
			int64_t at = ctl_now_ms(CLOCK_MONOTONIC) + d;

			if (d >= 0 && (!rescan_at || at < rescan_at))
				rescan_at = at;
		}
		if (lost && wd >= 0) {
			inotify_rm_watch(ifd, wd);
			wd = -1;
			log_warn("triggers directory gone or moved dir=%s", cfg->triggers_dir);
		}
	}
out:
	if (ifd >= 0)
		close(ifd);
	if (sfd >= 0)
		close(sfd);
	state_free(&s);
	return rc;
}
