/*
 * demo_http.c - strict, bounded parsing of HTTP/1.x heads (RFC 9112).
 *
 * Lines end in CRLF or a bare LF (RFC 9112 section 2.2 lets a recipient
 * accept a lone LF); any other control byte, obsolete line folding, blanks
 * before the colon, a missing Host, conflicting Content-Lengths and
 * Transfer-Encoding are refused, each with the status a client can act on.
 * Nothing is allocated; results point into the caller's buffer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "demo_http.h"
#include "traceprof/log.h"

#define HTTP_MAX_METHOD 32 /* longest method token accepted */

static bool is_tchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c);
}

/* Field value bytes: visible ASCII, blanks and obs-text. */
static bool is_value_char(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/*
 * Finds the line that starts at pos within buf[0..lim): returns the index
 * of its '\n' or -1, and sets *end to the end of its content (a CR before
 * the LF excluded).
 */
static long find_line(const char *buf, size_t lim, size_t pos, size_t *end)
{
	const char *nl = memchr(buf + pos, '\n', lim - pos);
	size_t eol;

	if (!nl)
		return -1;
	eol = nl - buf;
	*end = eol > pos && buf[eol - 1] == '\r' ? eol - 1 : eol;
	return (long)eol;
}

static bool equals_nocase(const char *s, size_t len, const char *lit)
{
	return strlen(lit) == len && !strncasecmp(s, lit, len);
}

/* True when the comma-separated list value contains token (without case). */
static bool list_has_token(const char *v, size_t len, const char *token)
{
	size_t i = 0;

	while (i < len) {
		size_t start, stop;

		while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		start = i;
		while (i < len && v[i] != ',')
			i++;
		stop = i;
		while (stop > start && (v[stop - 1] == ' ' || v[stop - 1] == '\t'))
			stop--;
		if (stop > start && equals_nocase(v + start, stop - start, token))
			return true;
	}
	return false;
}

/* Parses one header line buf[pos..end) into h; false when malformed. */
static bool parse_field(const char *buf, size_t pos, size_t end, struct http_header *h)
{
	size_t i = pos, vend;

	while (i < end && is_tchar((unsigned char)buf[i]))
		i++;
	if (i == pos || i == end || buf[i] != ':')
		return false;
	h->name = buf + pos;
	h->name_len = i - pos;
	i++;
	while (i < end && (buf[i] == ' ' || buf[i] == '\t'))
		i++;
	vend = end;
	while (vend > i && (buf[vend - 1] == ' ' || buf[vend - 1] == '\t'))
		vend--;
	for (size_t k = i; k < vend; k++)
		if (!is_value_char((unsigned char)buf[k]))
			return false;
	h->value = buf + i;
	h->value_len = vend - i;
	return true;
}

/*
 * Parses header lines from pos up to and including the empty line. Returns
 * 0 (head_len set), -EAGAIN, or -EBADMSG with *status 400 or 431.
 */
static int parse_fields(const char *buf, size_t len, size_t pos, struct http_header *headers,
			size_t *n, size_t *head_len, int *status)
{
	size_t lim = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD;

	*n = 0;
	for (;;) {
		size_t end;
		long eol = find_line(buf, lim, pos, &end);

		if (eol < 0) {
			*status = 431;
			return len >= HTTP_MAX_HEAD ? -EBADMSG : -EAGAIN;
		}
		if (end == pos) {
			*head_len = (size_t)eol + 1;
			return 0;
		}
		if (*n == HTTP_MAX_HEADERS) {
			*status = 431;
			return -EBADMSG;
		}
		if (!parse_field(buf, pos, end, &headers[*n])) {
			*status = 400;
			return -EBADMSG;
		}
		(*n)++;
		pos = (size_t)eol + 1;
	}
}

/* Parses "HTTP/d.d" at s[0..len): 0 (1.0 or 1.1), -EBADMSG, or -ENOTSUP. */
static int parse_version(const char *s, size_t len, int *minor)
{
	if (len != 8 || memcmp(s, "HTTP/", 5) || !is_digit(s[5]) || s[6] != '.' || !is_digit(s[7]))
		return -EBADMSG;
	if (s[5] != '1' || (s[7] != '0' && s[7] != '1'))
		return -ENOTSUP;
	*minor = s[7] - '0';
	return 0;
}

/* Content-Length: digits only; every occurrence must agree. */
static int parse_content_length(const struct http_header *headers, size_t n, uint64_t *out)
{
	bool seen = false;

	*out = 0;
	for (size_t i = 0; i < n; i++) {
		const struct http_header *h = &headers[i];
		uint64_t v = 0;

		if (!equals_nocase(h->name, h->name_len, "content-length"))
			continue;
		if (h->value_len == 0 || h->value_len > 18)
			return -EBADMSG;
		for (size_t k = 0; k < h->value_len; k++) {
			if (!is_digit(h->value[k]))
				return -EBADMSG;
			v = v * 10 + (uint64_t)(h->value[k] - '0');
		}
		if (seen && v != *out)
			return -EBADMSG;
		seen = true;
		*out = v;
	}
	return 0;
}

static bool keep_alive_of(const struct http_header *headers, size_t n, int minor)
{
	bool ka = minor >= 1;

	for (size_t i = 0; i < n; i++) {
		const struct http_header *h = &headers[i];

		if (!equals_nocase(h->name, h->name_len, "connection"))
			continue;
		if (list_has_token(h->value, h->value_len, "close"))
			return false;
		if (list_has_token(h->value, h->value_len, "keep-alive"))
			ka = true;
	}
	return ka;
}

static int fail(struct http_request *req, int status)
{
	req->error_status = status;
	return -EBADMSG;
}

/* Checks a request line that is not complete yet: is its method plausible? */
static int check_partial_line(const char *buf, size_t pos, size_t len, struct http_request *req)
{
	size_t i = pos;

	while (i < len && is_tchar((unsigned char)buf[i]))
		i++;
	if (i - pos > HTTP_MAX_METHOD || (i < len && (buf[i] != ' ' || i == pos)))
		return fail(req, 400);
	if (len >= HTTP_MAX_HEAD)
		return fail(req, 414);
	return -EAGAIN;
}

/* method SP request-target SP HTTP-version, in buf[pos..end). */
static int parse_request_line(const char *buf, size_t pos, size_t end, struct http_request *req)
{
	size_t i = pos;
	int rc;

	while (i < end && is_tchar((unsigned char)buf[i]))
		i++;
	if (i == pos || i - pos > HTTP_MAX_METHOD || i == end || buf[i] != ' ')
		return fail(req, 400);
	req->method = buf + pos;
	req->method_len = i - pos;
	pos = ++i;
	while (i < end && buf[i] > 0x20 && buf[i] < 0x7f)
		i++;
	if (i == pos || i == end || buf[i] != ' ' || buf[pos] != '/')
		return fail(req, 400);
	req->target = buf + pos;
	req->target_len = i - pos;
	i++;
	rc = parse_version(buf + i, end - i, &req->minor_version);
	if (rc == -ENOTSUP)
		return fail(req, 505);
	if (rc)
		return fail(req, 400);
	return 0;
}

/* Header rules that need the whole head: Host, Content-Length, codings. */
static int check_request_fields(struct http_request *req)
{
	size_t hosts;

	http_find_header(req->headers, req->n_headers, "host", &hosts);
	if (hosts > 1 || (req->minor_version >= 1 && hosts == 0))
		return fail(req, 400);
	if (parse_content_length(req->headers, req->n_headers, &req->content_length))
		return fail(req, 400);
	if (http_find_header(req->headers, req->n_headers, "transfer-encoding", NULL))
		return fail(req, 501);
	req->keep_alive = keep_alive_of(req->headers, req->n_headers, req->minor_version);
	{
		const struct http_header *e =
		    http_find_header(req->headers, req->n_headers, "expect", NULL);

		req->expect_continue = e && equals_nocase(e->value, e->value_len, "100-continue");
	}
	return 0;
}

int http_parse_request(const char *buf, size_t len, struct http_request *req)
{
	size_t lim = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD;
	size_t pos = 0, end;
	long eol;
	int rc;

	memset(req, 0, sizeof(*req));
	/* Empty lines before a request line are ignored (RFC 9112 2.2). */
	while (pos < lim && (buf[pos] == '\n' || buf[pos] == '\r')) {
		if (buf[pos] == '\r' && pos + 1 < lim && buf[pos + 1] != '\n')
			return fail(req, 400);
		pos++;
	}
	if (pos == lim)
		return len >= HTTP_MAX_HEAD ? fail(req, 400) : -EAGAIN;
	eol = find_line(buf, lim, pos, &end);
	if (eol < 0)
		return check_partial_line(buf, pos, lim, req);
	rc = parse_request_line(buf, pos, end, req);
	if (rc)
		return rc;
	rc = parse_fields(buf, len, (size_t)eol + 1, req->headers, &req->n_headers, &req->head_len,
			  &req->error_status);
	if (rc)
		return rc;
	return check_request_fields(req);
}

int http_parse_response(const char *buf, size_t len, struct http_response *resp)
{
	size_t lim = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD;
	size_t end;
	long eol;
	int status;
	int rc;

	memset(resp, 0, sizeof(*resp));
	eol = find_line(buf, lim, 0, &end);
	if (eol < 0)
		return len >= HTTP_MAX_HEAD ? -EBADMSG : -EAGAIN;
	/* HTTP/1.x SP 3DIGIT [SP reason] */
	if (end < 12 || parse_version(buf, 8, &resp->minor_version) || buf[8] != ' ' ||
	    !is_digit(buf[9]) || !is_digit(buf[10]) || !is_digit(buf[11]) ||
	    (end > 12 && buf[12] != ' '))
		return -EBADMSG;
	resp->status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
	if (resp->status < 100)
		return -EBADMSG;
	rc = parse_fields(buf, len, (size_t)eol + 1, resp->headers, &resp->n_headers,
			  &resp->head_len, &status);
	if (rc)
		return rc;
	if (parse_content_length(resp->headers, resp->n_headers, &resp->content_length))
		return -EBADMSG;
	resp->keep_alive = keep_alive_of(resp->headers, resp->n_headers, resp->minor_version);
	return 0;
}

const struct http_header *http_find_header(const struct http_header *headers, size_t n,
					   const char *name, size_t *count)
{
	const struct http_header *first = NULL;
	size_t c = 0;

	for (size_t i = 0; i < n; i++) {
		if (!equals_nocase(headers[i].name, headers[i].name_len, name))
			continue;
		if (!first)
			first = &headers[i];
		c++;
	}
	if (count)
		*count = c;
	return first;
}

int demo_send_all(int fd, const void *buf, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t n = send(fd, (const char *)buf + off, len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		off += (size_t)n;
	}
	return 0;
}

const char *http_reason(int status)
{
	switch (status) {
	case 100:
		return "Continue";
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 413:
		return "Content Too Large";
	case 414:
		return "URI Too Long";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 505:
		return "HTTP Version Not Supported";
	default:
		return "Unknown";
	}
}

int demo_parse_number(const char *name, const char *s, double min, double max, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !(v >= min && v <= max)) {
		log_error("%s: '%s' is not a number in [%g, %g]", name, s, min, max);
		return -EINVAL;
	}
	*out = v;
	return 0;
}
