/*
 * pyproc.c - CPython processes seen from outside (pyproc.h).
 *
 * CPython 3.11's layout was read off Debian 12's python3.11 and is
 * checked by test_pyproc against a live interpreter (the addresses Python
 * itself reports through ctypes). 3.13 and 3.14 publish most offsets in
 * _Py_DebugOffsets, read from the process (the word of each field in that
 * struct is per version, from Debian 13's python3.13 and unstable's
 * python3.14); the table holds the rest. 3.12 is not in the table
 * (docs/python.md says why).
 */
#include "pyproc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tlsloc.h"

const struct pyproc_layout pyproc_layouts[] = {
    {
	.major = 3,
	.minor = 11,
	.bpf =
	    {
		.interp_threads_head = 16,
		.ts_next = 8,
		.ts_native_tid = 160,
		.ts_cframe = 56,
		.ts_frame = 8, /* _PyCFrame.current_frame */
		.frame_code = 32,
		.frame_func = 0,
		.frame_previous = 48,
		.frame_instr = 56,
		.frame_entry = 68,
		.frame_owner = 69,
		.code_adaptive = 184,
		.ts_thread_id = 152,
		.interp_next = 0,
		.owner_cstack = 0xff,
		.owner_skip = 0xff,
	    },
	.runtime_interp = 40,
	.runtime_gil_holder = 576, /* gilstate.tstate_current */
	.ts_interp = 16,
	.co_filename = 112,
	.co_name = 120,
	.co_qualname = 128,
	.co_linetable = 136,
	.co_firstlineno = 72,
	.func_module = 104,
	.str_state = 32,
	.str_length = 16,
	.str_ascii_data = 48,
	.str_compact_data = 72,
	.bytes_size = 16,
	.bytes_data = 32,
    },
    /*
     * 3.13 and 3.14: most offsets come from the process (_Py_DebugOffsets);
     * these are those it does not give: the frame's function (f_funcobj),
     * the function's __module__, the frame owners, and 3.14's tagged
     * stack references (f_executable and f_funcobj are _PyStackRef, whose
     * low bits are flags).
     */
    {
	.major = 3,
	.minor = 13,
	.debug = &(const struct pyproc_debug_words){.version = 1,
						    .rt_interp_head = 5,
						    .is_threads_head = 9,
						    .is_next = 8,
						    .is_gil_holder = 18,
						    .ts_next = 21,
						    .ts_interp = 22,
						    .ts_frame = 23,
						    .ts_thread_id = 24,
						    .ts_native_tid = 25,
						    .fr_previous = 29,
						    .fr_code = 30,
						    .fr_instr = 31,
						    .fr_owner = 33,
						    .co_filename = 35,
						    .co_name = 36,
						    .co_qualname = 37,
						    .co_linetable = 38,
						    .co_firstlineno = 39,
						    .co_adaptive = 43,
						    .bytes_size = 65,
						    .bytes_data = 66,
						    .str_state = 68,
						    .str_length = 69,
						    .str_ascii_size = 70,
						    .count = 71},
	.bpf =
	    {
		.ts_cframe = TP_PY_NONE,
		.frame_func = 16,
		.frame_entry = TP_PY_NONE,
		.owner_cstack = 3, /* FRAME_OWNED_BY_CSTACK */
		.owner_skip = 0xff,
	    },
	.func_module = 104,
    },
    {
	.major = 3,
	.minor = 14,
	.debug = &(const struct pyproc_debug_words){.version = 1,
						    .rt_interp_head = 5,
						    .is_threads_head = 9,
						    .is_next = 8,
						    .is_gil_holder = 19,
						    .ts_next = 24,
						    .ts_interp = 25,
						    .ts_frame = 26,
						    .ts_thread_id = 27,
						    .ts_native_tid = 28,
						    .fr_previous = 32,
						    .fr_code = 33,
						    .fr_instr = 34,
						    .fr_owner = 36,
						    .co_filename = 40,
						    .co_name = 41,
						    .co_qualname = 42,
						    .co_linetable = 43,
						    .co_firstlineno = 44,
						    .co_adaptive = 48,
						    .bytes_size = 75,
						    .bytes_data = 76,
						    .str_state = 78,
						    .str_length = 79,
						    .str_ascii_size = 80,
						    .count = 81},
	.bpf =
	    {
		.ts_cframe = TP_PY_NONE,
		.frame_func = 16,
		.frame_entry = TP_PY_NONE,
		/*
		 * FRAME_OWNED_BY_INTERPRETER: the entry frame each evaluation
		 * loop pushes (and the thread's base frame, outermost)
		 */
		.owner_cstack = 3,
		.owner_skip = 4, /* FRAME_OWNED_BY_CSTACK: no code of its own */
		.ref_tag_bits = 3,
	    },
	.func_module = 104,
    },
};
const size_t pyproc_nlayouts = sizeof(pyproc_layouts) / sizeof(pyproc_layouts[0]);

