/*
 * kube_client.c - one connection to the Kubernetes API: JSON requests,
 * Status decoding, streamed WATCH bodies, resource paths.
 *
 * A client owns one libcurl easy handle, reused for every call so the TLS
 * connection stays alive; it is used by one thread at a time. Bodies are
 * collected up to max_response (64 MiB by default): a bigger answer is
 * dropped and reported, never buffered. A token file is re-read when its
 * mtime, size or inode change (checked at most once a minute, and at once
 * on a 401, after which the call is retried once with the new token), so
 * rotating bound service-account tokens keep working.
 *
 * Throttling, as client-go's rest client does it: a 429 or 503 answer
 * (which the server did not act on) is tried again after its Retry-After
 * (seconds, capped at 10 s), or after a jittered backoff from 250 ms
 * without one, at most RETRY_MAX times and within retry_wait_ms of waiting
 * per call. A Retry-After is also remembered: no later call of the client
 * goes out before it has passed (a call that cannot wait that long fails
 * with -EAGAIN instead). Other 5xx answers go back to the caller, whose
 * own backoff (a work queue's, the elector's period) applies.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <curl/curl.h>

#include "kube_internal.h"
#include "traceprof/kube.h"
#include "traceprof/log.h"

#define DEFAULT_TIMEOUT_MS    30000L
#define CONNECT_TIMEOUT_MS    5000L
#define DEFAULT_MAX_RESPONSE  ((size_t)64 << 20)
#define TOKEN_CHECK_MS	      60000 /* token file re-checked at most this often */
#define TOKEN_MAX	      (64 << 10)
#define DEFAULT_RETRY_WAIT_MS 10000L
#define RETRY_AFTER_CAP_MS    10000L
#define RETRY_MAX	      5

#ifndef TRACEPROF_VERSION
#define TRACEPROF_VERSION "0"
#endif

