/*
 * manifest_file.c - manifest files: reading (regular files only, opened
 * without following symbolic links, at most 1 MiB), the libyaml
 * event pass (syntax, nesting depth at most 32, no aliases, the number of
 * documents), then the document loader one document at a time, each handed
 * to manifest_walk_document(); the lists of triggers and errors. Aliases
 * are refused so that a small file cannot expand into a large tree.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "jsonbuf.h"
#include "manifest.h"
#include "manifest_internal.h"
#include "traceprof/utf8.h"

char *manifest_escape(char *out, size_t outlen, const char *s, size_t max_in)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), i = 0, o = 0;
	bool cut = false;

	if (!outlen)
		return out;
	while (i < n) {
		size_t u = tp_utf8_len(p + i, n - i), adv = u ? u : 1, k;
		char tmp[8];

		if (i + adv > max_in) {
			cut = true;
			break;
		}
		/* C1 controls and the Unicode line and paragraph separators break lines too */
		if (u == 2 && p[i] == 0xc2 && p[i + 1] < 0xa0)
			u = 0, adv = 1;
		if (u == 3 && p[i] == 0xe2 && p[i + 1] == 0x80 && (p[i + 2] & 0xfe) == 0xa8)
			u = 0, adv = 1;
		if (p[i] == '"' || p[i] == '\\') {
			tmp[0] = '\\';
			tmp[1] = (char)p[i];
			k = 2;
		} else if (p[i] < 0x20 || p[i] == 0x7f || !u) {
			k = (size_t)snprintf(tmp, sizeof(tmp), "\\x%02x", p[i]);
		} else {
			memcpy(tmp, p + i, u);
			k = u;
		}
		if (o + k + 4 > outlen) { /* room for "..." and the NUL */
			cut = true;
			break;
		}
		memcpy(out + o, tmp, k);
		o += k;
		i += adv;
	}
	if (cut && o + 4 <= outlen) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return out;
}

static int push_error(struct manifest_list *l, const struct manifest_error *e)
{
	if (l->n_errors == l->cap_errors) {
		size_t cap = l->cap_errors ? 2 * l->cap_errors : 8;
		struct manifest_error *p = realloc(l->errors, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		l->errors = p;
		l->cap_errors = cap;
	}
	l->errors[l->n_errors++] = *e;
	return 0;
}

int manifest_list_add_error(struct manifest_list *l, const char *file, int doc, const char *ns,
			    const char *name, const char *msg)
{
	struct manifest_error e = {.doc = doc};

	e.file = strdup(file);
	e.message = strdup(msg);
	snprintf(e.namespace_, sizeof(e.namespace_), "%s", ns ? ns : "");
	snprintf(e.name, sizeof(e.name), "%s", name ? name : "");
	if (!e.file || !e.message || push_error(l, &e)) {
		free(e.file);
		free(e.message);
		return -ENOMEM;
	}
	return 0;
}

static int push_trigger(struct manifest_list *l, struct manifest_trigger *t)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		struct manifest_trigger *p = realloc(l->items, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		l->items = p;
		l->cap = cap;
	}
	l->items[l->n++] = *t;
	return 0;
}

/*
 * First pass: syntax, depth, aliases and the number of documents. Returns 0
 * or -EINVAL with the reason in err.
 */
