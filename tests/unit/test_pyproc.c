/*
 * test_pyproc: a live CPython 3.11 (pyproc_target.py) read from outside.
 * The ground truth is the interpreter's own: the thread state's address
 * from PyThreadState_Get, the code objects' addresses, names, files and
 * line ranges (co_lines) as the script prints them. Checked: detection
 * (version, the runtime's self check), the thread list and the frame
 * chain walked with the sampler's offsets (the same reads as
 * python.bpf.c, from user space), each code object's name, file and first
 * line, the line of every co_lines() range start, a string that is not
 * ASCII, and a process that is not Python.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "pyproc.h"

/* Debian 12's interpreter (a non-PIE executable with the runtime in it) */
#define PYTHON	  "/usr/bin/python3.11"
#define MAX_CODES 8
#define MAX_LINES 256

struct tcode {
	uint64_t code, func;
	char name[256], file[512];
	int first;
};

struct tline {
	uint64_t code;
	uint32_t off;
	int line;
};

struct truth {
	uint64_t tstate, tid, ident; /* the main thread's state, native id, pthread_self() */
	int ncodes;
	struct tcode codes[MAX_CODES];
	int nlines;
	struct tline lines[MAX_LINES];
	uint64_t stack[2];
};

static pid_t spawn(int *to_child, FILE **from_child)
{
	int in[2], out[2];
	pid_t pid;

	if (pipe(in) || pipe(out))
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(PYTHON, PYTHON, PYPROC_TARGET, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	*to_child = in[1];
	*from_child = fdopen(out[0], "r");
	return pid;
}

static int read_truth(FILE *f, struct truth *t)
{
	char line[1024];

	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (!strcmp(line, "READY"))
			return 0;
		if (sscanf(line, "TSTATE %" SCNu64 " %" SCNu64 " %" SCNu64, &t->tstate, &t->tid,
			   &t->ident) == 3)
			continue;
		if (!strncmp(line, "CODE ", 5) && t->ncodes < MAX_CODES) {
			struct tcode *c = &t->codes[t->ncodes];

			if (sscanf(line, "CODE %" SCNu64 " %" SCNu64 " %255s %d %511s", &c->code,
				   &c->func, c->name, &c->first, c->file) == 5)
				t->ncodes++;
			continue;
		}
		if (!strncmp(line, "LINE ", 5) && t->nlines < MAX_LINES) {
			struct tline *l = &t->lines[t->nlines];

			if (sscanf(line, "LINE %" SCNu64 " %" SCNu32 " %d", &l->code, &l->off,
				   &l->line) == 3)
				t->nlines++;
			continue;
		}
		sscanf(line, "STACK %" SCNu64 " %" SCNu64, &t->stack[0], &t->stack[1]);
	}
	return -1;
}

static uint64_t rd(pid_t pid, uint64_t addr)
{
	uint64_t v = 0;

	procmem_read(pid, addr, &v, sizeof(v));
	return v;
}

/* The thread list and frame chain, with the offsets the sampler gets. */
static void walk(pid_t pid, const struct pyproc *pp, const struct truth *t)
{
	const struct tp_py_proc *b = &pp->bpf;
	uint64_t interp = rd(pid, b->interp_head), ts = rd(pid, interp + b->interp_threads_head);
	uint64_t found = 0, frame, codes[4] = {0};
	int n = 0;

	for (int i = 0; i < 64 && ts && !found; i++, ts = rd(pid, ts + b->ts_next))
		if (rd(pid, ts + b->ts_native_tid) == t->tid)
			found = ts;
	CHECK(found == t->tstate, "thread state by native id: %#" PRIx64 ", Python says %#" PRIx64,
	      found, t->tstate);
	/* the GIL's holder: the main thread, or nobody while it waits in read() */
	CHECK(pp->bpf.gil_holder &&
		  (rd(pid, pp->bpf.gil_holder) == 0 || rd(pid, pp->bpf.gil_holder) == t->tstate),
	      "GIL holder word at %#" PRIx64 ": %#" PRIx64, (uint64_t)pp->bpf.gil_holder,
	      rd(pid, pp->bpf.gil_holder));
	/* a forked worker's is found by pthread_self() (python.bpf.c) */
	CHECK(b->ts_thread_id != TP_PY_NONE && rd(pid, t->tstate + b->ts_thread_id) == t->ident,
	      "thread_id: %#" PRIx64 ", Python says %#" PRIx64,
	      rd(pid, t->tstate + b->ts_thread_id), t->ident);
	frame = rd(pid, rd(pid, found + b->ts_cframe) + b->ts_frame);
	for (; frame && n < 4; frame = rd(pid, frame + b->frame_previous))
		codes[n++] = rd(pid, frame + b->frame_code);
	CHECK(n == 2 && codes[0] == t->stack[0] && codes[1] == t->stack[1],
	      "frames: %d, [%#" PRIx64 " %#" PRIx64 "], Python says [%#" PRIx64 " %#" PRIx64 "]", n,
	      codes[0], codes[1], t->stack[0], t->stack[1]);
}

