/*
 * health.h - the controller's health endpoint: plain HTTP on one thread,
 * GET /healthz (liveness) and GET /readyz (readiness), for the kubelet's
 * probes. The answers come from two callbacks that read the controller's
 * state without blocking.
 */
#ifndef TRACEPROF_CONTROLLER_HEALTH_H
#define TRACEPROF_CONTROLLER_HEALTH_H

#include <stdbool.h>
#include <stddef.h>

#define HEALTH_REASON_MAX 256 /* bytes of a probe's reason, with the NUL */

/*
 * A probe: true when healthy; false with a short reason written to why
 * (HEALTH_REASON_MAX bytes). Called on the health thread: it must only
 * read atomics or take short locks.
 */
typedef bool (*health_probe_fn)(void *arg, char *why, size_t len);

struct health_probes {
	health_probe_fn live;  /* /healthz */
	health_probe_fn ready; /* /readyz */
	void *arg;	       /* passed to both */
};

struct health;

/*
 * Listens on addr ("HOST:PORT", "[V6]:PORT" or ":PORT" for every address;
 * port 0 picks one) and serves the probes on a thread of its own. Returns
 * the server (the caller stops it with health_stop), or NULL with the
 * reason in err.
 */
struct health *health_start(const char *addr, const struct health_probes *p, char *err,
			    size_t errlen);
/* The port it listens on. */
int health_port(const struct health *h);
/* Stops the thread, closes the socket and frees h; NULL is a no-op. */
void health_stop(struct health *h);

#endif
