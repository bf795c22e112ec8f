/*
 * test_offcpu_targets: off-CPU capture asked for by triggers, on the real
 * kernel (docs/offcpu.md, "From a trigger").
 *
 * The sampler's offcpu_targets map holds exactly the set last given to
 * sampler_set_offcpu_targets, each process with the threshold; bad input
 * (too many, tgid 0, a threshold out of range) changes nothing; n 0 clears
 * it. Then through the trigger engine and the agent's glue (raise.c):
 * the targets of the Active triggers with offcpu reach the map with the
 * smallest threshold among them, a trigger without offcpu adds nothing,
 * and the map empties when the off-CPU triggers leave the set or expire.
 * The map is read back from the kernel (sampler_offcpu_targets), not from
 * what the code meant to write.
 *
 * Needs root and kernel BTF; otherwise it says why and exits 77 (skip).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "raise.h"
#include "sampler.h"
#include "traceprof/log.h"
#include "triggers.h"

static int64_t fake_now = 1700000000000; /* the engine's clock, ms */

static int64_t fake_clock(void *ctx)
{
	(void)ctx;
	return fake_now;
}

/* The map holds exactly want[0..n) (ascending), each with threshold us. */
static void expect_map(struct sampler *s, const uint32_t *want, size_t n, uint32_t us,
		       const char *what)
{
	uint32_t got[16] = {0}, th[16] = {0};
	int k = sampler_offcpu_targets(s, got, th, 16);
	size_t found = 0;

	CHECK(k == (int)n, "%s: %d processes in the map, want %zu", what, k, n);
	for (int i = 0; i < k && i < 16; i++) {
		bool listed = false;

		for (size_t j = 0; j < n; j++)
			listed |= got[i] == want[j];
		found += listed;
		CHECK(listed, "%s: tgid %u in the map, not wanted", what, got[i]);
		CHECK(th[i] == us, "%s: tgid %u threshold %u us, want %u", what, got[i], th[i], us);
	}
	CHECK(found == n, "%s: %zu of %zu wanted in the map", what, found, n);
}

static void test_sampler_api(struct sampler *s)
{
	static uint32_t many[TP_MAX_OFFCPU_TARGETS + 1];
	uint32_t ab[] = {4001, 4002}, b = 4002;

	CHECK(sampler_set_offcpu_targets(s, ab, 2, 5000) == 0, "set two");
	expect_map(s, ab, 2, 5000, "two");
	CHECK(sampler_set_offcpu_targets(s, &b, 1, 300) == 0, "set one");
	expect_map(s, &b, 1, 300, "replaced by one");

	log_set_level(TP_LOG_QUIET); /* the errors it logs are expected */
	for (size_t i = 0; i <= TP_MAX_OFFCPU_TARGETS; i++)
		many[i] = (uint32_t)i + 1;
	CHECK(sampler_set_offcpu_targets(s, many, TP_MAX_OFFCPU_TARGETS + 1, 1000) == -ENOSPC,
	      "too many refused");
	log_set_level(TP_LOG_WARN);
	CHECK(sampler_set_offcpu_targets(s, (uint32_t[]){0}, 1, 1000) == -EINVAL, "tgid 0");
	CHECK(sampler_set_offcpu_targets(s, ab, 2, SAMPLER_OFFCPU_MIN_US_LO - 1) == -EINVAL,
	      "threshold below the bound");
	CHECK(sampler_set_offcpu_targets(s, ab, 2, SAMPLER_OFFCPU_MIN_US_HI + 1) == -EINVAL,
	      "threshold above the bound");
	expect_map(s, &b, 1, 300, "after refusals");
	CHECK(sampler_set_offcpu_targets(s, NULL, 0, 0) == 0, "clear");
	expect_map(s, NULL, 0, 0, "cleared");
}

