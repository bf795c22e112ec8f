/*
 * trigger_spec.h - the TraceProfileTrigger spec (traceprof.dev/v1alpha1):
 * its bounds and defaults, and one table of its fields.
 *
 * Every rule of a trigger lives here once. The table drives the
 * manifest validator (lib/spec/manifest.c: which keys exist, their type,
 * bounds and messages), the AgentControl Trigger message
 * (manifest_to_proto: each field names where it goes), the flags of
 * `traceprof trigger create` (name, argument, help, parsing) and the help
 * text. The agent's limits (agent/sampling/triggers.h) are these constants, and
 * tests/unit/test_trigger_spec.c holds the table against the CRD
 * (crds/), the CHECK constraints of sql/001_schema.sql and the agent, so
 * none of them can drift.
 *
 * Plain C, no dependency: the agent includes it too.
 */
#ifndef TRACEPROF_TRIGGER_SPEC_H
#define TRACEPROF_TRIGGER_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TRIGGER_SPEC_API_VERSION "traceprof.dev/v1alpha1"
#define TRIGGER_SPEC_KIND	 "TraceProfileTrigger"

/* spec.sampling.frequencyHz */
#define TRIGGER_SPEC_HZ_MIN	1
#define TRIGGER_SPEC_HZ_MAX	100
#define TRIGGER_SPEC_HZ_DEFAULT 99
/* spec.maxRequests */
#define TRIGGER_SPEC_REQUESTS_MIN     1
#define TRIGGER_SPEC_REQUESTS_MAX     1000
#define TRIGGER_SPEC_REQUESTS_DEFAULT 10
/* spec.timeout: more than 0 (1 ms at least), at most 10 minutes */
#define TRIGGER_SPEC_TIMEOUT_MIN_MS	1
#define TRIGGER_SPEC_TIMEOUT_MAX_MS	(10 * 60 * 1000)
#define TRIGGER_SPEC_TIMEOUT_DEFAULT_MS (5 * 60 * 1000)
/*
 * spec.sampling.offCPUThreshold, in µs: off-CPU intervals at least this
 * long are recorded with their stack, shorter ones summed without. 10 µs
 * at least (shorter thresholds would record nearly every context switch),
 * 10 s at most (the sampler's own bound, SAMPLER_OFFCPU_MIN_US_HI).
 * Set only with spec.sampling.offCPU: true (an error otherwise); the
 * default applies when offCPU is true and no threshold is given, so the
 * CRD states it in the description, not as a default the API server
 * would fill into every trigger.
 */
#define TRIGGER_SPEC_OFFCPU_MIN_US     10
#define TRIGGER_SPEC_OFFCPU_MAX_US     (10 * 1000 * 1000)
#define TRIGGER_SPEC_OFFCPU_DEFAULT_US 1000
/* string lengths (bytes) */
#define TRIGGER_SPEC_SERVICE_MAX     255
#define TRIGGER_SPEC_STATUS_MAX	     100
#define TRIGGER_SPEC_ROUTE_MAX	     1024
#define TRIGGER_SPEC_METHOD_MAX	     20
#define TRIGGER_SPEC_DURATION_MAX    64 /* a duration's text (CRD only) */
#define TRIGGER_SPEC_CGROUP_PATH_MAX 4096
#define TRIGGER_SPEC_LABEL_KEY_MAX   317 /* selector.matchExpressions[].key */
#define TRIGGER_SPEC_MAX_LIST	     64	 /* entries of pids, cgroupPaths, labels, expressions */
#define TRIGGER_SPEC_PID_MAX	     4194304
#define TRIGGER_SPEC_NAME_MAX	     63 /* metadata.name and namespace: DNS-1123 label */

enum trigger_spec_type {
	TRIGGER_SPEC_STRING,	  /* a string of 1..max_len bytes, no control characters */
	TRIGGER_SPEC_UINT,	  /* an integer of min..max */
	TRIGGER_SPEC_DURATION,	  /* a Go duration ("300ms", "1.5s"); min..max in ms when max > 0 */
	TRIGGER_SPEC_DURATION_US, /* a Go duration kept in µs (uint32_t), min..max in µs */
	TRIGGER_SPEC_BOOL,	  /* true or false (a YAML boolean, not a string) */
	TRIGGER_SPEC_STATUS,	  /* a status pattern ("5xx", "4xx,503"), normalized */
	TRIGGER_SPEC_METHOD,	  /* an HTTP method: letters, upper-cased */
	TRIGGER_SPEC_SELECTOR,	  /* a label selector (matchLabels, matchExpressions) */
	TRIGGER_SPEC_PIDS,	  /* a list of process ids, min..max each */
	TRIGGER_SPEC_PATHS,	  /* a list of absolute paths of at most max_len bytes */
};

/* One field of spec. */
struct trigger_spec_field {
	const char *path;	     /* in the manifest and the JSON: "spec.match.minDuration" */
	enum trigger_spec_type type; /* what its value is */
	int64_t min, max;	     /* bounds of a number (a DURATION's in ms); 0, 0: none */
	size_t max_len;		     /* a string's longest text, a list's most entries */
	const char *default_text;    /* the default (the CRD writes it unless only_with), or NULL */
	const char *only_with;	     /* a BOOL field's path: set only when it is true, else NULL */
	bool required;		     /* required by itself (service or selector: see below) */
	const char *flag;	     /* `traceprof trigger create --FLAG`, or NULL */
	const char *flag_arg;	     /* the flag's argument in the help ("D", "N") */
	const char *help;	     /* one line of help (the CRD's description says more) */
	const char *proto;	     /* AgentControl Trigger field it fills ("criteria.route") */
	const char *sql;	     /* its column of traceprof.trace_profile_triggers, or NULL */
	size_t offset;		     /* its member in struct manifest_trigger (lib/spec) */
};

/* The fields of spec, in the order the validator checks them. */
#define TRIGGER_SPEC_N_FIELDS 15 /* entries of trigger_spec_fields */
extern const struct trigger_spec_field trigger_spec_fields[TRIGGER_SPEC_N_FIELDS];
extern const size_t trigger_spec_n_fields;

/* The field of path ("spec.maxRequests"), or NULL. */
const struct trigger_spec_field *trigger_spec_field(const char *path);
/* The field of `--flag` (without the dashes), or NULL. */
const struct trigger_spec_field *trigger_spec_flag(const char *flag);
/* The last part of a path: "spec.match.route" -> "route". */
const char *trigger_spec_key(const struct trigger_spec_field *f);

#endif