static int scan_events(const char *buf, size_t len, bool quote, int *ndocs, char *err,
		       size_t errlen)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	int depth = 0, docs = 0, rc = 0;
	bool done = false;

	if (!yaml_parser_initialize(&parser)) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	while (!done) {
		if (!yaml_parser_parse(&parser, &ev)) {
			snprintf(err, errlen, "line %zu column %zu: invalid YAML: %s%s%s",
				 parser.problem_mark.line + 1, parser.problem_mark.column + 1,
				 parser.problem ? parser.problem : "syntax error",
				 parser.context ? " " : "", parser.context ? parser.context : "");
			rc = -EINVAL;
			break;
		}
		switch (ev.type) {
		case YAML_DOCUMENT_START_EVENT:
			docs++;
			break;
		case YAML_MAPPING_START_EVENT:
		case YAML_SEQUENCE_START_EVENT:
			if (++depth > MANIFEST_MAX_DEPTH) {
				snprintf(err, errlen,
					 "line %zu: document %d: nested deeper than %d levels",
					 ev.start_mark.line + 1, docs, MANIFEST_MAX_DEPTH);
				rc = -EINVAL;
			}
			break;
		case YAML_MAPPING_END_EVENT:
		case YAML_SEQUENCE_END_EVENT:
			depth--;
			break;
		case YAML_ALIAS_EVENT: {
			char anchor[MANIFEST_ESCAPED_SIZE(MANIFEST_EXCERPT_MAX)];

			manifest_escape(anchor, sizeof(anchor), (const char *)ev.data.alias.anchor,
					MANIFEST_EXCERPT_MAX);
			snprintf(err, errlen,
				 "line %zu: document %d: aliases (*%s) are not supported",
				 ev.start_mark.line + 1, docs, quote ? anchor : "...");
			rc = -EINVAL;
			break;
		}
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
		if (rc)
			break;
	}
	yaml_parser_delete(&parser);
	*ndocs = docs;
	return rc;
}

int manifest_parse_buffer(struct manifest_list *l, const char *file, const char *buf, size_t len,
			  const struct manifest_opts *opts)
{
	yaml_parser_t parser;
	char err[512];
	int ndocs = 0, rc = 0;

	if (len > MANIFEST_MAX_BYTES) {
		snprintf(err, sizeof(err), "%s: file is larger than %d bytes (1 MiB)", file,
			 MANIFEST_MAX_BYTES);
		l->broken_files++;
		return manifest_list_add_error(l, file, 0, NULL, NULL, err);
	}
	if (memchr(buf, '\0', len)) {
		snprintf(err, sizeof(err), "%s: not a text file (contains NUL bytes)", file);
		l->broken_files++;
		return manifest_list_add_error(l, file, 0, NULL, NULL, err);
	}
	{
		char why[400];

		if ((rc = scan_events(buf, len, !(opts && opts->no_excerpts), &ndocs, why,
				      sizeof(why)))) {
			snprintf(err, sizeof(err), "%s: %s", file, why);
			l->broken_files++;
			return manifest_list_add_error(l, file, 0, NULL, NULL, err);
		}
	}
	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	for (int i = 1;; i++) {
		yaml_document_t doc;
		struct manifest_trigger t = {.doc = i};
		struct manifest_error e = {.doc = i};
		char why[512];
		int got;

		if (!yaml_parser_load(&parser, &doc)) {
			/* the first pass accepted the syntax: only memory can fail here */
			rc = -ENOMEM;
			break;
		}
		if (!yaml_document_get_root_node(&doc)) { /* end of the stream */
			yaml_document_delete(&doc);
			break;
		}
		got = manifest_walk_document(&doc, file, i, ndocs > 1, opts, &t, &e, why,
					     sizeof(why));
		if (got == 1) {
			if (!(t.file = strdup(file)) || push_trigger(l, &t)) {
				manifest_trigger_clear(&t);
				rc = -ENOMEM;
			}
		} else if (got == 0) {
			manifest_trigger_clear(&t);
			rc = manifest_list_add_error(l, file, ndocs > 1 ? i : 0, e.namespace_,
						     e.name, why);
		}
		yaml_document_delete(&doc);
		if (rc)
			break;
	}
	yaml_parser_delete(&parser);
	return rc;
}

int manifest_parse_fd(struct manifest_list *l, int fd, const struct stat *st, const char *display,
		      const struct manifest_opts *opts)
{
	char err[512];
	char *buf;
	ssize_t got;
	size_t len = 0;
	int rc;

	if (st->st_size > MANIFEST_MAX_BYTES) {
		snprintf(err, sizeof(err), "%s: file is larger than %d bytes (1 MiB)", display,
			 MANIFEST_MAX_BYTES);
		l->broken_files++;
		return manifest_list_add_error(l, display, 0, NULL, NULL, err);
	}
	/* one byte more than the bound tells a file that grew since fstat */
	buf = malloc(MANIFEST_MAX_BYTES + 1);
	if (!buf)
		return -ENOMEM;
	while (len <= MANIFEST_MAX_BYTES &&
	       (got = read(fd, buf + len, MANIFEST_MAX_BYTES + 1 - len)) != 0) {
		if (got < 0) {
			if (errno == EINTR)
				continue;
			snprintf(err, sizeof(err), "%s: cannot read: %s", display, strerror(errno));
			free(buf);
			l->broken_files++;
			return manifest_list_add_error(l, display, 0, NULL, NULL, err);
		}
		len += (size_t)got;
	}
	rc = manifest_parse_buffer(l, display, buf, len, opts);
	free(buf);
	return rc;
}

