/*
 * otlp.c - see otlp.h.
 *
 * Workload: exports of a few to a few thousand spans, every second or so
 * per application (SDK batch exporters), up to max_bytes each. Decoding
 * goes through an arena of chunks whose total is capped at
 * OTLP_ARENA_FACTOR * size + OTLP_ARENA_SLACK; protobuf-c's frees are
 * no-ops and the whole arena goes at once. Kept spans are first collected
 * with pointers into the decoded message, then copied into one allocation
 * (the struct agg_window handed on): the requests, the distinct sources
 * (one per resource) and routes (sorted by id, duplicates removed), and
 * their strings.
 *
 * Before the unpacker runs, otlp_check_depth() (otlp_bounds.c) bounds the
 * nesting; compressed exports are inflated there too (otlp_inflate).
 */
#include "otlp.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "traceprof/ids.h"
#include "traceprof/log.h"
#include "traceprof/store.h"

typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest export_req;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse export_resp;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTracePartialSuccess partial_success;
typedef Opentelemetry__Proto__Trace__V1__ResourceSpans resource_spans;
typedef Opentelemetry__Proto__Trace__V1__Span span_t;
typedef Opentelemetry__Proto__Common__V1__KeyValue key_value;
typedef Opentelemetry__Proto__Common__V1__AnyValue any_value;

/* ---- the bounded arena ---- */

#define CHUNK_MIN (64u << 10)

struct chunk {
	struct chunk *next; /* older chunk */
	size_t size;	    /* usable bytes after the header */
	size_t used;	    /* bytes handed out */
};

struct arena {
	struct chunk *head; /* newest chunk */
	size_t total;	    /* bytes of all chunks */
	size_t limit;	    /* bound on total */
	bool exceeded;	    /* an allocation was refused at the limit */
};

static void *arena_alloc(void *data, size_t size)
{
	struct arena *ar = data;
	struct chunk *c = ar->head;
	size_t need = (size + 15) & ~(size_t)15, csize;

	if (need < size)
		return NULL;
	if (!c || c->size - c->used < need) {
		csize = need > CHUNK_MIN ? need : CHUNK_MIN;
		if (csize > ar->limit - ar->total) {
			csize = ar->limit - ar->total;
			if (csize < need) {
				ar->exceeded = true;
				return NULL;
			}
		}
		c = malloc(sizeof(*c) + csize);
		if (!c)
			return NULL;
		c->next = ar->head;
		c->size = csize;
		c->used = 0;
		ar->head = c;
		ar->total += csize;
	}
	c->used += need;
	return (char *)(c + 1) + c->used - need;
}

static void arena_free_one(void *data, void *ptr)
{
	(void)data;
	(void)ptr; /* everything goes with arena_release() */
}

static void arena_release(struct arena *ar)
{
	while (ar->head) {
		struct chunk *c = ar->head;

		ar->head = c->next;
		free(c);
	}
	ar->total = 0;
}

/* ---- attributes ---- */

static const any_value *attr(key_value *const *kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (kv[i] && kv[i]->key && kv[i]->value && strcmp(kv[i]->key, key) == 0)
			return kv[i]->value;
	return NULL;
}

/* The string value of the first key present with a non-empty string, or "". */
static const char *attr_str(key_value *const *kv, size_t n, const char *const *keys)
{
	for (; *keys; keys++) {
		const any_value *v = attr(kv, n, *keys);

		if (v &&
		    v->value_case ==
			OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE &&
		    v->string_value && v->string_value[0])
			return v->string_value;
	}
	return "";
}

/* An HTTP status from an int or decimal string value; 0 when absent or out of 0..999. */
static int attr_status(key_value *const *kv, size_t n, const char *const *keys)
{
	for (; *keys; keys++) {
		const any_value *v = attr(kv, n, *keys);
		long long x = -1;

		if (!v)
			continue;
		if (v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE) {
			x = v->int_value;
		} else if (v->value_case ==
			       OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE &&
			   v->string_value) {
			char *end;

			errno = 0;
			x = strtoll(v->string_value, &end, 10);
			if (end == v->string_value || *end || errno)
				x = -1;
		}
		if (x >= 0 && x <= 999)
			return (int)x;
		return 0;
	}
	return 0;
}

