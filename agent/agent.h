/*
 * agent.h - the agent's pipeline: BPF samples -> per-process state (service
 * identity, thread-context location, symbols) -> symbolized stacks ->
 * aggregation windows -> the shipper thread -> PostgreSQL.
 */
#ifndef TRACEPROF_AGENT_AGENT_H
#define TRACEPROF_AGENT_AGENT_H

#include <signal.h>

#include "config.h"

struct agent;

/*
 * Loads and attaches the sampler, starts the shipper (which connects in the
 * background: a database that is down is retried, not fatal) and looks at
 * the processes already running. Returns NULL with the reason logged when
 * the sampler cannot run (privileges, no BTF). cfg is copied.
 */
struct agent *agent_new(const struct agent_config *cfg);
/*
 * Runs until *stop becomes non-zero or cfg->duration_s passes, then stops
 * sampling, closes the open window and flushes the queue (bounded wait).
 * Returns 0, or -errno when the sampler failed.
 */
int agent_run(struct agent *a, volatile sig_atomic_t *stop, volatile sig_atomic_t *stats_now);
/* Frees everything; NULL is a no-op. */
void agent_free(struct agent *a);

#endif
