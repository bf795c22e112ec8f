/*
 * dlopen_writer.c - a thread-context writer library without the traceprof
 * SDK, for the late-dlopen test (run_agent_dlopen_test.sh): it defines the
 * OTEP 4947 TLS pointer otel_thread_ctx_v1 (global-dynamic TLS: loaded
 * with dlopen, its block is reached through the thread's DTV) and has no
 * tp_sdk_probe_thread_registered, as any writer but the SDK.
 *
 * dlopen_writer_run(tag, t0, seconds) burns CPU on the calling thread for
 * that long with its record attached, its trace id telling when each
 * sample was taken: bytes 0-7 are tag, bytes 8-15 (big-endian) the number
 * of DLOPEN_WRITER_SLOT_MS slots since t0 (CLOCK_MONOTONIC, ns), the time
 * the caller started the dlopen. The earliest slot among the tagged
 * samples stored is how late the agent learned of the library.
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

#define DLOPEN_WRITER_SLOT_MS 50

/* The fixed part of an OTEP 4947 record (sdk/traceprof_sdk.c has the full one). */
struct record {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t valid;
	uint8_t trace_flags;
	uint16_t attrs_data_size;
	uint8_t attrs_data[36];
} __attribute__((aligned(64)));

__attribute__((visibility("default"))) __thread struct record *otel_thread_ctx_v1;
static __thread struct record rec;
static volatile uint64_t sink; /* keeps the loop */

__attribute__((visibility("default"))) void dlopen_writer_run(uint64_t tag, uint64_t t0,
							      double seconds);

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

/* Burns about a millisecond; its own function, so stacks name it. */
static __attribute__((noinline)) void dlopen_writer_burn(void)
{
	for (int i = 0; i < 200000; i++)
		sink += (uint64_t)i * 7;
}

void dlopen_writer_run(uint64_t tag, uint64_t t0, double seconds)
{
	uint64_t end = t0 + (uint64_t)(seconds * 1e9), slot = UINT64_MAX, now;

	*(struct record *volatile *)&otel_thread_ctx_v1 = &rec;
	while ((now = mono_ns()) < end) {
		uint64_t s = (now - t0) / (DLOPEN_WRITER_SLOT_MS * 1000000ull);

		if (s != slot) { /* the spec's update: invalid, write, valid */
			slot = s;
			*(volatile uint8_t *)&rec.valid = 0;
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
			put_be64(rec.trace_id, tag);
			put_be64(rec.trace_id + 8, slot);
			put_be64(rec.span_id, slot + 1);
			rec.trace_flags = 1;
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
			*(volatile uint8_t *)&rec.valid = 1;
		}
		dlopen_writer_burn();
	}
	*(volatile uint8_t *)&rec.valid = 0;
}
