/*
 * test_otep: conformance of the context readers to OTEP 4719 (process
 * context, merged 2026-04-07) and OTEP 4947 (thread context, merged
 * 2026-07-17), one test per rule. Every header, payload and record here is
 * written by hand, byte by byte at the offsets the texts give, never by the
 * SDK: the reader is checked against the specifications, not against our
 * writer. The draft forms (what earlier SDK releases wrote) are read too.
 * A fuzz loop with a fixed seed feeds mutated payloads and records.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "check.h"
#include "procctx.h"
#include "threadrec.h"

#ifndef PR_SET_VMA
#define PR_SET_VMA	     0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

#define LIT(s) ((const uint8_t *)(s)), (sizeof(s) - 1)

/*
 * A merged payload: ProcessContext { resource = 1: Resource { attributes =
 * 1: service.name = "shop" }; attributes = 2: threadlocal.schema_version =
 * "tls_v1", threadlocal.attribute_key_map = ["http.route", "user"],
 * other.spec = "x" }.
 */
#define RESOURCE_SHOP                                                                              \
	"\x0a\x18" /* ProcessContext.resource, 24 bytes */                                         \
	"\x0a\x16" /* Resource.attributes, a KeyValue of 22 */                                     \
	"\x0a\x0c"                                                                                 \
	"service.name"                                                                             \
	"\x12\x06" /* key; value: AnyValue of 6 */                                                 \
	"\x0a\x04"                                                                                 \
	"shop" /* AnyValue.string_value */
#define ATTR_SCHEMA(v6)                                                                            \
	"\x12\x26" /* ProcessContext.attributes, 38 bytes */                                       \
	"\x0a\x1a"                                                                                 \
	"threadlocal.schema_version"                                                               \
	"\x12\x08"                                                                                 \
	"\x0a\x06" v6
#define ATTR_KEYMAP_2                                                                              \
	"\x12\x39" /* ProcessContext.attributes, 57 bytes */                                       \
	"\x0a\x1d"                                                                                 \
	"threadlocal.attribute_key_map"                                                            \
	"\x12\x18" /* AnyValue of 24 */                                                            \
	"\x2a\x16" /* AnyValue.array_value, 22 bytes */                                            \
	"\x0a\x0c"                                                                                 \
	"\x0a\x0a"                                                                                 \
	"http.route" /* ArrayValue.values[0] */                                                    \
	"\x0a\x06"                                                                                 \
	"\x0a\x04"                                                                                 \
	"user" /* ArrayValue.values[1] */
#define ATTR_OTHER                                                                                 \
	"\x12\x11"                                                                                 \
	"\x0a\x0a"                                                                                 \
	"other.spec"                                                                               \
	"\x12\x03"                                                                                 \
	"\x0a\x01"                                                                                 \
	"x"

static const char merged[] = RESOURCE_SHOP ATTR_SCHEMA("tls_v1") ATTR_KEYMAP_2 ATTR_OTHER;

/* The same with a key map of one key, then with a key map that is no append. */
#define ATTR_KEYMAP_1                                                                              \
	"\x12\x31"                                                                                 \
	"\x0a\x1d"                                                                                 \
	"threadlocal.attribute_key_map"                                                            \
	"\x12\x10"                                                                                 \
	"\x2a\x0e"                                                                                 \
	"\x0a\x0c"                                                                                 \
	"\x0a\x0a"                                                                                 \
	"http.route"
#define ATTR_KEYMAP_SWAPPED                                                                        \
	"\x12\x39"                                                                                 \
	"\x0a\x1d"                                                                                 \
	"threadlocal.attribute_key_map"                                                            \
	"\x12\x18"                                                                                 \
	"\x2a\x16"                                                                                 \
	"\x0a\x06"                                                                                 \
	"\x0a\x04"                                                                                 \
	"user"                                                                                     \
	"\x0a\x0c"                                                                                 \
	"\x0a\x0a"                                                                                 \
	"http.route"
static const char merged_1key[] = RESOURCE_SHOP ATTR_SCHEMA("tls_v1") ATTR_KEYMAP_1;
static const char merged_swapped[] = RESOURCE_SHOP ATTR_SCHEMA("tls_v1") ATTR_KEYMAP_SWAPPED;

