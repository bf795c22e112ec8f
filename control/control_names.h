/*
 * control_names.h - the full gRPC method names of AgentControl
 * (proto/traceprof/control/v1/agent_control.proto), the one place the
 * server (control.c), the client (control_client.c) and the tests take
 * them from.
 */
#ifndef TRACEPROF_CONTROL_NAMES_H
#define TRACEPROF_CONTROL_NAMES_H

#define CONTROL_SERVICE	      "traceprof.control.v1.AgentControl"
#define CONTROL_METHOD_APPLY  "/" CONTROL_SERVICE "/ApplyTriggers"
#define CONTROL_METHOD_STATUS "/" CONTROL_SERVICE "/GetStatus"

#endif