static const char *const K_ROUTE[] = {"http.route", "url.path", "http.target", NULL};
static const char *const K_METHOD[] = {"http.request.method", "http.method", NULL};
static const char *const K_STATUS[] = {"http.response.status_code", "http.status_code", NULL};
static const char *const K_SERVICE[] = {"service.name", NULL};
static const char *const K_NAMESPACE[] = {"k8s.namespace.name", NULL};
static const char *const K_POD[] = {"k8s.pod.name", NULL};
static const char *const K_POD_UID[] = {"k8s.pod.uid", NULL};
static const char *const K_CONTAINER[] = {"container.id", NULL};
static const char *const K_NODE[] = {"k8s.node.name", "host.name", NULL};

/* ---- decoding ---- */

/* A kept span, pointing into the decoded message until the batch is built. */
struct pending {
	struct store_request req; /* the row, source_id and route_id set */
	const char *method;	  /* route dictionary entry */
	const char *route;	  /* route dictionary entry */
};

struct pending_source {
	uint64_t id;		 /* ids_source() */
	struct store_source src; /* strings in the message */
};

static uint64_t be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* Checks one span; fills p or returns the reason it is rejected (-1 when kept). */
static int check_span(const span_t *sp, struct pending *p)
{
	memset(p, 0, sizeof(*p));
	if (sp->trace_id.len != 16 || all_zero(sp->trace_id.data, 16))
		return OTLP_REJ_TRACE_ID;
	if (sp->span_id.len != 8 || all_zero(sp->span_id.data, 8))
		return OTLP_REJ_SPAN_ID;
	if (sp->parent_span_id.len != 0 && sp->parent_span_id.len != 8)
		return OTLP_REJ_PARENT_ID;
	if (sp->start_time_unix_nano == 0 || sp->end_time_unix_nano < sp->start_time_unix_nano ||
	    sp->start_time_unix_nano / 1000 > (uint64_t)INT64_MAX)
		return OTLP_REJ_TIME;
	memcpy(p->req.trace_id, sp->trace_id.data, 16);
	p->req.span_id = be64(sp->span_id.data);
	p->req.parent_span_id = sp->parent_span_id.len ? be64(sp->parent_span_id.data) : 0;
	p->req.start_us = (int64_t)(sp->start_time_unix_nano / 1000);
	p->req.duration_us = (int64_t)((sp->end_time_unix_nano - sp->start_time_unix_nano) / 1000);
	p->route = attr_str(sp->attributes, sp->n_attributes, K_ROUTE);
	p->method = attr_str(sp->attributes, sp->n_attributes, K_METHOD);
	p->req.status_code = attr_status(sp->attributes, sp->n_attributes, K_STATUS);
	p->req.context_source = STORE_CTX_SOURCE_OTLP;
	if (!store_valid_text(p->route) || !store_valid_text(p->method))
		return OTLP_REJ_TEXT;
	p->req.route_id = p->route[0] || p->method[0] ? ids_route(p->method, p->route) : 0;
	return -1;
}

static size_t round8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static size_t slen(const char *s)
{
	return (s ? strlen(s) : 0) + 1;
}

static char *put_str(char **pos, const char *s)
{
	size_t n = slen(s);
	char *d = *pos;

	memcpy(d, s ? s : "", n);
	*pos += n;
	return d;
}

static int cmp_route(const void *a, const void *b)
{
	const struct pending *x = *(const struct pending *const *)a;
	const struct pending *y = *(const struct pending *const *)b;

	return x->req.route_id < y->req.route_id ? -1 : x->req.route_id > y->req.route_id;
}