#define LINETABLE_MAX (64u << 10) /* bytes of a location table read at most */

/* python3, python3.11, libpython3.11.so.1.0: a file that may hold the interpreter. */
static bool python_name(const char *path)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	return !strncmp(b, "python3", 7) || !strncmp(b, "libpython3", 10);
}

/* Bounds on offsets read from a process (it may lie): what a struct of that kind can be. */
#define DEBUG_OFF_MAX	(1u << 20)	      /* into _PyRuntime or an interpreter */
#define DEBUG_SMALL_MAX 1024		      /* into a thread state, code, bytes or str object */
#define DEBUG_WORDS_MAX 96		      /* _Py_DebugOffsets words read at most */
#define DEBUG_COOKIE	0x7970677562656478ull /* "xdebugpy" */

/* A small offset (thread state, code object, str, bytes) of word i, or -1. */
static int small_off(const uint64_t *w, uint8_t i, uint64_t max)
{
	return w[i] < max ? (int)w[i] : -1;
}

/*
 * Completes l (from the table) with the offsets of the interpreter's own
 * _Py_DebugOffsets at runtime (3.13+), each bounded: 0, or -EPROTO when
 * the process's struct is not what its version's should be.
 */
static int from_debug_offsets(pid_t pid, uint64_t runtime, uint32_t version,
			      struct pyproc_layout *l)
{
	const struct pyproc_debug_words *d = l->debug;
	uint64_t w[DEBUG_WORDS_MAX];
	int v[24], n = 0;

