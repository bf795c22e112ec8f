/*
 * kube_leader.c - leader election on a coordination.k8s.io/v1 Lease, with
 * the semantics of client-go's leaderelection (15 s / 10 s / 2 s):
 *
 *   candidate: every retry period (jittered up to +20 %) GET the Lease;
 *     missing -> create it holding it; held by another whose record
 *     (holder, renewTime, resourceVersion) has not changed for a lease
 *     duration as observed on this process's monotonic clock, or released
 *     (holder "") -> take it (acquireTime, leaseTransitions + 1). The
 *     wall-clock times in the record are for humans only: a peer whose
 *     clock is skewed by any amount never deposes a leader that renews;
 *   leader: every retry period renew (renewTime); no successful renew for
 *     the renew deadline -> stopped_leading, back to candidate;
 *   fencing: kube_leader_may_act() is true only while the last successful
 *     round started less than the renew deadline ago by this process's
 *     monotonic clock, whatever the elector thread has noticed yet: a
 *     leader frozen past its Lease (SIGSTOP, a pause) and woken before its
 *     elector ran again acts on nothing;
 *   stop: when leading, release (holder "", leaseDurationSeconds 1) so a
 *     peer takes over at once, unless no_release.
 *
 * Every write is a PUT carrying the resourceVersion that was read: a 409
 * means someone else wrote first, and the next round reads again instead of
 * overwriting. Times on the wire are MicroTime; local deadlines use
 * CLOCK_MONOTONIC. One thread per elector; callbacks run on it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kube_internal.h"
#include "traceprof/kube.h"
#include "traceprof/log.h"

struct kube_leader {
	struct kube_leader_opts o;	/* options with defaults filled */
	char *ns, *name, *identity;	/* copies of the strings */
	char lease_path[1024];		/* .../namespaces/NS/leases/NAME */
	char leases_path[1024];		/* .../namespaces/NS/leases */
	struct kube_client *client;	/* thread only */
	pthread_t thread;		/* the elector */
	pthread_mutex_t lock;		/* stop, leading, stats */
	pthread_cond_t cond;		/* wakes the thread on stop */
	volatile int stop;		/* set by kube_leader_stop */
	bool leading;			/* this elector holds the Lease */
	struct kube_leader_stats stats; /* counters */
	/* thread only */
	char observed_holder[256]; /* holder last seen */
	char observed_renew[64];   /* renewTime last seen */
	char observed_rv[64];	   /* metadata.resourceVersion last seen */
	int64_t observed_ms;	   /* when the record last changed (monotonic) */
	int64_t last_renew_ms;	   /* start of the last successful round as leader (monotonic;
				      under lock) */
};

void kube_format_microtime(char buf[32], const struct timespec *ts)
{
	struct tm tm;
	char sec[32];

	gmtime_r(&ts->tv_sec, &tm);
	strftime(sec, sizeof(sec), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, 32, "%.20s.%06ldZ", sec, (ts->tv_nsec / 1000) % 1000000);
}

void kube_format_time(char buf[32], const struct timespec *ts)
{
	struct tm tm;

	gmtime_r(&ts->tv_sec, &tm);
	strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int kube_parse_time(const char *s, struct timespec *ts)
{
	struct tm tm = {0};
	long frac = 0;
	int digits = 0;
	const char *p;

	if (!s)
		return -EINVAL;
	p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return -EINVAL;
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (digits < 9)
				frac = frac * 10 + (*p - '0');
		for (int d = digits; d < 9; d++)
			frac *= 10;
	}
	if (*p != 'Z' || p[1])
		return -EINVAL;
	ts->tv_sec = timegm(&tm);
	ts->tv_nsec = frac;
	return 0;
}

static void set_leading(struct kube_leader *l, bool on)
{
	bool was;

	pthread_mutex_lock(&l->lock);
	was = l->leading;
	l->leading = on;
	if (on && !was)
		l->stats.acquired++;
	pthread_mutex_unlock(&l->lock);
	if (on && !was) {
		log_info("kube: leading lease=%s/%s identity=%s", l->ns, l->name, l->identity);
		if (l->o.started_leading)
			l->o.started_leading(l->o.arg);
	} else if (!on && was) {
		log_warn("kube: lost leadership lease=%s/%s identity=%s", l->ns, l->name,
			 l->identity);
		if (l->o.stopped_leading)
			l->o.stopped_leading(l->o.arg);
	}
}

