/*
 * zc_owners.c - the owners of a process's zero-code capture (zc_owners.h):
 * two sorted sets of tgids and their union handed to the sampler.
 */
#include "zc_owners.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "traceprof/log.h"
#include "sampler.h"

int zc_owners_init(struct zc_owners *o, struct sampler *s)
{
	o->sampler = s;
	return -pthread_mutex_init(&o->mu, NULL);
}

void zc_owners_free(struct zc_owners *o)
{
	free(o->agent);
	free(o->trig);
	o->agent = o->trig = NULL;
	o->nagent = o->agent_cap = o->ntrig = 0;
	pthread_mutex_destroy(&o->mu);
}

/* Index of the first entry >= x in v[0..n). */
static size_t lower(const uint32_t *v, size_t n, uint32_t x)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool has(const uint32_t *v, size_t n, uint32_t x)
{
	size_t i = lower(v, n, x);

	return i < n && v[i] == x;
}

static int hand_on(struct zc_owners *o, uint32_t tgid)
{
	int err = o->sampler ? sampler_zerocode_add(o->sampler, tgid) : 0;

	if (err) {
		o->refused++;
		log_warn("zero-code HTTP: pid %u refused: %s", tgid, strerror(-err));
	} else {
		log_debug("zero-code HTTP on pid=%u", tgid);
	}
	return err;
}

static void take_back(struct zc_owners *o, uint32_t tgid)
{
	if (o->sampler)
		sampler_zerocode_remove(o->sampler, tgid);
	log_debug("zero-code HTTP off pid=%u", tgid);
}

/*
 * With no owner left, no process is followed: also the children that the
 * fork program made targets (bpf/sampler.bpf.c) without the agent owning
 * them, so the syscall programs go.
 */
static void forget_children(struct zc_owners *o)
{
	if (o->sampler && o->nagent == 0 && o->ntrig == 0)
		sampler_zerocode_clear(o->sampler);
}

int zc_owners_agent_add(struct zc_owners *o, uint32_t tgid)
{
	int err = 0;
	size_t i;

	pthread_mutex_lock(&o->mu);
	i = lower(o->agent, o->nagent, tgid);
	if (i < o->nagent && o->agent[i] == tgid)
		goto out;
	if (o->nagent == o->agent_cap) {
		size_t cap = o->agent_cap ? 2 * o->agent_cap : 16;
		uint32_t *v = realloc(o->agent, cap * sizeof(*v));

		if (!v) {
			err = -ENOMEM;
			goto out;
		}
		o->agent = v;
		o->agent_cap = cap;
	}
	if (!has(o->trig, o->ntrig, tgid)) {
		err = hand_on(o, tgid);
		if (err)
			goto out;
	}
	memmove(o->agent + i + 1, o->agent + i, (o->nagent - i) * sizeof(*o->agent));
	o->agent[i] = tgid;
	o->nagent++;
out:
	pthread_mutex_unlock(&o->mu);
	return err;
}

void zc_owners_gone(struct zc_owners *o, uint32_t tgid)
{
	size_t i;
	bool owned = false;

	pthread_mutex_lock(&o->mu);
	i = lower(o->agent, o->nagent, tgid);
	if (i < o->nagent && o->agent[i] == tgid) {
		memmove(o->agent + i, o->agent + i + 1, (o->nagent - i - 1) * sizeof(*o->agent));
		o->nagent--;
		owned = true;
	}
	i = lower(o->trig, o->ntrig, tgid);
	if (i < o->ntrig && o->trig[i] == tgid) {
		memmove(o->trig + i, o->trig + i + 1, (o->ntrig - i - 1) * sizeof(*o->trig));
		o->ntrig--;
		owned = true;
	}
	if (owned)
		take_back(o, tgid);
	forget_children(o);
	pthread_mutex_unlock(&o->mu);
}

int zc_owners_set_triggers(struct zc_owners *o, const uint32_t *tgids, size_t n)
{
	uint32_t *v = NULL;
	size_t k = 0;

	if (n) {
		v = malloc(n * sizeof(*v));
		if (!v)
			return -ENOMEM;
	}
	pthread_mutex_lock(&o->mu);
	for (size_t i = 0; i < o->ntrig; i++)
		if (!has(tgids, n, o->trig[i]) && !has(o->agent, o->nagent, o->trig[i]))
			take_back(o, o->trig[i]);
	for (size_t i = 0; i < n; i++) {
		if (has(o->trig, o->ntrig, tgids[i]) || has(o->agent, o->nagent, tgids[i]) ||
		    hand_on(o, tgids[i]) == 0)
			v[k++] = tgids[i];
	}
	free(o->trig);
	o->trig = v;
	o->ntrig = k;
	forget_children(o);
	pthread_mutex_unlock(&o->mu);
	return 0;
}

int zc_owners_has(struct zc_owners *o, uint32_t tgid)
{
	int r;

	pthread_mutex_lock(&o->mu);
	r = has(o->agent, o->nagent, tgid) || has(o->trig, o->ntrig, tgid);
	pthread_mutex_unlock(&o->mu);
	return r;
}
