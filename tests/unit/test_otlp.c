/*
 * test_otlp.c - decoding OTLP exports into request rows (agent/otlp/otlp.c):
 * every field for the current and the older semantic conventions, and each
 * kind of bad span rejected with its own counter while the good spans of
 * the same batch survive; malformed and hostile messages refused without
 * a crash and within the arena bound; nesting refused past OTLP_MAX_DEPTH
 * (messages encoded by hand here, their depth counted by hand), also on a
 * thread with a small stack; compressed exports inflated with a limit.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "otlp.h"
#include "otlp_build.h"
#include "traceprof/ids.h"

#define T0 1700000000000000000ull /* ns */

static const struct store_request *find_span(const struct agg_window *w, uint64_t span_id)
{
	for (size_t i = 0; w && i < w->nrequests; i++)
		if (w->requests[i].span_id == span_id)
			return &w->requests[i];
	return NULL;
}

static const struct agg_route *find_route(const struct agg_window *w, uint64_t id)
{
	for (size_t i = 0; i < w->nroutes; i++)
		if (w->routes[i].id == id)
			return &w->routes[i];
	return NULL;
}

static const struct agg_source *find_source(const struct agg_window *w, uint64_t id)
{
	for (size_t i = 0; i < w->nsources; i++)
		if (w->sources[i].id == id)
			return &w->sources[i];
	return NULL;
}

static uint64_t span_id_of(const struct tb_span *s)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | s->span[i];
	return v;
}