struct kube_client {
	const struct kube_config *cfg; /* borrowed */
	CURL *curl;		       /* one easy handle, kept alive */
	char *user_agent;	       /* User-Agent header */
	char *url_base;		       /* scheme://host:port the URLs start with */
	struct curl_slist *connect_to; /* tls-server-name mapping, or NULL */
	long timeout_ms;	       /* whole-request timeout */
	size_t max_response;	       /* body cap */
	char *token;		       /* bearer token in use, or NULL */
	struct stat token_st;	       /* token file as last read */
	int64_t token_checked_ms;      /* when the token file was last looked at */
	const volatile int *abort;     /* stop flag (borrowed), or NULL */
	long retry_wait_ms;	       /* most time a call waits for 429/503, or -1 */
	int64_t not_before_ms;	       /* no request before this (a server's Retry-After) */
	uint64_t retries;	       /* requests sent again after 429/503 */
	/* the call in progress */
	char *buf;		      /* body bytes, or the partial line while streaming */
	size_t len;		      /* bytes in buf */
	size_t cap;		      /* allocated bytes of buf */
	size_t limit;		      /* body or line cap of this call */
	bool too_big;		      /* the limit was passed */
	bool streaming;		      /* 2xx body is handed out line by line */
	kube_line_fn line;	      /* line callback while streaming */
	void *line_arg;		      /* its argument */
	void (*alive)(void *arg);     /* called while a stream answered 2xx is open, or NULL */
	int line_rc;		      /* what the callback returned to stop */
	char errbuf[CURL_ERROR_SIZE]; /* libcurl's detail */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

int64_t kube_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void kube_deadline(struct timespec *ts, long ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

uint64_t kube_rand(uint64_t n)
{
	static _Atomic uint64_t state;
	uint64_t x = atomic_load(&state), y;

	if (n == 0)
		return 0;
	do {
		y = x ? x : ((uint64_t)kube_mono_ms() * 0x9e3779b97f4a7c15ULL) | 1;
		y ^= y << 13;
		y ^= y >> 7;
		y ^= y << 17;
	} while (!atomic_compare_exchange_weak(&state, &x, y));
	return y % n;
}

/* Re-reads the token file when it changed (or when forced); true if the
 * token is different now. */
static bool token_refresh(struct kube_client *c, bool force)
{
	struct stat st;
	char *text;
	size_t len;
	int64_t now = kube_mono_ms();

	if (!c->cfg->token_file)
		return false;
	if (!force && c->token && now - c->token_checked_ms < TOKEN_CHECK_MS)
		return false;
	c->token_checked_ms = now;
	if (stat(c->cfg->token_file, &st) != 0) {
		log_warn("kube: cannot stat token file file=%s error=%s", c->cfg->token_file,
			 strerror(errno));
		return false;
	}
	if (c->token && st.st_ino == c->token_st.st_ino && st.st_size == c->token_st.st_size &&
	    st.st_mtim.tv_sec == c->token_st.st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == c->token_st.st_mtim.tv_nsec)
		return false;
	if (kube_read_file(c->cfg->token_file, TOKEN_MAX, &text, &len) != 0) {
		log_warn("kube: cannot read token file file=%s", c->cfg->token_file);
		return false;
	}
	while (len > 0 && strchr(" \t\r\n", text[len - 1]))
		text[--len] = '\0';
	if (c->token && strcmp(c->token, text) == 0) {
		free(text);
		c->token_st = st;
		return false;
	}
	free(c->token);
	c->token = text;
	c->token_st = st;
	return true;
}

/* A stream answered 2xx is open: tells the caller (from libcurl's callbacks). */
static void tell_alive(struct kube_client *c)
{
	long code = 0;

	if (!c->streaming || !c->alive)
		return;
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &code);
	if (code >= 200 && code < 300)
		c->alive(c->line_arg);
}

static int xferinfo(void *p, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct kube_client *c = p;

	tell_alive(c);
	return (c->abort && *c->abort) ? 1 : 0;
}

/* Appends n bytes to c->buf within c->limit; false when over it. */
static bool buf_append(struct kube_client *c, const char *data, size_t n)
{
	if (c->len + n > c->limit) {
		c->too_big = true;
		return false;
	}
	if (c->len + n + 1 > c->cap) {
		size_t cap = c->cap ? c->cap : 16384;
		char *nb;

		while (cap < c->len + n + 1)
			cap *= 2;
		if (cap > c->limit + 1)
			cap = c->limit + 1;
		nb = realloc(c->buf, cap);
		if (!nb) {
			c->too_big = true;
			return false;
		}
		c->buf = nb;
		c->cap = cap;
	}
	memcpy(c->buf + c->len, data, n);
	c->len += n;
	c->buf[c->len] = '\0';
	return true;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *p)
{
	struct kube_client *c = p;
	size_t n = size * nmemb, at = 0;
	long code = 0;

	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &code);
	tell_alive(c);
	if (!c->streaming || code < 200 || code >= 300)
		return buf_append(c, data, n) ? n : 0; /* 0 ends it: CURLE_WRITE_ERROR */
	/* A watch: one event per line, a line may come in many pieces. */
	while (at < n) {
		char *nl = memchr(data + at, '\n', n - at);
		size_t seg = nl ? (size_t)(nl - (data + at)) : n - at;

		if (!buf_append(c, data + at, seg))
			return 0;
		at += seg;
		if (!nl)
			break;
		at++;
		if (c->len > 0) {
			int rc = c->line(c->line_arg, c->buf, c->len);

			c->len = 0;
			if (rc) {
				c->line_rc = rc;
				return 0;
			}
		}
	}
	return n;
}

