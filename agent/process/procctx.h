/*
 * procctx.h - the OpenTelemetry process context (OTEP 4719) of another
 * process: the resource attributes an SDK publishes in a mapping named
 * OTEL_CTX, found through /proc/<pid>/maps, plus the thread context
 * reference data in it (threadlocal.schema_version and the attribute key
 * map that names the keys of OTEP 4947 thread records).
 *
 * Two payload forms are read (docs/thread-context.md): the merged one, a
 * protobuf ProcessContext { Resource resource = 1; repeated KeyValue
 * attributes = 2 } with the threadlocal.* entries in attributes, and the
 * earlier draft's, a bare Resource with everything in its attributes.
 * ctx->form says which was found, and the counters of procctx_stats_get
 * count both.
 *
 * Read on demand (a new process, an unknown thread record key index): the
 * header is read with the specification's consistency protocol and the
 * protobuf decoded with hard bounds, so a hostile or corrupt process can
 * make a read fail but never crash or bloat the agent.
 */
#ifndef TRACEPROF_AGENT_PROCCTX_H
#define TRACEPROF_AGENT_PROCCTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "procmem.h"

/* Largest payload read; a larger one is refused (-E2BIG). */
#define PROCCTX_MAX_PAYLOAD (64u << 10)
/* Most attributes and attribute map keys kept; more is refused (-E2BIG). */
#define PROCCTX_MAX_ATTRS 512
#define PROCCTX_MAX_KEYS  1024

/* One resource attribute; value is text (ints, bools and doubles formatted). */
struct procctx_attr {
	char *key;   /* attribute name, NUL-terminated; owned by the struct procctx */
	char *value; /* value as text, NUL-terminated; owned by the struct procctx */
};

/* Which payload form a process context was found in. */
enum procctx_form {
	PROCCTX_FORM_NONE = 0,	 /* nothing decoded */
	PROCCTX_FORM_DRAFT = 1,	 /* a bare Resource (the drafts; traceprof SDK <= 0.x) */
	PROCCTX_FORM_MERGED = 2, /* ProcessContext { resource = 1; attributes = 2 } */
};

/* Least time between two key map refreshes of one process (procctx_refresh_keys). */
#define PROCCTX_REFRESH_MIN_NS (100u * 1000u * 1000u)

/* Process-wide reader counters (all processes; read with procctx_stats_get). */
struct procctx_stats {
	uint64_t reads_merged;	      /* contexts decoded in the merged form */
	uint64_t reads_draft;	      /* contexts decoded in the draft form */
	uint64_t updating;	      /* header reads that met timestamp 0 (an update ran) */
	uint64_t changed;	      /* reads retried: the timestamp moved during the read */
	uint64_t gave_up;	      /* reads that changed under every retry (-EAGAIN) */
	uint64_t bad_payload;	      /* payloads neither form decodes (-EBADMSG, -E2BIG) */
	uint64_t key_refreshes;	      /* key maps re-read for an unknown key index */
	uint64_t key_refresh_limited; /* refreshes refused: the last was too recent */
	uint64_t key_map_rewritten;   /* refreshed maps that were no append of the old one */
};

/* A decoded process context. Everything it points to is owned by it. */
struct procctx {
	enum procctx_form form;	    /* which payload form was decoded */
	uint64_t published_at_ns;   /* header timestamp (a version; merged: CLOCK_BOOTTIME) */
	uint64_t header_addr;	    /* address of the header in the process */
	const char *service_name;   /* value of service.name in attrs, or NULL */
	const char *schema_version; /* value of threadlocal.schema_version, or NULL */
	struct procctx_attr *attrs; /* scalar attributes in payload order */
	size_t nattrs;		    /* entries in attrs */
	char **keys;		    /* threadlocal.attribute_key_map: key index -> name */
	size_t nkeys;		    /* entries in keys */
};

/*
 * Finds and reads the process context of pid into ctx (overwritten; free
 * with procctx_clear). Returns 0; -ENOENT when the process publishes none
 * (or is gone); -EAGAIN when it changed under every retry; -EPROTONOSUPPORT
 * for a header version other than 2; -E2BIG for a payload or attribute
 * count over the limits; -EFAULT when the payload pointer is unreadable;
 * -EBADMSG for a payload that is no Resource; -ENOMEM.
 */
int procctx_read(pid_t pid, struct procctx *ctx);

/*
 * Decodes a payload of len bytes into ctx (overwritten; free with
 * procctx_clear; on error ctx holds nothing): first as a merged
 * ProcessContext, strictly (every KeyValue needs a key); when
 * that fails, as a draft Resource (ctx->form says which). Resource
 * attributes with string, bool, int or double values are kept; other value
 * types are skipped; threadlocal.attribute_key_map (an array of strings)
 * fills keys. Of ProcessContext.attributes only the threadlocal.* entries
 * are kept. Returns 0, -EBADMSG, -E2BIG or -ENOMEM.
 */
int procctx_decode(const uint8_t *payload, size_t len, struct procctx *ctx);

/*
 * Re-reads pid's context into ctx for a thread record key index it does
 * not know (OTEP 4947: the reader refreshes its cached key map), at most
 * once per PROCCTX_REFRESH_MIN_NS per ctx: *last_ns holds the time of the
 * last refresh (0 at first), now_ns is the caller's CLOCK_MONOTONIC. The
 * map is append-only: a new map that does not start with the old keys is
 * taken all the same and counted (key_map_rewritten). Returns 0 (ctx
 * replaced), -EBUSY (too soon, ctx kept, counted) or procctx_read's error
 * (ctx kept).
 */
int procctx_refresh_keys(pid_t pid, struct procctx *ctx, uint64_t *last_ns, uint64_t now_ns);

/*
 * True for a readable mapping of at least a header whose name is one a
 * published context shows in /proc/<pid>/maps: [anon_shmem:OTEL_CTX],
 * [anon:OTEL_CTX] or /memfd:OTEL_CTX (with or without " (deleted)").
 */
bool procctx_is_ctx_mapping(const struct procmem_map *m);

/* Copies the process-wide counters into *out. */
void procctx_stats_get(struct procctx_stats *out);

/* "merged", "draft" or "none". */
const char *procctx_form_name(enum procctx_form form);

/* Frees what ctx owns and zeroes it; a zeroed ctx is fine. */
void procctx_clear(struct procctx *ctx);

/* The value of attribute key (first occurrence), borrowed from ctx, or NULL. */
const char *procctx_get(const struct procctx *ctx, const char *key);

#endif