static void count(struct kube_leader *l, uint64_t *field)
{
	pthread_mutex_lock(&l->lock);
	(*field)++;
	pthread_mutex_unlock(&l->lock);
}

/*
 * Notes the record read (holder, renewTime, resourceVersion of lease, which
 * may be NULL); any change restarts the lease duration on the monotonic
 * clock. Calls new_leader when the holder changed.
 */
static void observe(struct kube_leader *l, const json_t *lease, const char *holder)
{
	const json_t *spec = json_object_get(lease, "spec");
	const char *renew = json_string_value(json_object_get(spec, "renewTime"));
	const char *rv = json_string_value(
	    json_object_get(json_object_get(lease, "metadata"), "resourceVersion"));

	renew = renew ? renew : "";
	rv = rv ? rv : "";
	if (strcmp(holder, l->observed_holder) != 0 || strcmp(renew, l->observed_renew) != 0 ||
	    strcmp(rv, l->observed_rv) != 0 || l->observed_ms == 0) {
		bool changed = strcmp(holder, l->observed_holder) != 0 || l->observed_ms == 0;

		snprintf(l->observed_holder, sizeof(l->observed_holder), "%s", holder);
		snprintf(l->observed_renew, sizeof(l->observed_renew), "%s", renew);
		snprintf(l->observed_rv, sizeof(l->observed_rv), "%s", rv);
		l->observed_ms = kube_mono_ms();
		if (changed && l->o.new_leader)
			l->o.new_leader(l->o.arg, holder);
	}
}

static json_t *spec_for(struct kube_leader *l, const json_t *old_spec, bool acquire, bool release)
{
	char now[32];
	struct timespec ts;
	json_t *spec = old_spec ? json_deep_copy(old_spec) : json_object();
	json_int_t transitions = json_integer_value(json_object_get(old_spec, "leaseTransitions"));
	const char *holder = json_string_value(json_object_get(old_spec, "holderIdentity"));

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += l->o.wall_offset_s; /* test only: a skewed clock */
	kube_format_microtime(now, &ts);
	if (release) {
		json_object_set_new(spec, "holderIdentity", json_string(""));
		json_object_set_new(spec, "leaseDurationSeconds", json_integer(1));
		json_object_set_new(spec, "renewTime", json_string(now));
		json_object_set_new(spec, "acquireTime", json_string(now));
		return spec;
	}
	json_object_set_new(spec, "holderIdentity", json_string(l->identity));
	json_object_set_new(spec, "leaseDurationSeconds",
			    json_integer((l->o.lease_duration_ms + 999) / 1000));
	json_object_set_new(spec, "renewTime", json_string(now));
	if (acquire) {
		json_object_set_new(spec, "acquireTime", json_string(now));
		if (old_spec && holder && strcmp(holder, l->identity) != 0)
			transitions++;
		json_object_set_new(spec, "leaseTransitions", json_integer(transitions));
	}
	return spec;
}

/* One try: 0 when this elector holds the Lease afterwards. */
static int try_acquire_or_renew(struct kube_leader *l)
{
	struct kube_response r;
	json_t *spec, *lease, *body;
	const char *holder;
	json_int_t dur;
	bool mine, expired;
	int rc;

	rc = kube_request(l->client, KUBE_GET, l->lease_path, NULL, &r);
	if (rc) {
		count(l, &l->stats.errors);
		kube_response_clear(&r);
		return rc;
	}
	if (kube_is_not_found(&r)) {
		kube_response_clear(&r);
		spec = spec_for(l, NULL, true, false);
		body = json_pack("{s:s, s:s, s:{s:s, s:s}, s:o}", "apiVersion",
				 "coordination.k8s.io/v1", "kind", "Lease", "metadata", "name",
				 l->name, "namespace", l->ns, "spec", spec);
		rc = kube_request(l->client, KUBE_POST, l->leases_path, body, &r);
		json_decref(body);
		if (!rc && r.http_status == 201) {
			observe(l, r.body, l->identity);
			kube_response_clear(&r);
			return 0;
		}
		count(l, kube_is_already_exists(&r) ? &l->stats.conflicts : &l->stats.errors);
		kube_response_clear(&r);
		return -EAGAIN;
	}
	if (r.http_status != 200) {
		log_warn("kube: cannot read lease lease=%s/%s status=%ld message=\"%s\"", l->ns,
			 l->name, r.http_status, r.status.message);
		count(l, &l->stats.errors);
		kube_response_clear(&r);
		return -EIO;
	}
	lease = r.body;
	spec = json_object_get(lease, "spec");
	holder = json_string_value(json_object_get(spec, "holderIdentity"));
	holder = holder ? holder : "";
	dur = json_integer_value(json_object_get(spec, "leaseDurationSeconds"));
	observe(l, lease, holder);
	mine = strcmp(holder, l->identity) == 0;
	/* client-go's rule: the record unchanged for a lease duration on our own
	 * monotonic clock; renewTime is never compared with our wall clock */
	expired = !*holder || kube_mono_ms() - l->observed_ms >= dur * 1000;
	if (!mine && !expired) {
		kube_response_clear(&r);
		return -EBUSY;
	}
	body = json_deep_copy(lease);
	json_object_set_new(body, "spec", spec_for(l, spec, !mine, false));
	kube_response_clear(&r);
	/* The body keeps metadata.resourceVersion: a concurrent write gets 409. */
	rc = kube_request(l->client, KUBE_PUT, l->lease_path, body, &r);
	json_decref(body);
	if (!rc && r.http_status == 200) {
		observe(l, r.body, l->identity);
		kube_response_clear(&r);
		return 0;
	}
	if (!rc && kube_is_conflict(&r)) {
		log_debug("kube: lease written by someone else lease=%s/%s", l->ns, l->name);
		count(l, &l->stats.conflicts);
		rc = -EAGAIN;
	} else {
		count(l, &l->stats.errors);
		rc = rc ? rc : -EIO;
	}
	kube_response_clear(&r);
	return rc;
}

