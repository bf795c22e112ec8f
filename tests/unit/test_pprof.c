/*
 * test_pprof.c - tp_pprof_write: a hand-built stack set written, gunzipped
 * and decoded with the generated protobuf-c code, then checked for what a
 * pprof reader relies on (types, ids that resolve, totals, labels, leaf
 * first order, the string table, kernel and unsymbolized frames), the same
 * bytes twice, cohort B, and each kind of malformed set refused with a
 * message and nothing written.
 *
 * `test_pprof --write FILE` only writes the known set (cohort A) to FILE:
 * test_pprof_go.sh reads that file with the real go tool pprof.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "check.h"
#include "perftools/profiles/profile.pb-c.h"
#include "traceprof/pprof.h"

typedef Perftools__Profiles__Profile pb_profile;

#define T1 "0af7651916cd43dd8448eb211c80319c"
#define T2 "4bf92f3577b34da6a3ce929d0e0e4736"
#define T3 "00f067aa0ba902b700f067aa0ba902b7"

/* The known set: see the totals in tests/README.md ("pprof"). */
static struct tp_frame_info frames[] = {
    {"main", "main", "shop", "aa01", "main.c", 10, 0x1000, TP_FRAME_USER},
    {"handle", "handle", "shop", "aa01", "handler.c", 20, 0x1100, TP_FRAME_USER},
    {"validateSignature", "validateSignature", "shop", "aa01", "sig.c", 42, 0x1200, TP_FRAME_USER},
    {"bigint_mul", "bigint_mul", "libcrypto.so.3", "ef01", NULL, 0, 0x5000, TP_FRAME_USER},
    {"json_encode", "json_encode", "shop", "aa01", "json.c", 7, 0x1300, TP_FRAME_USER},
    {"write", "write", "libc.so.6", "c0ffee", NULL, 0, 0x9000, TP_FRAME_USER},
    {"entry_SYSCALL_64", "entry_SYSCALL_64", "[kernel]", "", NULL, 0, 0x40, TP_FRAME_KERNEL},
    {"do_syscall_64", "do_syscall_64", "[kernel]", "", NULL, 0, 0x80, TP_FRAME_KERNEL},
    {"ksys_write", "ksys_write", "[kernel]", "", NULL, 0, 0xc0, TP_FRAME_KERNEL},
    {"libfoo.so+0x1a2b", "libfoo.so+0x1a2b", "libfoo.so", "beef", NULL, 0, 0x1a2b,
     TP_FRAME_UNSYMBOLIZED},
    /* validateSignature again, another line: same Function, own Location */
    {"validateSignature", "validateSignature", "shop", "aa01", "sig.c", 57, 0x1250, TP_FRAME_USER},
    {"never_used", "never_used", "shop", "aa01", NULL, 0, 0x1400, TP_FRAME_USER},
};
static const uint32_t s0[] = {0, 1, 2, 3}, s1[] = {0, 1, 2}, s2[] = {0, 1, 4},
		      s3[] = {0, 1, 5, 6, 7, 8}, s4[] = {0, 9}, s5[] = {0, 1, 10};
static struct tp_stack_row rows[] = {
    {s0, 4, 60, 3000000, 2, 100000, "checkout", T1, "00f067aa0ba902b7", 0, 0},
    {s1, 3, 10, 500000, 0, 0, "checkout", T1, "00f067aa0ba902b7", 0, 0},
    {s2, 3, 20, 1000000, 0, 0, "checkout", T2, "b7ad6b7169203331", 0, 0},
    {s3, 6, 6, 300000, 0, 0, "checkout", NULL, NULL, 0, 0},
    {s4, 2, 4, 200000, 0, 0, "frontend", T3, "53995c3f42cd8ad8", 0, 0},
    {s5, 3, 0, 0, 8, 400000, "checkout", T2, "b7ad6b7169203331", 0, 0}, /* cohort B only */
};

static struct tp_stackset known_set(void)
{
	struct tp_stackset set = {
	    .frames = frames,
	    .nframes = sizeof(frames) / sizeof(frames[0]),
	    .rows = rows,
	    .nrows = sizeof(rows) / sizeof(rows[0]),
	    .differential = 1,
	    .a_name = "duration > 1s",
	    .b_name = "duration < 100ms",
	    .time_from_ns = 1700000000000000000LL,
	    .time_until_ns = 1700000060000000000LL,
	    .period_ns = 50000000,
	};
	return set;
}