/*
 * The draft form (traceprof SDK of the current release): a bare Resource
 * whose attributes hold service.name, then the threadlocal.* entries.
 */
static const char draft[] = "\x0a\x16"
			    "\x0a\x0c"
			    "service.name"
			    "\x12\x06"
			    "\x0a\x04"
			    "shop"
			    "\x0a\x2e"
			    "\x0a\x1a"
			    "threadlocal.schema_version"
			    "\x12\x10"
			    "\x0a\x0e"
			    "tlsdesc_v1_dev"
			    "\x0a\x31"
			    "\x0a\x1d"
			    "threadlocal.attribute_key_map"
			    "\x12\x10"
			    "\x2a\x0e"
			    "\x0a\x0c"
			    "\x0a\x0a"
			    "http.route";

/* --- process context: payload forms ------------------------------------ */

static void test_payload_forms(void)
{
	struct procctx ctx;
	struct procctx_stats before, after;

	procctx_stats_get(&before);
	CHECK(procctx_decode(LIT(merged), &ctx) == 0, "merged payload decodes");
	CHECK(ctx.form == PROCCTX_FORM_MERGED, "merged form found (%d)", (int)ctx.form);
	CHECK(ctx.service_name && !strcmp(ctx.service_name, "shop"), "service.name from resource");
	CHECK(ctx.schema_version && !strcmp(ctx.schema_version, "tls_v1"),
	      "schema version from ProcessContext.attributes");
	CHECK(ctx.nkeys == 2 && !strcmp(ctx.keys[0], "http.route") && !strcmp(ctx.keys[1], "user"),
	      "key map from ProcessContext.attributes, in index order");
	CHECK(!procctx_get(&ctx, "other.spec"),
	      "non-threadlocal ProcessContext.attributes not kept");
	procctx_clear(&ctx);

	CHECK(procctx_decode(LIT(draft), &ctx) == 0, "draft payload decodes");
	CHECK(ctx.form == PROCCTX_FORM_DRAFT, "draft form found (%d)", (int)ctx.form);
	CHECK(ctx.service_name && !strcmp(ctx.service_name, "shop"), "draft service.name");
	CHECK(ctx.schema_version && !strcmp(ctx.schema_version, "tlsdesc_v1_dev"),
	      "draft schema version from Resource.attributes");
	CHECK(ctx.nkeys == 1 && !strcmp(ctx.keys[0], "http.route"), "draft key map");
	procctx_clear(&ctx);

	procctx_stats_get(&after);
	CHECK(after.reads_merged == before.reads_merged + 1 &&
		  after.reads_draft == before.reads_draft + 1,
	      "one read counted per form");

	/* unknown fields are skipped: ProcessContext field 3, Resource field 2 varint */
	static const char extra[] = "\x1a\x02"
				    "ab"
				    "\x0a\x1a"
				    "\x10\x05"
				    "\x0a\x16"
				    "\x0a\x0c"
				    "service.name"
				    "\x12\x06"
				    "\x0a\x04"
				    "shop";
	CHECK(procctx_decode(LIT(extra), &ctx) == 0 && ctx.form == PROCCTX_FORM_MERGED &&
		  ctx.service_name && !strcmp(ctx.service_name, "shop"),
	      "unknown fields skipped");
	procctx_clear(&ctx);

	/* a KeyValue with a key and no value is skipped; the form stays merged */
	static const char keyonly[] = RESOURCE_SHOP "\x12\x05"
						    "\x0a\x03"
						    "abc";
	CHECK(procctx_decode(LIT(keyonly), &ctx) == 0 && ctx.form == PROCCTX_FORM_MERGED &&
		  ctx.service_name && !strcmp(ctx.service_name, "shop"),
	      "a key without a value skipped");
	procctx_clear(&ctx);

	/* a truncated payload is an error, counted */
	CHECK(procctx_decode((const uint8_t *)merged, 20, &ctx) == -EBADMSG, "truncated: -EBADMSG");
	procctx_stats_get(&after);
	CHECK(after.bad_payload > before.bad_payload, "bad payload counted");
}

