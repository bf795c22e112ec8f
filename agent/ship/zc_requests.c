/*
 * zc_requests.c - request rows from TP_REC_HTTP records (zc_requests.h).
 */
#include "zc_requests.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traceprof/ids.h"

static uint64_t be64(const uint8_t *b)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | b[i];
	return v;
}

const struct store_request *zc_requests_add(struct zc_requests *z, const struct tp_sample *s,
					    size_t len, uint64_t source_id, const char *service,
					    int64_t mono_to_real_us)
{
	const struct tp_http *h = (const struct tp_http *)s->ips;
	static const uint8_t zero[16];
	struct zc_request_info *in;
	struct store_request *r;
	bool bad = false;

	if (len < 64 + sizeof(*h) || s->kind != TP_REC_HTTP || h->start_ns > s->time_ns ||
	    !memcmp(s->trace_id, zero, 16) || !be64(s->span_id) || h->target_len > TP_HTTP_TARGET) {
		z->st.invalid++;
		return NULL;
	}
	if (z->n == ZC_BATCH) {
		z->st.dropped++;
		return NULL;
	}
	if (z->n == 0)
		z->first_ns = s->time_ns;
	r = &z->rows[z->n];
	in = &z->info[z->n];
	memset(r, 0, sizeof(*r));
	memcpy(in->method, h->method, sizeof(h->method)); /* one of zc_method's: ASCII */
	in->method[sizeof(h->method)] = 0;
	/*
	 * A request target is printable ASCII (RFC 9112; other bytes are sent
	 * percent-encoded): anything else, a client's garbage, becomes '?', so
	 * the route is always text the store takes.
	 */
	for (size_t i = 0; i < h->target_len; i++) {
		unsigned char c = (unsigned char)h->target[i];

		bad |= c < 0x21 || c > 0x7e;
		in->route[i] = c < 0x21 || c > 0x7e ? '?' : c;
	}
	in->route[h->target_len] = 0;
	snprintf(in->service, sizeof(in->service), "%s", service ? service : "");
	r->start_us = (int64_t)(h->start_ns / 1000) + mono_to_real_us;
	r->duration_us = (int64_t)((s->time_ns - h->start_ns) / 1000);
	r->source_id = source_id;
	memcpy(r->trace_id, s->trace_id, 16);
	r->span_id = be64(s->span_id);
	r->parent_span_id = be64(h->parent_span_id);
	r->route_id = ids_route(in->method, in->route);
	r->status_code = s->off_us <= 999 ? (int)s->off_us : 0;
	r->context_source = STORE_CTX_SOURCE_ZEROCODE;
	z->st.requests++;
	z->st.traceparent += !!(h->flags & TP_HTTP_TRACEPARENT);
	z->st.unanswered += !!(h->flags & TP_HTTP_UNANSWERED);
	z->st.multiplexed += !!(h->flags & TP_HTTP_MULTIPLEXED);
	z->st.truncated += !!(h->flags & TP_HTTP_TRUNCATED);
	z->st.bad_target += bad;
	z->n++;
	return r;
}

const struct zc_request_info *zc_requests_info(const struct zc_requests *z,
					       const struct store_request *r)
{
	return &z->info[r - z->rows];
}

static size_t round8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

struct agg_window *zc_requests_take(struct zc_requests *z)
{
	size_t n = z->n, bytes, nroutes = 0, strbytes = 0;
	struct agg_window *w;
	char *pos;

	if (!n)
		return NULL;
	for (size_t i = 0; i < n; i++)
		strbytes += strlen(z->info[i].method) + strlen(z->info[i].route) + 2;
	bytes = round8(sizeof(*w)) + round8(n * sizeof(*w->requests)) +
		round8(n * sizeof(*w->routes)) + strbytes;
	w = calloc(1, bytes);
	if (!w) {
		z->st.dropped += n;
		z->n = 0;
		return NULL;
	}
	pos = (char *)w + round8(sizeof(*w));
	w->requests = (struct store_request *)pos;
	pos += round8(n * sizeof(*w->requests));
	w->routes = (struct agg_route *)pos;
	pos += round8(n * sizeof(*w->routes));
	memcpy(w->requests, z->rows, n * sizeof(*w->requests));
	w->nrequests = n;
	for (size_t i = 0; i < n; i++) {
		bool seen = false;

		for (size_t k = 0; k < nroutes && !seen; k++)
			seen = w->routes[k].id == z->rows[i].route_id;
		if (seen)
			continue;
		w->routes[nroutes].id = z->rows[i].route_id;
		w->routes[nroutes].method = strcpy(pos, z->info[i].method);
		pos += strlen(pos) + 1;
		w->routes[nroutes].route = strcpy(pos, z->info[i].route);
		pos += strlen(pos) + 1;
		nroutes++;
	}
	w->nroutes = nroutes;
	w->bytes = bytes;
	w->start_us = w->requests[0].start_us;
	z->n = 0;
	z->st.windows++;
	return w;
}