	if (d->count > DEBUG_WORDS_MAX || procmem_read(pid, runtime, w, d->count * sizeof(w[0])))
		return -EFAULT;
	if (w[0] != DEBUG_COOKIE || (w[d->version] >> 16) != version >> 16)
		return -EPROTO;
	if (w[d->rt_interp_head] >= DEBUG_OFF_MAX || w[d->is_threads_head] >= DEBUG_OFF_MAX ||
	    w[d->is_next] >= DEBUG_OFF_MAX || w[d->is_gil_holder] >= DEBUG_OFF_MAX)
		return -EPROTO;
	/* frame offsets: within the bytes the sampler reads of a frame */
	v[n++] = small_off(w, d->fr_previous, TP_PY_FRAME_READ - 8);
	v[n++] = small_off(w, d->fr_code, TP_PY_FRAME_READ - 8);
	v[n++] = small_off(w, d->fr_instr, TP_PY_FRAME_READ - 8);
	v[n++] = small_off(w, d->fr_owner, TP_PY_FRAME_READ - 1);
	v[n++] = small_off(w, d->ts_next, DEBUG_SMALL_MAX);
	v[n++] = small_off(w, d->ts_interp, DEBUG_SMALL_MAX);
	v[n++] = small_off(w, d->ts_frame, DEBUG_SMALL_MAX);
	v[n++] = small_off(w, d->ts_thread_id, DEBUG_SMALL_MAX);
	v[n++] = small_off(w, d->ts_native_tid, DEBUG_SMALL_MAX);
	v[n++] = small_off(w, d->co_filename, DEBUG_SMALL_MAX);
	v[n++] = small_off(w, d->co_name, DEBUG_SMALL_MAX);
	v[n++] = small_off(w, d->co_qualname, DEBUG_SMALL_MAX);
	v[n++] = small_off(w, d->co_linetable, DEBUG_SMALL_MAX);
	v[n++] = small_off(w, d->co_firstlineno, DEBUG_SMALL_MAX);
	v[n++] = small_off(w, d->co_adaptive, DEBUG_SMALL_MAX);
	v[n++] = small_off(w, d->bytes_size, DEBUG_SMALL_MAX);
	v[n++] = small_off(w, d->bytes_data, DEBUG_SMALL_MAX);
	v[n++] = small_off(w, d->str_state, DEBUG_SMALL_MAX);
	v[n++] = small_off(w, d->str_length, DEBUG_SMALL_MAX);
	v[n++] = small_off(w, d->str_ascii_size, DEBUG_SMALL_MAX);
	for (int i = 0; i < n; i++)
		if (v[i] < 0)
			return -EPROTO;
	l->bpf.frame_previous = (uint16_t)v[0];
	l->bpf.frame_code = (uint16_t)v[1];
	l->bpf.frame_instr = (uint16_t)v[2];
	l->bpf.frame_owner = (uint16_t)v[3];
	l->bpf.ts_next = (uint16_t)v[4];
	l->ts_interp = (uint16_t)v[5];
	l->bpf.ts_frame = (uint16_t)v[6];
	l->bpf.ts_thread_id = (uint16_t)v[7];
	l->bpf.ts_native_tid = (uint16_t)v[8];
	l->co_filename = (uint16_t)v[9];
	l->co_name = (uint16_t)v[10];
	l->co_qualname = (uint16_t)v[11];
	l->co_linetable = (uint16_t)v[12];
	l->co_firstlineno = (uint16_t)v[13];
	l->bpf.code_adaptive = (uint16_t)v[14];
	l->bytes_size = (uint16_t)v[15];
	l->bytes_data = (uint16_t)v[16];
	l->str_state = (uint16_t)v[17];
	l->str_length = (uint16_t)v[18];
	l->str_ascii_data = (uint16_t)v[19];
	/* a compact str that is not ASCII: utf8_length and utf8 follow the ASCII header */
	l->str_compact_data = (uint16_t)(v[19] + 16);
	l->runtime_interp = (uint16_t)w[d->rt_interp_head];
	l->bpf.interp_threads_head = (uint16_t)w[d->is_threads_head];
	l->bpf.interp_next = (uint16_t)w[d->is_next];
	l->interp_gil_holder = (uint32_t)w[d->is_gil_holder];
	if (w[d->is_threads_head] > UINT16_MAX || w[d->rt_interp_head] > UINT16_MAX ||
	    w[d->is_next] > UINT16_MAX)
		return -EPROTO; /* the sampler's offsets are 16 bits */
	return 0;
}

static const struct pyproc_layout *layout_of(uint32_t version)
{
	unsigned major = version >> 24, minor = (version >> 16) & 0xff;

	for (size_t i = 0; i < pyproc_nlayouts; i++)
		if (pyproc_layouts[i].major == major && pyproc_layouts[i].minor == minor)
			return &pyproc_layouts[i];
	return NULL;
}

/* The load bias of the file of mapping m: where its file offset 0 is, minus its ELF address. */
static int bias_of(const struct procmem_maps *maps, const struct procmem_map *m, uint64_t vaddr0,
		   uint64_t *bias)
{
	for (size_t i = 0; i < maps->n; i++) {
		const struct procmem_map *x = &maps->maps[i];

		if (x->inode == m->inode && x->dev == m->dev && x->offset == 0) {
			*bias = x->start - vaddr0;
			return 0;
		}
	}
	return -ENOENT;
}

/*
 * The first mapped file named like the interpreter that defines _PyRuntime
 * and Py_Version (an executable linked with libpython is only a launcher):
 * its symbols' values and the load bias in *bias. 0 or -ENOENT.
 */
static int find_runtime(pid_t pid, const struct procmem_maps *maps, uint64_t values[3],
			uint64_t sizes[3], uint64_t *bias)
{
	static const char *const names[] = {"_PyRuntime", "Py_Version", "_PyEval_EvalFrameDefault"};
	uint64_t tried[4] = {0};
	size_t ntried = 0;

	for (size_t i = 0; i < maps->n && ntried < 4; i++) {
		const struct procmem_map *m = &maps->maps[i];
		uint64_t vaddr0 = 0;
		bool seen = false;
		int fd, n;

		if (!procmem_map_is_file(m) || !strchr(m->perms, 'x') || !python_name(m->path))
			continue;
		for (size_t k = 0; k < ntried; k++)
			seen |= tried[k] == m->inode;
		if (seen)
			continue;
		tried[ntried++] = m->inode;
		fd = procmem_open_mapped(pid, m, NULL);
		if (fd < 0)
			continue;
		n = tlsloc_fd_symbols(fd, names, 3, values, sizes, &vaddr0);
		close(fd);
		if (n > 0 && values[0] && values[1] && bias_of(maps, m, vaddr0, bias) == 0)
			return 0;
	}
	return -ENOENT;
}