/* --- process context: header, mapping names, the update protocol ------- */

/* Header offsets of OTEP 4719 (64-bit, host endianness). */
#define H_SIG	  0
#define H_VERSION 8
#define H_SIZE	  12
#define H_TS	  16
#define H_PAYLOAD 24
#define H_LEN	  32

/* Writes a header at m for the payload that follows it, byte offset by offset. */
static void write_header(uint8_t *m, const char *payload, size_t len, uint32_t version, uint64_t ts)
{
	uint32_t size = (uint32_t)len;
	uint64_t ptr = (uint64_t)(uintptr_t)(m + H_LEN);

	memcpy(m + H_LEN, payload, len);
	memcpy(m + H_VERSION, &version, 4);
	memcpy(m + H_SIZE, &size, 4);
	memcpy(m + H_TS, &ts, 8);
	memcpy(m + H_PAYLOAD, &ptr, 8);
	memcpy(m + H_SIG, "OTEL_CTX", 8);
}

enum kind { MEMFD, ANON_SHMEM, ANON_PRIVATE, OTHER_NAME };

/* Maps a page the way a writer would; NULL (and a note) where the kernel cannot. */
static uint8_t *map_kind(enum kind k)
{
	void *p = MAP_FAILED;
	const char *name = k == OTHER_NAME ? "OTEL_CTX2" : "OTEL_CTX";

	if (k == MEMFD) {
		int fd = memfd_create("OTEL_CTX", MFD_CLOEXEC);

		if (fd >= 0 && !ftruncate(fd, 4096))
			p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (fd >= 0)
			close(fd);
		return p == MAP_FAILED ? NULL : p;
	}
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		 (k == ANON_PRIVATE ? MAP_PRIVATE : MAP_SHARED) | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	memset(p, 0, 4096); /* a private page must be touched to be a mapping of its own */
	if (prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)p, 4096UL, name)) {
		munmap(p, 4096);
		return NULL;
	}
	return p;
}

static void test_mapping_names(void)
{
	static const char *const what[] = {"/memfd:OTEL_CTX (deleted)", "[anon_shmem:OTEL_CTX]",
					   "[anon:OTEL_CTX]", "[anon_shmem:OTEL_CTX2]"};
	struct procctx ctx;

	for (int k = MEMFD; k <= OTHER_NAME; k++) {
		uint8_t *m = map_kind((enum kind)k);
		int err;

		if (!m) {
			printf("skip %s: the kernel cannot make it\n", what[k]);
			continue;
		}
		write_header(m, merged, sizeof(merged) - 1, 2, 1000);
		err = procctx_read(getpid(), &ctx);
		if (k == OTHER_NAME)
			CHECK(err == -ENOENT, "%s is not a context (%d)", what[k], err);
		else
			CHECK(err == 0 && ctx.form == PROCCTX_FORM_MERGED && ctx.nkeys == 2,
			      "context found in %s (%d)", what[k], err);
		procctx_clear(&ctx);
		munmap(m, 4096);
	}
}

/* The names as /proc/<pid>/maps shows them, hand-written. */
static void test_mapping_name_rule(void)
{
	static const struct {
		const char *line; /* a maps line */
		bool ctx;	  /* a context mapping */
	} cases[] = {
	    {"7f0000000000-7f0000001000 rw-s 00000000 00:01 1234 /memfd:OTEL_CTX (deleted)\n",
	     true},
	    {"7f0000000000-7f0000001000 rw-s 00000000 00:01 1234 /memfd:OTEL_CTX\n", true},
	    {"7f0000000000-7f0000001000 rw-s 00000000 00:01 99 [anon_shmem:OTEL_CTX]\n", true},
	    {"7f0000000000-7f0000001000 rw-p 00000000 00:00 0 [anon:OTEL_CTX]\n", true},
	    {"7f0000000000-7f0000001000 ---p 00000000 00:00 0 [anon:OTEL_CTX]\n", false},
	    {"7f0000000000-7f0000000010 rw-p 00000000 00:00 0 [anon:OTEL_CTX]\n", false},
	    {"7f0000000000-7f0000001000 rw-p 00000000 00:00 0 [anon:OTEL_CTX2]\n", false},
	    {"7f0000000000-7f0000001000 rw-s 00000000 00:01 12 /memfd:OTEL (deleted)\n", false},
	    {"7f0000000000-7f0000001000 rw-p 00000000 08:01 12 /tmp/OTEL_CTX\n", false},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct procmem_maps maps;

		if (procmem_maps_parse(cases[i].line, strlen(cases[i].line), &maps) ||
		    maps.n != 1) {
			CHECK(0, "maps line %zu parses", i);
			continue;
		}
		CHECK(procctx_is_ctx_mapping(&maps.maps[0]) == cases[i].ctx, "%s: %s",
		      cases[i].line, cases[i].ctx ? "a context" : "not a context");
		procmem_maps_free(&maps);
	}
}

