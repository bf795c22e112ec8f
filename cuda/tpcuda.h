/*
 * tpcuda.h - inside libtraceprof-cuda: the ring writer (ring.c, no CUDA)
 * and the CUPTI glue (inject.c) that feeds it. docs/gpu.md.
 */
#ifndef TRACEPROF_CUDA_TPCUDA_H
#define TRACEPROF_CUDA_TPCUDA_H

#include <stddef.h>
#include <stdint.h>

#include "traceprof/cuda_ring.h"

/* Ring sizes (records a power of two), from the environment at first use. */
#define TPC_DEFAULT_RECORDS	(1u << 16) /* 3 MiB of records */
#define TPC_MAX_RECORDS		(1u << 22)
#define TPC_MIN_RECORDS		(1u << 6)
#define TPC_DEFAULT_NAMES_BYTES (1u << 20)
#define TPC_MAX_NAME		1024u /* bytes of a kernel name kept (longer ones are cut) */

/*
 * Creates the ring (memfd named TP_CUDA_RING_NAME, mapped shared) once
 * per process; later calls return the same. Sizes from
 * TRACEPROF_CUDA_RING_RECORDS (records, rounded up to a power of two,
 * 64 to 4M) and TRACEPROF_CUDA_NAMES_BYTES (4K to 64M). NULL when it
 * could not be made (the library then only counts nothing: launches go
 * on, records are dropped).
 */
struct tp_cuda_ring_hdr *tpc_ring(void);

/*
 * Publishes one kernel record. name (NUL-ended, cut at TPC_MAX_NAME) is
 * interned by name_key (CUPTI keeps one string per function: its
 * address): the first record of a key demangles the name (C++ kernels)
 * and appends it to the names area, later ones reuse it. Thread-safe. Returns 0,
 * or -1 when the ring is full or missing (counted in dropped_full).
 */
int tpc_publish(uint64_t start_ns, uint64_t end_ns, uint64_t stream, uint32_t correlation_id,
		uint32_t device, const void *name_key, const char *name);

/* Counter helpers (relaxed atomic adds on the ring's counters; no-op without a ring). */
void tpc_count(uint64_t *counter, uint64_t n);
#define TPC_COUNT(field, n)                                                                        \
	do {                                                                                       \
		struct tp_cuda_ring_hdr *h_ = tpc_ring();                                          \
		if (h_)                                                                            \
			tpc_count(&h_->field, (n));                                                \
	} while (0)

/* Demangles a C++ symbol into out (size bytes, NUL-ended); returns out, or name as is. */
const char *tpc_demangle(const char *name, char *out, size_t size);

#endif