/*
 * The address of the word that names the GIL's holder, 0 when unknown:
 * 3.11's _PyRuntime.gilstate.tstate_current; 3.13+'s last holder of the
 * main interpreter's GIL (which sub-interpreters share unless made with
 * their own), the main interpreter being the last of the list from head.
 */
static uint64_t gil_holder(pid_t pid, uint64_t runtime, uint64_t head,
			   const struct pyproc_layout *l)
{
	uint64_t interp = head, next = 0;

	if (l->runtime_gil_holder)
		return runtime + l->runtime_gil_holder;
	if (!l->interp_gil_holder || l->bpf.interp_next == TP_PY_NONE)
		return 0;
	for (int i = 0; i < 64; i++, interp = next)
		if (procmem_read(pid, interp + l->bpf.interp_next, &next, sizeof(next)) || !next)
			break;
	return next ? 0 : interp + l->interp_gil_holder;
}

int pyproc_detect(pid_t pid, const struct procmem_maps *maps, struct pyproc *out)
{
	const struct pyproc_layout *l;
	uint64_t values[3], sizes[3], bias = 0, interp = 0, ts = 0, back = 0;
	uint32_t version = 0;
	int err;

	memset(out, 0, sizeof(*out));
	err = find_runtime(pid, maps, values, sizes, &bias);
	if (err)
		return err;
	if (procmem_read(pid, bias + values[1], &version, sizeof(version)))
		return -EFAULT;
	out->version = version;
	l = layout_of(version);
	if (!l)
		return -ENOTSUP;
	out->layout = *l;
	if (l->debug && (err = from_debug_offsets(pid, bias + values[0], version, &out->layout)))
		return err;
	l = &out->layout;
	if (l->co_linetable != l->co_qualname + 8)
		return -ENOTSUP; /* the sampler reads both names in one piece */
	out->bpf = l->bpf;
	out->bpf.interp_head = bias + values[0] + l->runtime_interp;
	out->bpf.code_qualname = l->co_qualname;
	out->bpf.func_module = l->func_module;
	if (values[2] && sizes[2]) {
		out->eval_start = bias + values[2];
		out->eval_end = out->eval_start + sizes[2];
	}
	/* the main interpreter's first thread state must point back at it */
	if (procmem_read(pid, out->bpf.interp_head, &interp, sizeof(interp)) || !interp ||
	    procmem_read(pid, interp + out->bpf.interp_threads_head, &ts, sizeof(ts)) || !ts ||
	    procmem_read(pid, ts + l->ts_interp, &back, sizeof(back)))
		return -EAGAIN;
	if (back != interp)
		return -EPROTO;
	out->bpf.gil_holder = gil_holder(pid, bias + values[0], interp, l);
	return 0;
}

/* ---- code objects ---- */

static void put_utf8(char **p, char *end, uint32_t cp)
{
	char b[4];
	int n;

	if (cp < 0x80)
		b[0] = (char)cp, n = 1;
	else if (cp < 0x800)
		b[0] = (char)(0xc0 | cp >> 6), b[1] = (char)(0x80 | (cp & 0x3f)), n = 2;
	else if (cp < 0x10000 && (cp < 0xd800 || cp > 0xdfff))
		b[0] = (char)(0xe0 | cp >> 12), b[1] = (char)(0x80 | ((cp >> 6) & 0x3f)),
		b[2] = (char)(0x80 | (cp & 0x3f)), n = 3;
	else if (cp >= 0x10000 && cp <= 0x10ffff)
		b[0] = (char)(0xf0 | cp >> 18), b[1] = (char)(0x80 | ((cp >> 12) & 0x3f)),
		b[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), b[3] = (char)(0x80 | (cp & 0x3f)), n = 4;
	else
		b[0] = '?', n = 1; /* a lone surrogate */
	if (end - *p <= n)
		return;
	memcpy(*p, b, (size_t)n);
	*p += n;
}