/* Copies the kept spans, their sources and routes into one window. */
static struct agg_window *build_batch(struct pending *rows, size_t nrows,
				      const struct pending_source *srcs, size_t nsrcs)
{
	struct pending **by_route = malloc(sizeof(*by_route) * nrows);
	size_t nroutes = 0, bytes, strbytes = 0;
	struct agg_window *w;
	char *pos;

	if (!by_route)
		return NULL;
	for (size_t i = 0; i < nrows; i++)
		if (rows[i].req.route_id)
			by_route[nroutes++] = &rows[i];
	qsort(by_route, nroutes, sizeof(*by_route), cmp_route);
	{
		size_t u = 0;

		for (size_t i = 0; i < nroutes; i++)
			if (!u || by_route[u - 1]->req.route_id != by_route[i]->req.route_id)
				by_route[u++] = by_route[i];
		nroutes = u;
	}
	for (size_t i = 0; i < nroutes; i++)
		strbytes += slen(by_route[i]->method) + slen(by_route[i]->route);
	for (size_t i = 0; i < nsrcs; i++) {
		const struct store_source *s = &srcs[i].src;

		strbytes += slen(s->service) + slen(s->namespace_) + slen(s->pod) +
			    slen(s->container) + slen(s->node) + slen(s->labels_json) + 1;
	}
	bytes = round8(sizeof(*w)) + round8(nrows * sizeof(*w->requests)) +
		round8(nsrcs * sizeof(*w->sources)) + round8(nroutes * sizeof(*w->routes)) +
		strbytes;
	w = calloc(1, bytes);
	if (!w) {
		free(by_route);
		return NULL;
	}
	pos = (char *)w + round8(sizeof(*w));
	w->requests = (struct store_request *)pos;
	pos += round8(nrows * sizeof(*w->requests));
	w->sources = (struct agg_source *)pos;
	pos += round8(nsrcs * sizeof(*w->sources));
	w->routes = (struct agg_route *)pos;
	pos += round8(nroutes * sizeof(*w->routes));
	w->nrequests = nrows;
	w->nsources = nsrcs;
	w->nroutes = nroutes;
	w->bytes = bytes;
	for (size_t i = 0; i < nrows; i++)
		w->requests[i] = rows[i].req;
	for (size_t i = 0; i < nroutes; i++) {
		w->routes[i].id = by_route[i]->req.route_id;
		w->routes[i].method = put_str(&pos, by_route[i]->method);
		w->routes[i].route = put_str(&pos, by_route[i]->route);
	}
	for (size_t i = 0; i < nsrcs; i++) {
		const struct store_source *s = &srcs[i].src;
		struct store_source *d = &w->sources[i].src;

		w->sources[i].id = srcs[i].id;
		d->service = put_str(&pos, s->service);
		d->namespace_ = put_str(&pos, s->namespace_);
		d->pod = put_str(&pos, s->pod);
		d->container = put_str(&pos, s->container);
		d->node = put_str(&pos, s->node);
		d->build_id = put_str(&pos, "");
		d->labels_json = put_str(&pos, s->labels_json);
	}
	if (nrows)
		w->start_us = w->requests[0].start_us;
	free(by_route);
	return w;
}

static void reject_message(struct otlp_decoded *out)
{
	size_t o;

	o = (size_t)snprintf(out->message, sizeof(out->message),
			     "%llu of %llu spans rejected:", (unsigned long long)out->rejected,
			     (unsigned long long)out->spans);
	for (int r = 0; r < OTLP_REJ__COUNT && o < sizeof(out->message); r++)
		if (out->by_reason[r])
			o += (size_t)snprintf(out->message + o, sizeof(out->message) - o,
					      " %s=%llu", otlp_reject_name(r),
					      (unsigned long long)out->by_reason[r]);
}

/* One otlp_decode's kept spans and sources while it walks the resources. */
struct decode_state {
	const struct otlp_decode_opts *opts; /* as given (may be NULL) */
	uint32_t kinds;			     /* span kinds kept (bits) */
	const char *node;		     /* node when the resource names none */
	struct otlp_decoded *out;	     /* counters */
	struct pending *rows;		     /* kept spans */
	struct pending_source *srcs;	     /* their sources, one per resource */
	struct kubepods_pod *pods;	     /* per resource, when opts->pod_lookup */
	size_t nrows, nsrcs, npods;
};

/* The spans of one resource's scopes: kept into d->rows, the rest counted. */
static void decode_spans(struct decode_state *d, const resource_spans *rs, uint64_t source_id,
			 bool text_ok)
{
	struct otlp_decoded *out = d->out;

	for (size_t j = 0; rs && j < rs->n_scope_spans; j++) {
		const Opentelemetry__Proto__Trace__V1__ScopeSpans *ss = rs->scope_spans[j];

		for (size_t k = 0; ss && k < ss->n_spans; k++) {
			const span_t *sp = ss->spans[k];
			int why;

			if (!sp)
				continue;
			out->spans++;
			if ((unsigned)sp->kind > 31 || !(d->kinds & (1u << sp->kind))) {
				out->ignored_kind++;
				continue;
			}
			why = check_span(sp, &d->rows[d->nrows]);
			if (why < 0 && !source_id)
				why = OTLP_REJ_NO_SERVICE;
			else if (why < 0 && !text_ok)
				why = OTLP_REJ_TEXT;
			if (why >= 0) {
				out->by_reason[why]++;
				out->rejected++;
				continue;
			}
			d->rows[d->nrows++].req.source_id = source_id;
		}
	}
}