/* Writes set into memory; *buf (caller frees) and *len get the bytes. */
static int write_mem(const struct tp_stackset *set, const struct tp_pprof_opts *opts, char **buf,
		     size_t *len, char *err, size_t errlen)
{
	FILE *f = open_memstream(buf, len);
	int rc;

	if (!f)
		return -errno;
	rc = tp_pprof_write(set, opts, f, err, errlen);
	fclose(f);
	return rc;
}

/* Gunzips and decodes; NULL on any failure. The caller frees with
 * perftools__profiles__profile__free_unpacked(p, NULL). */
static pb_profile *decode(const char *gz, size_t len)
{
	z_stream zs = {0};
	size_t cap = 1 << 16, n = 0;
	uint8_t *raw = malloc(cap);
	pb_profile *p = NULL;
	int zrc = Z_OK;

	if (!raw || inflateInit2(&zs, 15 + 16) != Z_OK) {
		free(raw);
		return NULL;
	}
	zs.next_in = (Bytef *)(uintptr_t)gz;
	zs.avail_in = (uInt)len;
	while (zrc == Z_OK) {
		if (n == cap) {
			uint8_t *bigger = realloc(raw, cap * 2);

			if (!bigger)
				break;
			raw = bigger;
			cap *= 2;
		}
		zs.next_out = raw + n;
		zs.avail_out = (uInt)(cap - n);
		zrc = inflate(&zs, Z_NO_FLUSH);
		n = cap - zs.avail_out;
	}
	inflateEnd(&zs);
	if (zrc == Z_STREAM_END)
		p = perftools__profiles__profile__unpack(NULL, n, raw);
	free(raw);
	return p;
}

static const char *str(const pb_profile *p, int64_t i)
{
	return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "<bad index>";
}

static const Perftools__Profiles__Location *location(const pb_profile *p, uint64_t id)
{
	for (size_t i = 0; i < p->n_location; i++)
		if (p->location[i]->id == id)
			return p->location[i];
	return NULL;
}

static const Perftools__Profiles__Function *function(const pb_profile *p, uint64_t id)
{
	for (size_t i = 0; i < p->n_function; i++)
		if (p->function[i]->id == id)
			return p->function[i];
	return NULL;
}

static const Perftools__Profiles__Mapping *mapping(const pb_profile *p, uint64_t id)
{
	for (size_t i = 0; i < p->n_mapping; i++)
		if (p->mapping[i]->id == id)
			return p->mapping[i];
	return NULL;
}

/* The function name of a sample's d-th location (0 = leaf). */
static const char *frame_name(const pb_profile *p, const Perftools__Profiles__Sample *s, size_t d)
{
	const Perftools__Profiles__Location *l = location(p, s->location_id[d]);
	const Perftools__Profiles__Function *f;

	if (!l || l->n_line != 1 || !(f = function(p, l->line[0]->function_id)))
		return "<unresolved>";
	return str(p, f->name);
}

static const char *label(const pb_profile *p, const Perftools__Profiles__Sample *s, const char *key)
{
	for (size_t i = 0; i < s->n_label; i++)
		if (!strcmp(str(p, s->label[i]->key), key))
			return str(p, s->label[i]->str);
	return NULL;
}

static const Perftools__Profiles__Location *location_of(const pb_profile *p, const char *fn)
{
	for (size_t i = 0; i < p->n_location; i++) {
		const Perftools__Profiles__Location *l = p->location[i];
		const Perftools__Profiles__Function *f =
		    l->n_line ? function(p, l->line[0]->function_id) : NULL;

		if (f && !strcmp(str(p, f->name), fn))
			return l;
	}
	return NULL;
}

