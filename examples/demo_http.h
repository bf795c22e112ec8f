/*
 * demo_http.h - the HTTP/1.x message heads of the demo service and its load
 * generator: a strict, bounded parser for request and response heads.
 *
 * The parser never allocates and never copies: it points into the caller's
 * buffer, so the results live as long as that buffer is unchanged. It is
 * called again from the start each time more bytes arrive (heads are at most
 * HTTP_MAX_HEAD bytes, so re-parsing is cheap), and it rejects a malformed
 * request line as soon as that line is complete, without waiting for the
 * rest of the head. Bodies are Content-Length only (no chunked coding).
 */
#ifndef TRACEPROF_DEMO_HTTP_H
#define TRACEPROF_DEMO_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of a message head (start line, header lines, empty line). */
#define HTTP_MAX_HEAD 8192
/* Header lines in one head. */
#define HTTP_MAX_HEADERS 64
/* Bytes of a request body the service accepts. */
#define HTTP_MAX_BODY 65536

/* One header line; name and value point into the parsed buffer. */
struct http_header {
	const char *name;  /* field name, not NUL-terminated */
	size_t name_len;   /* bytes at name */
	const char *value; /* field value without surrounding blanks */
	size_t value_len;  /* bytes at value */
};

/* The parts of a request head that the service uses. */
struct http_request {
	const char *method;			      /* token, e.g. "GET" */
	size_t method_len;			      /* bytes at method */
	const char *target;			      /* origin-form target, starts with '/' */
	size_t target_len;			      /* bytes at target, query included */
	int minor_version;			      /* 0 for HTTP/1.0, 1 for HTTP/1.1 */
	struct http_header headers[HTTP_MAX_HEADERS]; /* header lines in order */
	size_t n_headers;			      /* entries used in headers */
	size_t head_len;			      /* bytes of the head, empty line included */
	uint64_t content_length;		      /* body bytes that follow the head */
	bool keep_alive;			      /* the client lets the connection stay open */
	bool expect_continue;			      /* Expect: 100-continue was sent */
	int error_status; /* on -EBADMSG: the status to answer (400, 414...) */
};

/* The parts of a response head that the load generator uses. */
struct http_response {
	int status;				      /* status code, 100..999 */
	int minor_version;			      /* 0 or 1 */
	struct http_header headers[HTTP_MAX_HEADERS]; /* header lines in order */
	size_t n_headers;			      /* entries used in headers */
	size_t head_len;			      /* bytes of the head */
	uint64_t content_length;		      /* body bytes; 0 when absent */
	bool keep_alive;			      /* the server keeps the connection */
};

/*
 * Parses the request head at buf[0..len). Returns 0 when the head is
 * complete and valid (req filled), -EAGAIN when more bytes are needed, or
 * -EBADMSG when the head is malformed or too large; req->error_status then
 * holds the status to answer (400, 414, 431, 501 or 505) and the
 * connection should be closed. Empty lines before the request line are
 * skipped and counted in head_len.
 */
int http_parse_request(const char *buf, size_t len, struct http_request *req);

/*
 * Parses the response head at buf[0..len). Returns 0, -EAGAIN or -EBADMSG
 * like http_parse_request (no error_status).
 */
int http_parse_response(const char *buf, size_t len, struct http_response *resp);

/*
 * The first header named name (compared without case) among n headers, or
 * NULL. *count, when not NULL, receives how many headers have that name.
 */
const struct http_header *http_find_header(const struct http_header *headers, size_t n,
					   const char *name, size_t *count);

/* Sends all len bytes on a blocking socket (EINTR retried). Returns 0 or -errno (-EPIPE: closed).
 */
int demo_send_all(int fd, const void *buf, size_t len);

/* The reason phrase of a status code the demo uses ("Unknown" otherwise). */
const char *http_reason(int status);

/*
 * Command-line number: s must be a whole number or decimal within
 * [min, max]. Returns 0, or -EINVAL after logging what was wrong with name.
 */
int demo_parse_number(const char *name, const char *s, double min, double max, double *out);

#endif