/* One resource: its source from the attributes (and the pod lookup), then its spans. */
static void decode_resource(struct decode_state *d, const resource_spans *rs)
{
	key_value *const *kv = rs && rs->resource ? rs->resource->attributes : NULL;
	size_t nkv = rs && rs->resource ? rs->resource->n_attributes : 0;
	struct store_source src = {
	    .service = attr_str(kv, nkv, K_SERVICE),
	    .namespace_ = attr_str(kv, nkv, K_NAMESPACE),
	    .pod = attr_str(kv, nkv, K_POD),
	    .container = attr_str(kv, nkv, K_CONTAINER),
	    .node = attr_str(kv, nkv, K_NODE),
	    .build_id = "",
	};
	uint64_t source_id = 0;
	size_t before = d->nrows;
	bool text_ok;

	if (!src.node[0])
		src.node = d->node;
	/* A pod the agent knows: its namespace, name and labels (kubepods.h). */
	if (d->pods && d->opts->pod_lookup(d->opts->pod_ctx, attr_str(kv, nkv, K_POD_UID),
					   src.container, &d->pods[d->npods])) {
		src.namespace_ = d->pods[d->npods].namespace_;
		src.pod = d->pods[d->npods].name;
		src.labels_json = d->pods[d->npods].labels_json;
		d->npods++;
	}
	text_ok = store_valid_text(src.service) && store_valid_text(src.namespace_) &&
		  store_valid_text(src.pod) && store_valid_text(src.container) &&
		  store_valid_text(src.node);
	if (src.service[0])
		source_id =
		    ids_source(src.service, src.namespace_, src.pod, src.container, src.node, "");
	decode_spans(d, rs, source_id, text_ok);
	if (d->nrows > before) {
		d->srcs[d->nsrcs].id = source_id;
		d->srcs[d->nsrcs++].src = src;
	}
}

int otlp_decode(const void *buf, size_t len, const struct otlp_decode_opts *opts,
		struct otlp_decoded *out)
{
	struct arena ar = {.limit = len * OTLP_ARENA_FACTOR + OTLP_ARENA_SLACK};
	ProtobufCAllocator alloc = {arena_alloc, arena_free_one, &ar};
	struct decode_state d = {
	    .opts = opts,
	    .kinds = opts && opts->kinds ? opts->kinds : OTLP_KIND_SERVER,
	    .node = opts && opts->node ? opts->node : "",
	    .out = out,
	};
	size_t total = 0;
	export_req *req;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (len / OTLP_ARENA_FACTOR > SIZE_MAX / OTLP_ARENA_FACTOR / 2) {
		snprintf(out->message, sizeof(out->message), "export of %zu bytes is too large",
			 len);
		return -E2BIG;
	}
	rc = otlp_check_depth(buf, len, OTLP_MAX_DEPTH, out->message, sizeof(out->message));
	if (rc)
		return rc;
	req = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
	    &alloc, len, buf);
	if (!req) {
		if (ar.exceeded) {
			snprintf(out->message, sizeof(out->message),
				 "export of %zu bytes decodes into more than %zu bytes", len,
				 ar.limit);
			rc = -E2BIG;
		} else {
			snprintf(out->message, sizeof(out->message),
				 "malformed ExportTraceServiceRequest (%zu bytes)", len);
			rc = -EBADMSG;
		}
		goto out_release;
	}
	for (size_t i = 0; i < req->n_resource_spans; i++) {
		const resource_spans *rs = req->resource_spans[i];

		for (size_t j = 0; rs && j < rs->n_scope_spans; j++)
			if (rs->scope_spans[j])
				total += rs->scope_spans[j]->n_spans;
	}
	d.rows = malloc(sizeof(*d.rows) * (total ? total : 1));
	d.srcs = malloc(sizeof(*d.srcs) * (req->n_resource_spans ? req->n_resource_spans : 1));
	if (opts && opts->pod_lookup)
		d.pods = calloc(req->n_resource_spans ? req->n_resource_spans : 1, sizeof(*d.pods));
	if (!d.rows || !d.srcs || (opts && opts->pod_lookup && !d.pods)) {
		snprintf(out->message, sizeof(out->message), "out of memory");
		rc = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0; i < req->n_resource_spans; i++)
		decode_resource(&d, req->resource_spans[i]);
	if (out->rejected)
		reject_message(out);
	if (d.nrows) {
		out->batch = build_batch(d.rows, d.nrows, d.srcs, d.nsrcs);
		if (!out->batch) {
			snprintf(out->message, sizeof(out->message), "out of memory");
			rc = -ENOMEM;
		}
	}
