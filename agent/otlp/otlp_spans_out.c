/*
 * otlp_spans_out.c - see otlp_spans_out.h. The message is built from the
 * generated protobuf-c structs in one arena (one allocation for the
 * structs, one for the bytes) and packed.
 */
#include "otlp_spans_out.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest export_req;
typedef Opentelemetry__Proto__Trace__V1__ResourceSpans resource_spans;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans scope_spans;
typedef Opentelemetry__Proto__Trace__V1__Span span_t;
typedef Opentelemetry__Proto__Trace__V1__Status status_t;
typedef Opentelemetry__Proto__Resource__V1__Resource resource_t;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope scope_t;
typedef Opentelemetry__Proto__Common__V1__KeyValue key_value;
typedef Opentelemetry__Proto__Common__V1__AnyValue any_value;

#define SPAN_ATTRS   3 /* method, path, status */
#define NAME_MAX_LEN 160

/* Everything one span needs, in the arena. */
struct span_mem {
	span_t span;
	status_t status;
	key_value kv[SPAN_ATTRS];
	any_value av[SPAN_ATTRS];
	key_value *attrs[SPAN_ATTRS];
	uint8_t ids[8 + 8];
	char name[NAME_MAX_LEN];
};

/* One service: its resource, scope and span list. */
struct res_mem {
	resource_spans rs;
	resource_t res;
	key_value kv;
	any_value av;
	key_value *attrs[1];
	scope_spans ss;
	scope_spans *ssp[1];
	scope_t scope;
	span_t **spans; /* into the arena's pointer area */
	const char *service;
};

static const char *service_of(const struct otlp_span_out *s)
{
	return s->service && s->service[0] ? s->service : "unknown_service";
}

static void put_be64(uint8_t *b, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		b[i] = (uint8_t)v;
}

static void attr_str(key_value *kv, any_value *av, const char *key, const char *v)
{
	opentelemetry__proto__common__v1__key_value__init(kv);
	opentelemetry__proto__common__v1__any_value__init(av);
	kv->key = (char *)key;
	kv->value = av;
	av->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	av->string_value = (char *)v;
}

static void fill_span(struct span_mem *m, const struct otlp_span_out *s)
{
	span_t *sp = &m->span;
	size_t na = 0;

	opentelemetry__proto__trace__v1__span__init(sp);
	sp->trace_id.data = (uint8_t *)s->trace_id;
	sp->trace_id.len = 16;
	put_be64(m->ids, s->span_id);
	sp->span_id.data = m->ids;
	sp->span_id.len = 8;
	if (s->parent_span_id) {
		put_be64(m->ids + 8, s->parent_span_id);
		sp->parent_span_id.data = m->ids + 8;
		sp->parent_span_id.len = 8;
	}
	snprintf(m->name, sizeof(m->name), "%s%s%s", s->method ? s->method : "",
		 s->method && s->method[0] && s->path && s->path[0] ? " " : "",
		 s->path ? s->path : "");
	sp->name = m->name[0] ? m->name : (char *)"request";
	sp->kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER;
	sp->start_time_unix_nano = s->start_unix_ns;
	sp->end_time_unix_nano = s->end_unix_ns;
	if (s->method && s->method[0])
		attr_str(&m->kv[na], &m->av[na], "http.request.method", s->method), na++;
	if (s->path && s->path[0])
		attr_str(&m->kv[na], &m->av[na], "url.path", s->path), na++;
	if (s->status_code > 0) {
		attr_str(&m->kv[na], &m->av[na], "http.response.status_code", NULL);
		m->av[na].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
		m->av[na].int_value = s->status_code;
		na++;
	}
	for (size_t i = 0; i < na; i++)
		m->attrs[i] = &m->kv[i];
	sp->attributes = m->attrs;
	sp->n_attributes = na;
	if (s->status_code >= 500 && s->status_code <= 599) {
		opentelemetry__proto__trace__v1__status__init(&m->status);
		m->status.code =
		    OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR;
		sp->status = &m->status;
	}
}

static void fill_resource(struct res_mem *r, const char *service, span_t **spans)
{
	opentelemetry__proto__trace__v1__resource_spans__init(&r->rs);
	opentelemetry__proto__resource__v1__resource__init(&r->res);
	attr_str(&r->kv, &r->av, "service.name", service);
	r->attrs[0] = &r->kv;
	r->res.attributes = r->attrs;
	r->res.n_attributes = 1;
	r->rs.resource = &r->res;
	opentelemetry__proto__trace__v1__scope_spans__init(&r->ss);
	opentelemetry__proto__common__v1__instrumentation_scope__init(&r->scope);
	r->scope.name = (char *)OTLP_SPANS_OUT_SCOPE;
	r->ss.scope = &r->scope;
	r->ss.spans = spans;
	r->ssp[0] = &r->ss;
	r->rs.scope_spans = r->ssp;
	r->rs.n_scope_spans = 1;
	r->service = service;
	r->spans = spans;
}

int otlp_spans_encode(const struct otlp_span_out *v, size_t n, uint8_t **out, size_t *len)
{
	export_req req;
	struct span_mem *sm;
	struct res_mem *rm;
	resource_spans **rsp;
	span_t **order;
	size_t nres = 0, packed, k = 0;
	void *arena;
	uint8_t *buf;

	if (!v || !out || !len || n == 0 || n > OTLP_SPANS_OUT_MAX)
		return -EINVAL;
	arena = calloc(1, n * (sizeof(*sm) + sizeof(*rm) + sizeof(*rsp) + sizeof(*order)));
	if (!arena)
		return -ENOMEM;
	sm = arena;
	rm = (struct res_mem *)(sm + n);
	rsp = (resource_spans **)(rm + n);
	order = (span_t **)(rsp + n);
	for (size_t i = 0; i < n; i++)
		fill_span(&sm[i], &v[i]);
	/* group by service, first appearance first; spans of one service contiguous in order */
	for (size_t i = 0; i < n; i++) {
		const char *svc = service_of(&v[i]);
		bool seen = false;

		for (size_t r = 0; r < nres && !seen; r++)
			seen = !strcmp(rm[r].service, svc);
		if (seen)
			continue;
		fill_resource(&rm[nres], svc, order + k);
		for (size_t j = i; j < n; j++)
			if (!strcmp(service_of(&v[j]), svc))
				order[k++] = &sm[j].span, rm[nres].ss.n_spans++;
		rsp[nres] = &rm[nres].rs;
		nres++;
	}
	opentelemetry__proto__collector__trace__v1__export_trace_service_request__init(&req);
	req.resource_spans = rsp;
	req.n_resource_spans = nres;
	packed =
	    opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(
		&req);
	buf = malloc(packed ? packed : 1);
	if (!buf) {
		free(arena);
		return -ENOMEM;
	}
	*len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req,
											      buf);
	*out = buf;
	free(arena);
	return 0;
}
