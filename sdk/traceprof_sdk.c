/*
 * traceprof_sdk.c - the thread context of OTEP 4947, W3C traceparent, ids.
 *
 * Each thread owns one fixed record in its own TLS block. The TLS pointer
 * otel_thread_ctx_v1 is set once per thread (tp_sdk_thread_register) and
 * never changes; attach and detach flip the record's valid byte around the
 * writes (the spec's "fixed record" variant, never both variants at once).
 * A reader interrupts the thread (perf event, ptrace stop), so only compiler
 * ordering matters: volatile stores of valid and the pointer, with signal
 * fences between them and the other fields. Attach and detach are tuned for
 * the request path: one TLS access, no allocation, no lock, no syscall.
 *
 * otel_thread_ctx_v1 is global-dynamic (TLSDESC where the compiler supports
 * it) in the shared library; the static variant gets whatever model the
 * final link relaxes it to, which the spec allows.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "sdk_internal.h"
#include "traceprof/hex.h"
#include "traceprof/sdk.h"

/* The OTEP 4947 Thread-Local Context Record: byte-packed, host endianness. */
struct tp_record {
	uint8_t trace_id[16];	  /* W3C trace id; zero when none */
	uint8_t span_id[8];	  /* W3C span id; zero when none */
	uint8_t valid;		  /* 1: the reader may use the record; anything else: ignore */
	uint8_t trace_flags;	  /* W3C trace-flags byte of the ids above */
	uint16_t attrs_data_size; /* bytes used in attrs_data */
	uint8_t attrs_data[TP_SDK_RECORD_SIZE - TP_SDK_RECORD_HEADER_SIZE]; /* key, len, value... */
} __attribute__((packed));

_Static_assert(offsetof(struct tp_record, span_id) == 16, "span-id at 16");
_Static_assert(offsetof(struct tp_record, valid) == 24, "valid at 24");
_Static_assert(offsetof(struct tp_record, trace_flags) == 25, "trace-flags at 25");
_Static_assert(offsetof(struct tp_record, attrs_data_size) == 26, "attrs-data-size at 26");
_Static_assert(offsetof(struct tp_record, attrs_data) == TP_SDK_RECORD_HEADER_SIZE,
	       "attrs-data at 28");
_Static_assert(sizeof(struct tp_record) == TP_SDK_RECORD_SIZE, "record size");

/* The spec's TLS variable: exported, global-dynamic, NULL until registered. */
__thread struct tp_record *otel_thread_ctx_v1
    __attribute__((visibility("default"), tls_model("global-dynamic")));

/* The calling thread's record; a cache line aligned start (the spec needs 2). */
static __thread struct tp_record thread_record __attribute__((aligned(64)));

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

static inline void compiler_fence(void)
{
	atomic_signal_fence(memory_order_seq_cst);
}

static inline bool ids_nonzero(const uint8_t *trace_id, const uint8_t *span_id)
{
	uint64_t a, b, c;

	memcpy(&a, trace_id, 8);
	memcpy(&b, trace_id + 8, 8);
	memcpy(&c, span_id, 8);
	return (a | b) != 0 && c != 0;
}

TP_SDK_EXPORT __attribute__((noinline)) void tp_sdk_probe_thread_registered(const void *record,
									    const void *tls_slot)
{
	/* Keeps the call and its arguments: a uprobe reads them here. */
	__asm__ volatile("" : : "r"(record), "r"(tls_slot) : "memory");
}

TP_SDK_EXPORT int tp_sdk_thread_register(void)
{
	if (otel_thread_ctx_v1)
		return 0;
	/* thread_record starts zeroed (TLS), so valid is 0 before it is visible */
	*(struct tp_record *volatile *)&otel_thread_ctx_v1 = &thread_record;
	compiler_fence();
	tp_sdk_probe_thread_registered(&thread_record, &otel_thread_ctx_v1);
	return 0;
}