/*
 * The str object at addr as UTF-8 into buf (size bytes, NUL-terminated,
 * cut at a character boundary). Compact strings only (every identifier and
 * file name the interpreter makes); 0 or -EFAULT.
 */
static int read_str(pid_t pid, const struct pyproc_layout *l, uint64_t addr, char *buf, size_t size)
{
	uint8_t raw[512];
	uint32_t state, kind;
	int64_t len;
	size_t bytes;
	char *p = buf, *end = buf + size;

	buf[0] = 0;
	if (!addr || procmem_read(pid, addr + l->str_state, &state, sizeof(state)) ||
	    procmem_read(pid, addr + l->str_length, &len, sizeof(len)) || len < 0)
		return -EFAULT;
	kind = (state >> 2) & 7;
	if (!((state >> 5) & 1) || (kind != 1 && kind != 2 && kind != 4))
		return -EFAULT; /* not compact, or not a str */
	if ((uint64_t)len > sizeof(raw) / kind)
		len = (int64_t)(sizeof(raw) / kind);
	bytes = (size_t)len * kind;
	if (bytes &&
	    procmem_read(pid, addr + (((state >> 6) & 1) ? l->str_ascii_data : l->str_compact_data),
			 raw, bytes))
		return -EFAULT;
	for (size_t i = 0; i < (size_t)len; i++) {
		uint32_t cp =
		    kind == 1	? raw[i]
		    : kind == 2 ? (uint32_t)(raw[2 * i] | raw[2 * i + 1] << 8)
				: (uint32_t)(raw[4 * i] | raw[4 * i + 1] << 8 |
					     raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24);

		put_utf8(&p, end, cp < 0x20 && cp != '\t' ? '?' : cp);
	}
	*p = 0;
	return 0;
}

/* The code's qualified name, file and table addresses and first line; 0 or -EFAULT. */
static int code_fields(pid_t pid, const struct pyproc_layout *l, uint64_t code, uint64_t *qual,
		       uint64_t *file, uint64_t *table, int32_t *first)
{
	if (!code || procmem_read(pid, code + l->co_qualname, qual, sizeof(*qual)) ||
	    procmem_read(pid, code + l->co_filename, file, sizeof(*file)) ||
	    procmem_read(pid, code + l->co_linetable, table, sizeof(*table)) ||
	    procmem_read(pid, code + l->co_firstlineno, first, sizeof(*first)))
		return -EFAULT;
	return 0;
}

int pycode_read(pid_t pid, const struct pyproc_layout *l, uint64_t code, uint64_t module,
		uint32_t ident, struct pycode **out)
{
	uint64_t qual, file, table, qual2, file2, table2;
	char mod[128] = "", qn[200], fn[512];
	int64_t tlen = 0;
	int32_t first, first2;
	size_t flen, nlen, tbytes = 0;
	struct pycode *c;
	char *p;

	*out = NULL;
	if (code_fields(pid, l, code, &qual, &file, &table, &first))
		return -EFAULT;
	if (tp_py_ident(qual, table) != ident)
		return -ESTALE;
	if (read_str(pid, l, qual, qn, sizeof(qn)) || read_str(pid, l, file, fn, sizeof(fn)))
		return -EFAULT;
	if (module)
		read_str(pid, l, module, mod, sizeof(mod)); /* not a str (rare): no module */
	if (table && !procmem_read(pid, table + l->bytes_size, &tlen, sizeof(tlen)) && tlen > 0 &&
	    (uint64_t)tlen <= LINETABLE_MAX)
		tbytes = (size_t)tlen;
	flen = strlen(fn) + 1;
	nlen = strlen(mod) + 1 + strlen(qn) + 1;
	c = malloc(sizeof(*c) + nlen + flen + tbytes);
	if (!c)
		return -ENOMEM;
	p = (char *)(c + 1);
	snprintf(p, nlen, "%s%s%s", mod, mod[0] ? "." : "", qn);
	c->function = p;
	memcpy(p + nlen, fn, flen);
	c->file = p + nlen;
	c->firstlineno = first;
	c->linetable = NULL;
	c->linetable_len = 0;
	c->bytes = sizeof(*c) + nlen + flen + tbytes;
	if (tbytes && !procmem_read(pid, table + l->bytes_data, p + nlen + flen, tbytes)) {
		c->linetable = (const uint8_t *)(p + nlen + flen);
		c->linetable_len = tbytes;
	}
	/* read again: the code object may have been freed (and reused) while it was read */
	if (code_fields(pid, l, code, &qual2, &file2, &table2, &first2) || qual2 != qual ||
	    file2 != file || table2 != table || first2 != first) {
		free(c);
		return -ESTALE;
	}
	*out = c;
	return 0;
}