static void check_structure(const pb_profile *p)
{
	CHECK(p->n_string_table > 0 && !strcmp(p->string_table[0], ""), "string 0 is \"\"");
	for (size_t i = 0; i < p->n_string_table; i++)
		for (size_t j = i + 1; j < p->n_string_table; j++)
			CHECK(strcmp(p->string_table[i], p->string_table[j]) != 0,
			      "string %zu and %zu both \"%s\"", i, j, p->string_table[i]);
	for (size_t i = 0; i < p->n_location; i++) {
		const Perftools__Profiles__Location *l = p->location[i];

		CHECK(l->id == i + 1, "location ids 1..n in order (%zu: %llu)", i,
		      (unsigned long long)l->id);
		CHECK(l->mapping_id == 0 || mapping(p, l->mapping_id),
		      "location %llu: mapping %llu", (unsigned long long)l->id,
		      (unsigned long long)l->mapping_id);
		CHECK(l->n_line == 1 && function(p, l->line[0]->function_id),
		      "location %llu: one line with a function", (unsigned long long)l->id);
	}
	for (size_t i = 0; i < p->n_function; i++)
		CHECK(p->function[i]->id == i + 1 && p->function[i]->name > 0,
		      "function %zu: id and name", i);
	for (size_t i = 0; i < p->n_mapping; i++)
		CHECK(p->mapping[i]->id == i + 1 && p->mapping[i]->has_functions,
		      "mapping %zu: id, has_functions", i);
	for (size_t i = 0; i < p->n_sample; i++) {
		CHECK(p->sample[i]->n_value == p->n_sample_type, "sample %zu: one value per type",
		      i);
		for (size_t d = 0; d < p->sample[i]->n_location_id; d++)
			CHECK(location(p, p->sample[i]->location_id[d]), "sample %zu: location %zu",
			      i, d);
	}
}