static void release(struct kube_leader *l)
{
	const char *holder;
	struct kube_response r;
	json_t *body;
	int rc;

	rc = kube_request(l->client, KUBE_GET, l->lease_path, NULL, &r);
	if (rc || r.http_status != 200) {
		kube_response_clear(&r);
		return;
	}
	holder =
	    json_string_value(json_object_get(json_object_get(r.body, "spec"), "holderIdentity"));
	if (!holder || strcmp(holder, l->identity) != 0) {
		kube_response_clear(&r);
		return;
	}
	body = json_deep_copy(r.body);
	json_object_set_new(body, "spec",
			    spec_for(l, json_object_get(r.body, "spec"), false, true));
	kube_response_clear(&r);
	rc = kube_request(l->client, KUBE_PUT, l->lease_path, body, &r);
	json_decref(body);
	if (!rc && r.http_status == 200)
		log_info("kube: released lease=%s/%s identity=%s", l->ns, l->name, l->identity);
	kube_response_clear(&r);
}

/* Sleeps ms unless stopped; true if stopped. */
static bool sleep_or_stop(struct kube_leader *l, long ms)
{
	struct timespec dl;

	kube_deadline(&dl, ms);
	pthread_mutex_lock(&l->lock);
	while (!l->stop && pthread_cond_timedwait(&l->cond, &l->lock, &dl) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&l->lock);
	return l->stop;
}

static void *run(void *arg)
{
	struct kube_leader *l = arg;

	while (!l->stop) {
		bool leading;
		int rc;

		int64_t round = kube_mono_ms();

		pthread_mutex_lock(&l->lock);
		leading = l->leading;
		pthread_mutex_unlock(&l->lock);
		rc = try_acquire_or_renew(l);
		if (l->stop)
			break;
		if (rc == 0) {
			/* counted from before the read: the others saw the record no
			 * earlier than that */
			pthread_mutex_lock(&l->lock);
			l->last_renew_ms = round;
			pthread_mutex_unlock(&l->lock);
			if (leading)
				count(l, &l->stats.renewals);
			set_leading(l, true);
		} else if (leading) {
			/* Someone else holds it now, or the renew deadline passed. */
			if (rc == -EBUSY ||
			    kube_mono_ms() - l->last_renew_ms >= l->o.renew_deadline_ms)
				set_leading(l, false);
			else if (sleep_or_stop(l, l->o.retry_period_ms / 4))
				break; /* retry a failed renew sooner */
			else
				continue;
		}
		pthread_mutex_lock(&l->lock);
		leading = l->leading;
		pthread_mutex_unlock(&l->lock);
		if (sleep_or_stop(
			l, leading ? l->o.retry_period_ms
				   : l->o.retry_period_ms +
					 (long)kube_rand((uint64_t)l->o.retry_period_ms / 5 + 1)))
			break;
	}
	return NULL;
}

