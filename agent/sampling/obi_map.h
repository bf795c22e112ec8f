/*
 * obi_map.h - OBI's trace map as a context source (docs/agent.md, "OBI's
 * trace map").
 *
 * OpenTelemetry eBPF Instrumentation pins an LRU hash "traces_ctx_v1"
 * (pid_tgid -> trace id, span id) for the threads whose requests it sees.
 * The agent looks for it at start and then every OBI_MAP_CHECK_US from the
 * main loop: a map found (or replaced, when OBI restarted) is handed to
 * the sampler, which reads it for threads without a thread context; a pin
 * that went away stops that. A map of another layout is refused, logged
 * once per map and counted.
 */
#ifndef TRACEPROF_AGENT_OBI_MAP_H
#define TRACEPROF_AGENT_OBI_MAP_H

#include <stdbool.h>
#include <stdint.h>

#include "sampler.h"

#define OBI_MAP_CHECK_US 10000000 /* between two looks for the pinned map */
#define OBI_MAP_NAME	 "traces_ctx_v1"

struct obi_map_stats {
	uint64_t installed; /* 1 while the sampler reads a map */
	uint64_t changes;   /* maps handed to the sampler (found, or replaced) */
	uint64_t lost;	    /* maps no longer pinned: the sampler stopped reading them */
	uint64_t refused;   /* maps of another type, key or value size */
	uint64_t errors;    /* pins that could not be opened or read (other than absent) */
};

struct obi_map {
	char path[4096];     /* the pin; "auto": searched under the BPF filesystem */
	char found[4096];    /* the pin in use, or "" */
	uint32_t id;	     /* the kernel id of the map in use, 0: none */
	uint32_t refused_id; /* the last map refused (logged once) */
	int64_t next_us;     /* next look (monotonic µs) */
	struct obi_map_stats st;
};

/* path: a pin, "auto" (the usual places), or "" (off: obi_map_tick does nothing). */
void obi_map_init(struct obi_map *o, const char *path);
/* Main loop: looks again when due (now_us monotonic). */
void obi_map_tick(struct obi_map *o, struct sampler *s, int64_t now_us);
/* Whether it is on (a path was given). */
static inline bool obi_map_enabled(const struct obi_map *o)
{
	return o->path[0] != 0;
}

#endif
