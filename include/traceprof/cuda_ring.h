/*
 * cuda_ring.h - what libtraceprof-cuda (the CUPTI injection library, in
 * the application's process) and the agent share (docs/gpu.md).
 *
 * Two channels, one per direction of need:
 *
 *  - The launch marker. On every kernel launch (runtime or driver API,
 *    graph launches included) the library calls traceprof_cuda_launch()
 *    on the launching thread, inside the launch call, with CUPTI's
 *    correlation id. The agent's uprobe on that exported function takes
 *    the thread's CPU stack and its request context, as a sample does.
 *
 *  - The record ring. CUPTI hands the library each kernel's activity
 *    record (GPU start and end) later, in buffers. The library copies
 *    them into a ring in a shared memory file (memfd named
 *    TP_CUDA_RING_NAME, mapped once per process) that the agent finds in
 *    /proc/PID/maps and maps through /proc/PID/map_files. One producer
 *    lock in the library, one consumer (the agent). A full ring drops the
 *    record and counts it; nothing ever waits for the agent.
 *
 * The agent joins the two on (process, correlation id).
 */
#ifndef TRACEPROF_CUDA_RING_H
#define TRACEPROF_CUDA_RING_H

#include <stdint.h>

#define TP_CUDA_RING_NAME    "traceprof-cuda-v1" /* the memfd's name: "/memfd:traceprof-cuda-v1" */
#define TP_CUDA_RING_MAGIC   0x3176616475637074ull /* "tpcudav1" little-endian */
#define TP_CUDA_RING_VERSION 1u
#define TP_CUDA_MARKER	     "traceprof_cuda_launch" /* the exported marker's symbol */
/*
 * x86-64: the probe point inside the marker, a 5-byte nop with the
 * arguments in their registers, exported as a function symbol of its own.
 * A uprobe there costs a system call instead of a breakpoint trap on
 * kernels that optimize uprobes on 5-byte nops (Linux 6.18 on x86-64):
 * the agent probes it where the library has it, else the marker's entry.
 */
#define TP_CUDA_MARKER_PROBE "traceprof_cuda_launch_probe"

/* How the launch was made: the marker's api argument. */
enum tp_cuda_api {
	TP_CUDA_API_RUNTIME =
	    1, /* cudaLaunchKernel, cudaLaunchKernelExC, cudaLaunchCooperativeKernel... */
	TP_CUDA_API_DRIVER = 2, /* cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel... */
	TP_CUDA_API_GRAPH = 3,	/* cudaGraphLaunch / cuGraphLaunch: one id, many kernels */
};

/* What a ring record is (struct tp_cuda_rec.kind). */
enum tp_cuda_rec_kind {
	TP_CUDA_REC_KERNEL = 1, /* a kernel ran on the GPU from start_ns to end_ns */
};

/* tp_cuda_rec.flags */
#define TP_CUDA_REC_NAME_LOST 0x1 /* the names area was full: no name (name_len 0) */

/*
 * One record, 48 bytes. Times are CUPTI's timestamps (ns); only their
 * difference (the kernel's GPU time) and their order are used.
 */
struct tp_cuda_rec {
	uint64_t start_ns;
	uint64_t end_ns;
	uint64_t stream;	 /* CUPTI's stream id */
	uint32_t correlation_id; /* the launch's: the marker's first argument */
	uint32_t device;	 /* CUDA device ordinal */
	uint32_t name_off;	 /* the kernel's name: bytes [name_off, name_off + name_len) */
	uint32_t name_len;	 /* of the names area; not NUL-terminated; 0: no name */
	uint16_t kind;		 /* enum tp_cuda_rec_kind */
	uint16_t flags;		 /* TP_CUDA_REC_* */
	uint32_t reserved;	 /* zero */
};

/*
 * The file: this header (TP_CUDA_HDR_BYTES), then nrecs records
 * (a power of two) at recs_off, then the names area at names_off.
 *
 * Publication: the producer writes a record (and its name, appended to
 * the names area, names_used advanced first), then stores head + 1 with
 * release order. The consumer loads head with acquire order, reads
 * records [tail, head) at index (i & (nrecs - 1)), then stores tail with
 * release order. Names are append-only: once published, a name's bytes
 * never change, and names_used never shrinks. The consumer trusts
 * nothing: every offset and length is checked against the file's size.
 */
#define TP_CUDA_HDR_BYTES 4096u
struct tp_cuda_ring_hdr {
	uint64_t magic;	      /* TP_CUDA_RING_MAGIC */
	uint32_t version;     /* TP_CUDA_RING_VERSION */
	uint32_t rec_bytes;   /* sizeof(struct tp_cuda_rec) */
	uint32_t nrecs;	      /* records in the ring: a power of two */
	uint32_t names_bytes; /* size of the names area */
	uint64_t recs_off;    /* file offset of record 0 */
	uint64_t names_off;   /* file offset of the names area */
	uint32_t pid;	      /* the producer's process id, as it sees itself */
	uint32_t reserved0;
	uint64_t reserved1[8];
	/* the producer's cache line */
	_Alignas(64) uint64_t head; /* records published (ever) */
	uint64_t names_used;	    /* bytes of the names area in use */
	/* the producer's counters (monotonic) */
	uint64_t launches;	  /* marker calls */
	uint64_t records;	  /* kernel records published */
	uint64_t dropped_full;	  /* kernel records dropped: ring full (agent absent or slow) */
	uint64_t names_lost;	  /* records published without a name: names area full */
	uint64_t cupti_dropped;	  /* records CUPTI itself dropped (its buffers full) */
	uint64_t buffers;	  /* CUPTI activity buffers handled */
	uint64_t other_records;	  /* activity records of other kinds, skipped */
	uint64_t errors;	  /* CUPTI calls that failed */
	uint64_t nested_launches; /* launch calls inside another launch call of the thread */
	/* the consumer's cache line */
	_Alignas(64) uint64_t tail; /* records consumed (ever) */
	uint64_t consumer_pid;	    /* the agent's pid while it reads the ring, else 0 */
};

/*
 * The marker: called once per launch on the launching thread. Exported,
 * never inlined, never optimized away (docs/gpu.md). correlation_id:
 * CUPTI's id of the launch; every kernel record it causes carries it (a
 * graph launch: all of the graph's kernels). api: enum tp_cuda_api.
 */
void traceprof_cuda_launch(uint32_t correlation_id, uint32_t device, uint64_t stream, uint32_t api);

#endif