/* What a file that is not a regular file is, for the message that refuses it. */
const char *manifest_file_kind(mode_t mode)
{
	if (S_ISLNK(mode))
		return "a symbolic link";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISSOCK(mode))
		return "a socket";
	if (S_ISCHR(mode) || S_ISBLK(mode))
		return "a device";
	if (S_ISDIR(mode))
		return "a directory";
	return "an unknown kind of file";
}

int manifest_parse_file(struct manifest_list *l, const char *path, const char *display,
			const struct manifest_opts *opts)
{
	char err[512];
	struct stat st;
	int fd, rc;

	/* never follow a link, never wait for a FIFO's writer; fstat decides */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 && errno == ELOOP) {
		snprintf(err, sizeof(err),
			 "%s: refused: a symbolic link, not a regular file (never read)", display);
		l->broken_files++;
		return manifest_list_add_error(l, display, 0, NULL, NULL, err);
	}
	if (fd < 0 || fstat(fd, &st)) {
		snprintf(err, sizeof(err), "%s: cannot read: %s", display, strerror(errno));
		if (fd >= 0)
			close(fd);
		l->broken_files++;
		return manifest_list_add_error(l, display, 0, NULL, NULL, err);
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, sizeof(err), "%s: refused: %s, not a regular file (never read)",
			 display, manifest_file_kind(st.st_mode));
		close(fd);
		l->broken_files++;
		return manifest_list_add_error(l, display, 0, NULL, NULL, err);
	}
	rc = manifest_parse_fd(l, fd, &st, display, opts);
	close(fd);
	return rc;
}

static int dup_field(char **dst, const char *src)
{
	if (!src)
		return 0;
	*dst = strdup(src);
	return *dst ? 0 : -ENOMEM;
}

int manifest_trigger_copy(struct manifest_trigger *dst, const struct manifest_trigger *src)
{
	struct manifest_trigger t = *src;
	int rc = 0;

	t.file = t.service = t.status = t.route = t.method = t.id = t.selector_json = NULL;
	t.pids = NULL;
	t.cgroup_paths = NULL;
	t.n_pids = t.n_cgroup_paths = 0;
	rc |= dup_field(&t.file, src->file);
	rc |= dup_field(&t.service, src->service);
	rc |= dup_field(&t.status, src->status);
	rc |= dup_field(&t.route, src->route);
	rc |= dup_field(&t.method, src->method);
	rc |= dup_field(&t.id, src->id);
	rc |= dup_field(&t.selector_json, src->selector_json);
	if (!rc && src->n_pids) {
		if ((t.pids = malloc(src->n_pids * sizeof(*t.pids)))) {
			memcpy(t.pids, src->pids, src->n_pids * sizeof(*t.pids));
			t.n_pids = src->n_pids;
		} else {
			rc = -ENOMEM;
		}
	}
	if (!rc && src->n_cgroup_paths) {
		if ((t.cgroup_paths = calloc(src->n_cgroup_paths, sizeof(*t.cgroup_paths))))
			for (; t.n_cgroup_paths < src->n_cgroup_paths && !rc; t.n_cgroup_paths++)
				rc = dup_field(&t.cgroup_paths[t.n_cgroup_paths],
					       src->cgroup_paths[t.n_cgroup_paths]);
		else
			rc = -ENOMEM;
	}
	if (rc) {
		manifest_trigger_clear(&t);
		*dst = t;
		return -ENOMEM;
	}
	*dst = t;
	return 0;
}

/* Orders indexes of sort_list->items by (namespace, name), then by position. */
static const struct manifest_list *sort_list;

