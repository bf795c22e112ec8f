/*
 * test_procctx: the OTEP 4719 process context is read from outside as the
 * SDK publishes it (first publication, an update in place, a payload that
 * moves to a new mapping, removal), and hand-made headers and payloads
 * that are wrong in every way end in an error code, never a crash.
 *
 * The SDK runs in a forked child that acts on one-byte commands over a
 * pipe and acknowledges each; hand-made contexts live in this process.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "procctx.h"
#include "traceprof/sdk.h"

#ifndef PR_SET_VMA
#define PR_SET_VMA	     0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

/* A protobuf output buffer for hand-made payloads. */
struct enc {
	uint8_t b[8192]; /* bytes */
	size_t n;	 /* used */
};

static void put_varint(struct enc *e, uint64_t v)
{
	while (v >= 0x80) {
		e->b[e->n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	e->b[e->n++] = (uint8_t)v;
}

static void put_bytes(struct enc *e, unsigned field, const void *p, size_t len)
{
	put_varint(e, field << 3 | 2);
	put_varint(e, len);
	memcpy(e->b + e->n, p, len);
	e->n += len;
}

static void put_enc(struct enc *e, unsigned field, const struct enc *inner)
{
	put_bytes(e, field, inner->b, inner->n);
}

/* Resource.attributes += {key, AnyValue built by the caller}. */
static void put_attr(struct enc *res, const char *key, const struct enc *any)
{
	struct enc kv = {.n = 0};

	put_bytes(&kv, 1, key, strlen(key));
	put_enc(&kv, 2, any);
	put_enc(res, 1, &kv);
}

static void put_attr_str(struct enc *res, const char *key, const char *value)
{
	struct enc any = {.n = 0};

	put_bytes(&any, 1, value, strlen(value));
	put_attr(res, key, &any);
}

/* --- the SDK in a child ------------------------------------------------ */

/* The forked SDK publisher. */
struct child {
	pid_t pid; /* its pid */
	int cmd;   /* commands to it */
	int ack;   /* its acknowledgements */
};

static void child_main(int cmd, int ack)
{
	struct tp_sdk_kv attrs[2] = {{"deployment.environment.name", "prod"},
				     {"service.version", "1.2.3"}};
	static char big[6000];
	char c, r;

	while (read(cmd, &c, 1) == 1) {
		int err = 0;

		switch (c) {
		case 'p':
			err = tp_sdk_process_publish("checkout", attrs, 2);
			break;
		case 'u':
			err = tp_sdk_key_register("http.route") != 0 ||
			      tp_sdk_key_register("http.method") != 1;
			attrs[1].value = "1.2.4";
			err |= tp_sdk_process_publish("checkout", attrs, 2);
			break;
		case 'b':
			memset(big, 'x', sizeof(big) - 1);
			attrs[0].value = big;
			err = tp_sdk_process_publish("checkout", attrs, 2);
			break;
		case 'r':
			err = tp_sdk_process_remove();
			break;
		}
		r = err ? 'E' : 'K';
		if (write(ack, &r, 1) != 1)
			break;
	}
	_exit(0);
}

static int child_start(struct child *ch)
{
	int cmd[2], ack[2];

	if (pipe(cmd) || pipe(ack))
		return -errno;
	ch->pid = fork();
	if (ch->pid < 0)
		return -errno;
	if (ch->pid == 0) {
		close(cmd[1]);
		close(ack[0]);
		child_main(cmd[0], ack[1]);
	}
	close(cmd[0]);
	close(ack[1]);
	ch->cmd = cmd[1];
	ch->ack = ack[0];
	return 0;
}

static bool child_do(struct child *ch, char c)
{
	char r = 0;

	return write(ch->cmd, &c, 1) == 1 && read(ch->ack, &r, 1) == 1 && r == 'K';
}

static void child_stop(struct child *ch)
{
	int status;

	close(ch->cmd);
	close(ch->ack);
	waitpid(ch->pid, &status, 0);
}

static void test_sdk_child(void)
{
	struct procctx ctx;
	struct child ch;
	uint64_t first;
	const char *v;

	CHECK(procctx_read(getpid(), &ctx) == -ENOENT, "no context in this process: -ENOENT");
	if (child_start(&ch))
		return;
	CHECK(child_do(&ch, 'p'), "child published");
	CHECK(procctx_read(ch.pid, &ctx) == 0, "read after publish");
	CHECK(ctx.service_name && !strcmp(ctx.service_name, "checkout"), "service.name");
	v = procctx_get(&ctx, "service.version");
	CHECK(v && !strcmp(v, "1.2.3"), "service.version");
	v = procctx_get(&ctx, "deployment.environment.name");
	CHECK(v && !strcmp(v, "prod"), "deployment.environment.name");
	CHECK(ctx.form == PROCCTX_FORM_MERGED && ctx.schema_version &&
		  !strcmp(ctx.schema_version, "tls_v1"),
	      "threadlocal.schema_version");
	CHECK(ctx.nkeys == 0, "empty key map (%zu)", ctx.nkeys);
	CHECK(ctx.published_at_ns != 0, "timestamp");
	first = ctx.published_at_ns;
	procctx_clear(&ctx);

	CHECK(child_do(&ch, 'u'), "child registered keys and updated");
	CHECK(procctx_read(ch.pid, &ctx) == 0, "read after update");
	CHECK(ctx.published_at_ns > first, "newer timestamp");
	CHECK(ctx.nkeys == 2 && !strcmp(ctx.keys[0], "http.route") &&
		  !strcmp(ctx.keys[1], "http.method"),
	      "attribute key map in index order");
	v = procctx_get(&ctx, "service.version");
	CHECK(v && !strcmp(v, "1.2.4"), "updated value");
	procctx_clear(&ctx);

	CHECK(child_do(&ch, 'b'), "child published a payload larger than its mapping");
	CHECK(procctx_read(ch.pid, &ctx) == 0, "read after the move to a new mapping");
	v = procctx_get(&ctx, "deployment.environment.name");
	CHECK(v && strlen(v) == 5999, "long value whole");
	CHECK(ctx.nkeys == 2, "key map kept");
	procctx_clear(&ctx);

	CHECK(child_do(&ch, 'r'), "child removed its context");
	CHECK(procctx_read(ch.pid, &ctx) == -ENOENT, "removed: -ENOENT");
	child_stop(&ch);
	CHECK(procctx_read(ch.pid, &ctx) == -ENOENT, "process gone: -ENOENT");
}

/* --- hand-made contexts in this process -------------------------------- */

/* A header as OTEP 4719 lays it out (64-bit). */
struct header {
	char signature[8];	  /* "OTEL_CTX" */
	uint32_t version;	  /* 2 */
	uint32_t payload_size;	  /* bytes at payload */
	uint64_t published_at_ns; /* 0 while updating */
	uint64_t payload;	  /* address of the payload */
};

/*
 * Maps a page named OTEL_CTX (memfd or named shared anonymous memory),
 * followed by an inaccessible guard page.
 */
static struct header *map_ctx(bool memfd)
{
	void *p;

	if (memfd) {
		int fd = memfd_create("OTEL_CTX", MFD_CLOEXEC);

		if (fd < 0 || ftruncate(fd, 8192))
			return NULL;
		p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
	} else {
		p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (p != MAP_FAILED &&
		    prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)p, 4096UL, "OTEL_CTX")) {
			int err = errno;

			munmap(p, 8192);
			errno = err;
			return NULL;
		}
	}
	if (p == MAP_FAILED)
		return NULL;
	mprotect((char *)p + 4096, 4096, PROT_NONE);
	return p;
}