/* New conventions in one resource, old ones in another; string and int statuses. */
static void test_fields(void)
{
	struct tb_span a = tb_server_span(1, T0), b = tb_server_span(2, T0 + 5000000000ull);
	struct tb_span c = tb_server_span(3, T0), d = tb_server_span(4, T0);
	struct tb_resource res[2] = {
	    {.attrs = {{"service.name", "checkout", 0},
		       {"k8s.namespace.name", "shop", 0},
		       {"k8s.pod.name", "checkout-7f9", 0},
		       {"container.id", "c0ffee", 0},
		       {"k8s.node.name", "node-a", 0}},
	     .spans = NULL,
	     .nspans = 2},
	    {.attrs = {{"service.name", "legacy", 0}, {"host.name", "host-b", 0}},
	     .spans = NULL,
	     .nspans = 2},
	};
	struct tb_span s1[2], s2[2];
	struct otlp_decoded d0;
	const struct store_request *r;
	const struct agg_route *rt;
	const struct agg_source *src;
	uint8_t *buf;
	size_t len;
	int rc;

	a.attrs[0] = (struct tb_attr){"http.route", "/cart/{id}", 0};
	a.attrs[1] = (struct tb_attr){"url.path", "/cart/42", 0};
	a.attrs[2] = (struct tb_attr){"http.request.method", "POST", 0};
	a.attrs[3] = (struct tb_attr){"http.response.status_code", NULL, 201};
	a.parent_len = 8;
	memcpy(a.parent, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
	a.end_ns = a.start_ns + 2500000; /* 2.5 ms */
	b.attrs[0] = (struct tb_attr){"url.path", "/health", 0};
	b.attrs[1] = (struct tb_attr){"http.request.method", "GET", 0};
	b.attrs[2] = (struct tb_attr){"http.response.status_code", "503", 0};
	c.attrs[0] = (struct tb_attr){"http.target", "/old?x=1", 0};
	c.attrs[1] = (struct tb_attr){"http.method", "PUT", 0};
	c.attrs[2] = (struct tb_attr){"http.status_code", NULL, 404};
	d.attrs[0] = (struct tb_attr){"http.status_code", "oops", 0}; /* not a number: 0 */
	s1[0] = a;
	s1[1] = b;
	s2[0] = c;
	s2[1] = d;
	res[0].spans = s1;
	res[1].spans = s2;
	buf = tb_pack(res, 2, &len);
	rc = otlp_decode(buf, len, &(struct otlp_decode_opts){.node = "agent-node"}, &d0);
	CHECK(rc == 0, "decode: %d %s", rc, d0.message);
	CHECK(d0.spans == 4 && d0.rejected == 0 && d0.batch && d0.batch->nrequests == 4,
	      "4 rows, got spans=%llu rejected=%llu", (unsigned long long)d0.spans,
	      (unsigned long long)d0.rejected);
	if (!d0.batch)
		goto out;
	CHECK(d0.batch->nrows == 0 && d0.batch->nsources == 2 && d0.batch->nroutes == 3,
	      "sources=%zu routes=%zu", d0.batch->nsources, d0.batch->nroutes);

	r = find_span(d0.batch, span_id_of(&a));
	CHECK(r && memcmp(r->trace_id, a.trace, 16) == 0, "span a's trace id");
	if (r) {
		CHECK(r->start_us == (int64_t)(T0 / 1000) && r->duration_us == 2500,
		      "a start/duration %lld %lld", (long long)r->start_us,
		      (long long)r->duration_us);
		CHECK(r->parent_span_id == 0x0102030405060708ull, "a parent");
		CHECK(r->status_code == 201, "a status %d", r->status_code);
		CHECK(r->route_id == ids_route("POST", "/cart/{id}"), "a route is http.route");
		rt = find_route(d0.batch, r->route_id);
		CHECK(rt && !strcmp(rt->method, "POST") && !strcmp(rt->route, "/cart/{id}"),
		      "a's route entry");
		src = find_source(d0.batch, r->source_id);
		CHECK(src && !strcmp(src->src.service, "checkout") &&
			  !strcmp(src->src.namespace_, "shop") &&
			  !strcmp(src->src.pod, "checkout-7f9") &&
			  !strcmp(src->src.container, "c0ffee") && !strcmp(src->src.node, "node-a"),
		      "a's source");
		CHECK(r->source_id ==
			  ids_source("checkout", "shop", "checkout-7f9", "c0ffee", "node-a", ""),
		      "source id");
	}
	r = find_span(d0.batch, span_id_of(&b));
	CHECK(r && r->status_code == 503 && r->parent_span_id == 0 &&
		  r->route_id == ids_route("GET", "/health") &&
		  r->start_us == (int64_t)((T0 + 5000000000ull) / 1000) && r->duration_us == 1000,
	      "b: url.path, string status, root span");
	r = find_span(d0.batch, span_id_of(&c));
	CHECK(r && r->status_code == 404 && r->route_id == ids_route("PUT", "/old?x=1"),
	      "c: http.target, http.method, http.status_code");
	if (r) {
		src = find_source(d0.batch, r->source_id);
		CHECK(src && !strcmp(src->src.service, "legacy") &&
			  !strcmp(src->src.node, "host-b") && !src->src.pod[0],
		      "c's source: host.name as node");
	}
	r = find_span(d0.batch, span_id_of(&d));
	CHECK(r && r->status_code == 0 && r->route_id == 0, "d: no route, bad status is 0");
out:
	agg_window_free(d0.batch);
	free(buf);
}

/* Every kind of bad span next to good ones in the same batch. */
static void test_rejects(void)
{
	struct tb_span sp[14];
	struct tb_resource res[3] = {
	    {.attrs = {{"service.name", "svc", 0}}, .spans = sp, .nspans = 11},
	    {.attrs = {{"host.name", "h", 0}}, .spans = sp + 11, .nspans = 2},
	    {.attrs = {{"service.name", "bad\xff", 0}}, .spans = sp + 13, .nspans = 1},
	};
	struct otlp_decoded d0;
	uint8_t *buf;
	size_t len;
	int rc;

	for (int i = 0; i < 14; i++)
		sp[i] = tb_server_span((uint32_t)i + 1, T0);
	memset(sp[1].trace, 0, 16);					  /* all-zero trace id */
	sp[2].trace_len = 15;						  /* 15-byte trace id */
	memset(sp[3].span, 0, 8);					  /* zero span id */
	sp[4].parent_len = 4;						  /* 4-byte parent */
	sp[5].end_ns = sp[5].start_ns - 1;				  /* end before start */
	sp[6].kind = 3;							  /* client */
	sp[7].kind = 1;							  /* internal */
	sp[8].span_len = 0;						  /* no span id */
	sp[10].attrs[0] = (struct tb_attr){"http.route", "/\xc0\xaf", 0}; /* overlong UTF-8 */
	/*
	 * sp[0], sp[9]: good; sp[11], sp[12]: good but their resource has no
	 * service.name; sp[13]: its service name is not UTF-8
	 */
	buf = tb_pack(res, 3, &len);
	rc = otlp_decode(buf, len, NULL, &d0);
	CHECK(rc == 0, "decode %d", rc);
	CHECK(d0.spans == 14, "spans %llu", (unsigned long long)d0.spans);
	CHECK(d0.batch && d0.batch->nrequests == 2 && find_span(d0.batch, span_id_of(&sp[0])) &&
		  find_span(d0.batch, span_id_of(&sp[9])),
	      "the two good spans survive");
	CHECK(d0.by_reason[OTLP_REJ_TRACE_ID] == 2, "trace_id rejects %llu",
	      (unsigned long long)d0.by_reason[OTLP_REJ_TRACE_ID]);
	CHECK(d0.by_reason[OTLP_REJ_SPAN_ID] == 2, "span_id rejects");
	CHECK(d0.by_reason[OTLP_REJ_PARENT_ID] == 1, "parent rejects");
	CHECK(d0.by_reason[OTLP_REJ_TIME] == 1, "time rejects");
	CHECK(d0.by_reason[OTLP_REJ_NO_SERVICE] == 2, "no service rejects");
	CHECK(d0.by_reason[OTLP_REJ_TEXT] == 2, "text rejects");
	CHECK(d0.rejected == 10 && d0.ignored_kind == 2, "rejected %llu ignored %llu",
	      (unsigned long long)d0.rejected, (unsigned long long)d0.ignored_kind);
	CHECK(strstr(d0.message, "10 of 14 spans rejected") && strstr(d0.message, "trace_id=2") &&
		  strstr(d0.message, "no_service=2"),
	      "message \"%s\"", d0.message);
	agg_window_free(d0.batch);

	/* client spans kept when configured */
	rc = otlp_decode(buf, len,
			 &(struct otlp_decode_opts){.kinds = OTLP_KIND_SERVER | OTLP_KIND_CLIENT},
			 &d0);
	CHECK(rc == 0 && d0.batch && d0.batch->nrequests == 3 && d0.ignored_kind == 1 &&
		  find_span(d0.batch, span_id_of(&sp[6])),
	      "server+client keeps the client span");
	agg_window_free(d0.batch);
	free(buf);
}

/* Truncated, garbage, hostile: refused with a message, never a crash. */
static void test_malformed(void)
{
	struct tb_span sp[3] = {tb_server_span(1, T0), tb_server_span(2, T0),
				tb_server_span(3, T0)};
	struct tb_resource res = {.attrs = {{"service.name", "svc", 0}}, .spans = sp, .nspans = 3};
	struct otlp_decoded d0;
	size_t len, bad = 0, ok = 0;
	uint8_t *buf = tb_pack(&res, 1, &len), junk[4096];
	int rc;

	/* every truncation either fails cleanly or decodes a prefix */
	for (size_t cut = 1; cut < len; cut++) {
		rc = otlp_decode(buf, cut, NULL, &d0);
		if (rc == -EBADMSG && strstr(d0.message, "malformed"))
			bad++;
		else if (rc == 0)
			ok++;
		agg_window_free(d0.batch);
	}
	CHECK(bad > 0 && bad + ok == len - 1, "truncations: %zu refused, %zu decoded of %zu", bad,
	      ok, len - 1);
	rc = otlp_decode(buf, len - 1, NULL, &d0);
	CHECK(rc == -EBADMSG, "cut by one byte: %d", rc);
	agg_window_free(d0.batch);

	srand(42);
	for (int round = 0; round < 2000; round++) {
		size_t n = (size_t)(rand() % (int)sizeof(junk)) + 1;

		for (size_t i = 0; i < n; i++)
			junk[i] = (uint8_t)rand();
		rc = otlp_decode(junk, n, NULL, &d0);
		CHECK(rc == 0 || rc == -EBADMSG || rc == -E2BIG, "garbage: %d", rc);
		agg_window_free(d0.batch);
	}

	/*
	 * Hostile: 100000 empty spans (2 bytes each on the wire, a whole struct
	 * each when decoded) expand past the arena bound: refused as too large.
	 */
	{
		size_t nspans = 100000, o = 0;
		uint8_t *h = malloc(nspans * 2 + 64);
		size_t inner = nspans * 2, scope_len, rs_len;

		/* ScopeSpans { spans(2) x nspans } inside ResourceSpans(2) inside field 1 */
		scope_len = inner;
		rs_len = 1 + 3 + scope_len; /* tag + 3-byte varint length + scope */
		h[o++] = 0x0a;		    /* ExportTraceServiceRequest.resource_spans */
		h[o++] = (uint8_t)(rs_len | 0x80);
		h[o++] = (uint8_t)((rs_len >> 7) | 0x80);
		h[o++] = (uint8_t)(rs_len >> 14);
		h[o++] = 0x12; /* ResourceSpans.scope_spans */
		h[o++] = (uint8_t)(scope_len | 0x80);
		h[o++] = (uint8_t)((scope_len >> 7) | 0x80);
		h[o++] = (uint8_t)(scope_len >> 14);
		for (size_t i = 0; i < nspans; i++) {
			h[o++] = 0x12; /* ScopeSpans.spans, empty */
			h[o++] = 0x00;
		}
		rc = otlp_decode(h, o, NULL, &d0);
		CHECK(rc == -E2BIG && strstr(d0.message, "decodes into more than"),
		      "expanding message: %d \"%s\"", rc, d0.message);
		free(h);
	}

	/* empty message: nothing, no error */
	rc = otlp_decode("", 0, NULL, &d0);
	CHECK(rc == 0 && !d0.batch && d0.spans == 0, "empty export: %d", rc);
	free(buf);
}

/* ---- nesting, encoded by hand ---- */

struct enc {
	uint8_t *b;  /* bytes */
	size_t n;    /* used */
	size_t size; /* allocated */
};

static void enc_bytes(struct enc *e, const void *p, size_t n)
{
	if (e->n + n > e->size) {
		e->size = (e->n + n) * 2;
		e->b = realloc(e->b, e->size);
		if (!e->b)
			abort();
	}
	memcpy(e->b + e->n, p, n);
	e->n += n;
}

static void enc_varint(struct enc *e, uint64_t v)
{
	uint8_t b[10];
	size_t n = 0;

	do {
		b[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	enc_bytes(e, b, n);
}

/* A new encoding: field (wire type 2) holding what inner holds; inner is freed. */
static struct enc wrap(unsigned field, struct enc inner)
{
	struct enc e = {0};

	enc_varint(&e, (uint64_t)field << 3 | 2);
	enc_varint(&e, inner.n);
	enc_bytes(&e, inner.b, inner.n);
	free(inner.b);
	return e;
}

static struct enc cat(struct enc a, struct enc b)
{
	enc_bytes(&a, b.b, b.n);
	free(b.b);
	return a;
}

static struct enc str_field(unsigned field, const char *s)
{
	struct enc e = {0}, v = {0};

	enc_bytes(&v, s, strlen(s));
	e = wrap(field, v);
	return e;
}

/*
 * The AnyValue bytes of a value nested n times: arrays (ArrayValue.values
 * inside AnyValue.array_value, 2 levels each) or kvlists (KeyValue.value in
 * KeyValueList.values in AnyValue.kvlist_value, 3 levels each).
 */
static struct enc nested_any(unsigned n, bool kvlist)
{
	struct enc v = str_field(1, "leaf"); /* AnyValue.string_value */

	for (unsigned i = 0; i < n; i++)
		v = kvlist ? wrap(6, wrap(1, cat(str_field(1, "k"), wrap(2, v))))
			   : wrap(5, wrap(1, v));
	return v;
}

/*
 * One server span with attribute "deep" = value (in a span event when
 * in_event), in an export of service "svc". Levels: export 1,
 * ResourceSpans 2, ScopeSpans 3, Span 4, [Event 5,] KeyValue 5 (6),
 * AnyValue 6 (7), then the value's own.
 */
static struct enc deep_export(struct enc value, bool in_event)
{
	struct tb_span sp = tb_server_span(9, T0);
	struct enc span = {0}, kv = cat(str_field(1, "deep"), wrap(2, value)), res;
	uint8_t fixed[9];

	span = cat(span, str_field(1, "")); /* replaced below: ids as bytes */
	span.n = 0;
	enc_varint(&span, 1 << 3 | 2);
	enc_varint(&span, 16);
	enc_bytes(&span, sp.trace, 16);
	enc_varint(&span, 2 << 3 | 2);
	enc_varint(&span, 8);
	enc_bytes(&span, sp.span, 8);
	enc_varint(&span, 6 << 3); /* kind */
	enc_varint(&span, 2);
	fixed[0] = 7 << 3 | 1; /* start_time_unix_nano, fixed64 */
	for (int i = 0; i < 8; i++)
		fixed[1 + i] = (uint8_t)(sp.start_ns >> (8 * i));
	enc_bytes(&span, fixed, 9);
	fixed[0] = 8 << 3 | 1;
	for (int i = 0; i < 8; i++)
		fixed[1 + i] = (uint8_t)(sp.end_ns >> (8 * i));
	enc_bytes(&span, fixed, 9);
	if (in_event) /* Span.events(11) { name(2), attributes(3) } */
		span = cat(span, wrap(11, cat(str_field(2, "ev"), wrap(3, kv))));
	else /* Span.attributes(9) */
		span = cat(span, wrap(9, kv));
	res = wrap(1, wrap(1, cat(str_field(1, "service.name"), wrap(2, str_field(1, "svc")))));
	/* ResourceSpans { resource(1), scope_spans(2) { spans(2) } } in resource_spans(1) */
	return wrap(1, cat(res, wrap(2, wrap(2, span))));
}

struct small_stack_call {
	const struct enc *msg; /* what to decode */
	int rc;		       /* otlp_decode's result */
	char message[256];     /* its message */
};

static void *decode_thread(void *arg)
{
	struct small_stack_call *c = arg;
	struct otlp_decoded d;

	c->rc = otlp_decode(c->msg->b, c->msg->n, NULL, &d);
	memcpy(c->message, d.message, sizeof(c->message));
	agg_window_free(d.batch);
	return NULL;
}

static void test_depth(void)
{
	static const struct {
		unsigned n;	/* nested arrays or kvlists */
		bool kvlist;	/* kvlists, not arrays */
		bool in_event;	/* the attribute of a span event */
		unsigned depth; /* levels, counted by hand (deep_export) */
	} cases[] = {
	    {0, false, false, 6},   {13, false, false, 32}, {13, false, true, 33},
	    {14, false, false, 34}, {8, true, false, 30},   {9, true, false, 33},
	    {12, false, true, 31},
	};
	struct otlp_decoded d;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct enc m =
		    deep_export(nested_any(cases[i].n, cases[i].kvlist), cases[i].in_event);
		int rc = otlp_decode(m.b, m.n, NULL, &d);

		if (cases[i].depth <= OTLP_MAX_DEPTH)
			CHECK(rc == 0 && d.batch && d.batch->nrequests == 1,
			      "%u levels (%u %s) decode: %d \"%s\"", cases[i].depth, cases[i].n,
			      cases[i].kvlist ? "kvlists" : "arrays", rc, d.message);
		else
			CHECK(rc == -ELOOP && strstr(d.message, "nested deeper than 32 levels"),
			      "%u levels (%u %s) refused: %d \"%s\"", cases[i].depth, cases[i].n,
			      cases[i].kvlist ? "kvlists" : "arrays", rc, d.message);
		agg_window_free(d.batch);
		free(m.b);
	}
	/* the walker alone: exactly max_depth levels pass, one more does not */
	{
		struct enc m = deep_export(nested_any(13, false), false); /* 32 levels */

		CHECK(otlp_check_depth(m.b, m.n, 32, NULL, 0) == 0, "32 levels at limit 32");
		CHECK(otlp_check_depth(m.b, m.n, 31, NULL, 0) == -ELOOP, "32 levels at limit 31");
		free(m.b);
	}
	/*
	 * 100000 nested arrays (about 700 KB; 4,300 took protobuf-c past an 8 MiB
	 * stack) on a thread with a 64 KiB stack: refused, no recursion.
	 */
	{
		struct enc m = deep_export(nested_any(100000, false), false);
		struct small_stack_call c = {.msg = &m};
		pthread_attr_t at;
		pthread_t t;

		pthread_attr_init(&at);
		pthread_attr_setstacksize(&at, 64 << 10);
		CHECK(pthread_create(&t, &at, decode_thread, &c) == 0, "small-stack thread");
		pthread_join(t, NULL);
		pthread_attr_destroy(&at);
		CHECK(c.rc == -ELOOP, "100000 nested arrays on a 64 KiB stack: %d \"%s\"", c.rc,
		      c.message);
		free(m.b);
	}
}

/* ---- compressed exports ---- */

static void test_inflate(void)
{
	struct tb_span sp[2] = {tb_server_span(1, T0), tb_server_span(2, T0)};
	struct tb_resource res = {.attrs = {{"service.name", "svc", 0}}, .spans = sp, .nspans = 2};
	size_t len, zlen, olen, zeros_len = 16u << 20;
	uint8_t *buf = tb_pack(&res, 1, &len), *z, *out, *zeros;
	int rc;

	/* gzip and zlib give back the same bytes */
	for (int wb = 15; wb <= 31; wb += 16) {
		z = tb_deflate(buf, len, wb, &zlen);
		rc = otlp_inflate(z, zlen, len, &out, &olen);
		CHECK(rc == 0 && olen == len && !memcmp(out, buf, len), "%s round trip: %d",
		      wb == 31 ? "gzip" : "zlib", rc);
		free(out);
		/* one byte less of room: refused, nothing returned */
		rc = otlp_inflate(z, zlen, len - 1, &out, &olen);
		CHECK(rc == -E2BIG && !out, "%s over the limit by one byte: %d",
		      wb == 31 ? "gzip" : "zlib", rc);
		/* cut short: malformed */
		rc = otlp_inflate(z, zlen - 5, len, &out, &olen);
		CHECK(rc == -EBADMSG && !out, "%s cut short: %d", wb == 31 ? "gzip" : "zlib", rc);
		free(z);
	}
	/* two gzip members read one after the other */
	{
		size_t l1, l2;
		uint8_t *a = tb_deflate(buf, 10, 31, &l1),
			*b = tb_deflate(buf + 10, len - 10, 31, &l2);

		a = realloc(a, l1 + l2);
		memcpy(a + l1, b, l2);
		rc = otlp_inflate(a, l1 + l2, len, &out, &olen);
		CHECK(rc == 0 && olen == len && !memcmp(out, buf, len), "two gzip members: %d", rc);
		free(out);
		free(a);
		free(b);
	}
	rc = otlp_inflate("not gzip at all", 15, 1 << 20, &out, &olen);
	CHECK(rc == -EBADMSG && !out, "not gzip: %d", rc);
	/* a bomb: 16 MiB of zeros (about 16 KB of gzip) refused at 1 MiB, quickly */
	zeros = calloc(1, zeros_len);
	z = tb_deflate(zeros, zeros_len, 31, &zlen);
	free(zeros);
	{
		struct timespec t0, t1;
		double ms;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		rc = otlp_inflate(z, zlen, 1u << 20, &out, &olen);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ms =
		    (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
		CHECK(rc == -E2BIG && !out, "gzip bomb of %zu bytes refused: %d", zlen, rc);
		CHECK(ms < 2000, "gzip bomb refused in %.1f ms", ms);
	}
	free(z);
	free(buf);
}

static void test_rpc_status(void)
{
	uint8_t out[64];
	size_t n;

	n = otlp_pack_rpc_status(3, "bad", out, sizeof(out));
	CHECK(n == 7 && !memcmp(out,
				"\x08\x03\x12\x03"
				"bad",
				7),
	      "google.rpc.Status bytes");
}

int main(void)
{
	test_fields();
	test_rejects();
	test_malformed();
	test_depth();
	test_inflate();
	test_rpc_status();
	return check_done();
}