/* A varint of the location table: 6 bits a byte, 0x40 says more follow. */
static uint32_t lt_varint(const uint8_t *t, size_t n, size_t *i)
{
	uint32_t v = 0;
	unsigned shift = 0;

	while (*i < n && shift < 32) {
		uint8_t b = t[(*i)++];

		v |= (uint32_t)(b & 0x3f) << shift;
		shift += 6;
		if (!(b & 0x40))
			break;
	}
	return v;
}

static int32_t lt_svarint(const uint8_t *t, size_t n, size_t *i)
{
	uint32_t v = lt_varint(t, n, i);

	return (v & 1) ? -(int32_t)(v >> 1) : (int32_t)(v >> 1);
}

int pycode_line(const struct pycode *c, uint32_t instr)
{
	const uint8_t *t = c->linetable;
	size_t n = c->linetable_len, i = 0;
	uint32_t unit = instr / 2, at = 0;
	int line = c->firstlineno, result = c->firstlineno;

	while (i < n) {
		uint8_t b = t[i++];
		unsigned code = (b >> 3) & 15, len = (b & 7) + 1;
		bool has_line = true;

		if (!(b & 0x80))
			break; /* not the first byte of an entry: a damaged table */
		if (code == 15) {
			has_line = false; /* no location */
		} else if (code == 14) {
			line += lt_svarint(t, n, &i);
			lt_varint(t, n, &i); /* end line */
			lt_varint(t, n, &i); /* column */
			lt_varint(t, n, &i); /* end column */
		} else if (code == 13) {
			line += lt_svarint(t, n, &i);
		} else if (code >= 10) {
			line += (int)code - 10;
			i += 2; /* column, end column */
		} else {
			i += 1; /* short form: column bits */
		}
		if (unit < at + len)
			return has_line ? line : result;
		if (has_line)
			result = line;
		at += len;
	}
	return result;
}

/* ---- the cache ---- */

struct pyentry {
	pid_t pid;	  /* 0: free */
	uint32_t ident;	  /* tp_py_ident the sample saw */
	uint64_t gen;	  /* the process's program generation */
	uint64_t code;	  /* the code object's address */
	uint64_t module;  /* the module name's address, 0 none */
	struct pycode *c; /* owned; NULL: could not be read (not tried again) */
};

struct pycache {
	struct pyentry *slots; /* PYCACHE_SLOTS, open addressing */
	size_t n;	       /* entries */
	size_t budget;	       /* bytes at most */
	uint64_t epoch;	       /* bumped at each flush: processes' counts older than it are 0 */
	struct pycache_stats st;
};

#define PYCACHE_SLOTS (2 * PYCACHE_MAX)
#define ENTRY_BYTES   (sizeof(struct pyentry) * 2) /* an entry's share of the slot table */

struct pycache *pycache_new(size_t budget_bytes)
{
	struct pycache *pc = calloc(1, sizeof(*pc));

	if (pc && !(pc->slots = calloc(PYCACHE_SLOTS, sizeof(*pc->slots)))) {
		free(pc);
		return NULL;
	}
	if (pc) {
		pc->budget = budget_bytes;
		pc->epoch = 1;
		pc->st.budget_bytes = budget_bytes;
	}
	return pc;
}

static size_t entry_bytes(const struct pyentry *e)
{
	return ENTRY_BYTES + (e->c ? e->c->bytes : 0);
}

static void flush(struct pycache *pc)
{
	for (size_t i = 0; i < PYCACHE_SLOTS; i++) {
		if (pc->slots[i].pid)
			free(pc->slots[i].c);
		pc->slots[i].pid = 0;
		pc->slots[i].c = NULL;
	}
	pc->n = 0;
	pc->st.bytes = 0;
	pc->epoch++;
}