struct kube_client *kube_client_new(const struct kube_config *cfg,
				    const struct kube_client_opts *opts, char *err, size_t errlen)
{
	struct kube_client *c = calloc(1, sizeof(*c));
	const char *host, *rest;

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_once(&curl_once, curl_init_once);
	c->cfg = cfg;
	c->timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : DEFAULT_TIMEOUT_MS;
	c->max_response =
	    opts && opts->max_response > 0 ? opts->max_response : DEFAULT_MAX_RESPONSE;
	c->retry_wait_ms =
	    opts && opts->retry_wait_ms ? opts->retry_wait_ms : DEFAULT_RETRY_WAIT_MS;
	c->user_agent =
	    strdup(opts && opts->user_agent ? opts->user_agent : "traceprof/" TRACEPROF_VERSION);
	c->curl = curl_easy_init();
	if (!c->curl || !c->user_agent || !cfg->server) {
		snprintf(err, errlen, cfg->server ? "out of memory" : "config has no server");
		goto out_free;
	}
	c->url_base = strdup(cfg->server);
	if (c->url_base && cfg->tls_server_name) {
		/* Connect to the configured host, but verify (and name in the URL)
		 * tls-server-name. */
		char map[512], port[16] = "443";
		const char *hp = cfg->server + 8, *pc;
		size_t hl;

		rest = strchr(hp, '/');
		hl = rest ? (size_t)(rest - hp) : strlen(hp);
		pc = hp[0] == '[' ? strchr(hp, ']') : hp;
		pc = pc ? memchr(pc, ':', hl - (size_t)(pc - hp)) : NULL;
		if (pc)
			snprintf(port, sizeof(port), "%.*s", (int)(hl - (size_t)(pc + 1 - hp)),
				 pc + 1);
		host = hp;
		snprintf(map, sizeof(map), "%s:%s:%.*s:%s", cfg->tls_server_name, port,
			 (int)((pc ? pc : hp + hl) - host), host, port);
		c->connect_to = curl_slist_append(NULL, map);
		free(c->url_base);
		if (asprintf(&c->url_base, "https://%s:%s", cfg->tls_server_name, port) < 0)
			c->url_base = NULL;
	}
	if (!c->url_base) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	c->token = cfg->token ? strdup(cfg->token) : NULL;
	token_refresh(c, true);
	if (cfg->token_file && !c->token) {
		snprintf(err, errlen, "%s: cannot read the token file", cfg->token_file);
		goto out_free;
	}
	return c;
out_free:
	kube_client_free(c);
	return NULL;
}

void kube_client_free(struct kube_client *c)
{
	if (!c)
		return;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	curl_slist_free_all(c->connect_to);
	free(c->user_agent);
	free(c->url_base);
	free(c->token);
	free(c->buf);
	free(c);
}

void kube_client_set_abort(struct kube_client *c, const volatile int *flag)
{
	c->abort = flag;
}

void kube_response_clear(struct kube_response *r)
{
	if (!r)
		return;
	json_decref(r->body);
	json_decref(r->status.causes);
	memset(r, 0, sizeof(*r));
}

static const char *reason_of(long code)
{
	switch (code) {
	case 400:
		return "BadRequest";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "NotFound";
	case 405:
		return "MethodNotAllowed";
	case 409:
		return "Conflict";
	case 410:
		return "Expired";
	case 413:
		return "RequestEntityTooLarge";
	case 415:
		return "UnsupportedMediaType";
	case 422:
		return "Invalid";
	case 429:
		return "TooManyRequests";
	case 500:
		return "InternalError";
	case 503:
		return "ServiceUnavailable";
	case 504:
		return "Timeout";
	default:
		return "Unknown";
	}
}

void kube_decode_status(struct kube_response *r)
{
	json_t *b = r->body;
	const char *kind = json_string_value(json_object_get(b, "kind"));
	const char *s;

	r->status.code = r->http_status;
	snprintf(r->status.reason, sizeof(r->status.reason), "%s", reason_of(r->http_status));
	if (!json_is_object(b) || !kind || strcmp(kind, "Status") != 0)
		return;
	if (json_integer_value(json_object_get(b, "code")))
		r->status.code = (long)json_integer_value(json_object_get(b, "code"));
	s = json_string_value(json_object_get(b, "reason"));
	if (s && *s)
		snprintf(r->status.reason, sizeof(r->status.reason), "%s", s);
	s = json_string_value(json_object_get(b, "message"));
	if (s)
		snprintf(r->status.message, sizeof(r->status.message), "%s", s);
	json_decref(r->status.causes);
	r->status.causes = json_incref(json_object_get(json_object_get(b, "details"), "causes"));
}