/* The calling thread's record, registered on first use. */
static inline struct tp_record *this_record(void)
{
	struct tp_record *r = otel_thread_ctx_v1;

	if (unlikely(!r)) {
		tp_sdk_thread_register();
		r = otel_thread_ctx_v1;
	}
	return r;
}

/* Length of value cut to at most 255 bytes, at a UTF-8 character boundary. */
static inline uint32_t attr_len(const char *value, uint32_t len)
{
	if (len <= 255)
		return len;
	len = 255;
	while (len > 0 && ((unsigned char)value[len] & 0xc0) == 0x80)
		len--;
	return len;
}

/* Encodes attrs into r->attrs_data; returns false when some did not fit. */
static bool encode_attrs(struct tp_record *r, const struct tp_sdk_attr *attrs, size_t n)
{
	size_t off = 0;
	bool all = true;

	for (size_t i = 0; i < n; i++) {
		uint32_t len = attr_len(attrs[i].value, attrs[i].value_len);

		if (off + 2 + len > sizeof(r->attrs_data)) {
			all = false;
			continue;
		}
		r->attrs_data[off] = (uint8_t)attrs[i].key;
		r->attrs_data[off + 1] = (uint8_t)len;
		off += 2;
		/* values are short: a loop beats a call to memcpy */
		for (uint32_t j = 0; j < len; j++)
			r->attrs_data[off + j] = (uint8_t)attrs[i].value[j];
		off += len;
	}
	r->attrs_data_size = (uint16_t)off;
	return all;
}

TP_SDK_EXPORT int tp_sdk_attach(const uint8_t *trace_id, const uint8_t *span_id,
				uint8_t trace_flags, const struct tp_sdk_attr *attrs, size_t n)
{
	struct tp_record *r;
	bool all = true;

	if (unlikely(!trace_id || !span_id || !ids_nonzero(trace_id, span_id)))
		return -EINVAL;
	if (n) {
		uint32_t nkeys = atomic_load_explicit(&tp_sdk_nkeys, memory_order_acquire);

		if (!attrs)
			return -EINVAL;
		for (size_t i = 0; i < n; i++)
			if (attrs[i].key >= nkeys || (attrs[i].value_len && !attrs[i].value))
				return -EINVAL;
	}
	r = this_record();
	*(volatile uint8_t *)&r->valid = 0;
	compiler_fence();
	memcpy(r->trace_id, trace_id, sizeof(r->trace_id));
	memcpy(r->span_id, span_id, sizeof(r->span_id));
	r->trace_flags = trace_flags;
	if (n)
		all = encode_attrs(r, attrs, n);
	else
		r->attrs_data_size = 0;
	compiler_fence();
	*(volatile uint8_t *)&r->valid = 1;
	return all ? 0 : -ENOSPC;
}

void tp_sdk_attach_ids(const uint8_t *trace_id, const uint8_t *span_id, uint8_t trace_flags)
{
	struct tp_record *r = this_record();

	*(volatile uint8_t *)&r->valid = 0;
	compiler_fence();
	memcpy(r->trace_id, trace_id, sizeof(r->trace_id));
	memcpy(r->span_id, span_id, sizeof(r->span_id));
	r->trace_flags = trace_flags;
	r->attrs_data_size = 0;
	compiler_fence();
	*(volatile uint8_t *)&r->valid = 1;
}

void tp_sdk_detach_fast(void)
{
	struct tp_record *r = otel_thread_ctx_v1;

	if (r)
		*(volatile uint8_t *)&r->valid = 0;
	compiler_fence();
}

TP_SDK_EXPORT int tp_sdk_detach(void)
{
	tp_sdk_detach_fast();
	return 0;
}

/*
 * W3C traceparent: version "-" trace-id "-" parent-id "-" trace-flags, all
 * lower case hex; 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55 bytes for version 00.
 *
 * This runs for every incoming request, so where SSE2 is there (every
 * x86-64) the ids (48 characters) are decoded 16 characters at a time, with
 * no branch per character; elsewhere, and for the version and flags, a
 * table does it. Both accept exactly '0'-'9' and 'a'-'f'.
 */