static void fill(struct header *h, const struct enc *payload)
{
	memcpy(h + 1, payload->b, payload->n);
	memcpy(h->signature, "OTEL_CTX", 8);
	h->version = 2;
	h->payload_size = (uint32_t)payload->n;
	h->published_at_ns = 1700000000000000000ULL;
	h->payload = (uint64_t)(uintptr_t)(h + 1);
}

static void test_handmade(bool memfd)
{
	const char *kind = memfd ? "memfd" : "anon_shmem";
	struct header *h = map_ctx(memfd);
	struct enc res = {.n = 0}, garbage = {.n = 0};
	struct procctx ctx;
	int err;

	if (!h && !memfd && errno == EINVAL) {
		printf("anon_shmem: skipped, this kernel cannot name anonymous mappings\n");
		return;
	}
	CHECK(h != NULL, "%s: mapped", kind);
	if (!h)
		return;
	put_attr_str(&res, "service.name", "cart");
	fill(h, &res);
	err = procctx_read(getpid(), &ctx);
	CHECK(err == 0 && ctx.service_name && !strcmp(ctx.service_name, "cart") &&
		  ctx.header_addr == (uint64_t)(uintptr_t)h,
	      "%s: found and read (%d)", kind, err);
	procctx_clear(&ctx);

	h->version = 3;
	CHECK(procctx_read(getpid(), &ctx) == -EPROTONOSUPPORT, "%s: version 3", kind);
	fill(h, &res);
	h->published_at_ns = 0;
	CHECK(procctx_read(getpid(), &ctx) == -EAGAIN, "%s: update never finishes: -EAGAIN", kind);
	fill(h, &res);
	h->payload_size = PROCCTX_MAX_PAYLOAD + 1;
	CHECK(procctx_read(getpid(), &ctx) == -E2BIG, "%s: payload over the limit", kind);
	fill(h, &res);
	h->payload = 16;
	CHECK(procctx_read(getpid(), &ctx) == -EFAULT, "%s: payload pointer unmapped", kind);
	fill(h, &res);
	h->payload_size = 4096; /* runs past the page */
	CHECK(procctx_read(getpid(), &ctx) == -EFAULT, "%s: payload past the mapping", kind);
	fill(h, &res);
	memset(h->signature, 0, 8);
	CHECK(procctx_read(getpid(), &ctx) == -ENOENT, "%s: no signature yet: -ENOENT", kind);
	memset(garbage.b, 0xff, 64);
	garbage.n = 64;
	fill(h, &garbage);
	CHECK(procctx_read(getpid(), &ctx) == -EBADMSG, "%s: garbage payload", kind);
	munmap(h, 8192);
	CHECK(procctx_read(getpid(), &ctx) == -ENOENT, "%s: unmapped", kind);
}