static const char *method_name(enum kube_method m)
{
	switch (m) {
	case KUBE_GET:
		return "GET";
	case KUBE_POST:
		return "POST";
	case KUBE_PUT:
		return "PUT";
	case KUBE_DELETE:
		return "DELETE";
	default:
		return "PATCH";
	}
}

static const char *content_type(enum kube_method m)
{
	switch (m) {
	case KUBE_PATCH_MERGE:
		return "Content-Type: application/merge-patch+json";
	case KUBE_PATCH_JSON:
		return "Content-Type: application/json-patch+json";
	case KUBE_PATCH_STRATEGIC:
		return "Content-Type: application/strategic-merge-patch+json";
	default:
		return "Content-Type: application/json";
	}
}

static int curl_rc(struct kube_client *c, CURLcode cc, struct kube_response *r)
{
	const char *detail = c->errbuf[0] ? c->errbuf : curl_easy_strerror(cc);

	if (c->too_big) {
		snprintf(r->error, sizeof(r->error), "%s larger than %zu bytes",
			 c->streaming ? "watch event" : "response", c->limit);
		return c->streaming ? -EMSGSIZE : -EFBIG;
	}
	snprintf(r->error, sizeof(r->error), "%s", detail);
	switch (cc) {
	case CURLE_ABORTED_BY_CALLBACK:
		return -ECANCELED;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
		return -EHOSTUNREACH;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CERTPROBLEM:
		return -EPROTO;
	default:
		return -EIO;
	}
}

/* One exchange; body_text may be NULL. */
static int perform(struct kube_client *c, const char *method, const char *ctype, const char *path,
		   const char *body_text, long timeout_ms, struct kube_response *r)
{
	const struct kube_config *cfg = c->cfg;
	struct curl_slist *h = NULL;
	char *url = NULL, *auth = NULL;
	CURLcode cc;
	int rc = 0;

	if (asprintf(&url, "%s%s", c->url_base, path) < 0)
		return -ENOMEM;
	h = curl_slist_append(h, "Accept: application/json");
	if (body_text)
		h = curl_slist_append(h, ctype);
	if (c->token) {
		if (asprintf(&auth, "Authorization: Bearer %s", c->token) < 0) {
			free(url);
			curl_slist_free_all(h);
			return -ENOMEM;
		}
		h = curl_slist_append(h, auth);
	}
	c->len = 0;
	c->too_big = false;
	c->line_rc = 0;
	c->errbuf[0] = '\0';
	curl_easy_reset(c->curl);
	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c->curl, CURLOPT_USERAGENT, c->user_agent);
	curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->errbuf);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, xferinfo);
	curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, c);
	curl_easy_setopt(c->curl, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(c->curl, CURLOPT_TCP_KEEPALIVE, 1L);
	if (c->connect_to)
		curl_easy_setopt(c->curl, CURLOPT_CONNECT_TO, c->connect_to);
	if (body_text) {
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body_text);
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body_text));
	}
	if (cfg->insecure) {
		curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYHOST, 0L);
	} else if (cfg->ca_data) {
		struct curl_blob b = {cfg->ca_data, cfg->ca_data_len, CURL_BLOB_NOCOPY};

		curl_easy_setopt(c->curl, CURLOPT_CAINFO_BLOB, &b);
	} else if (cfg->ca_file) {
		curl_easy_setopt(c->curl, CURLOPT_CAINFO, cfg->ca_file);
	}
	if (cfg->cert_data) {
		struct curl_blob b = {cfg->cert_data, cfg->cert_data_len, CURL_BLOB_NOCOPY};

		curl_easy_setopt(c->curl, CURLOPT_SSLCERT_BLOB, &b);
		curl_easy_setopt(c->curl, CURLOPT_SSLCERTTYPE, "PEM");
	} else if (cfg->cert_file) {
		curl_easy_setopt(c->curl, CURLOPT_SSLCERT, cfg->cert_file);
	}
	if (cfg->key_data) {
		struct curl_blob b = {cfg->key_data, cfg->key_data_len, CURL_BLOB_NOCOPY};

		curl_easy_setopt(c->curl, CURLOPT_SSLKEY_BLOB, &b);
		curl_easy_setopt(c->curl, CURLOPT_SSLKEYTYPE, "PEM");
	} else if (cfg->key_file) {
		curl_easy_setopt(c->curl, CURLOPT_SSLKEY, cfg->key_file);
	}
	cc = curl_easy_perform(c->curl);
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &r->http_status);
	if (c->line_rc)
		rc = c->line_rc;
	else if (cc != CURLE_OK)
		rc = curl_rc(c, cc, r);
	/* The slist and URL must live until the transfer ends; the handle
	 * keeps its connection for the next call. */
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(h);
	free(auth);
	free(url);
	return rc;
}

