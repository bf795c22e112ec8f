/*
 * procctx.h - the OpenTelemetry process context (OTEP 4719) of another
 * process: the resource attributes an SDK publishes in a mapping named
 * OTEL_CTX, found through /proc/<pid>/maps, plus the thread context
 * reference data in it (threadlocal.schema_version and the attribute key
 * map that names the keys of OTEP 4947 thread records).
 *
 * Read on demand (a new process, a failed lookup of a thread record key):
 * the header is read with the specification's consistency protocol and the
 * protobuf Resource decoded with hard bounds, so a hostile or corrupt
 * process can make a read fail but never crash or bloat the agent.
 */
#ifndef TRACEPROF_AGENT_PROCCTX_H
#define TRACEPROF_AGENT_PROCCTX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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

/* A decoded process context. Everything it points to is owned by it. */
struct procctx {
	uint64_t published_at_ns;   /* header timestamp of the copy read */
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
 * Decodes a protobuf opentelemetry.proto.resource.v1.Resource of len bytes
 * into ctx (overwritten; free with procctx_clear; on error ctx holds
 * nothing). Attributes with string, bool, int or double values are kept;
 * other value types are skipped; threadlocal.attribute_key_map (an array
 * of strings) fills keys. Returns 0, -EBADMSG, -E2BIG or -ENOMEM.
 */
int procctx_decode(const uint8_t *payload, size_t len, struct procctx *ctx);

/* Frees what ctx owns and zeroes it; a zeroed ctx is fine. */
void procctx_clear(struct procctx *ctx);

/* The value of attribute key (first occurrence), borrowed from ctx, or NULL. */
const char *procctx_get(const struct procctx *ctx, const char *key);

#endif