static void test_header_rules(void)
{
	uint8_t *m = map_kind(MEMFD);
	struct procctx_stats before, after;
	struct procctx ctx;
	uint64_t zero = 0;

	if (!m) {
		CHECK(0, "memfd");
		return;
	}
	write_header(m, merged, sizeof(merged) - 1, 2, 5);
	CHECK(procctx_read(getpid(), &ctx) == 0 && ctx.published_at_ns == 5 &&
		  ctx.header_addr == (uint64_t)(uintptr_t)m,
	      "timestamp at offset 16, header address");
	procctx_clear(&ctx);

	/* monotonic_published_at_ns == 0: an update runs; retried, then given up, counted */
	procctx_stats_get(&before);
	memcpy(m + H_TS, &zero, 8);
	CHECK(procctx_read(getpid(), &ctx) == -EAGAIN, "timestamp 0: -EAGAIN after retries");
	procctx_stats_get(&after);
	CHECK(after.updating > before.updating && after.gave_up == before.gave_up + 1,
	      "update-in-progress reads counted (%llu)",
	      (unsigned long long)(after.updating - before.updating));

	write_header(m, merged, sizeof(merged) - 1, 3, 7);
	CHECK(procctx_read(getpid(), &ctx) == -EPROTONOSUPPORT, "version 3 refused");
	write_header(m, merged, sizeof(merged) - 1, 2, 7);
	memcpy(m + H_SIG, "OTEL_CTY", 8);
	CHECK(procctx_read(getpid(), &ctx) == -ENOENT, "wrong signature: no context");

	/* the draft header (same offsets, real-time clock) with a draft payload */
	write_header(m, draft, sizeof(draft) - 1, 2, 1700000000000000000ull);
	CHECK(procctx_read(getpid(), &ctx) == 0 && ctx.form == PROCCTX_FORM_DRAFT &&
		  !strcmp(ctx.schema_version, "tlsdesc_v1_dev"),
	      "draft context read in place");
	procctx_clear(&ctx);
	munmap(m, 4096);
}

/* --- thread context records -------------------------------------------- */

/* Builds a record: header at the OTEP 4947 offsets, then attrs as given. */
static size_t record(uint8_t *r, uint8_t valid, uint8_t flags, uint16_t attrs_size,
		     const char *attrs, size_t attrs_len)
{
	memset(r, 0, THREADREC_MAX_SIZE);
	for (int i = 0; i < 16; i++)
		r[i] = (uint8_t)(0xa0 + i); /* trace-id at 0 */
	for (int i = 0; i < 8; i++)
		r[16 + i] = (uint8_t)(0xb0 + i); /* span-id at 16 */
	r[24] = valid;
	r[25] = flags;
	memcpy(r + 26, &attrs_size, 2); /* native endian u16 */
	memcpy(r + 28, attrs, attrs_len);
	return 28 + attrs_len;
}

static bool value_is(const struct threadrec *t, const uint8_t *r, unsigned key, const char *want)
{
	size_t len;
	const uint8_t *v = threadrec_value(t, r, key, &len);

	return v && len == strlen(want) && !memcmp(v, want, len);
}