/* Reals that hold an integer within +-2^53 become integers again, in place. */
/* A real holding an integer within +-2^53 as a new integer; NULL for any other value. */
static json_t *integer_of(const json_t *x)
{
	double d = json_real_value(x);

	if (!json_is_real(x) || d < -9007199254740992.0 || d > 9007199254740992.0 ||
	    d != (double)(json_int_t)d)
		return NULL;
	return json_integer((json_int_t)d);
}

/* Turns the integral reals inside the containers of v back into integers, in place. */
static void integers_back(json_t *v)
{
	const char *k;
	json_t *x, *n;
	size_t i;

	json_object_foreach(v, k, x)
	{
		if ((n = integer_of(x)))
			json_object_set_new(v, k,
					    n); /* replaces an existing key: iteration holds */
		else
			integers_back(x);
	}
	json_array_foreach(v, i, x)
	{
		if ((n = integer_of(x)))
			json_array_set_new(v, i, n);
		else
			integers_back(x);
	}
}

json_t *kube_json_loadb(const char *buf, size_t len, json_error_t *je)
{
	json_t *v = json_loadb(buf, len, 0, je), *n;

	if (v || !strstr(je->text, "too big"))
		return v;
	v = json_loadb(buf, len, JSON_DECODE_INT_AS_REAL, je);
	if ((n = integer_of(v))) {
		json_decref(v);
		return n;
	}
	integers_back(v);
	return v;
}

/* Decodes c->buf into r after a completed exchange. */
static int decode_body(struct kube_client *c, struct kube_response *r)
{
	json_error_t je;
	bool ok = r->http_status >= 200 && r->http_status < 300;

	if (c->len > 0) {
		r->body = kube_json_loadb(c->buf, c->len, &je);
		if (!r->body && ok) {
			snprintf(r->error, sizeof(r->error), "response is not JSON: %s", je.text);
			return -EPROTO;
		}
	}
	if (!ok) {
		kube_decode_status(r);
		if (!r->status.message[0] && c->len > 0 && !r->body)
			snprintf(r->status.message, sizeof(r->status.message), "%.*s",
				 (int)(c->len > 200 ? 200 : c->len), c->buf);
	}
	return 0;
}

/*
 * Waits until ms from now unless the abort flag is raised first; -ECANCELED
 * then.
 */
static int wait_ms(struct kube_client *c, long ms)
{
	int64_t end = kube_mono_ms() + ms;

	for (;;) {
		int64_t left = end - kube_mono_ms();
		struct timespec ts;

		if (c->abort && *c->abort)
			return -ECANCELED;
		if (left <= 0)
			return 0;
		if (left > 50)
			left = 50;
		ts.tv_sec = 0;
		ts.tv_nsec = left * 1000000L;
		nanosleep(&ts, NULL);
	}
}