/* --- the decoder --------------------------------------------------------- */

static void test_decode(void)
{
	struct enc res = {.n = 0}, any, arr, el;
	struct procctx ctx;
	double d = 2.5;
	const char *v;

	put_attr_str(&res, "service.name", "api");
	any = (struct enc){.n = 0};
	put_varint(&any, 3 << 3); /* int_value */
	put_varint(&any, (uint64_t)-42);
	put_attr(&res, "answer", &any);
	any = (struct enc){.n = 0};
	put_varint(&any, 2 << 3); /* bool_value */
	put_varint(&any, 1);
	put_attr(&res, "flag", &any);
	any = (struct enc){.n = 0};
	put_varint(&any, 4 << 3 | 1); /* double_value */
	memcpy(any.b + any.n, &d, 8);
	any.n += 8;
	put_attr(&res, "ratio", &any);
	any = (struct enc){.n = 0};
	put_bytes(&any, 7, "\x01\x02", 2); /* bytes_value: skipped */
	put_attr(&res, "blob", &any);
	put_varint(&res, 2 << 3); /* Resource.dropped_attributes_count */
	put_varint(&res, 7);
	put_bytes(&res, 9, "future", 6); /* an unknown field */
	arr = (struct enc){.n = 0};
	for (int i = 0; i < 3; i++) {
		char name[8];

		snprintf(name, sizeof(name), "k%d", i);
		el = (struct enc){.n = 0};
		put_bytes(&el, 1, name, strlen(name));
		put_enc(&arr, 1, &el);
	}
	any = (struct enc){.n = 0};
	put_enc(&any, 5, &arr);
	put_attr(&res, "threadlocal.attribute_key_map", &any);

	CHECK(procctx_decode(res.b, res.n, &ctx) == 0, "decode");
	CHECK(ctx.service_name && !strcmp(ctx.service_name, "api"), "service.name");
	v = procctx_get(&ctx, "answer");
	CHECK(v && !strcmp(v, "-42"), "int as text (%s)", v ? v : "NULL");
	v = procctx_get(&ctx, "flag");
	CHECK(v && !strcmp(v, "true"), "bool as text");
	v = procctx_get(&ctx, "ratio");
	CHECK(v && !strcmp(v, "2.5"), "double as text (%s)", v ? v : "NULL");
	CHECK(!procctx_get(&ctx, "blob"), "bytes skipped");
	CHECK(ctx.nattrs == 4 && ctx.nkeys == 3 && !strcmp(ctx.keys[2], "k2"), "counts");
	CHECK(!ctx.schema_version, "no schema version");
	procctx_clear(&ctx);
	procctx_clear(&ctx); /* twice is fine */

	for (size_t cut = 1; cut < res.n; cut++) {
		int err = procctx_decode(res.b, cut, &ctx);

		CHECK(err == 0 || err == -EBADMSG, "truncated at %zu: %d", cut, err);
		procctx_clear(&ctx);
	}

	res = (struct enc){.n = 0};
	put_attr_str(&res, "nul", "a\0b");
	res.b[res.n - 2] = '\0';
	CHECK(procctx_decode(res.b, res.n, &ctx) == -EBADMSG, "NUL inside a string");
	res = (struct enc){.n = 0};
	el = (struct enc){.n = 0};
	put_varint(&el, 3 << 3);
	put_varint(&el, 1);
	arr = (struct enc){.n = 0};
	put_enc(&arr, 1, &el);
	any = (struct enc){.n = 0};
	put_enc(&any, 5, &arr);
	put_attr(&res, "threadlocal.attribute_key_map", &any);
	CHECK(procctx_decode(res.b, res.n, &ctx) == -EBADMSG, "key map entry that is no string");
	res = (struct enc){.n = 0};
	for (int i = 0; i <= PROCCTX_MAX_ATTRS; i++)
		put_attr_str(&res, "k", "v");
	CHECK(procctx_decode(res.b, res.n, &ctx) == -E2BIG, "too many attributes");
	CHECK(procctx_decode(res.b, PROCCTX_MAX_PAYLOAD + 1, &ctx) == -E2BIG, "payload too big");
	CHECK(ctx.attrs == NULL && ctx.nattrs == 0, "nothing held after an error");
	res.b[0] = 0x0b; /* field 1, wire type 3 (group) */
	CHECK(procctx_decode(res.b, 10, &ctx) == -EBADMSG, "group wire type");
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Random bytes and random mutations of a valid payload: an error or a sane result. */
static void test_fuzz(void)
{
	struct enc valid = {.n = 0}, arr = {.n = 0}, el = {.n = 0}, any = {.n = 0};
	uint8_t buf[600];
	int bad = 0, ok = 0;

	put_attr_str(&valid, "service.name", "fuzz");
	put_attr_str(&valid, "host.name", "node-1");
	put_bytes(&el, 1, "route", 5);
	put_enc(&arr, 1, &el);
	put_enc(&any, 5, &arr);
	put_attr(&valid, "threadlocal.attribute_key_map", &any);
	for (int i = 0; i < 40000; i++) {
		struct procctx ctx;
		size_t len;
		int err;

		if (i % 2) {
			len = rnd() % sizeof(buf);
			for (size_t j = 0; j < len; j++)
				buf[j] = (uint8_t)rnd();
		} else {
			len = valid.n;
			memcpy(buf, valid.b, len);
			for (int m = 0; m < 1 + (int)(rnd() % 4); m++)
				buf[rnd() % len] = (uint8_t)rnd();
			len -= rnd() % 3 ? 0 : rnd() % len;
		}
		err = procctx_decode(buf, len, &ctx);
		if (err != 0 && err != -EBADMSG && err != -E2BIG)
			bad++;
		if (!err) {
			ok++;
			for (size_t j = 0; j < ctx.nattrs; j++)
				if (!ctx.attrs[j].key || !ctx.attrs[j].value)
					bad++;
			for (size_t j = 0; j < ctx.nkeys; j++)
				if (!ctx.keys[j])
					bad++;
		}
		procctx_clear(&ctx);
	}
	CHECK(bad == 0, "fuzz: only documented errors and complete results (%d bad)", bad);
	CHECK(ok > 0, "fuzz: some mutations still decode (%d)", ok);
}

int main(void)
{
	test_decode();
	test_fuzz();
	test_sdk_child();
	test_handmade(true);
	test_handmade(false);
	return check_done();
}