static void test_known_set(void)
{
	struct tp_stackset set = known_set();
	char *buf = NULL, err[256] = "";
	size_t len = 0;
	int rc = write_mem(&set, NULL, &buf, &len, err, sizeof(err));
	pb_profile *p;
	int64_t total_samples = 0, total_ns = 0;

	CHECK(rc == 0, "write: %d %s", rc, err);
	CHECK(len > 18 && (uint8_t)buf[0] == 0x1f && (uint8_t)buf[1] == 0x8b, "gzip magic");
	CHECK(len > 8 && !buf[4] && !buf[5] && !buf[6] && !buf[7], "gzip mtime 0");
	p = decode(buf, len);
	CHECK(p != NULL, "gunzip and decode");
	if (!p) {
		free(buf);
		return;
	}
	check_structure(p);
	CHECK(p->n_sample_type == 2, "two sample types");
	if (p->n_sample_type == 2) {
		CHECK(!strcmp(str(p, p->sample_type[0]->type), "samples") &&
			  !strcmp(str(p, p->sample_type[0]->unit), "count"),
		      "samples/count");
		CHECK(!strcmp(str(p, p->sample_type[1]->type), "cpu") &&
			  !strcmp(str(p, p->sample_type[1]->unit), "nanoseconds"),
		      "cpu/nanoseconds");
	}
	CHECK(!strcmp(str(p, p->default_sample_type), "cpu"), "default cpu");
	CHECK(p->period_type && !strcmp(str(p, p->period_type->type), "cpu") &&
		  !strcmp(str(p, p->period_type->unit), "nanoseconds"),
	      "period type cpu/nanoseconds");
	CHECK(p->period == 50000000, "period %lld", (long long)p->period);
	CHECK(p->time_nanos == 1700000000000000000LL, "time_nanos");
	CHECK(p->duration_nanos == 60000000000LL, "duration 60 s: %lld",
	      (long long)p->duration_nanos);
	CHECK(p->n_comment == 2 && !strcmp(str(p, p->comment[0]), "traceprof profile") &&
		  !strcmp(str(p, p->comment[1]), "duration > 1s"),
	      "comments: traceprof, cohort A's name");

	/* five rows kept (the sixth is cohort B only), their totals */
	CHECK(p->n_sample == 5, "5 samples, got %zu", p->n_sample);
	for (size_t i = 0; i < p->n_sample; i++) {
		total_samples += p->sample[i]->value[0];
		total_ns += p->sample[i]->value[1];
	}
	CHECK(total_samples == 100, "samples sum %lld", (long long)total_samples);
	CHECK(total_ns == 5000000000LL, "cpu sum %lld ns", (long long)total_ns);

	/* frames 0-9 used in cohort A: one location and one function each;
	 * mappings shop, libcrypto, libc, the kernel, libfoo */
	CHECK(p->n_location == 10, "10 locations, got %zu", p->n_location);
	CHECK(p->n_function == 10, "10 functions, got %zu", p->n_function);
	CHECK(p->n_mapping == 5, "5 mappings, got %zu", p->n_mapping);
	CHECK(!location_of(p, "never_used"), "an unused frame has no location");

	if (p->n_sample == 5) {
		const Perftools__Profiles__Sample *s = p->sample[0];

		CHECK(s->n_location_id == 4 && !strcmp(frame_name(p, s, 0), "bigint_mul") &&
			  !strcmp(frame_name(p, s, 1), "validateSignature") &&
			  !strcmp(frame_name(p, s, 3), "main"),
		      "leaf first: %s ... %s", frame_name(p, s, 0), frame_name(p, s, 3));
		CHECK(s->value[0] == 60 && s->value[1] == 3000000000LL, "row 0 values");
		CHECK(label(p, s, "trace_id") && !strcmp(label(p, s, "trace_id"), T1), "trace_id");
		CHECK(label(p, s, "span_id") && !strcmp(label(p, s, "span_id"), "00f067aa0ba902b7"),
		      "span_id");
		CHECK(label(p, s, "service") && !strcmp(label(p, s, "service"), "checkout"),
		      "service");
		s = p->sample[3];
		CHECK(s->n_label == 1 && !label(p, s, "trace_id") && !label(p, s, "span_id"),
		      "no trace: service label only (%zu labels)", s->n_label);
		CHECK(!strcmp(frame_name(p, s, 0), "ksys_write") &&
			  !strcmp(frame_name(p, s, 5), "main"),
		      "kernel leaf first");
		s = p->sample[4];
		CHECK(!strcmp(label(p, s, "service") ? label(p, s, "service") : "", "frontend"),
		      "second service");
	}

	/* kernel frames: the kernel mapping; unsymbolized: module+offset text */
	const Perftools__Profiles__Location *k = location_of(p, "do_syscall_64");
	const Perftools__Profiles__Mapping *km = k ? mapping(p, k->mapping_id) : NULL;
	CHECK(km && !strcmp(str(p, km->filename), "[kernel.kallsyms]"), "kernel mapping");
	const Perftools__Profiles__Location *u = location_of(p, "libfoo.so+0x1a2b");
	const Perftools__Profiles__Mapping *um = u ? mapping(p, u->mapping_id) : NULL;
	CHECK(u && u->address == 0x1a2b && u->line[0]->line == 0, "unsymbolized: address only");
	CHECK(um && !strcmp(str(p, um->filename), "libfoo.so") &&
		  !strcmp(str(p, um->build_id), "beef"),
	      "unsymbolized: its module and build id");
	const Perftools__Profiles__Location *v = location_of(p, "validateSignature");
	const Perftools__Profiles__Function *vf = v ? function(p, v->line[0]->function_id) : NULL;
	const Perftools__Profiles__Mapping *vm = v ? mapping(p, v->mapping_id) : NULL;
	CHECK(v && v->address == 0x1200 && v->line[0]->line == 42, "line and address");
	CHECK(vf && !strcmp(str(p, vf->filename), "sig.c") &&
		  !strcmp(str(p, vf->system_name), "validateSignature"),
	      "function file and system name");
	CHECK(vm && !strcmp(str(p, vm->filename), "shop") &&
		  !strcmp(str(p, vm->build_id), "aa01") && vm->has_filenames &&
		  vm->has_line_numbers,
	      "mapping of shop");

	/* deterministic: the same set gives the same bytes */
	char *again = NULL;
	size_t again_len = 0;
	rc = write_mem(&set, NULL, &again, &again_len, err, sizeof(err));
	CHECK(rc == 0 && again_len == len && !memcmp(again, buf, len), "same bytes twice");
	free(again);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(buf);
}