static void test_record_rules(void)
{
	static struct threadrec t;
	uint8_t r[THREADREC_MAX_SIZE];
	size_t n;

	n = record(r, 1, 0x01, 11,
		   "\x00\x03"
		   "GET"
		   "\x01\x04"
		   "/api",
		   11);
	CHECK(threadrec_parse(r, n, 2, &t) == 0, "valid record");
	CHECK(t.trace_id[0] == 0xa0 && t.trace_id[15] == 0xaf && t.span_id[0] == 0xb0 &&
		  t.span_id[7] == 0xb7,
	      "trace-id at 0, span-id at 16");
	CHECK(t.trace_flags == 0x01, "trace-flags: the byte after valid");
	CHECK(t.attrs_data_size == 11 && t.nkeys_set == 2, "attrs-data-size at 26");
	CHECK(value_is(&t, r, 0, "GET") && value_is(&t, r, 1, "/api"), "{key, length, UTF-8}");

	for (unsigned v = 0; v < 256; v++) {
		if (v == 1)
			continue;
		n = record(r, (uint8_t)v, 0, 5,
			   "\x00\x03"
			   "GET",
			   5);
		if (threadrec_parse(r, n, 2, &t) != -ENODATA) {
			CHECK(0, "valid == %u is not valid", v);
			break;
		}
	}
	CHECK(threadrec_parse(r, 27, 2, &t) == -EINVAL, "under 28 bytes: -EINVAL");

	n = record(r, 1, 0, 10,
		   "\x00\x01"
		   "a"
		   "\x01\x01"
		   "b"
		   "\x00\x02"
		   "cc",
		   10);
	CHECK(threadrec_parse(r, n, 2, &t) == 0 && value_is(&t, r, 0, "cc") &&
		  value_is(&t, r, 1, "b") && t.duplicates == 1,
	      "the last entry of a duplicate key wins");

	n = record(r, 1, 0, 9,
		   "\x00\x01"
		   "a"
		   "\x01\x05"
		   "bc",
		   7);
	CHECK(threadrec_parse(r, 28 + 9, 2, &t) == 0 && value_is(&t, r, 0, "a") &&
		  !threadrec_value(&t, r, 1, &n) && t.partial,
	      "an entry longer than what remains ends the list");
	n = record(r, 1, 0, 4,
		   "\x00\x01"
		   "a"
		   "\x01",
		   4);
	CHECK(threadrec_parse(r, n, 2, &t) == 0 && value_is(&t, r, 0, "a") && t.partial,
	      "a lone key byte ends the list");

	n = record(r, 1, 0, 0,
		   "\x00\x03"
		   "GET",
		   5);
	CHECK(threadrec_parse(r, n, 2, &t) == 0 && t.nkeys_set == 0 && !t.partial,
	      "attrs-data-size 0: nothing read after the header");
	n = record(r, 1, 0, 600,
		   "\x00\x03"
		   "GET",
		   5);
	CHECK(threadrec_parse(r, n, 2, &t) == 0 && t.clipped && value_is(&t, r, 0, "GET"),
	      "attrs-data-size past the bytes read: clipped");

	n = record(r, 1, 0, 10,
		   "\x05\x03"
		   "xyz"
		   "\x00\x03"
		   "GET",
		   10);
	CHECK(threadrec_parse(r, n, 2, &t) == 0 && t.unknown == 1 && value_is(&t, r, 0, "GET") &&
		  !threadrec_value(&t, r, 5, &n),
	      "an unknown key index is ignored and counted");

	/* draft record: byte 25 reserved (0): read as flags 0, attributes the same */
	n = record(r, 1, 0, 5,
		   "\x00\x03"
		   "GET",
		   5);
	CHECK(threadrec_parse(r, n, 1, &t) == 0 && t.trace_flags == 0 && value_is(&t, r, 0, "GET"),
	      "draft record");
}