void pycache_free(struct pycache *pc)
{
	if (!pc)
		return;
	flush(pc);
	free(pc->slots);
	free(pc);
}

static size_t slot_of(pid_t pid, uint64_t gen, uint64_t code, uint64_t module, uint32_t ident)
{
	uint64_t h = code ^ ((uint64_t)pid << 32) ^ (gen * 0x9e3779b97f4a7c15ull) ^
		     (module * 0xc2b2ae3d27d4eb4full) ^ ident;

	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return (size_t)h & (PYCACHE_SLOTS - 1);
}

static size_t *proc_bytes(const struct pycache *pc, struct pyproc *pp)
{
	if (pp->cache_epoch != pc->epoch) {
		pp->cache_epoch = pc->epoch;
		pp->cache_bytes = 0;
	}
	return &pp->cache_bytes;
}

const struct pycode *pycache_get(struct pycache *pc, pid_t pid, uint64_t gen, struct pyproc *pp,
				 const __u64 f[TP_PY_WORDS])
{
	uint32_t ident = (uint32_t)(f[2] >> TP_PY_IDENT_SHIFT);
	size_t i = slot_of(pid, gen, f[0], f[1], ident), need;
	struct pycode *c = NULL;
	struct pyentry *e;
	int err;

	for (;; i = (i + 1) & (PYCACHE_SLOTS - 1)) {
		e = &pc->slots[i];
		if (!e->pid)
			break;
		if (e->pid == pid && e->gen == gen && e->code == f[0] && e->module == f[1] &&
		    e->ident == ident) {
			pc->st.hits++;
			return e->c;
		}
	}
	pc->st.misses++;
	err = pycode_read(pid, &pp->layout, f[0], f[1], ident, &c);
	/* kept as unreadable either way: the key holds the identity the sample saw */
	pc->st.stale += err == -ESTALE;
	pc->st.faults += err && err != -ESTALE;
	need = ENTRY_BYTES + (c ? c->bytes : 0);
	if (*proc_bytes(pc, pp) + need > pc->budget / PYCACHE_SHARE) {
		pc->st.share_evicts++;
		pycache_forget(pc, pid);
		pp->cache_bytes = 0;
	}
	if (pc->n >= PYCACHE_MAX || pc->st.bytes + need > pc->budget) {
		pc->st.flushes++;
		flush(pc);
	}
	if (need > pc->budget / PYCACHE_SHARE) {
		free(c); /* larger than any share: named, not kept */
		c = NULL;
		pc->st.faults++;
		return NULL;
	}
	for (i = slot_of(pid, gen, f[0], f[1], ident); pc->slots[i].pid;
	     i = (i + 1) & (PYCACHE_SLOTS - 1))
		;
	e = &pc->slots[i];
	*e = (struct pyentry){
	    .pid = pid, .ident = ident, .gen = gen, .code = f[0], .module = f[1], .c = c};
	pc->n++;
	pc->st.bytes += need;
	*proc_bytes(pc, pp) += need;
	return c;
}

void pycache_forget(struct pycache *pc, pid_t pid)
{
	bool any = false;

	for (size_t i = 0; i < PYCACHE_SLOTS && !any; i++)
		any = pc->slots[i].pid == pid;
	if (!any)
		return;
	/* open addressing: rebuild without the process (exits are rare next to samples) */
	for (size_t i = 0; i < PYCACHE_SLOTS; i++) {
		struct pyentry *e = &pc->slots[i];

		if (e->pid == pid) {
			pc->st.bytes -= entry_bytes(e);
			free(e->c);
			e->c = NULL;
			e->pid = 0;
			pc->n--;
		}
	}
	for (size_t i = 0; i < PYCACHE_SLOTS; i++) {
		struct pyentry e = pc->slots[i];
		size_t j;

		if (!e.pid)
			continue;
		pc->slots[i].pid = 0;
		for (j = slot_of(e.pid, e.gen, e.code, e.module, e.ident); pc->slots[j].pid;
		     j = (j + 1) & (PYCACHE_SLOTS - 1))
			;
		pc->slots[j] = e;
	}
}

void pycache_get_stats(const struct pycache *pc, struct pycache_stats *out)
{
	*out = pc->st;
}