static void test_cohort_b(void)
{
	struct tp_stackset set = known_set();
	struct tp_pprof_opts opts = {.cohort_b = 1, .comment = "traceprof compare --service shop"};
	char *buf = NULL, err[256] = "";
	size_t len = 0;
	int rc = write_mem(&set, &opts, &buf, &len, err, sizeof(err));
	pb_profile *p = rc == 0 ? decode(buf, len) : NULL;

	CHECK(p != NULL, "cohort B written: %d %s", rc, err);
	if (p) {
		check_structure(p);
		CHECK(p->n_sample == 2 && p->sample[0]->value[0] == 2 &&
			  p->sample[1]->value[0] == 8 && p->sample[1]->value[1] == 400000000LL,
		      "cohort B's values");
		/* main, handle, validateSignature (two lines), bigint_mul */
		CHECK(p->n_location == 5 && p->n_function == 4, "B: %zu locations, %zu functions",
		      p->n_location, p->n_function);
		CHECK(p->n_comment == 3 && !strcmp(str(p, p->comment[1]), "duration < 100ms") &&
			  !strcmp(str(p, p->comment[2]), "traceprof compare --service shop"),
		      "B: cohort name and the caller's comment");
		perftools__profiles__profile__free_unpacked(p, NULL);
	}
	free(buf);

	set.differential = 0;
	rc = write_mem(&set, &opts, &buf, &len, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "cohort B"), "B of a plain set: %d %s", rc, err);
	free(buf);
}

/* Off-CPU rows: a third sample type off_cpu/nanoseconds; a CPU sample has
 * off_cpu 0, an off-CPU one samples and cpu 0; cohort B has none. */
static void test_offcpu(void)
{
	struct tp_frame_info fr[2] = {
	    {"main", "main", "shop", "", NULL, 0, 0, TP_FRAME_USER},
	    {"recv", "recv", "libc.so.6", "", NULL, 0, 0, TP_FRAME_USER},
	};
	uint32_t cpu[] = {0}, wait[] = {0, 1};
	struct tp_stack_row r[] = {
	    {cpu, 1, 3, 150000, 0, 0, "svc", T1, NULL, 0, 0},
	    {wait, 2, 0, 0, 0, 0, "svc", T1, NULL, 2500, 0},
	};
	struct tp_stackset set = {.frames = fr, .nframes = 2, .rows = r, .nrows = 2};
	char *buf = NULL, err[256] = "";
	size_t len = 0;
	int rc = write_mem(&set, NULL, &buf, &len, err, sizeof(err));
	pb_profile *p = rc == 0 ? decode(buf, len) : NULL;

	CHECK(p != NULL, "off-CPU set written: %d %s", rc, err);
	if (p) {
		check_structure(p);
		CHECK(p->n_sample_type == 3 &&
			  !strcmp(str(p, p->sample_type[2]->type), "off_cpu") &&
			  !strcmp(str(p, p->sample_type[2]->unit), "nanoseconds"),
		      "third sample type off_cpu/nanoseconds");
		CHECK(!strcmp(str(p, p->default_sample_type), "cpu"), "default still cpu");
		CHECK(p->n_sample == 2 && p->sample[0]->n_value == 3 &&
			  p->sample[0]->value[0] == 3 && p->sample[0]->value[1] == 150000000LL &&
			  p->sample[0]->value[2] == 0,
		      "CPU sample: off_cpu 0");
		CHECK(p->n_sample == 2 && p->sample[1]->n_value == 3 &&
			  p->sample[1]->value[0] == 0 && p->sample[1]->value[1] == 0 &&
			  p->sample[1]->value[2] == 2500000LL && p->sample[1]->n_location_id == 2,
		      "off-CPU sample: 2.5 ms, samples and cpu 0, its two frames");
		perftools__profiles__profile__free_unpacked(p, NULL);
	}
	free(buf);
	r[1].offcpu_us = -1;
	rc = write_mem(&set, NULL, &buf, &len, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "negative"), "negative off-CPU time refused: %s", err);
	free(buf);
}

/* GPU rows: a sample type gpu/nanoseconds, after off_cpu when both are
 * there (exact ns, not rounded to us); a GPU sample has every other value 0. */
