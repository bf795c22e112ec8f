/*
 * test_demo_http.c - the demo service's parsers and CPU work, in process.
 *
 * HTTP heads: known vectors for every status the service answers, every
 * prefix of a valid request being incomplete, then a fuzz run (random bytes,
 * and valid requests with bytes flipped, inserted and deleted) that checks
 * the parser never reads outside its input and always gives one of its
 * three answers with a sane result. Work: the Montgomery exponentiation
 * against its shift-and-add reference, order parsing vectors, and CPU
 * budgets that are really spent.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "demo_http.h"
#include "demo_work.h"

#define FUZZ_ROUNDS 100000

static const char valid_post[] =
    "POST /api/checkout?x=1 HTTP/1.1\r\n"
    "Host: localhost:8080\r\n"
    "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"
    "Content-Length: 2\r\n"
    "X-Demo-Path:  slow \r\n"
    "\r\n"
    "{}";

static uint64_t rng_state = 42;

static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Parses text (NUL-terminated) and returns the result; *status gets error_status. */
static int parse(const char *text, struct http_request *req)
{
	return http_parse_request(text, strlen(text), req);
}

static int status_of(const char *text)
{
	struct http_request req;
	int rc = parse(text, &req);

	return rc == -EBADMSG ? req.error_status : rc;
}

static void test_valid(void)
{
	struct http_request req;
	size_t head = sizeof(valid_post) - 1 - 2;
	const struct http_header *h;

	CHECK(http_parse_request(valid_post, sizeof(valid_post) - 1, &req) == 0, "valid POST");
	CHECK(req.head_len == head, "head_len %zu", req.head_len);
	CHECK(req.method_len == 4 && !memcmp(req.method, "POST", 4), "method");
	CHECK(req.target_len == 17 && !memcmp(req.target, "/api/checkout?x=1", 17), "target");
	CHECK(req.minor_version == 1 && req.keep_alive && !req.expect_continue, "1.1 keep-alive");
	CHECK(req.content_length == 2 && req.n_headers == 4, "content length, headers");
	h = http_find_header(req.headers, req.n_headers, "x-demo-path", NULL);
	CHECK(h && h->value_len == 4 && !memcmp(h->value, "slow", 4), "value trimmed");
	/* Every prefix of the head is incomplete, never an error. */
	for (size_t n = 0; n < head; n++)
		CHECK(http_parse_request(valid_post, n, &req) == -EAGAIN, "prefix %zu", n);

	CHECK(parse("GET /healthz HTTP/1.0\n\n", &req) == 0 && !req.keep_alive, "bare LF, 1.0");
	CHECK(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &req) == 0 &&
		  req.keep_alive,
	      "1.0 keep-alive");
	CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, close\r\n\r\n", &req) == 0 &&
		  !req.keep_alive,
	      "close in a list");
	CHECK(parse("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", &req) == 0 && req.head_len == 31,
	      "leading empty lines skipped, head_len %zu", req.head_len);
	CHECK(parse("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 9\r\n"
		    "Content-Length: 9\r\n\r\n",
		    &req) == 0 &&
		  req.expect_continue && req.content_length == 9,
	      "expect, repeated equal lengths");
}

static void test_errors(void)
{
	char *big = malloc(HTTP_MAX_HEAD + 64);
	struct http_request req;

	CHECK(status_of("GARBAGE\r\n\r\n") == 400, "no target");
	CHECK(status_of("GET / HTTP/1.1 x\r\n\r\n") == 400, "junk after version");
	CHECK(status_of("GET  / HTTP/1.1\r\nHost: a\r\n\r\n") == 400, "two spaces");
	CHECK(status_of("GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n") == 400, "absolute form");
	CHECK(status_of("G\x01") == 400, "bad method byte, before the line ends");
	CHECK(status_of("GET / HTTP/2.0\r\nHost: a\r\n\r\n") == 505, "version 2.0");
	CHECK(status_of("GET / HTTP/1.1\r\n\r\n") == 400, "no Host");
	CHECK(status_of("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n") == 400, "two Hosts");
	CHECK(status_of("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n") == 400, "obs-fold");
	CHECK(status_of("GET / HTTP/1.1\r\nHost : a\r\n\r\n") == 400, "blank before colon");
	CHECK(status_of("GET / HTTP/1.1\r\nHost: a\r\nX: a\x01\r\n\r\n") == 400, "control byte");
	CHECK(status_of("GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n") == 400, "lone CR");
	CHECK(status_of("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n") == 400,
	      "length list");
	CHECK(status_of("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n") == 400,
	      "negative length");
	CHECK(status_of("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n"
			"\r\n") == 400,
	      "conflicting lengths");
	CHECK(status_of("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n"
			"\r\n") == 400,
	      "length overflow");
	CHECK(status_of("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n") == 501,
	      "chunked");

	/* Too many header lines, too long a head, too long a request line. */
	{
		size_t n = (size_t)sprintf(big, "GET / HTTP/1.1\r\nHost: a\r\n");

		for (int i = 0; i < HTTP_MAX_HEADERS; i++)
			n += (size_t)sprintf(big + n, "X-%d: 1\r\n", i);
		strcpy(big + n, "\r\n");
		CHECK(status_of(big) == 431, "65 header lines");
	}
	memset(big, 'a', HTTP_MAX_HEAD + 10);
	memcpy(big, "GET / HTTP/1.1\r\nHost: a\r\nX: ", 28);
	big[HTTP_MAX_HEAD + 10] = '\0';
	CHECK(status_of(big) == 431, "head over the limit");
	CHECK(http_parse_request(big, HTTP_MAX_HEAD - 1, &req) == -EAGAIN,
	      "just under: incomplete");
	memcpy(big, "GET /", 5);
	memset(big + 5, 'a', HTTP_MAX_HEAD + 5);
	CHECK(status_of(big) == 414, "request line over the limit");
	free(big);
}