out_free:
	for (size_t i = 0; i < d.npods; i++)
		free(d.pods[i].labels_json);
	free(d.pods);
	free(d.rows);
	free(d.srcs);
out_release:
	arena_release(&ar);
	return rc;
}

const char *otlp_reject_name(enum otlp_reject r)
{
	static const char *const names[OTLP_REJ__COUNT] = {
	    "trace_id", "span_id", "parent_span_id", "no_service", "time", "text"};

	return (unsigned)r < OTLP_REJ__COUNT ? names[r] : "?";
}

const char *otlp_status_name(enum otlp_status s)
{
	static const char *const names[OTLP_STATUS__COUNT] = {
	    "ok", "malformed", "too_large", "unavailable", "nomem", "too_deep"};

	return (unsigned)s < OTLP_STATUS__COUNT ? names[s] : "?";
}

/* ---- the receiver ---- */

struct otlp_receiver {
	struct otlp_receiver_opts o; /* options; node owned */
	pthread_mutex_t mu;	     /* guards stats */
	struct otlp_stats stats;     /* counters */
};

struct otlp_receiver *otlp_receiver_new(const struct otlp_receiver_opts *opts)
{
	struct otlp_receiver *r;

	if (!opts || !opts->submit) {
		errno = EINVAL;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->o = *opts;
	r->o.node = strdup(opts->node ? opts->node : "");
	if (!r->o.node) {
		free(r);
		errno = ENOMEM;
		return NULL;
	}
	if (!r->o.max_bytes)
		r->o.max_bytes = OTLP_DEFAULT_MAX_BYTES;
	pthread_mutex_init(&r->mu, NULL);
	return r;
}

void otlp_receiver_free(struct otlp_receiver *r)
{
	if (!r)
		return;
	pthread_mutex_destroy(&r->mu);
	free((char *)r->o.node);
	free(r);
}

size_t otlp_receiver_max_bytes(const struct otlp_receiver *r)
{
	return r->o.max_bytes;
}

void otlp_receiver_export(struct otlp_receiver *r, const void *buf, size_t len,
			  struct otlp_result *out)
{
	struct otlp_decode_opts dopts = {.kinds = r->o.kinds,
					 .node = r->o.node,
					 .pod_lookup = r->o.pod_lookup,
					 .pod_ctx = r->o.pod_ctx};
	struct otlp_decoded d;
	uint64_t rows = 0, unqueued = 0, by_status[6] = {0};
	int rc;

	memset(out, 0, sizeof(*out));
	if (len > r->o.max_bytes) {
		out->status = OTLP_TOO_LARGE;
		snprintf(out->message, sizeof(out->message),
			 "export of %zu bytes is over the limit of %zu bytes (otlp-max-bytes)", len,
			 r->o.max_bytes);
		memset(&d, 0, sizeof(d));
		goto out_count;
	}
	rc = otlp_decode(buf, len, &dopts, &d);
	if (rc) {
		out->status = rc == -EBADMSG ? OTLP_MALFORMED
			      : rc == -E2BIG ? OTLP_TOO_LARGE
			      : rc == -ELOOP ? OTLP_TOO_DEEP
					     : OTLP_NOMEM;
		snprintf(out->message, sizeof(out->message), "%s", d.message);
		goto out_count;
	}
	out->rejected = (int64_t)d.rejected;
	snprintf(out->message, sizeof(out->message), "%s", d.message);
	if (r->o.forward)
		r->o.forward(r->o.forward_ctx, buf, len); /* counts its own drops */
	if (d.batch) {
		rows = d.batch->nrequests;
		for (size_t i = 0; i < d.batch->nrequests; i++) {
			int c = d.batch->requests[i].status_code / 100;

			by_status[c >= 1 && c <= 5 ? c : 0]++;
		}
		rc = r->o.submit(r->o.submit_ctx, d.batch);
		if (rc) {
			unqueued = rows;
			rows = 0;
			memset(by_status, 0, sizeof(by_status));
			out->status = OTLP_UNAVAILABLE;
			snprintf(out->message, sizeof(out->message),
				 "cannot queue %llu request rows: %s", (unsigned long long)unqueued,
				 strerror(-rc));
		}
	}
out_count:
	pthread_mutex_lock(&r->mu);
	r->stats.exports[out->status]++;
	if (out->status == OTLP_OK && d.rejected)
		r->stats.exports_partial++;
	r->stats.bytes += len;
	r->stats.spans += d.spans;
	r->stats.rows += rows;
	r->stats.rows_unqueued += unqueued;
	for (int i = 0; i < 6; i++)
		r->stats.rows_by_status[i] += by_status[i];
	r->stats.ignored_kind += d.ignored_kind;
	for (int i = 0; i < OTLP_REJ__COUNT; i++)
		r->stats.rejected[i] += d.by_reason[i];
	pthread_mutex_unlock(&r->mu);
	if (out->status != OTLP_OK)
		log_debug("otlp: export refused status=%s error=\"%s\"",
			  otlp_status_name(out->status), out->message);
}

void otlp_receiver_export_compressed(struct otlp_receiver *r, const void *buf, size_t len,
				     struct otlp_result *out)
{
	uint8_t *raw;
	size_t rawlen;
	int rc;