static int cmp_by_name(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	const struct manifest_trigger *p = &sort_list->items[x], *q = &sort_list->items[y];
	int c = strcmp(p->namespace_, q->namespace_);

	if (!c)
		c = strcmp(p->name, q->name);
	if (!c)
		c = x < y ? -1 : x > y;
	return c;
}

void manifest_list_sort_by_name(const struct manifest_list *l, size_t *idx)
{
	for (size_t i = 0; i < l->n; i++)
		idx[i] = i;
	sort_list = l;
	qsort(idx, l->n, sizeof(*idx), cmp_by_name);
}

/* Sorted rather than compared pairwise: 10,000 triggers cost n log n. */
void manifest_list_drop_duplicates(struct manifest_list *m)
{
	size_t *idx = calloc(m->n ? m->n : 1, sizeof(*idx)), kept = 0;
	bool *dup = calloc(m->n ? m->n : 1, sizeof(*dup));

	if (!idx || !dup) {
		free(idx);
		free(dup);
		m->broken_files++;
		return;
	}
	manifest_list_sort_by_name(m, idx);
	for (size_t k = 1, first = 0; k < m->n; k++) {
		const struct manifest_trigger *f = &m->items[idx[first]], *t = &m->items[idx[k]];
		char msg[1024];

		if (strcmp(f->namespace_, t->namespace_) != 0 || strcmp(f->name, t->name) != 0) {
			first = k;
			continue;
		}
		snprintf(msg, sizeof(msg),
			 "%s: document %d: metadata.name: trigger %s/%s is already defined in "
			 "%s (document %d)",
			 t->file, t->doc, t->namespace_, t->name, f->file, f->doc);
		manifest_list_add_error(m, t->file, t->doc, t->namespace_, t->name, msg);
		dup[idx[k]] = true;
	}
	for (size_t i = 0; i < m->n; i++) {
		if (dup[i]) {
			manifest_trigger_clear(&m->items[i]);
			continue;
		}
		if (kept != i)
			m->items[kept] = m->items[i];
		kept++;
	}
	m->n = kept;
	free(idx);
	free(dup);
}

void manifest_trigger_clear(struct manifest_trigger *t)
{
	free(t->file);
	free(t->service);
	free(t->pids);
	for (size_t i = 0; i < t->n_cgroup_paths; i++)
		free(t->cgroup_paths[i]);
	free(t->cgroup_paths);
	free(t->status);
	free(t->route);
	free(t->method);
	free(t->id);
	free(t->selector_json);
	memset(t, 0, sizeof(*t));
}

void manifest_list_free(struct manifest_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		manifest_trigger_clear(&l->items[i]);
	for (size_t i = 0; i < l->n_errors; i++) {
		free(l->errors[i].file);
		free(l->errors[i].message);
	}
	free(l->items);
	free(l->errors);
	memset(l, 0, sizeof(*l));
}

int manifest_spec_from_json(struct manifest_trigger *t, const char *namespace_, const char *name,
			    const char *json, const struct manifest_opts *opts, char *err,
			    size_t errlen)
{
	struct manifest_list l = {0};
	size_t len = strlen(json);
	char *doc;
	int rc;

	/* JSON is YAML: wrap the spec into a whole manifest and parse that */
	doc = malloc(len + 256 + 2 * MANIFEST_NAME_MAX);
	if (!doc)
		return -ENOMEM;
	snprintf(doc, len + 256 + 2 * MANIFEST_NAME_MAX,
		 "{\"apiVersion\": \"%s\", \"kind\": \"%s\", \"metadata\": {\"namespace\": \"%s\", "
		 "\"name\": \"%s\"}, \"spec\": %s}",
		 MANIFEST_API_VERSION, MANIFEST_KIND, namespace_, name, json);
	rc = manifest_parse_buffer(&l, "spec", doc, strlen(doc), opts);
	free(doc);
	if (!rc && l.n == 1) {
		*t = l.items[0];
		memset(&l.items[0], 0, sizeof(l.items[0]));
	} else if (!rc) {
		snprintf(err, errlen, "%s", l.n_errors ? l.errors[0].message : "no spec");
		rc = -EINVAL;
	}
	manifest_list_free(&l);
	return rc;
}