static void test_gpu(void)
{
	struct tp_frame_info fr[3] = {
	    {"main", "main", "shop", "", NULL, 0, 0, TP_FRAME_USER},
	    {"recv", "recv", "libc.so.6", "", NULL, 0, 0, TP_FRAME_USER},
	    {"[gpu] gemm", "[gpu] gemm", "[gpu]", "", NULL, 0, 0, TP_FRAME_USER},
	};
	uint32_t cpu[] = {0}, wait[] = {0, 1}, gpu[] = {0, 2};
	struct tp_stack_row r[] = {
	    {cpu, 1, 3, 150000, 0, 0, "svc", T1, NULL, 0, 0},
	    {gpu, 2, 0, 0, 0, 0, "svc", T1, NULL, 0, 1234567},
	    {wait, 2, 0, 0, 0, 0, "svc", T1, NULL, 2500, 0},
	};
	struct tp_stackset set = {.frames = fr, .nframes = 3, .rows = r, .nrows = 2};
	char *buf = NULL, err[256] = "";
	size_t len = 0;
	int rc = write_mem(&set, NULL, &buf, &len, err, sizeof(err));
	pb_profile *p = rc == 0 ? decode(buf, len) : NULL;

	CHECK(p != NULL, "GPU set written: %d %s", rc, err);
	if (p) {
		check_structure(p);
		CHECK(p->n_sample_type == 3 && !strcmp(str(p, p->sample_type[2]->type), "gpu") &&
			  !strcmp(str(p, p->sample_type[2]->unit), "nanoseconds"),
		      "third sample type gpu/nanoseconds");
		CHECK(p->n_sample == 2 && p->sample[0]->n_value == 3 &&
			  p->sample[0]->value[1] == 150000000LL && p->sample[0]->value[2] == 0,
		      "CPU sample: gpu 0");
		CHECK(p->n_sample == 2 && p->sample[1]->n_value == 3 &&
			  p->sample[1]->value[0] == 0 && p->sample[1]->value[1] == 0 &&
			  p->sample[1]->value[2] == 1234567LL && p->sample[1]->n_location_id == 2,
		      "GPU sample: 1234567 ns exactly, samples and cpu 0, its two frames");
		perftools__profiles__profile__free_unpacked(p, NULL);
	}
	free(buf);
	set.nrows = 3; /* with off-CPU time: off_cpu third, gpu fourth */
	rc = write_mem(&set, NULL, &buf, &len, err, sizeof(err));
	p = rc == 0 ? decode(buf, len) : NULL;
	CHECK(p != NULL, "GPU and off-CPU set written: %d %s", rc, err);
	if (p) {
		CHECK(p->n_sample_type == 4 &&
			  !strcmp(str(p, p->sample_type[2]->type), "off_cpu") &&
			  !strcmp(str(p, p->sample_type[3]->type), "gpu"),
		      "sample types samples, cpu, off_cpu, gpu");
		CHECK(p->n_sample == 3 && p->sample[1]->n_value == 4 &&
			  p->sample[1]->value[2] == 0 && p->sample[1]->value[3] == 1234567LL &&
			  p->sample[2]->value[2] == 2500000LL && p->sample[2]->value[3] == 0,
		      "GPU sample in gpu, off-CPU sample in off_cpu");
		perftools__profiles__profile__free_unpacked(p, NULL);
	}
	free(buf);
	r[1].gpu_ns = -1;
	rc = write_mem(&set, NULL, &buf, &len, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "negative"), "negative GPU time refused: %s", err);
	free(buf);
}

/* Writes a malformed set: -EINVAL, a message containing `want`, no bytes. */
static void expect_refused(const struct tp_stackset *set, const char *want, const char *what)
{
	char *buf = NULL, err[256] = "";
	size_t len = 0;
	int rc = write_mem(set, NULL, &buf, &len, err, sizeof(err));

	CHECK(rc == -EINVAL, "%s: rc %d", what, rc);
	CHECK(strstr(err, want) != NULL, "%s: message \"%s\" names \"%s\"", what, err, want);
	CHECK(len == 0, "%s: nothing written (%zu bytes)", what, len);
	free(buf);
}

