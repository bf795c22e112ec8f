/*
 * manifest_file.c - manifest files: reading (at most 1 MiB), the libyaml
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

#include "manifest.h"
#include "manifest_internal.h"

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
static int scan_events(const char *buf, size_t len, int *ndocs, char *err, size_t errlen)
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
		case YAML_ALIAS_EVENT:
			snprintf(err, errlen,
				 "line %zu: document %d: aliases (*%s) are not supported",
				 ev.start_mark.line + 1, docs, (const char *)ev.data.alias.anchor);
			rc = -EINVAL;
			break;
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

		if ((rc = scan_events(buf, len, &ndocs, why, sizeof(why)))) {
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

int manifest_parse_file(struct manifest_list *l, const char *path, const char *display,
			const struct manifest_opts *opts)
{
	char err[512];
	struct stat st;
	char *buf;
	ssize_t got;
	size_t len = 0;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0 && errno == ELOOP) /* a symbolic link: follow it, as kubectl would */
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		snprintf(err, sizeof(err), "%s: cannot read: %s", display,
			 fd < 0 || errno ? strerror(errno) : "not a regular file");
		if (fd >= 0 && S_ISREG(st.st_mode) == 0)
			snprintf(err, sizeof(err), "%s: cannot read: not a regular file", display);
		if (fd >= 0)
			close(fd);
		l->broken_files++;
		return manifest_list_add_error(l, display, 0, NULL, NULL, err);
	}
	if (st.st_size > MANIFEST_MAX_BYTES) {
		close(fd);
		snprintf(err, sizeof(err), "%s: file is larger than %d bytes (1 MiB)", display,
			 MANIFEST_MAX_BYTES);
		l->broken_files++;
		return manifest_list_add_error(l, display, 0, NULL, NULL, err);
	}
	/* one byte more than the bound tells a file that grew since fstat */
	buf = malloc(MANIFEST_MAX_BYTES + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (len <= MANIFEST_MAX_BYTES &&
	       (got = read(fd, buf + len, MANIFEST_MAX_BYTES + 1 - len)) != 0) {
		if (got < 0) {
			if (errno == EINTR)
				continue;
			snprintf(err, sizeof(err), "%s: cannot read: %s", display, strerror(errno));
			free(buf);
			close(fd);
			l->broken_files++;
			return manifest_list_add_error(l, display, 0, NULL, NULL, err);
		}
		len += (size_t)got;
	}
	close(fd);
	rc = manifest_parse_buffer(l, display, buf, len, opts);
	free(buf);
	return rc;
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