static void codes(pid_t pid, const struct pyproc *pp, const struct truth *t)
{
	int right = 0, total = 0;

	for (int i = 0; i < t->ncodes; i++) {
		const struct pyproc_layout *l = &pp->layout;
		uint64_t code = t->codes[i].code;
		uint64_t module = t->codes[i].func ? rd(pid, t->codes[i].func + l->func_module) : 0;
		uint32_t ident = (uint32_t)tp_py_ident(rd(pid, code + l->co_qualname),
						       rd(pid, code + l->co_linetable));
		struct pycode *cp = NULL, c0 = {.function = "", .file = ""}, *c = &c0;

		CHECK(pycode_read(pid, l, code, module, ident ^ 1, &cp) == -ESTALE && !cp,
		      "code %s with another identity: stale", t->codes[i].name);
		CHECK(pycode_read(pid, l, code, module, ident, &cp) == 0 && cp, "code %s readable",
		      t->codes[i].name);
		if (cp)
			c = cp;
		CHECK(!strcmp(c->function, t->codes[i].name) &&
			  !strcmp(c->file, t->codes[i].file) && c->firstlineno == t->codes[i].first,
		      "code: %s %s %d, Python says %s %s %d", c->function, c->file, c->firstlineno,
		      t->codes[i].name, t->codes[i].file, t->codes[i].first);
		for (int k = 0; k < t->nlines; k++) {
			int got;

			if (t->lines[k].code != t->codes[i].code)
				continue;
			total++;
			got = pycode_line(c, t->lines[k].off);
			right += got == t->lines[k].line;
			if (got != t->lines[k].line)
				fprintf(stderr, "  %s +%u: line %d, Python says %d\n", c->function,
					t->lines[k].off, got, t->lines[k].line);
		}
		free(cp);
	}
	CHECK(total > 20 && right == total, "lines of every co_lines() range: %d of %d", right,
	      total);
	CHECK(pycode_read(pid, &pp->layout, 8, 0, 0, &(struct pycode *){NULL}) == -EFAULT,
	      "a pointer that is not a code object");
}

int main(void)
{
	struct truth *t = calloc(1, sizeof(*t));
	struct procmem_maps maps = {0};
	struct pyproc pp;
	FILE *from;
	int to = -1, rc;
	pid_t pid;

	if (access(PYTHON, X_OK) != 0) {
		printf("skip: no %s\n", PYTHON);
		return 77;
	}
	pid = spawn(&to, &from);
	CHECK(pid > 0 && read_truth(from, t) == 0 && t->ncodes == 4, "the target started");
	if (check_failed)
		return check_done();
	CHECK(procmem_maps_read(pid, &maps) == 0, "maps");
	rc = pyproc_detect(pid, &maps, &pp);
	CHECK(rc == 0 && pp.version >> 16 == 0x030b && pp.layout.major == 3,
	      "detected 3.11: %d %#x", rc, pp.version);
	CHECK(pp.eval_start && pp.eval_end > pp.eval_start, "_PyEval_EvalFrameDefault found");
	if (rc == 0) {
		walk(pid, &pp, t);
		codes(pid, &pp, t);
	}
	procmem_maps_free(&maps);
	close(to);
	waitpid(pid, NULL, 0);
	/* not Python: this test itself */
	CHECK(procmem_maps_read(getpid(), &maps) == 0 &&
		  pyproc_detect(getpid(), &maps, &pp) == -ENOENT,
	      "a process that is not Python");
	procmem_maps_free(&maps);
	free(t);
	return check_done();
}