static void test_malformed(void)
{
	struct tp_frame_info fr[2] = {
	    {"main", "main", "shop", "", NULL, 0, 0, TP_FRAME_USER},
	    {"leaf", "leaf", "shop", "", NULL, 0, 0, TP_FRAME_USER},
	};
	uint32_t bad[] = {0, 7}, good[] = {0, 1};
	struct tp_stack_row row = {good, 2, 1, 100, 0, 0, "svc", NULL, NULL, 0, 0};
	struct tp_stackset set = {.frames = fr, .nframes = 2, .rows = &row, .nrows = 1};
	char err[256] = "";

	row.frames = bad;
	expect_refused(&set, "row 0: frame index 7 out of range (the set has 2 frames)",
		       "index out of range");
	row.frames = good;
	row.depth = 0;
	expect_refused(&set, "row 0: empty stack", "depth 0");
	row.depth = 1000000000u; /* frames holds 2: the limit refuses it before any read */
	expect_refused(&set, "exceeds the limit", "huge depth");
	row.depth = 2;
	row.frames = NULL;
	expect_refused(&set, "frames is NULL", "NULL frames");
	row.frames = good;
	fr[1].function = NULL;
	expect_refused(&set, "frame 1: function is NULL", "NULL function");
	fr[1].function = "leaf";
	fr[1].name = NULL;
	expect_refused(&set, "frame 1: name is NULL", "NULL name");
	fr[1].name = "leaf";
	fr[0].module = NULL;
	expect_refused(&set, "frame 0: module is NULL", "NULL module");
	fr[0].module = "shop";
	fr[0].kind = 9;
	expect_refused(&set, "unknown kind 9", "bad kind");
	fr[0].kind = TP_FRAME_USER;
	row.service = NULL;
	expect_refused(&set, "service is NULL", "NULL service");
	row.service = "svc";
	row.cpu_us = -1;
	expect_refused(&set, "negative value", "negative cpu");
	row.cpu_us = INT64_MAX / 10;
	expect_refused(&set, "overflows", "cpu overflow");
	row.cpu_us = 100;
	set.rows = NULL;
	expect_refused(&set, "rows counted but NULL", "NULL rows");
	set.rows = &row;
	expect_refused(NULL, "no stack set", "NULL set");
	CHECK(tp_pprof_write(&set, NULL, NULL, err, sizeof(err)) == -EINVAL &&
		  strstr(err, "no output"),
	      "NULL output: %s", err);

	/* the fixed set is fine; an empty one is a valid empty profile */
	char *buf = NULL;
	size_t len = 0;
	CHECK(write_mem(&set, NULL, &buf, &len, err, sizeof(err)) == 0, "fixed: %s", err);
	free(buf);
	buf = NULL;
	set.nrows = 0;
	pb_profile *p =
	    write_mem(&set, NULL, &buf, &len, err, sizeof(err)) == 0 ? decode(buf, len) : NULL;
	CHECK(p && p->n_sample == 0 && p->n_location == 0 && p->n_sample_type == 2,
	      "empty set: empty profile");
	if (p)
		perftools__profiles__profile__free_unpacked(p, NULL);
	free(buf);
}

static void test_output_error(void)
{
	struct tp_stackset set = known_set();
	char err[256] = "";
	FILE *full = fopen("/dev/full", "w");

	if (!full)
		return; /* no /dev/full here: nothing to check */
	CHECK(tp_pprof_write(&set, NULL, full, err, sizeof(err)) == -EIO &&
		  strstr(err, "cannot write the profile: No space left on device"),
	      "a full device: -EIO (%s)", err);
	fclose(full);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--write")) {
		struct tp_stackset set = known_set();
		char err[256] = "";
		FILE *f = fopen(argv[2], "w");
		int rc = f ? tp_pprof_write(&set, NULL, f, err, sizeof(err)) : -errno;

		if (f && fclose(f) != 0 && !rc)
			rc = -EIO;
		if (rc)
			fprintf(stderr, "test_pprof: cannot write %s: %s\n", argv[2],
				err[0] ? err : strerror(-rc));
		return rc ? 1 : 0;
	}
	test_known_set();
	test_offcpu();
	test_gpu();
	test_cohort_b();
	test_malformed();
	test_output_error();
	return check_done();
}
