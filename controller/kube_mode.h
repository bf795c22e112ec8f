/*
 * kube_mode.h - the controller's Kubernetes mode: TraceProfileTrigger
 * objects (traceprof.dev/v1alpha1) watched through the API server,
 * resolved to pods and nodes, mirrored into
 * traceprof.trace_profile_triggers, sent to the agent of each node and
 * reported in each object's status subresource.
 */
#ifndef TRACEPROF_CONTROLLER_KUBE_MODE_H
#define TRACEPROF_CONTROLLER_KUBE_MODE_H

#include <stdbool.h>
#include <stddef.h>

#include "traceprof/control_client.h"

#define KUBE_MODE_MAX_AGENTS	 256 /* agents programmed (one per node) */
#define KUBE_MODE_AGENT_SELECTOR "app.kubernetes.io/name=traceprof-agent"
#define KUBE_MODE_AGENT_PORT	 4320
#define KUBE_MODE_LEASE		 "traceprof-controller"
#define KUBE_MODE_MAX_WRITERS	 64 /* --status-workers at most */

struct kube_mode_config {
	const char *kubeconfig;			  /* kubeconfig path, or NULL with in_cluster */
	bool in_cluster;			  /* the service account's config */
	const char *context;			  /* kubeconfig context; NULL: current */
	const char *agents[KUBE_MODE_MAX_AGENTS]; /* --agent ADDR@NODE (borrowed) */
	size_t n_agents;			  /* entries of agents */
	const char *agent_selector;		  /* label selector of the agent pods */
	const char *agent_namespace;		  /* their namespace; NULL: our own */
	int agent_port;				  /* AgentControl port on the agent pods */
	struct control_auth auth;		  /* how to authenticate to the agents */
	const char *db;				  /* libpq conninfo; NULL: PG* environment */
	int interval_ms;			  /* database and agents pass period */
	int resync_ms;				  /* every trigger reconciled at least this often */
	bool leader_elect;			  /* campaign for the Lease before acting */
	const char *lease_namespace;		  /* namespace of the Lease; NULL: our own */
	const char *identity;			  /* leader identity; NULL: hostname_pid */
	const char *health_addr;		  /* --health-addr HOST:PORT; NULL: none */
	int stuck_ms;		 /* /readyz fails once an informer has failed this long; 0: 60 s */
	int status_workers;	 /* threads writing statuses and their events */
	int test_clock_offset_s; /* tests only: seconds added to this replica's wall clock */
};

/*
 * Runs until SIGTERM or SIGINT. Returns the exit status: 0, or 2 when it
 * cannot start (configuration, API server unreachable at start).
 */
int kube_mode_run(const struct kube_mode_config *cfg);

#endif