/* An unknown key index refreshes the key map from the process context, bounded. */
static void test_key_refresh(void)
{
	uint8_t *m = map_kind(MEMFD), r[THREADREC_MAX_SIZE];
	struct procctx_stats before, after;
	static struct threadrec t;
	struct procctx ctx;
	uint64_t last = 0, now = 1000000000ull;
	bool refreshed;
	size_t n;

	if (!m) {
		CHECK(0, "memfd");
		return;
	}
	write_header(m, merged_1key, sizeof(merged_1key) - 1, 2, 10);
	CHECK(procctx_read(getpid(), &ctx) == 0 && ctx.nkeys == 1, "one key at first");
	n = record(r, 1, 0, 11,
		   "\x00\x03"
		   "GET"
		   "\x01\x04"
		   "anna",
		   11);
	procctx_stats_get(&before);

	/* the writer appends "user" (update protocol: new payload, new timestamp) */
	write_header(m, merged, sizeof(merged) - 1, 2, 11);
	CHECK(threadrec_resolve(getpid(), r, n, &ctx, &last, now, &t, &refreshed) == 0 &&
		  refreshed && ctx.nkeys == 2 && value_is(&t, r, 1, "anna") && t.unknown == 0,
	      "unknown index: key map refreshed, entry resolved");

	n = record(r, 1, 0, 5,
		   "\x07\x03"
		   "abc",
		   5);
	CHECK(threadrec_resolve(getpid(), r, n, &ctx, &last, now + 1000, &t, &refreshed) == 0 &&
		  !refreshed && t.unknown == 1,
	      "a second refresh within the bound is refused; the entry stays ignored");

	write_header(m, merged_swapped, sizeof(merged_swapped) - 1, 2, 12);
	CHECK(procctx_refresh_keys(getpid(), &ctx, &last, now + PROCCTX_REFRESH_MIN_NS) == 0 &&
		  !strcmp(ctx.keys[0], "user"),
	      "after the bound, refreshed again");
	procctx_stats_get(&after);
	CHECK(after.key_refreshes == before.key_refreshes + 2 &&
		  after.key_refresh_limited == before.key_refresh_limited + 1 &&
		  after.key_map_rewritten == before.key_map_rewritten + 1,
	      "refreshes, refusals and a rewritten (not appended) map counted");
	procctx_clear(&ctx);
	munmap(m, 4096);
}

/* --- fuzz ---------------------------------------------------------------- */

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void test_fuzz(void)
{
	static const char *const seeds[] = {merged, draft, merged_1key};
	static const size_t lens[] = {sizeof(merged) - 1, sizeof(draft) - 1,
				      sizeof(merged_1key) - 1};
	uint8_t buf[512], r[THREADREC_MAX_SIZE];
	static struct threadrec t;
	unsigned ok = 0, errors = 0, records_ok = 0, bad_values = 0;

	for (int i = 0; i < 20000; i++) {
		int s = (int)(rnd() % 3), flips = 1 + (int)(rnd() % 4);
		size_t len = lens[s];
		struct procctx ctx;
		int err;

		memcpy(buf, seeds[s], len);
		for (int f = 0; f < flips; f++)
			buf[rnd() % len] = (uint8_t)rnd();
		if (rnd() % 4 == 0)
			len = rnd() % (len + 1);
		err = procctx_decode(buf, len, &ctx);
		if (err == 0)
			ok++;
		else if (err == -EBADMSG || err == -E2BIG)
			errors++;
		else
			CHECK(0, "unexpected error %d", err);
		procctx_clear(&ctx);

		/* a random record: header, then random entries, random attrs-data-size */
		for (size_t j = 0; j < sizeof(r); j++)
			r[j] = (uint8_t)rnd();
		r[24] = rnd() % 8 ? 1 : (uint8_t)rnd();
		len = 28 + rnd() % (sizeof(r) - 27);
		if (threadrec_parse(r, len, rnd() % 256, &t) == 0)
			records_ok++;
		for (unsigned k = 0; k < THREADREC_KEYS; k++)
			if (t.by_key[k].set && (size_t)t.by_key[k].off + t.by_key[k].len > len)
				bad_values++;
	}
	CHECK(ok > 0 && errors > 0, "fuzzed payloads: %u decoded, %u refused", ok, errors);
	CHECK(records_ok > 0 && bad_values == 0,
	      "fuzzed records: %u parsed, every value inside the bytes read", records_ok);
}

int main(void)
{
	test_payload_forms();
	test_mapping_names();
	test_mapping_name_rule();
	test_header_rules();
	test_record_rules();
	test_key_refresh();
	test_fuzz();
	return check_done();
}