/* Applies set[0..n) (generation gen) to the engine; every trigger targets its service. */
static void apply(struct triggers *t, uint64_t gen, Traceprof__Control__V1__Trigger *set, size_t n)
{
	Traceprof__Control__V1__ApplyTriggersRequest req =
	    TRACEPROF__CONTROL__V1__APPLY_TRIGGERS_REQUEST__INIT;
	Traceprof__Control__V1__Trigger *ptr[8];
	bool changed;
	uint64_t fence;

	for (size_t i = 0; i < n; i++)
		ptr[i] = &set[i];
	req.generation = gen;
	req.n_triggers = n;
	req.triggers = ptr;
	CHECK(triggers_apply(t, &req, &changed, &fence) == 0 && changed, "apply %llu",
	      (unsigned long long)gen);
}

static void test_through_engine(struct sampler *s)
{
	static char *svc[3] = {"pay", "inv", "ship"};
	Traceprof__Control__V1__Trigger tr[3];
	Traceprof__Control__V1__Targets tg[3];
	Traceprof__Control__V1__Criteria cr[3];
	struct raise r = {.sampler = s, .base_hz = 19};
	struct triggers_opts to = {.no_claims = true, .now_ms = fake_clock};
	struct triggers *t = NULL;
	uint32_t pay_inv[] = {5001, 5002}, pay = 5001;

	CHECK(raise_init(&r, 1 << 20) == 0, "raise_init");
	raise_trigger_opts(&r, &to);
	t = triggers_new(&to);
	CHECK(t != NULL, "triggers_new: %s", strerror(errno));
	if (!t)
		goto out;
	for (int i = 0; i < 3; i++) {
		traceprof__control__v1__trigger__init(&tr[i]);
		traceprof__control__v1__targets__init(&tg[i]);
		traceprof__control__v1__criteria__init(&cr[i]);
		tr[i].id = svc[i];
		tr[i].service = svc[i];
		tr[i].deadline_unix_ms = fake_now + 60000;
		tr[i].targets = &tg[i];
		tr[i].criteria = &cr[i];
		tg[i].services = &svc[i];
		tg[i].n_services = 1;
		triggers_proc_add(t,
				  &(struct triggers_proc){5001 + (uint32_t)i, svc[i], "", "", ""});
	}
	tr[0].offcpu = true;
	tr[0].offcpu_threshold_us = 2000;
	tr[1].offcpu = true;		/* threshold 0: the default, 1 ms, the smallest */
	tr[2].offcpu_threshold_us = 50; /* without offcpu: not read */
	apply(t, 1, tr, 3);
	expect_map(s, pay_inv, 2, 1000, "pay and inv, the smallest threshold");
	CHECK(r.offcpu_errors == 0, "%llu off-CPU errors", (unsigned long long)r.offcpu_errors);

	apply(t, 2, (Traceprof__Control__V1__Trigger[]){tr[0], tr[2]}, 2);
	expect_map(s, &pay, 1, 2000, "inv left the set");
	apply(t, 3, &tr[2], 1);
	expect_map(s, NULL, 0, 0, "only a trigger without offcpu");
	apply(t, 4, tr, 1);
	expect_map(s, &pay, 1, 2000, "pay again");
	fake_now += 60000;
	triggers_tick(t);
	expect_map(s, NULL, 0, 0, "pay expired");
out:
	triggers_free(t);
	sampler_set_raised(s, 0);
	raise_free(&r);
}

int main(void)
{
	struct sampler_opts o = {.hz = 19, .ring_bytes = 1 << 20, .filter = TP_FILTER_PIDS};
	struct sampler *s;
	if (check_skip_without_bpf())
		return 77;
	log_set_level(getenv("TRACEPROF_TEST_VERBOSE") ? TP_LOG_DEBUG : TP_LOG_WARN);
	s = sampler_open(&o);
	CHECK(s != NULL, "sampler_open: %s", strerror(errno));
	if (s) {
		test_sampler_api(s);
		test_through_engine(s);
	}
	sampler_free(s);
	return check_done();
}