static const uint8_t hex_lower[256] = {
    ['0'] = 0x10, ['1'] = 0x11, ['2'] = 0x12, ['3'] = 0x13, ['4'] = 0x14, ['5'] = 0x15,
    ['6'] = 0x16, ['7'] = 0x17, ['8'] = 0x18, ['9'] = 0x19, ['a'] = 0x1a, ['b'] = 0x1b,
    ['c'] = 0x1c, ['d'] = 0x1d, ['e'] = 0x1e, ['f'] = 0x1f,
}; /* 0x10 | value for a lower case hex digit, 0 for any other byte */

/* Decodes 2 * n lower case hex characters into out; false when one is not. */
static inline bool hex_lower_decode(const char *text, uint8_t *out, size_t n)
{
	const unsigned char *t = (const unsigned char *)text;
	uint8_t ok = 0x10;

	for (size_t i = 0; i < n; i++) {
		uint8_t hi = hex_lower[t[2 * i]], lo = hex_lower[t[2 * i + 1]];

		ok &= hi & lo; /* bit 4 survives only if every character was a digit */
		out[i] = (uint8_t)(hi << 4 | (lo & 0x0f));
	}
	return ok != 0;
}

#ifdef __SSE2__
/*
 * Decodes 16 hex characters into out[8]; ORs into *bad a non-zero value
 * when one is not a lower case hex digit. Signed byte compares: a byte
 * >= 0x80 is negative, below '0', so it fails like any other.
 */
static inline void hex16_decode(const char *text, uint8_t *out, int *bad)
{
	__m128i x = _mm_loadu_si128((const __m128i *)(const void *)text);
	__m128i digit = _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8('0' - 1)),
				      _mm_cmplt_epi8(x, _mm_set1_epi8('9' + 1)));
	__m128i letter = _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8('a' - 1)),
				       _mm_cmplt_epi8(x, _mm_set1_epi8('f' + 1)));
	__m128i nib = _mm_add_epi8(_mm_and_si128(x, _mm_set1_epi8(0x0f)),
				   _mm_and_si128(letter, _mm_set1_epi8(9)));
	/* 16-bit lanes: the first character (low byte) is the high nibble */
	__m128i v = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(nib, _mm_set1_epi16(0x00ff)), 4),
				 _mm_srli_epi16(nib, 8));

	*bad |= _mm_movemask_epi8(_mm_or_si128(digit, letter)) ^ 0xffff;
	_mm_storel_epi64((__m128i *)(void *)out, _mm_packus_epi16(v, v));
}

/* Decodes the trace id and span id (32 + "-" + 16 characters at text). */
static inline bool ids_decode(const char *text, uint8_t *tid, uint8_t *sid)
{
	int bad = 0;

	hex16_decode(text, tid, &bad);
	hex16_decode(text + 16, tid + 8, &bad);
	hex16_decode(text + 33, sid, &bad);
	return bad == 0;
}
#else
static inline bool ids_decode(const char *text, uint8_t *tid, uint8_t *sid)
{
	bool ok = hex_lower_decode(text, tid, 16);

	return hex_lower_decode(text + 33, sid, 8) && ok;
}
#endif

