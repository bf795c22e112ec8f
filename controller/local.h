/*
 * local.h - the controller's local mode: trigger manifests in a directory
 * (GitOps on one machine, no Kubernetes), mirrored into
 * traceprof.trace_profile_triggers and sent to the agents given on the
 * command line.
 */
#ifndef TRACEPROF_CONTROLLER_LOCAL_H
#define TRACEPROF_CONTROLLER_LOCAL_H

#include <stdbool.h>
#include <stddef.h>

#include "traceprof/control_client.h"

#define LOCAL_MAX_AGENTS     64
#define LOCAL_STATUS_DEFAULT ".traceprof-status.json" /* inside the triggers directory */

struct local_config {
	const char *triggers_dir;	      /* the directory of *.yaml / *.yml manifests */
	const char *agents[LOCAL_MAX_AGENTS]; /* agent control addresses, host:port */
	size_t n_agents;		      /* entries of agents */
	struct control_auth auth;	      /* how to authenticate to the agents */
	const char *db;			      /* libpq conninfo; NULL: PG* environment */
	const char *status_file; /* status JSON; NULL: LOCAL_STATUS_DEFAULT in the directory */
	int interval_ms;	 /* reconcile and status poll period */
	bool once;		 /* one pass, then exit */
};

/*
 * Runs until SIGTERM or SIGINT (or one pass with once). Returns the exit
 * status: 0, 1 when --once found an invalid manifest or an unreachable
 * database or agent, 2 when it cannot start.
 */
int local_run(const struct local_config *cfg);

#endif