/*
 * Before a request: waits out a Retry-After the server gave this client
 * (when it fits in what the call may still wait, *budget), else -EAGAIN.
 */
static int honour_not_before(struct kube_client *c, long *budget, struct kube_response *r)
{
	int64_t left = c->not_before_ms - kube_mono_ms();
	int rc;

	if (left <= 0)
		return 0;
	if (c->retry_wait_ms < 0 || left > *budget) {
		snprintf(r->error, sizeof(r->error), "the server asked to wait %lld ms more",
			 (long long)left);
		return -EAGAIN;
	}
	rc = wait_ms(c, (long)left);
	*budget -= (long)left;
	return rc;
}

/*
 * After a 429 or 503: how long to wait before the next try. The server's
 * Retry-After (seconds, capped at RETRY_AFTER_CAP_MS) is remembered for
 * every later call of this client; without one, 250 ms doubling per try,
 * jittered to [d/2, d].
 */
static long retry_delay(struct kube_client *c, int tries)
{
	curl_off_t ra = -1;
	long d;

	if (curl_easy_getinfo(c->curl, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra > 0) {
		d = ra > RETRY_AFTER_CAP_MS / 1000 ? RETRY_AFTER_CAP_MS : (long)ra * 1000;
		c->not_before_ms = kube_mono_ms() + d;
		return d;
	}
	d = 250L << (tries < 6 ? tries : 6);
	return d / 2 + (long)kube_rand((uint64_t)d / 2 + 1);
}

static bool retryable(long status)
{
	return status == 429 || status == 503;
}

int kube_request(struct kube_client *c, enum kube_method method, const char *path,
		 const json_t *body, struct kube_response *r)
{
	char *text = NULL;
	bool refreshed = false;
	long budget = c->retry_wait_ms < 0 ? 0 : c->retry_wait_ms;
	int rc, tries = 0;

	memset(r, 0, sizeof(*r));
	if (body) {
		text = json_dumps(body, JSON_COMPACT);
		if (!text)
			return -ENOMEM;
	}
	c->streaming = false;
	c->limit = c->max_response;
	token_refresh(c, false);
	for (;;) {
		rc = honour_not_before(c, &budget, r);
		if (rc)
			break;
		rc = perform(c, method_name(method), content_type(method), path, text,
			     c->timeout_ms, r);
		if (rc)
			break;
		/* A rotated token: read the file again and retry once. */
		if (r->http_status == 401 && !refreshed && token_refresh(c, true)) {
			refreshed = true;
			continue;
		}
		/* Throttled or unavailable: the server did not act on it, try again. */
		if (retryable(r->http_status) && c->retry_wait_ms >= 0 && tries < RETRY_MAX) {
			long d = retry_delay(c, tries);

			if (d <= budget) {
				log_debug("kube: %s %s answered %ld, trying again in %ld ms",
					  method_name(method), path, r->http_status, d);
				rc = wait_ms(c, d);
				if (rc)
					break;
				budget -= d;
				tries++;
				c->retries++;
				c->not_before_ms = 0;
				continue;
			}
		}
		rc = decode_body(c, r);
		break;
	}
	free(text);
	return rc;
}

uint64_t kube_client_retries(const struct kube_client *c)
{
	return c->retries;
}

int kube_stream(struct kube_client *c, const char *path, long timeout_ms, size_t max_line,
		kube_line_fn fn, void (*alive)(void *arg), void *arg, struct kube_response *r)
{
	int rc;

	memset(r, 0, sizeof(*r));
	c->streaming = true;
	c->line = fn;
	c->line_arg = arg;
	c->alive = alive;
	c->limit = max_line;
	token_refresh(c, false);
	{
		long budget = c->retry_wait_ms < 0 ? 0 : c->retry_wait_ms;

		rc = honour_not_before(c, &budget, r);
		if (rc)
			return rc;
	}
	rc = perform(c, "GET", NULL, path, NULL, timeout_ms, r);
	if (retryable(r->http_status))
		(void)retry_delay(c, 0); /* the next call waits for a Retry-After */
	if (r->http_status == 401)
		token_refresh(c, true);
	c->streaming = false;
	if (rc)
		return rc;
	if (r->http_status >= 200 && r->http_status < 300) {
		/* A last line without its newline. */
		if (c->len > 0) {
			c->buf[c->len] = '\0';
			rc = fn(arg, c->buf, c->len);
			c->len = 0;
		}
		return rc;
	}
	return decode_body(c, r);
}

static bool failed_with(const struct kube_response *r, long code)
{
	return r && r->http_status == code;
}

bool kube_is_not_found(const struct kube_response *r)
{
	return failed_with(r, 404);
}

bool kube_is_conflict(const struct kube_response *r)
{
	return failed_with(r, 409) && strcmp(r->status.reason, "AlreadyExists") != 0;
}

bool kube_is_already_exists(const struct kube_response *r)
{
	return failed_with(r, 409) && strcmp(r->status.reason, "AlreadyExists") == 0;
}

bool kube_is_gone(const struct kube_response *r)
{
	return failed_with(r, 410);
}

bool kube_is_invalid(const struct kube_response *r)
{
	return failed_with(r, 422);
}

bool kube_is_unauthorized(const struct kube_response *r)
{
	return failed_with(r, 401);
}

bool kube_is_forbidden(const struct kube_response *r)
{
	return failed_with(r, 403);
}

static int append(char *buf, size_t len, size_t *at, const char *s)
{
	size_t n = strlen(s);

	if (*at + n + 1 > len)
		return -ENAMETOOLONG;
	memcpy(buf + *at, s, n + 1);
	*at += n;
	return 0;
}

static int segment(char *buf, size_t len, size_t *at, const char *a, const char *b)
{
	if (!b || !*b || strchr(b, '/') || strcmp(b, ".") == 0 || strcmp(b, "..") == 0)
		return -EINVAL;
	if (append(buf, len, at, a))
		return -ENAMETOOLONG;
	return append(buf, len, at, b);
}

int kube_path(char *buf, size_t len, const char *prefix, const char *ns, const char *plural,
	      const char *name, const char *sub)
{
	size_t at = 0;
	int rc;

	if (!prefix || prefix[0] != '/' || !len)
		return -EINVAL;
	buf[0] = '\0';
	rc = append(buf, len, &at, prefix);
	if (!rc && ns)
		rc = segment(buf, len, &at, "/namespaces/", ns);
	if (!rc)
		rc = segment(buf, len, &at, "/", plural);
	if (!rc && name)
		rc = segment(buf, len, &at, "/", name);
	if (!rc && sub)
		rc = segment(buf, len, &at, "/", sub);
	if (rc)
		buf[0] = '\0';
	return rc;
}

int kube_query_add(char *buf, size_t len, const char *key, const char *value)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t at = strlen(buf);
	char sep = strchr(buf, '?') ? '&' : '?';
	size_t need = at + 1 + strlen(key) + 1 + strlen(value) * 3 + 1;

	if (need > len)
		return -ENAMETOOLONG;
	at += (size_t)sprintf(buf + at, "%c%s=", sep, key);
	for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.' || *p == '~') {
			buf[at++] = (char)*p;
		} else {
			buf[at++] = '%';
			buf[at++] = hex[*p >> 4];
			buf[at++] = hex[*p & 15];
		}
	}
	buf[at] = '\0';
	return 0;
}

int kube_object_key(const json_t *obj, char *buf, size_t len)
{
	json_t *md = json_object_get(obj, "metadata");
	const char *ns = json_string_value(json_object_get(md, "namespace"));
	const char *name = json_string_value(json_object_get(md, "name"));
	int n;

	if (!name || !*name)
		return -EINVAL;
	if (ns && *ns)
		n = snprintf(buf, len, "%s/%s", ns, name);
	else
		n = snprintf(buf, len, "%s", name);
	return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}
