/*
 * manifest.h - TraceProfileTrigger manifests (traceprof.dev/v1alpha1):
 * YAML files with one or more documents, parsed strictly and validated into
 * struct manifest_trigger, then turned into the AgentControl Trigger message.
 *
 * Data flow: file (at most 1 MiB) -> libyaml events (depth, aliases) ->
 * libyaml documents -> one manifest_trigger per valid document, one
 * manifest_error per invalid one. An error names the file, the document
 * (when the file has several), the field path and why; the other documents
 * of the file still count. The spec is also rendered as canonical JSON
 * (the jsonb column of traceprof.trace_profile_triggers) and parsed back
 * from it, so the database row alone can reproduce what agents get.
 */
#ifndef TRACEPROF_SPEC_MANIFEST_H
#define TRACEPROF_SPEC_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "traceprof/control/v1/agent_control.pb-c.h"
#include "traceprof/trigger_spec.h"

#define MANIFEST_API_VERSION	TRIGGER_SPEC_API_VERSION
#define MANIFEST_KIND		TRIGGER_SPEC_KIND
#define MANIFEST_MAX_BYTES	(1024 * 1024)	      /* larger files are refused */
#define MANIFEST_MAX_DEPTH	32		      /* deeper nesting is refused */
#define MANIFEST_MAX_LIST	TRIGGER_SPEC_MAX_LIST /* entries of pids, cgroupPaths, labels */
#define MANIFEST_NAME_MAX	TRIGGER_SPEC_NAME_MAX /* DNS-1123 label */
#define MANIFEST_MAX_TIMEOUT_MS TRIGGER_SPEC_TIMEOUT_MAX_MS
#define MANIFEST_EXCERPT_MAX	60 /* bytes of a manifest's own text quoted in a message */
/* room for an escaped text of n bytes: every byte may become \xNN, plus "..." */
#define MANIFEST_ESCAPED_SIZE(n) (4 * (n) + 4)

struct manifest_trigger {
	char *file;				/* file it came from (as given to the parser) */
	int doc;				/* 1-based document index in that file */
	char namespace_[MANIFEST_NAME_MAX + 1]; /* metadata.namespace, "default" if unset */
	char name[MANIFEST_NAME_MAX + 1];	/* metadata.name */
	char *service;				/* spec.service, or NULL (Kubernetes only) */
	bool has_selector;			/* spec.selector was given */
	char *selector_json;   /* spec.selector as canonical JSON (stored with the spec), or NULL */
	uint32_t *pids;	       /* spec.targets.pids */
	size_t n_pids;	       /* entries of pids */
	char **cgroup_paths;   /* spec.targets.cgroupPaths */
	size_t n_cgroup_paths; /* entries of cgroup_paths */
	uint64_t min_duration_us;     /* spec.match.minDuration, 0 = unset */
	uint64_t max_duration_us;     /* spec.match.maxDuration, 0 = unset */
	char *status;		      /* spec.match.status, normalized, or NULL */
	char *route;		      /* spec.match.route glob, or NULL */
	char *method;		      /* spec.match.method, upper case, or NULL */
	uint32_t frequency_hz;	      /* spec.sampling.frequencyHz, 1..100 */
	bool offcpu;		      /* spec.sampling.offCPU */
	uint32_t offcpu_threshold_us; /* spec.sampling.offCPUThreshold, 10 µs..10 s */
	bool zero_code_http;	      /* spec.sampling.zeroCodeHTTP */
	uint32_t max_requests;	      /* spec.maxRequests, 1..1000 */
	uint64_t timeout_ms;	      /* spec.timeout, 1 ms..10 min */
	char *id; /* trigger id fixed by the source (Kubernetes: namespace/name/uid prefix); NULL:
		     minted at first sight. Owned: manifest_trigger_clear frees it. */
};

struct manifest_error {
	char *file;				/* file the error is in */
	int doc;				/* 1-based document index, 0 = the whole file */
	char namespace_[MANIFEST_NAME_MAX + 1]; /* the trigger's namespace when readable, else "" */
	char name[MANIFEST_NAME_MAX + 1];	/* the trigger's name when readable, else "" */
	char *message;				/* "FILE: document N: FIELD: why" */
};

struct manifest_list {
	struct manifest_trigger *items; /* valid triggers, in file and document order */
	size_t n, cap;			/* used and allocated entries of items */
	struct manifest_error *errors;	/* one per rejected document or file */
	size_t n_errors, cap_errors;	/* used and allocated entries of errors */
	size_t broken_files;		/* files that could not be read or parsed at all */
};

struct manifest_opts {
	bool local;	  /* local mode: spec.service required, a selector alone rejected */
	bool no_excerpts; /* messages quote nothing of the text (a file not the user's own) */
};

