/*
 * zc_owners.h - who asked for zero-code HTTP/1.x capture of a process
 * (docs/zero-code-http.md, "Turning it on"): the agent setting
 * (--zero-code-http on, for the processes it samples) and the active
 * triggers with spec.sampling.zeroCodeHTTP. A process is handed to the
 * sampler (sampler_zerocode_add) when its first owner asks and taken back
 * (sampler_zerocode_remove) when its last owner lets go or it ends.
 *
 * Thread-safe: the agent's main loop (processes) and the trigger engine's
 * callback (on whichever thread applied a set) both call in; the sampler's
 * zero-code functions are called only from here, under the lock.
 */
#ifndef TRACEPROF_AGENT_ZC_OWNERS_H
#define TRACEPROF_AGENT_ZC_OWNERS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct sampler;

struct zc_owners {
	struct sampler *sampler; /* borrowed; NULL: nothing is handed on (tests) */
	pthread_mutex_t mu;	 /* guards everything below */
	uint32_t *agent;	 /* processes of the agent setting, sorted */
	size_t nagent, agent_cap;
	uint32_t *trig; /* targets of triggers asking for it, sorted */
	size_t ntrig;
	uint64_t refused; /* processes the sampler refused (stats: zc_refused) */
};

/* On a zeroed o: the lock. 0 or -errno. */
int zc_owners_init(struct zc_owners *o, struct sampler *s);
void zc_owners_free(struct zc_owners *o);

/* The agent setting owns tgid (a process it samples). 0, -ENOMEM or the sampler's error. */
int zc_owners_agent_add(struct zc_owners *o, uint32_t tgid);

/* The process ended: no owner keeps it. */
void zc_owners_gone(struct zc_owners *o, uint32_t tgid);

/*
 * The triggers' set becomes tgids (n entries, sorted and unique, n 0:
 * none): processes that join are handed to the sampler unless the agent
 * setting has them already, those that leave are taken back unless it
 * keeps them. 0 or -ENOMEM (the old set stays).
 */
int zc_owners_set_triggers(struct zc_owners *o, const uint32_t *tgids, size_t n);

/* Whether some owner has tgid. */
int zc_owners_has(struct zc_owners *o, uint32_t tgid);

#endif
