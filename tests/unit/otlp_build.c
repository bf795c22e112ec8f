/* otlp_build.c - see otlp_build.h. */
#include "otlp_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

typedef Opentelemetry__Proto__Common__V1__KeyValue kv_t;
typedef Opentelemetry__Proto__Common__V1__AnyValue av_t;
typedef Opentelemetry__Proto__Trace__V1__Span span_t;

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	return p;
}

/* Fills out from attrs with storage in kvs and avs; returns how many. */
static size_t fill_attrs(const struct tb_attr *attrs, kv_t **out, kv_t *kvs, av_t *avs)
{
	size_t n = 0;

	for (; n < TB_MAX_ATTRS && attrs[n].key; n++) {
		opentelemetry__proto__common__v1__key_value__init(&kvs[n]);
		opentelemetry__proto__common__v1__any_value__init(&avs[n]);
		kvs[n].key = (char *)attrs[n].key;
		kvs[n].value = &avs[n];
		if (attrs[n].str) {
			avs[n].value_case =
			    OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
			avs[n].string_value = (char *)attrs[n].str;
		} else {
			avs[n].value_case =
			    OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
			avs[n].int_value = attrs[n].i;
		}
		out[n] = &kvs[n];
	}
	return n;
}

uint8_t *tb_pack(const struct tb_resource *res, size_t nres, size_t *len)
{
	Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest req =
	    OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
	Opentelemetry__Proto__Trace__V1__ResourceSpans *rs = xcalloc(nres, sizeof(*rs));
	Opentelemetry__Proto__Trace__V1__ResourceSpans **rsp = xcalloc(nres, sizeof(*rsp));
	Opentelemetry__Proto__Resource__V1__Resource *rr = xcalloc(nres, sizeof(*rr));
	Opentelemetry__Proto__Trace__V1__ScopeSpans *ss = xcalloc(nres, sizeof(*ss));
	Opentelemetry__Proto__Trace__V1__ScopeSpans **ssp = xcalloc(nres, sizeof(*ssp));
	size_t total = 0, si = 0;
	span_t *spans, **spp;
	kv_t *kvs, **kvp;
	av_t *avs;
	uint8_t *buf;

	for (size_t i = 0; i < nres; i++)
		total += res[i].nspans;
	spans = xcalloc(total, sizeof(*spans));
	spp = xcalloc(total, sizeof(*spp));
	kvs = xcalloc((total + nres) * TB_MAX_ATTRS, sizeof(*kvs));
	kvp = xcalloc((total + nres) * TB_MAX_ATTRS, sizeof(*kvp));
	avs = xcalloc((total + nres) * TB_MAX_ATTRS, sizeof(*avs));
	for (size_t i = 0; i < nres; i++) {
		size_t ka = i * TB_MAX_ATTRS;

		opentelemetry__proto__trace__v1__resource_spans__init(&rs[i]);
		opentelemetry__proto__resource__v1__resource__init(&rr[i]);
		opentelemetry__proto__trace__v1__scope_spans__init(&ss[i]);
		rr[i].attributes = &kvp[ka];
		rr[i].n_attributes = fill_attrs(res[i].attrs, &kvp[ka], &kvs[ka], &avs[ka]);
		rs[i].resource = &rr[i];
		rs[i].scope_spans = &ssp[i];
		rs[i].n_scope_spans = 1;
		ssp[i] = &ss[i];
		ss[i].spans = &spp[si];
		ss[i].n_spans = res[i].nspans;
		for (size_t j = 0; j < res[i].nspans; j++, si++) {
			const struct tb_span *t = &res[i].spans[j];
			span_t *s = &spans[si];
			size_t k = (nres + si) * TB_MAX_ATTRS;

			opentelemetry__proto__trace__v1__span__init(s);
			s->trace_id.data = (uint8_t *)t->trace;
			s->trace_id.len = t->trace_len;
			s->span_id.data = (uint8_t *)t->span;
			s->span_id.len = t->span_len;
			s->parent_span_id.data = (uint8_t *)t->parent;
			s->parent_span_id.len = t->parent_len;
			s->name = "span";
			s->kind = t->kind;
			s->start_time_unix_nano = t->start_ns;
			s->end_time_unix_nano = t->end_ns;
			s->attributes = &kvp[k];
			s->n_attributes = fill_attrs(t->attrs, &kvp[k], &kvs[k], &avs[k]);
			spp[si] = s;
		}
		rsp[i] = &rs[i];
	}
	req.resource_spans = rsp;
	req.n_resource_spans = nres;
	*len =
	    opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(
		&req);
	buf = xcalloc(*len, 1);
	opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, buf);
	free(rs);
	free(rsp);
	free(rr);
	free(ss);
	free(ssp);
	free(spans);
	free(spp);
	free(kvs);
	free(kvp);
	free(avs);
	return buf;
}

struct tb_span tb_server_span(uint32_t n, uint64_t start_ns)
{
	struct tb_span s;

	memset(&s, 0, sizeof(s));
	for (int i = 0; i < 16; i++)
		s.trace[i] = (uint8_t)(n >> (8 * (i % 4))) ^ (uint8_t)(0x10 + i);
	s.trace_len = 16;
	s.span[7] = (uint8_t)n;
	s.span[6] = (uint8_t)(n >> 8);
	s.span[0] = 0xab;
	s.span_len = 8;
	s.kind = 2;
	s.start_ns = start_ns;
	s.end_ns = start_ns + 1000000;
	return s;
}

uint8_t *tb_deflate(const void *in, size_t len, int window_bits, size_t *outlen)
{
	z_stream z = {0};
	size_t cap;
	uint8_t *out;

	if (deflateInit2(&z, 9, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		abort();
	cap = deflateBound(&z, len) + 64;
	out = malloc(cap);
	if (!out)
		abort();
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END)
		abort();
	*outlen = cap - z.avail_out;
	deflateEnd(&z);
	return out;
}
