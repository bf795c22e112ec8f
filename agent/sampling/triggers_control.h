/*
 * triggers_control.h - the trigger engine (triggers.h) as the engine the
 * AgentControl server drives (control/control.h, struct control_engine):
 * the agent and the tests hand it to control_start.
 */
#ifndef TRACEPROF_AGENT_TRIGGERS_CONTROL_H
#define TRACEPROF_AGENT_TRIGGERS_CONTROL_H

#include "control.h"
#include "triggers.h"

/* Fills *out with t's functions; t is borrowed and must outlive the server. */
void triggers_control_engine(struct triggers *t, struct control_engine *out);

#endif
