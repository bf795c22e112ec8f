/*
 * py_frames.c - the Python frames of a sample (py_frames.h).
 */
#include "py_frames.h"

#include <string.h>

uint32_t py_frames_count(const struct tp_sample *s)
{
	uint32_t n = s->kind == TP_REC_SAMPLE || s->kind == TP_REC_OFFCPU ? s->py_n : 0;

	if (n > TP_PY_MAX_FRAMES ||
	    (size_t)s->kern_n + s->user_n + (size_t)n * TP_PY_WORDS > 2 * TP_MAX_FRAMES)
		return 0;
	return n;
}

void py_frames_chunks(const struct tp_sample *s, uint32_t n, struct py_chunks *c)
{
	const __u64 *w = s->ips + s->kern_n + s->user_n;

	c->n = 0;
	c->at[0] = 0;
	for (uint32_t i = 0; i < n; i++)
		if ((w[i * TP_PY_WORDS + 2] & TP_PY_ENTRY) || i == n - 1)
			c->at[++c->n] = i + 1;
}

int py_frames_is_eval(const struct proc *p, uint64_t ip)
{
	return p->pyp && ip >= p->pyp->eval_start && ip < p->pyp->eval_end;
}

/* "encoder.py" of "/usr/lib/python3.11/json/encoder.py" */
static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

uint32_t py_frames_emit(struct pycache *pc, const struct proc *p, const struct tp_sample *s,
			uint32_t from, uint32_t to, py_emit_fn emit, void *ctx)
{
	const __u64 *w = s->ips + s->kern_n + s->user_n;
	uint32_t unknown = 0;

	for (uint32_t i = to; i-- > from;) {
		const __u64 *f = w + (size_t)i * TP_PY_WORDS;
		const struct pycode *c =
		    pc && p->pyp ? pycache_get(pc, p->pid, p->gen, p->pyp, f) : NULL;
		struct sym_frame sf = {.build_id = "", .kind = SYM_KIND_USER};

		if (c) {
			sf.function = c->function;
			sf.module = base_name(c->file);
			sf.file = c->file;
			sf.line = pycode_line(c, (uint32_t)f[2]);
		} else {
			sf.function = "[python]";
			sf.module = "[python]";
			sf.kind = SYM_KIND_UNKNOWN;
			unknown++;
		}
		emit(ctx, &sf);
	}
	return unknown;
}
