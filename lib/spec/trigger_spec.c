/*
 * trigger_spec.c - the table of the TraceProfileTrigger spec's fields
 * (include/traceprof/trigger_spec.h). Its order is the validator's: the
 * first invalid field of a document is the one reported.
 *
 * Where a value is kept (offset, in struct manifest_trigger): a string as
 * char *, a number as uint32_t, a duration as uint64_t microseconds, or
 * milliseconds when it has bounds (spec.timeout), a DURATION_US as
 * uint32_t microseconds (spec.sampling.offCPUThreshold), a boolean as
 * bool, a selector as its
 * canonical JSON, pids as uint32_t * and paths as char ** (with their
 * counts next to them).
 */
#include "traceprof/trigger_spec.h"

#include <stddef.h>
#include <string.h>

#include "manifest.h"

#define STR(x)	XSTR(x)
#define XSTR(x) #x
#define AT(m)	offsetof(struct manifest_trigger, m)

const struct trigger_spec_field trigger_spec_fields[TRIGGER_SPEC_N_FIELDS] = {
    {.path = "spec.service",
     .type = TRIGGER_SPEC_STRING,
     .max_len = TRIGGER_SPEC_SERVICE_MAX,
     .flag = "service",
     .flag_arg = "S",
     .help = "the service to profile (or --selector)",
     .proto = "service",
     .offset = AT(service)},
    {.path = "spec.selector",
     .type = TRIGGER_SPEC_SELECTOR,
     .max_len = TRIGGER_SPEC_MAX_LIST,
     .flag = "selector",
     .flag_arg = "K=V[,K=V]",
     .help = "pods with these labels (cluster only)",
     .proto = "targets.pod_uids",
     .offset = AT(selector_json)},
    {.path = "spec.targets.pids",
     .type = TRIGGER_SPEC_PIDS,
     .min = 1,
     .max = TRIGGER_SPEC_PID_MAX,
     .max_len = TRIGGER_SPEC_MAX_LIST,
     .help = "process ids to profile (local mode only)",
     .proto = "targets.pids",
     .offset = AT(pids)},
    {.path = "spec.targets.cgroupPaths",
     .type = TRIGGER_SPEC_PATHS,
     .max_len = TRIGGER_SPEC_CGROUP_PATH_MAX,
     .help = "cgroup v2 paths of the processes to profile (local mode only)",
     .proto = "targets.cgroup_paths",
     .offset = AT(cgroup_paths)},
    {.path = "spec.match.minDuration",
     .type = TRIGGER_SPEC_DURATION,
     .max_len = TRIGGER_SPEC_DURATION_MAX,
     .flag = "min-duration",
     .flag_arg = "D",
     .help = "keep requests taking at least D (300ms, 1.5s, 1m)",
     .proto = "criteria.min_duration_us",
     .offset = AT(min_duration_us)},
    {.path = "spec.match.maxDuration",
     .type = TRIGGER_SPEC_DURATION,
     .max_len = TRIGGER_SPEC_DURATION_MAX,
     .flag = "max-duration",
     .flag_arg = "D",
     .help = "... and at most D",
     .proto = "criteria.max_duration_us",
     .offset = AT(max_duration_us)},
    {.path = "spec.match.status",
     .type = TRIGGER_SPEC_STATUS,
     .max_len = TRIGGER_SPEC_STATUS_MAX,
     .flag = "status",
     .flag_arg = "P",
     .help = "status pattern: 500, 5xx, 4xx,5xx",
     .proto = "criteria.status",
     .offset = AT(status)},
    {.path = "spec.match.route",
     .type = TRIGGER_SPEC_STRING,
     .max_len = TRIGGER_SPEC_ROUTE_MAX,
     .flag = "route",
     .flag_arg = "GLOB",
     .help = "route glob: /api/pay*",
     .proto = "criteria.route",
     .offset = AT(route)},
    {.path = "spec.match.method",
     .type = TRIGGER_SPEC_METHOD,
     .max_len = TRIGGER_SPEC_METHOD_MAX,
     .flag = "method",
     .flag_arg = "M",
     .help = "HTTP method",
     .proto = "criteria.method",
     .offset = AT(method)},
    {.path = "spec.sampling.frequencyHz",
     .type = TRIGGER_SPEC_UINT,
     .min = TRIGGER_SPEC_HZ_MIN,
     .max = TRIGGER_SPEC_HZ_MAX,
     .default_text = STR(TRIGGER_SPEC_HZ_DEFAULT),
     .flag = "frequency",
     .flag_arg = "HZ",
     .help = "raised sampling rate",
     .proto = "frequency_hz",
     .sql = "frequency_hz",
     .offset = AT(frequency_hz)},
    {.path = "spec.sampling.offCPU",
     .type = TRIGGER_SPEC_BOOL,
     .default_text = "false",
     .flag = "offcpu",
     .help = "also capture off-CPU time (blocked, waiting for a CPU)",
     .proto = "offcpu",
     .offset = AT(offcpu)},
    {.path = "spec.sampling.offCPUThreshold",
     .type = TRIGGER_SPEC_DURATION_US,
     .min = TRIGGER_SPEC_OFFCPU_MIN_US,
     .max = TRIGGER_SPEC_OFFCPU_MAX_US,
     .max_len = TRIGGER_SPEC_DURATION_MAX,
     .default_text = "1ms",
     .only_with = "spec.sampling.offCPU",
     .flag = "offcpu-threshold",
     .flag_arg = "D",
     .help = "off-CPU stacks from D up",
     .proto = "offcpu_threshold_us",
     .offset = AT(offcpu_threshold_us)},
    {.path = "spec.sampling.zeroCodeHTTP",
     .type = TRIGGER_SPEC_BOOL,
     .default_text = "false",
     .flag = "zero-code-http",
     .help = "find HTTP/1.x requests from system calls (no SDK)",
     .proto = "zero_code_http",
     .offset = AT(zero_code_http)},
    {.path = "spec.maxRequests",
     .type = TRIGGER_SPEC_UINT,
     .min = TRIGGER_SPEC_REQUESTS_MIN,
     .max = TRIGGER_SPEC_REQUESTS_MAX,
     .default_text = STR(TRIGGER_SPEC_REQUESTS_DEFAULT),
     .flag = "max-requests",
     .flag_arg = "N",
     .help = "requests to collect",
     .proto = "max_requests",
     .sql = "max_requests",
     .offset = AT(max_requests)},
    {.path = "spec.timeout",
     .type = TRIGGER_SPEC_DURATION,
     .min = TRIGGER_SPEC_TIMEOUT_MIN_MS,
     .max = TRIGGER_SPEC_TIMEOUT_MAX_MS,
     .max_len = TRIGGER_SPEC_DURATION_MAX,
     .default_text = "5m",
     .flag = "timeout",
     .flag_arg = "D",
     .help = "give up after D",
     .proto = "deadline_unix_ms",
     .offset = AT(timeout_ms)},
};

const size_t trigger_spec_n_fields = sizeof(trigger_spec_fields) / sizeof(trigger_spec_fields[0]);

const struct trigger_spec_field *trigger_spec_field(const char *path)
{
	for (size_t i = 0; i < trigger_spec_n_fields; i++)
		if (strcmp(trigger_spec_fields[i].path, path) == 0)
			return &trigger_spec_fields[i];
	return NULL;
}

const struct trigger_spec_field *trigger_spec_flag(const char *flag)
{
	for (size_t i = 0; i < trigger_spec_n_fields; i++)
		if (trigger_spec_fields[i].flag && strcmp(trigger_spec_fields[i].flag, flag) == 0)
			return &trigger_spec_fields[i];
	return NULL;
}

const char *trigger_spec_key(const struct trigger_spec_field *f)
{
	const char *dot = strrchr(f->path, '.');

	return dot ? dot + 1 : f->path;
}