TP_SDK_EXPORT int tp_sdk_traceparent_parse(const char *text, size_t len, uint8_t *trace_id,
					   uint8_t *span_id, uint8_t *trace_flags)
{
	uint8_t version, tid[16], sid[8], flags;
	bool ok;

	if (!text || !trace_id || !span_id || !trace_flags || len < TP_SDK_TRACEPARENT_LEN)
		return -EINVAL;
	if (!hex_lower_decode(text, &version, 1) || version == 0xff)
		return -EINVAL;
	if (version == 0 && len != TP_SDK_TRACEPARENT_LEN)
		return -EINVAL;
	/* a later version may append fields, each after a '-' */
	if (len > TP_SDK_TRACEPARENT_LEN && text[TP_SDK_TRACEPARENT_LEN] != '-')
		return -EINVAL;
	if ((text[2] != '-') | (text[35] != '-') | (text[52] != '-'))
		return -EINVAL;
	ok = ids_decode(text + 3, tid, sid);
	ok &= hex_lower_decode(text + 53, &flags, 1);
	if (!ok || !ids_nonzero(tid, sid))
		return -EINVAL;
	memcpy(trace_id, tid, 16);
	memcpy(span_id, sid, 8);
	*trace_flags = flags;
	return 0;
}

TP_SDK_EXPORT int tp_sdk_traceparent_format(const uint8_t *trace_id, const uint8_t *span_id,
					    uint8_t trace_flags, char *out, size_t out_size)
{
	if (!trace_id || !span_id || !out || !ids_nonzero(trace_id, span_id))
		return -EINVAL;
	if (out_size < TP_SDK_TRACEPARENT_LEN + 1)
		return -ENOSPC;
	memcpy(out, "00-", 3);
	tp_hex_encode(trace_id, 16, out + 3);
	out[35] = '-';
	tp_hex_encode(span_id, 8, out + 36);
	out[52] = '-';
	tp_hex_encode(&trace_flags, 1, out + 53);
	out[TP_SDK_TRACEPARENT_LEN] = '\0';
	return 0;
}

/*
 * Ids: SplitMix64 per thread, seeded from getrandom(2) on a thread's first
 * id and again in a forked child (so parent and child never repeat ids).
 */
static atomic_uint fork_generation = 1; /* bumped in the child after fork */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static __thread uint64_t rng_state;	 /* SplitMix64 state */
static __thread unsigned rng_generation; /* fork_generation at seeding; 0: unseeded */

static void after_fork_child(void)
{
	atomic_fetch_add(&fork_generation, 1);
}

static void install_atfork(void)
{
	pthread_atfork(NULL, NULL, after_fork_child);
}

static uint64_t rng_next(void)
{
	unsigned gen = atomic_load_explicit(&fork_generation, memory_order_relaxed);
	uint64_t z;

	if (unlikely(rng_generation != gen)) {
		uint64_t seed = 0;
		struct timespec ts;

		pthread_once(&atfork_once, install_atfork);
		if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed)) {
			/* no entropy yet: time and this thread's address differ enough */
			clock_gettime(CLOCK_MONOTONIC, &ts);
			seed = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)ts.tv_sec ^
			       (uint64_t)(uintptr_t)&rng_state;
		}
		rng_state = seed;
		rng_generation = atomic_load(&fork_generation);
	}
	z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

TP_SDK_EXPORT int tp_sdk_new_trace_id(uint8_t *trace_id)
{
	uint64_t w[2];

	do {
		w[0] = rng_next();
		w[1] = rng_next();
	} while ((w[0] | w[1]) == 0);
	memcpy(trace_id, w, 16);
	return 0;
}

TP_SDK_EXPORT int tp_sdk_new_span_id(uint8_t *span_id)
{
	uint64_t w;

	do
		w = rng_next();
	while (w == 0);
	memcpy(span_id, &w, 8);
	return 0;
}

/* Direct (hidden) names of exported functions for the request path. */
extern __typeof__(tp_sdk_traceparent_parse) tp_sdk_traceparent_parse_fast
    __attribute__((alias("tp_sdk_traceparent_parse"), visibility("hidden")));
extern __typeof__(tp_sdk_new_trace_id) tp_sdk_new_trace_id_fast
    __attribute__((alias("tp_sdk_new_trace_id"), visibility("hidden")));
extern __typeof__(tp_sdk_new_span_id) tp_sdk_new_span_id_fast
    __attribute__((alias("tp_sdk_new_span_id"), visibility("hidden")));