static void test_response(void)
{
	static const char ok[] =
	    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\ntraceresponse: x\r\n\r\nok";
	struct http_response r;

	CHECK(http_parse_response(ok, sizeof(ok) - 1, &r) == 0 && r.status == 200 &&
		  r.content_length == 2 && r.keep_alive && r.head_len == sizeof(ok) - 3,
	      "200");
	CHECK(http_parse_response(ok, 20, &r) == -EAGAIN, "partial");
	CHECK(http_parse_response("HTTP/1.1 100 Continue\r\n\r\n", 25, &r) == 0 && r.status == 100,
	      "100");
	CHECK(http_parse_response("HTTP/1.0 500\r\n\r\n", 16, &r) == 0 && r.status == 500 &&
		  !r.keep_alive,
	      "no reason, 1.0");
	CHECK(http_parse_response("HTTX/1.1 200 OK\r\n\r\n", 19, &r) == -EBADMSG, "bad version");
	CHECK(http_parse_response("HTTP/1.1 20 OK\r\n\r\n", 18, &r) == -EBADMSG, "short status");
}

/* One fuzz input: the parser's answer must be one of three, with a sane result. */
static void fuzz_one(const char *buf, size_t len)
{
	struct http_request req;
	struct http_response resp;
	int rc = http_parse_request(buf, len, &req);

	if (rc == 0) {
		bool inside = req.head_len <= len && req.head_len <= HTTP_MAX_HEAD &&
			      req.n_headers <= HTTP_MAX_HEADERS && req.target >= buf &&
			      req.target + req.target_len <= buf + req.head_len &&
			      req.target[0] == '/';

		for (size_t i = 0; i < req.n_headers; i++)
			inside =
			    inside && req.headers[i].value >= buf &&
			    req.headers[i].value + req.headers[i].value_len <= buf + req.head_len;
		CHECK(inside, "complete request with a result outside its head, len %zu", len);
	} else if (rc == -EBADMSG) {
		int s = req.error_status;

		CHECK(s == 400 || s == 414 || s == 431 || s == 501 || s == 505, "status %d", s);
	} else {
		CHECK(rc == -EAGAIN && len < HTTP_MAX_HEAD, "rc %d at len %zu", rc, len);
	}
	rc = http_parse_response(buf, len, &resp);
	CHECK(rc == 0 || rc == -EAGAIN || rc == -EBADMSG, "response rc %d", rc);
	if (rc == 0)
		CHECK(resp.head_len <= len && resp.status >= 100 && resp.status <= 999,
		      "response head %zu status %d", resp.head_len, resp.status);
}

static void test_fuzz(void)
{
	static const char alphabet[] = "GETPOST /:\r\n HTTP/1.0 Host:Content-Length: 12a\t\x01\x80";
	char *buf = malloc(HTTP_MAX_HEAD + 1024);
	int failed_before = check_failed;

	for (int round = 0; round < FUZZ_ROUNDS && check_failed == failed_before; round++) {
		uint64_t r = rng();
		size_t len;

		switch (r % 3) {
		case 0: /* random bytes, sometimes long */
			len = (size_t)(rng() % (r & 8 ? HTTP_MAX_HEAD + 1000 : 200));
			for (size_t i = 0; i < len; i++)
				buf[i] = (char)rng();
			break;
		case 1: /* bytes from an HTTP-ish alphabet */
			len = (size_t)(rng() % 300);
			for (size_t i = 0; i < len; i++)
				buf[i] = alphabet[rng() % (sizeof(alphabet) - 1)];
			break;
		default: /* a valid request, mutated */
			len = sizeof(valid_post) - 1;
			memcpy(buf, valid_post, len);
			for (int m = 1 + (int)(rng() % 4); m > 0; m--) {
				size_t at = (size_t)(rng() % len);

				if (m % 3 == 0 && len > 1) {
					memmove(buf + at, buf + at + 1, len - at - 1);
					len--;
				} else if (m % 3 == 1) {
					memmove(buf + at + 1, buf + at, len - at);
					buf[at] = (char)rng();
					len++;
				} else {
					buf[at] = (char)rng();
				}
			}
		}
		fuzz_one(buf, len);
	}
	free(buf);
}