	pthread_mutex_lock(&r->mu);
	r->stats.compressed++;
	pthread_mutex_unlock(&r->mu);
	rc = otlp_inflate(buf, len, r->o.max_bytes, &raw, &rawlen);
	if (!rc) {
		otlp_receiver_export(r, raw, rawlen, out);
		free(raw);
		return;
	}
	memset(out, 0, sizeof(*out));
	out->status = rc == -E2BIG ? OTLP_TOO_LARGE : rc == -EBADMSG ? OTLP_MALFORMED : OTLP_NOMEM;
	if (rc == -E2BIG)
		snprintf(out->message, sizeof(out->message),
			 "compressed export of %zu bytes inflates past the limit of %zu bytes "
			 "(otlp-max-bytes)",
			 len, r->o.max_bytes);
	else
		snprintf(out->message, sizeof(out->message), "%s",
			 rc == -EBADMSG ? "compressed export is not valid gzip or zlib data"
					: "out of memory");
	pthread_mutex_lock(&r->mu);
	r->stats.exports[out->status]++;
	r->stats.bytes += len;
	pthread_mutex_unlock(&r->mu);
	log_debug("otlp: export refused status=%s error=\"%s\"", otlp_status_name(out->status),
		  out->message);
}

void otlp_receiver_count_refusal(struct otlp_receiver *r, enum otlp_refusal why)
{
	if ((unsigned)why >= OTLP_REFUSE__COUNT)
		return;
	pthread_mutex_lock(&r->mu);
	r->stats.refused[why]++;
	pthread_mutex_unlock(&r->mu);
}

const char *otlp_refusal_name(enum otlp_refusal why)
{
	static const char *const names[OTLP_REFUSE__COUNT] = {
	    "http_400", "http_404", "http_405", "http_411",
	    "http_413", "http_415", "http_431", "grpc_too_large"};

	return (unsigned)why < OTLP_REFUSE__COUNT ? names[why] : "?";
}

void otlp_receiver_get_stats(struct otlp_receiver *r, struct otlp_stats *out)
{
	pthread_mutex_lock(&r->mu);
	*out = r->stats;
	pthread_mutex_unlock(&r->mu);
}

int otlp_pack_response(const struct otlp_result *res, uint8_t **out, size_t *len)
{
	export_resp resp =
	    OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_RESPONSE__INIT;
	partial_success ps =
	    OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_PARTIAL_SUCCESS__INIT;
	size_t n;

	*out = NULL;
	*len = 0;
	if (res->rejected) {
		ps.rejected_spans = res->rejected;
		ps.error_message = (char *)res->message;
		resp.partial_success = &ps;
	}
	n = opentelemetry__proto__collector__trace__v1__export_trace_service_response__get_packed_size(
	    &resp);
	if (!n)
		return 0;
	*out = malloc(n);
	if (!*out)
		return -ENOMEM;
	*len = opentelemetry__proto__collector__trace__v1__export_trace_service_response__pack(
	    &resp, *out);
	return 0;
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	do {
		p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	return n;
}

size_t otlp_pack_rpc_status(int code, const char *message, uint8_t *out, size_t outlen)
{
	size_t msglen = message ? strlen(message) : 0, o = 0;

	if (outlen < 24)
		return 0;
	if (code) {
		out[o++] = 0x08; /* field 1 (code), varint */
		o += put_varint(out + o, (uint64_t)(int64_t)code);
	}
	if (msglen) {
		if (msglen > outlen - o - 6)
			msglen = outlen - o - 6;
		out[o++] = 0x12; /* field 2 (message), length-delimited */
		o += put_varint(out + o, msglen);
		memcpy(out + o, message, msglen);
		o += msglen;
	}
	return o;
}
