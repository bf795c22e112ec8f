/*
 * kube_internal.h - what the kube_*.c files share and callers do not see:
 * the streaming call used by the informer's WATCH, clocks and file reads.
 */
#ifndef TRACEPROF_KUBE_INTERNAL_H
#define TRACEPROF_KUBE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "traceprof/kube.h"

/* Called for each complete line of a streamed body (newline removed,
 * NUL-terminated); non-zero stops the stream and is returned by kube_stream. */
typedef int (*kube_line_fn)(void *arg, char *line, size_t len);

/*
 * A GET whose 2xx body is a stream of lines (a WATCH). Lines longer than
 * max_line end the call with -EMSGSIZE. alive (or NULL) is called at least
 * once a second while the server's 2xx answer is open, lines or not.
 * Returns 0 when the server ended
 * the stream, the callback's value when it stopped it, or -errno like
 * kube_request; a non-2xx answer is decoded into resp as by kube_request.
 */
int kube_stream(struct kube_client *c, const char *path, long timeout_ms, size_t max_line,
		kube_line_fn fn, void (*alive)(void *arg), void *arg, struct kube_response *resp);

/*
 * Decodes the JSON text buf[0..len) like json_loadb. A document jansson
 * refuses only for an integer beyond int64 (kube-apiserver prints a stored
 * 1e20 of a schema-less or older CRD version as 100000000000000000000) is
 * decoded with such numbers as reals: integral values within +-2^53 are
 * integers again, the others stay reals, which a consumer expecting an
 * integer then refuses for that object alone. A new reference, or NULL
 * with je filled.
 */
json_t *kube_json_loadb(const char *buf, size_t len, json_error_t *je);

/* Fills resp->status from resp->body (a metav1.Status) or the HTTP code. */
void kube_decode_status(struct kube_response *resp);

/* Reads a whole file of at most max bytes (NUL-terminated; the caller frees). */
int kube_read_file(const char *path, size_t max, char **out, size_t *len);

/* Milliseconds of CLOCK_MONOTONIC. */
int64_t kube_mono_ms(void);
/* Adds ms to now (CLOCK_MONOTONIC) for pthread_cond_timedwait on a monotonic condvar. */
void kube_deadline(struct timespec *ts, long ms);
/* A random number in [0, n) (thread-safe, not for cryptography). */
uint64_t kube_rand(uint64_t n);

#endif