static void test_work(void)
{
	static const char order_json[] =
	    " { \"customer\" : \"c1\", \"items\" : [ {\"sku\":\"SKU-0042\",\"qty\":3,"
	    "\"price_cents\":1299,\"note\":\"x\"}, {\"price_cents\":1,\"qty\":1,\"sku\":\"A\"} ] "
	    "}\n";
	static const char *const bad[] = {
	    "{",
	    "{\"items\":[]}",
	    "{\"items\":[{\"sku\":\"A\",\"qty\":0,\"price_cents\":1}]}",
	    "{\"items\":[{\"sku\":\"A\",\"qty\":1}]}",
	    "{\"items\":[{\"sku\":\"A\\\"\",\"qty\":1,"
	    "\"price_cents\":1}]}",
	    "{\"items\":[{\"sku\":\"A\",\"qty\":1,\"price_cents\":1}]} x",
	    "[]",
	    "null",
	};
	struct demo_order o;
	struct demo_total t;
	struct demo_stock st;
	char out[4096];
	size_t len;
	int64_t t0;

	CHECK(demo_work_init(0) == 0, "init");
	CHECK(demo_work_init(-1) == -EINVAL, "negative scale");
	CHECK(demo_work_self_test() == 0, "the gateway signature verifies, a flipped bit does not");
	CHECK(parseOrder(order_json, sizeof(order_json) - 1, &o) == 0 && o.n_items == 2 &&
		  !strcmp(o.items[0].sku, "SKU-0042") && o.items[0].qty == 3 &&
		  o.items[0].price_cents == 1299 && !strcmp(o.items[1].sku, "A"),
	      "order parsed");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(parseOrder(bad[i], strlen(bad[i]), &o) == -EINVAL, "bad order %zu", i);
	CHECK(parseOrder("", 0, &o) == 0 && o.n_items == 1, "empty body: default order");
	parseOrder(order_json, sizeof(order_json) - 1, &o);
	CHECK(computeTotal(&o, &t) == 0 && t.subtotal_cents == 3 * 1299 + 1 &&
		  t.total_cents == t.subtotal_cents - t.discount_cents + t.tax_cents,
	      "total");
	CHECK(serializeResponse(&o, &t, "abc", out, sizeof(out), &len) == 0 && len == strlen(out) &&
		  strstr(out, "\"sku\":\"SKU-0042\",\"qty\":3,\"line_total\":\"38.97\"") &&
		  strstr(out, "\"subtotal\":\"38.98\""),
	      "serialized: %s", out);
	CHECK(serializeResponse(&o, &t, "abc", out, 10, &len) == -ENOSPC, "too small");
	CHECK(lookupInventory("SKU-0042", 8, &st) == 0 && !strcmp(st.sku, "SKU-0042"), "sku found");
	CHECK(lookupInventory("SKU-0000", 8, &st) == 0 && lookupInventory("SKU-4095", 8, &st) == 0,
	      "first and last");
	CHECK(lookupInventory("SKU-004", 7, &st) == -ENOENT &&
		  lookupInventory("SKU-4096", 8, &st) == -ENOENT,
	      "unknown skus");
	CHECK(validateSignature(&o) == 0, "signature verifies");
	CHECK(chargeCard(&o, &t) == -ETIMEDOUT, "the gateway times out");
	CHECK(refreshCache() == 0, "refresh");

	/* At scale 0.01 the slow tail spends at least its 4 ms of thread CPU. */
	demo_work_init(0.01);
	t0 = demo_thread_cpu_ns();
	validateSignature(&o);
	t0 = demo_thread_cpu_ns() - t0;
	CHECK(t0 >= 4000000 && t0 < 100000000, "validateSignature cpu %lld ns", (long long)t0);
	t0 = demo_thread_cpu_ns();
	chargeCard(&o, &t);
	t0 = demo_thread_cpu_ns() - t0;
	CHECK(t0 >= 300000 && t0 < 50000000, "chargeCard cpu %lld ns", (long long)t0);
}

int main(void)
{
	test_valid();
	test_errors();
	test_response();
	test_fuzz();
	test_work();
	return check_done();
}
