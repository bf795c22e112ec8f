/*
 * test_otlp.c - decoding OTLP exports into request rows (agent/otlp.c):
 * every field for the current and the older semantic conventions, and each
 * kind of bad span rejected with its own counter while the good spans of
 * the same batch survive; malformed and hostile messages refused without
 * a crash and within the arena bound.
 */
#include <errno.h>
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
	test_rpc_status();
	return check_done();
}
