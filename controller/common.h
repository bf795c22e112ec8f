/*
 * common.h - what both modes of the controller share: the database
 * connection (connect, migrate, log an outage once), the agents (one
 * AgentControl channel each: ApplyTriggers then GetStatus, an outage
 * logged once) and the desired set's generation (wall-clock milliseconds
 * of the last change, so it keeps increasing across restarts).
 */
#ifndef TRACEPROF_CONTROLLER_COMMON_H
#define TRACEPROF_CONTROLLER_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <libpq-fe.h>

#include "traceprof/control/v1/agent_control.pb-c.h"
#include "traceprof/control_client.h"

#define CTL_AGENT_TIMEOUT_MS 1000

struct ctl_db {
	const char *conninfo; /* libpq conninfo; NULL: PG* environment (borrowed) */
	PGconn *conn;	      /* connection, NULL while down */
	bool down;	      /* unreachable at the last try */
	char error[256];      /* why, while down */
};

/* Connects (and migrates) when not connected; false while unreachable. */
bool ctl_db_ensure(struct ctl_db *db);
/* After a failed statement: drops the connection when it is broken. */
void ctl_db_lost(struct ctl_db *db);
void ctl_db_close(struct ctl_db *db);

struct ctl_agent {
	char addr[272];				     /* host:port */
	char node[256];				     /* node it serves ("" outside Kubernetes) */
	struct control_client *client;		     /* channel, NULL until created */
	bool down;				     /* the last call failed */
	char error[256];			     /* why, while down */
	uint64_t generation;			     /* generation the agent has in force */
	Traceprof__Control__V1__AgentStatus *status; /* last GetStatus answer, or NULL */
};

/*
 * Sends req to the agent (ApplyTriggers), then reads its status
 * (GetStatus). Logs an outage once and the recovery; a set the agent
 * applied is logged at info.
 */
void ctl_agent_program(struct ctl_agent *a, const struct control_auth *auth,
		       const Traceprof__Control__V1__ApplyTriggersRequest *req);
/* The agent's view of trigger id from its last status, or NULL. */
const Traceprof__Control__V1__TriggerStatus *ctl_agent_trigger(const struct ctl_agent *a,
							       const char *id);
/* Frees the channel and the status; the struct is the caller's. */
void ctl_agent_clear(struct ctl_agent *a);
/* "Pending", "Active", ... for an agent's trigger state. */
const char *ctl_state_name(Traceprof__Control__V1__TriggerState st);

struct ctl_set {
	Traceprof__Control__V1__ApplyTriggersRequest req; /* the desired set */
	uint8_t *bytes; /* the set packed with generation 0: change detection */
	size_t len;	/* bytes of bytes */
};

void ctl_set_init(struct ctl_set *s);
/* Frees the triggers of the set (manifest_proto_free) and empties it. */
void ctl_set_clear_triggers(struct ctl_set *s);
/*
 * After the triggers were replaced: keeps the generation when the set is
 * byte-equal to the last one, else sets a new one (wall-clock ms, always
 * increasing). Returns true when the set changed.
 */
bool ctl_set_commit(struct ctl_set *s);
void ctl_set_free(struct ctl_set *s);
/* The trigger id of the set, or NULL. */
const Traceprof__Control__V1__Trigger *ctl_set_trigger(const struct ctl_set *s, const char *id);

/*
 * What the message of a trigger without a target process adds when the
 * trigger asks for off-CPU capture: nothing is captured until one appears.
 */
#define CTL_NO_TARGET_OFFCPU ": no CPU or off-CPU profile until one appears"

int64_t ctl_now_ms(clockid_t clk);

#endif
