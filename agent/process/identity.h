/*
 * identity.h - who a profiled process is: its service name (and resource
 * attributes), the container and Kubernetes pod it runs in, and the build
 * id of its executable. Samples and requests are labelled with these.
 *
 * The service name comes from, in order: the OTEP 4719 process context
 * (service.name), OTEL_SERVICE_NAME, service.name in
 * OTEL_RESOURCE_ATTRIBUTES (both from /proc/<pid>/environ, i.e. the
 * environment the process was started with), the executable's file name,
 * the thread name of the main thread. Read once per process.
 */
#ifndef TRACEPROF_AGENT_IDENTITY_H
#define TRACEPROF_AGENT_IDENTITY_H

#include <stddef.h>
#include <sys/types.h>

#include "buildid.h"

#define IDENTITY_NAME_MAX	  256 /* bytes of a service name, NUL included */
#define IDENTITY_CONTAINER_ID_LEN 64  /* hex digits of a container id */
#define IDENTITY_POD_UID_LEN	  36  /* a pod UID with dashes (static pods: 32 hex) */

/* Where the service name came from. */
enum identity_source {
	IDENTITY_FROM_PROCCTX = 1, /* service.name of the OTEP 4719 process context */
	IDENTITY_FROM_ENV = 2,	   /* OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES */
	IDENTITY_FROM_EXE = 3,	   /* file name of /proc/<pid>/exe */
	IDENTITY_FROM_COMM = 4,	   /* /proc/<pid>/comm */
};

/* One resource attribute. */
struct identity_attr {
	char *key;   /* NUL-terminated; owned by the struct that holds the attribute */
	char *value; /* NUL-terminated; owned by the struct that holds the attribute */
};

/*
 * A process's identity. The strings are fixed-size arrays inside the
 * struct ("" when unknown); attrs is owned by the struct and freed by
 * identity_clear.
 */
struct identity {
	char service_name[IDENTITY_NAME_MAX]; /* never empty after identity_read */
	enum identity_source source;	      /* where service_name came from */
	int ctx_form; /* enum procctx_form of the process context found, or 0 (none) */
	char container_id[IDENTITY_CONTAINER_ID_LEN + 1]; /* lower case hex, or "" */
	char pod_uid[IDENTITY_POD_UID_LEN + 1];		  /* Kubernetes pod UID, or "" */
	char build_id[2 * BUILDID_MAX + 1];		  /* GNU build id in hex, or "" */
	struct identity_attr *attrs; /* resource attributes other than service.name */
	size_t nattrs;		     /* entries in attrs */
	char *cgroup_v2;	     /* the cgroup v2 path ("0::" line), or NULL; owned */
};

/*
 * Reads the identity of pid into id (overwritten; free with
 * identity_clear). Missing pieces (no container, a stripped build id, an
 * unreadable environment) leave their fields empty. Returns 0, -ENOENT or
 * -ESRCH when the process is gone, -ENOMEM.
 */
int identity_read(pid_t pid, struct identity *id);

/* Frees what id owns and zeroes it; a zeroed id is fine. */
void identity_clear(struct identity *id);

/*
 * Finds the container id and pod UID in the text of /proc/<pid>/cgroup
 * (cgroup v1 or v2; containerd, CRI-O, Docker and Podman under the
 * systemd or cgroupfs drivers). container_id gets 64 lower case hex digits
 * and pod_uid the UID with dashes ('_' in systemd slice names becomes '-'),
 * or "" each. Returns 0 when at least one was found, else -ENOENT.
 */
int identity_parse_cgroup(const char *text, char container_id[IDENTITY_CONTAINER_ID_LEN + 1],
			  char pod_uid[IDENTITY_POD_UID_LEN + 1]);

/*
 * Parses OTEL_RESOURCE_ATTRIBUTES ("k1=v1,k2=v2", percent-encoded, blanks
 * around keys and values ignored) into a new array *attrs of *n entries
 * (the caller frees with identity_attrs_free). As the OpenTelemetry
 * specification asks, any error discards the whole value: -EINVAL for an
 * entry without '=' or an empty key, a bad percent escape or a decoded
 * NUL; -ENOMEM.
 */
int identity_parse_resource_attrs(const char *text, struct identity_attr **attrs, size_t *n);
/* Frees n attributes and the array; NULL is fine. */
void identity_attrs_free(struct identity_attr *attrs, size_t n);

#endif