struct kube_leader *kube_leader_start(const struct kube_config *cfg,
				      const struct kube_leader_opts *opts, char *err, size_t errlen)
{
	struct kube_leader *l = calloc(1, sizeof(*l));
	pthread_condattr_t ca;
	char host[256];

	if (!l) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	l->o = *opts;
	if (l->o.lease_duration_ms <= 0)
		l->o.lease_duration_ms = 15000;
	if (l->o.renew_deadline_ms <= 0)
		l->o.renew_deadline_ms = 10000;
	if (l->o.retry_period_ms <= 0)
		l->o.retry_period_ms = 2000;
	if (l->o.renew_deadline_ms >= l->o.lease_duration_ms ||
	    l->o.retry_period_ms >= l->o.renew_deadline_ms) {
		snprintf(err, errlen,
			 "leader election: need retry period < renew deadline < lease duration");
		free(l);
		return NULL;
	}
	if (!opts->namespace || !opts->name) {
		snprintf(err, errlen,
			 "leader election: the Lease's namespace and name are required");
		free(l);
		return NULL;
	}
	if (opts->identity) {
		l->identity = strdup(opts->identity);
	} else {
		if (gethostname(host, sizeof(host)) != 0)
			snprintf(host, sizeof(host), "unknown");
		host[sizeof(host) - 1] = '\0';
		if (asprintf(&l->identity, "%s_%ld", host, (long)getpid()) < 0)
			l->identity = NULL;
	}
	l->ns = strdup(opts->namespace);
	l->name = strdup(opts->name);
	if (!l->identity || !l->ns || !l->name ||
	    kube_path(l->lease_path, sizeof(l->lease_path), "/apis/coordination.k8s.io/v1", l->ns,
		      "leases", l->name, NULL) ||
	    kube_path(l->leases_path, sizeof(l->leases_path), "/apis/coordination.k8s.io/v1", l->ns,
		      "leases", NULL, NULL)) {
		snprintf(err, errlen, "leader election: bad Lease name or out of memory");
		goto out_free;
	}
	if (l->o.client.timeout_ms <= 0)
		l->o.client.timeout_ms = l->o.retry_period_ms * 2;
	/* A throttled renewal waits at most one retry period inside the call;
	 * a longer Retry-After delays the next round instead. */
	if (l->o.client.retry_wait_ms == 0)
		l->o.client.retry_wait_ms = l->o.retry_period_ms;
	l->client = kube_client_new(cfg, &l->o.client, err, errlen);
	if (!l->client)
		goto out_free;
	kube_client_set_abort(l->client, &l->stop);
	pthread_mutex_init(&l->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&l->thread, NULL, run, l) != 0) {
		snprintf(err, errlen, "cannot start the leader election thread");
		pthread_cond_destroy(&l->cond);
		pthread_mutex_destroy(&l->lock);
		goto out_free;
	}
	return l;
out_free:
	kube_client_free(l->client);
	free(l->identity);
	free(l->ns);
	free(l->name);
	free(l);
	return NULL;
}

bool kube_leader_may_act(struct kube_leader *l)
{
	bool v;

	pthread_mutex_lock(&l->lock);
	v = l->leading && kube_mono_ms() - l->last_renew_ms < l->o.renew_deadline_ms;
	pthread_mutex_unlock(&l->lock);
	return v;
}

bool kube_leader_is_leader(struct kube_leader *l)
{
	bool v;

	pthread_mutex_lock(&l->lock);
	v = l->leading;
	pthread_mutex_unlock(&l->lock);
	return v;
}

const char *kube_leader_identity(struct kube_leader *l)
{
	return l->identity;
}

void kube_leader_get_stats(struct kube_leader *l, struct kube_leader_stats *st)
{
	pthread_mutex_lock(&l->lock);
	*st = l->stats;
	pthread_mutex_unlock(&l->lock);
}

void kube_leader_stop(struct kube_leader *l)
{
	bool leading;

	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	l->stop = 1;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
	pthread_join(l->thread, NULL);
	pthread_mutex_lock(&l->lock);
	leading = l->leading;
	pthread_mutex_unlock(&l->lock);
	if (leading) {
		if (!l->o.no_release) {
			/* The stop flag is set: release with a client that is not aborted. */
			kube_client_set_abort(l->client, NULL);
			release(l);
		}
		set_leading(l, false);
	}
	kube_client_free(l->client);
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->lock);
	free(l->identity);
	free(l->ns);
	free(l->name);
	free(l);
}