/*
 * Parses buf (len bytes; need not be NUL-terminated) as the manifest file
 * called file, appending valid triggers and errors to l. Returns 0, or
 * -ENOMEM (l keeps what was appended before).
 */
int manifest_parse_buffer(struct manifest_list *l, const char *file, const char *buf, size_t len,
			  const struct manifest_opts *opts);
/*
 * The same for a file on disk; path is read, display names it in messages.
 * Only a regular file is read: path is opened without following a symbolic
 * link and without blocking (O_NOFOLLOW | O_NONBLOCK), then fstat decides;
 * a symbolic link, FIFO, socket, device or directory is refused with an
 * error ("not a regular file") and never read, and so is a file over
 * MANIFEST_MAX_BYTES. Such refusals count in l->broken_files.
 */
int manifest_parse_file(struct manifest_list *l, const char *path, const char *display,
			const struct manifest_opts *opts);
/*
 * Reads and parses the open file fd, whose fstat is st (a regular file, the
 * caller checked), as manifest_parse_file does. fd stays the caller's.
 */
int manifest_parse_fd(struct manifest_list *l, int fd, const struct stat *st, const char *display,
		      const struct manifest_opts *opts);
/*
 * Escapes s for a message: at most max_in bytes of it, valid UTF-8 kept,
 * '"' and '\\' backslashed, control characters (C0, DEL, C1), U+2028/9 and
 * bytes that are not UTF-8 as \xNN, "..." appended when cut. So the result
 * is one line of valid UTF-8 whatever s holds. out has outlen bytes
 * (MANIFEST_ESCAPED_SIZE(max_in) is always enough). Returns out.
 */
char *manifest_escape(char *out, size_t outlen, const char *s, size_t max_in);
/* What a file of mode is when it is not a regular file ("a symbolic link", "a FIFO"...). */
const char *manifest_file_kind(mode_t mode);
/* A deep copy of src into *dst. Returns 0 or -ENOMEM (dst then empty). */
int manifest_trigger_copy(struct manifest_trigger *dst, const struct manifest_trigger *src);
/*
 * Appends an error for file (doc 0: the whole file; ns and name may be NULL
 * when unknown). Returns 0 or -ENOMEM.
 */
int manifest_list_add_error(struct manifest_list *l, const char *file, int doc, const char *ns,
			    const char *name, const char *msg);
/*
 * Fills idx (l->n entries) with the indexes of l->items ordered by
 * (namespace, name), then by position. Not thread-safe (qsort() without a
 * context).
 */
void manifest_list_sort_by_name(const struct manifest_list *l, size_t *idx);
/*
 * A second definition of one (namespace, name) in l is an error: the first
 * (in file and document order) stays, the later ones turn into errors
 * naming where the first is. Out of memory: l->broken_files is raised.
 */
void manifest_list_drop_duplicates(struct manifest_list *l);
/* Frees what l holds and empties it; l itself is the caller's. */
void manifest_list_free(struct manifest_list *l);
void manifest_trigger_clear(struct manifest_trigger *t);

/*
 * The spec as canonical JSON (the manifest's spec with defaults filled in,
 * durations as Go-style strings). The caller frees it. NULL on -ENOMEM.
 */
char *manifest_spec_json(const struct manifest_trigger *t);
/*
 * Parses a spec rendered by manifest_spec_json() (or any JSON object with
 * the shape of spec) into *t for namespace/name. Returns 0, or -EINVAL with
 * the reason in err; on success the caller clears *t with
 * manifest_trigger_clear().
 */
int manifest_spec_from_json(struct manifest_trigger *t, const char *namespace_, const char *name,
			    const char *json, const struct manifest_opts *opts, char *err,
			    size_t errlen);

/*
 * The AgentControl Trigger for t with the given id and deadline. The caller
 * frees it with manifest_proto_free(). NULL on -ENOMEM.
 */
Traceprof__Control__V1__Trigger *manifest_to_proto(const struct manifest_trigger *t, const char *id,
						   int64_t deadline_unix_ms);
void manifest_proto_free(Traceprof__Control__V1__Trigger *p);

/*
 * Go-style durations: "300ms", "1.5s", "2m", "1h2m", "0". Returns 0 and the
 * value in microseconds (fractions below 1 us are dropped), or -EINVAL.
 */
int manifest_parse_duration(const char *s, uint64_t *us);
/* The shortest exact form of us ("5m", "1500ms", "0s") into out. */
void manifest_format_duration(uint64_t us, char *out, size_t len);
/* "5xx", "500", "4xx,5xx": 0 and the normalized form in out, or -EINVAL. */
int manifest_parse_status(const char *s, char *out, size_t len);

#endif
