// SPDX-License-Identifier: GPL-2.0
/*
 * zerocode.bpf.c - HTTP/1.x requests found from system calls
 * (docs/zero-code-http.md), part of the sampler's object: sampler.bpf.c
 * declares the per-thread state (zc_threads, read by read_thread_ctx) and
 * includes this file.
 *
 * Two hooks, chosen per process (zc_targets' value): uprobes on the
 * libc wrappers of the followed calls, attached to that process alone
 * (on_zc_uenter, on_zc_uexit; the call's number is the attach cookie),
 * or, for a process without a libc found (static, Go, musl), two programs
 * on the raw syscall tracepoints, attached only while some process uses
 * them. Both run the same code: for a target's thread, the call's entry
 * keeps its fd and buffer; the return of a read-like call
 * on a TCP socket that brought a request line opens a request on the
 * thread: its trace context (from the head's traceparent, else a new
 * trace) tags the thread's samples from then on. The status line written
 * back marks it answered; the thread's next read on that connection,
 * close, shutdown or accept ends it, and a TP_REC_HTTP record carries it
 * to the agent, which writes the request row.
 */

#define ZC_HEAD 2048 /* bytes of a request head looked at */
#define ZC_BUF	4096 /* the scratch buffer (a power of two: indexes are masked) */

/* x86-64 system call numbers */
#define ZC_NR_READ     0
#define ZC_NR_WRITE    1
#define ZC_NR_CLOSE    3
#define ZC_NR_READV    19
#define ZC_NR_WRITEV   20
#define ZC_NR_SENDFILE 40
#define ZC_NR_ACCEPT   43
#define ZC_NR_SENDTO   44
#define ZC_NR_RECVFROM 45
#define ZC_NR_SENDMSG  46
#define ZC_NR_RECVMSG  47
#define ZC_NR_SHUTDOWN 48
#define ZC_NR_ACCEPT4  288

#define ZC_S_IFMT   0170000
#define ZC_S_IFSOCK 0140000
#define ZC_AF_INET  2
#define ZC_AF_INET6 10

/* A request head, copied from user memory (per CPU). */
struct zc_scratch {
	char b[ZC_BUF];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct zc_scratch);
} zc_scratch SEC(".maps");

/* Whether fd of task is a TCP socket (IPv4 or IPv6). */
static __always_inline bool zc_is_tcp(struct task_struct *task, __u32 fd)
{
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds;
	struct socket *sock;
	struct file *f = NULL;
	__u16 family;
	short type;

	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return false;
	fds = BPF_CORE_READ(fdt, fd);
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return false;
	if ((BPF_CORE_READ(f, f_inode, i_mode) & ZC_S_IFMT) != ZC_S_IFSOCK)
		return false;
	sock = (struct socket *)BPF_CORE_READ(f, private_data);
	if (!sock)
		return false;
	type = BPF_CORE_READ(sock, type);
	family = BPF_CORE_READ(sock, sk, __sk_common.skc_family);
	return type == 1 /* SOCK_STREAM */ && (family == ZC_AF_INET || family == ZC_AF_INET6);
}

/* The length of the method the head starts with ("GET " ...: with its space), or 0. */
static __always_inline int zc_method(const char *b)
{
	if (b[0] == 'G' && b[1] == 'E' && b[2] == 'T' && b[3] == ' ')
		return 4;
	if (b[0] == 'P' && b[1] == 'U' && b[2] == 'T' && b[3] == ' ')
		return 4;
	if (b[0] == 'P' && b[1] == 'O' && b[2] == 'S' && b[3] == 'T' && b[4] == ' ')
		return 5;
	if (b[0] == 'H' && b[1] == 'E' && b[2] == 'A' && b[3] == 'D' && b[4] == ' ')
		return 5;
	if (b[0] == 'P' && b[1] == 'A' && b[2] == 'T' && b[3] == 'C' && b[4] == 'H' && b[5] == ' ')
		return 6;
	if (b[0] == 'D' && b[1] == 'E' && b[2] == 'L' && b[3] == 'E' && b[4] == 'T' &&
	    b[5] == 'E' && b[6] == ' ')
		return 7;
	if (b[0] == 'O' && b[1] == 'P' && b[2] == 'T' && b[3] == 'I' && b[4] == 'O' &&
	    b[5] == 'N' && b[6] == 'S' && b[7] == ' ')
		return 8;
	return 0;
}

/* A lower-case hex digit's value, or -1. */
static __always_inline int zc_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

struct zc_find {
	const char *b;
	__u32 n;
	__u32 at;  /* index of the value after "traceparent:", 0: not found */
	__u32 end; /* index after the blank line that ends the head, 0: not in b */
	__u8 two;  /* a second traceparent line: neither is adopted (W3C) */
};

/*
 * bpf_loop over the head's bytes: at each line start, the blank line that
 * ends the head (the loop stops there: a body is never searched) or
 * "traceparent:" (any case; a second one sets two).
 */
static long zc_find_tp(__u32 i, void *arg)
{
	static const char name[12] = "traceparent:";
	struct zc_find *f = arg;
	char c;

	if (i + 1 >= f->n)
		return 1;
	if (f->b[i & (ZC_BUF - 1)] != '\n')
		return 0;
	c = f->b[(i + 1) & (ZC_BUF - 1)];
	if (c == '\n' || (c == '\r' && i + 2 < f->n && f->b[(i + 2) & (ZC_BUF - 1)] == '\n')) {
		f->end = i + (c == '\n' ? 2 : 3);
		return 1;
	}
	if (i + 13 > f->n)
		return 0;
	for (int k = 0; k < 12; k++) {
		c = f->b[(i + 1 + k) & (ZC_BUF - 1)];
		if (c >= 'A' && c <= 'Z')
			c += 'a' - 'A';
		if (c != name[k])
			return 0;
	}
	if (f->at)
		f->two = 1;
	else
		f->at = i + 13;
	return 0;
}

struct zc_line {
	const char *b;
	__u32 n;
	__u32 from; /* the request target's first byte */
	__u32 sp;   /* the space after the target, 0: none (yet) */
	__u8 bad;   /* the line ended (CR, LF) before that space */
};

/* bpf_loop: the end of the request target (the space before the version). */
static long zc_find_sp(__u32 i, void *arg)
{
	struct zc_line *l = arg;
	__u32 j = l->from + i;
	char c;

	if (j >= l->n)
		return 1;
	c = l->b[j & (ZC_BUF - 1)];
	if (c == ' ') {
		l->sp = j;
		return 1;
	}
	if (c == '\r' || c == '\n') {
		l->bad = 1;
		return 1;
	}
	return 0;
}

enum zc_line_kind { ZC_LINE_OK, ZC_LINE_BAD, ZC_LINE_SPLIT };

/*
 * Whether the head b (n bytes read) holds a whole request line after its
 * method (m bytes with the space): "target SP HTTP/1.D" then CRLF or LF.
 * ZC_LINE_SPLIT: the read ended before the line did (and it was shorter
 * than the ZC_HEAD bytes looked at: a head sent in pieces).
 */
static __always_inline int zc_request_line(const char *b, __u32 n, __u32 m)
{
	struct zc_line l = {.b = b, .n = n, .from = m};
	__u32 v;

	bpf_loop(ZC_HEAD, zc_find_sp, &l, 0);
	if (l.bad)
		return ZC_LINE_BAD;
	if (!l.sp)
		return n < ZC_HEAD ? ZC_LINE_SPLIT : ZC_LINE_BAD;
	v = l.sp + 1;
	if (v + 9 > n)
		return n < ZC_HEAD ? ZC_LINE_SPLIT : ZC_LINE_BAD;
	if (b[v & (ZC_BUF - 1)] != 'H' || b[(v + 1) & (ZC_BUF - 1)] != 'T' ||
	    b[(v + 2) & (ZC_BUF - 1)] != 'T' || b[(v + 3) & (ZC_BUF - 1)] != 'P' ||
	    b[(v + 4) & (ZC_BUF - 1)] != '/' || b[(v + 5) & (ZC_BUF - 1)] != '1' ||
	    b[(v + 6) & (ZC_BUF - 1)] != '.' || b[(v + 7) & (ZC_BUF - 1)] < '0' ||
	    b[(v + 7) & (ZC_BUF - 1)] > '9')
		return ZC_LINE_BAD;
	if (b[(v + 8) & (ZC_BUF - 1)] == '\n')
		return ZC_LINE_OK;
	if (b[(v + 8) & (ZC_BUF - 1)] != '\r')
		return ZC_LINE_BAD;
	if (v + 10 > n)
		return ZC_LINE_SPLIT;
	return b[(v + 9) & (ZC_BUF - 1)] == '\n' ? ZC_LINE_OK : ZC_LINE_BAD;
}

/*
 * Whether the traceparent field value at p (its flags end at p + 55) ends
 * as version's rules say: version 00 with a blank or the end of the line
 * (what follows a blank is not looked at: the verifier's budget); a later
 * version may also go on with '-' and more fields.
 */
static __always_inline bool zc_tp_end(const char *b, __u32 n, __u32 p, bool v00)
{
	char c = p + 55 < n ? b[(p + 55) & (ZC_BUF - 1)] : 0;

	return c == '\r' || c == '\n' || c == ' ' || c == '\t' || (c == '-' && !v00);
}

/*
 * The traceparent of the head b (n bytes) whose value starts at at (0:
 * none), strict (the SDK's rules, tp_sdk_traceparent_parse): trace id,
 * parent span id and flags into t. Returns whether a valid one was found.
 */
static __always_inline bool zc_traceparent(const char *b, __u32 n, __u32 at, struct zc_thread *t)
{
	__u8 x = 0, any_t = 0, any_s = 0;
	__u32 p;
	int h, l;

	if (!at)
		return false;
	p = at;
	for (int k = 0;
	     k < 8 && p < n && (b[p & (ZC_BUF - 1)] == ' ' || b[p & (ZC_BUF - 1)] == '\t'); k++)
		p++;
	if (p + 55 > n)
		return false;
	/* version: two hex digits, not ff; the version-00 layout is read */
	h = zc_hex(b[p & (ZC_BUF - 1)]);
	l = zc_hex(b[(p + 1) & (ZC_BUF - 1)]);
	if (h < 0 || l < 0 || (h == 15 && l == 15) || b[(p + 2) & (ZC_BUF - 1)] != '-' ||
	    b[(p + 35) & (ZC_BUF - 1)] != '-' || b[(p + 52) & (ZC_BUF - 1)] != '-' ||
	    !zc_tp_end(b, n, p, h == 0 && l == 0))
		return false;
	for (int k = 0; k < 16; k++) {
		h = zc_hex(b[(p + 3 + 2 * k) & (ZC_BUF - 1)]);
		l = zc_hex(b[(p + 4 + 2 * k) & (ZC_BUF - 1)]);
		if (h < 0 || l < 0)
			return false;
		x = (__u8)(h << 4 | l);
		t->hdr.trace_id[k] = x;
		any_t |= x;
	}
	for (int k = 0; k < 8; k++) {
		h = zc_hex(b[(p + 36 + 2 * k) & (ZC_BUF - 1)]);
		l = zc_hex(b[(p + 37 + 2 * k) & (ZC_BUF - 1)]);
		if (h < 0 || l < 0)
			return false;
		x = (__u8)(h << 4 | l);
		t->parent_span_id[k] = x;
		any_s |= x;
	}
	h = zc_hex(b[(p + 53) & (ZC_BUF - 1)]);
	l = zc_hex(b[(p + 54) & (ZC_BUF - 1)]);
	if (h < 0 || l < 0 || !any_t || !any_s)
		return false;
	t->hdr.trace_flags = (__u8)(h << 4 | l);
	return true;
}

static __always_inline void zc_random(__u8 *out, int n)
{
	__u32 v;

	for (int k = 0; k < n; k += 4) {
		v = bpf_get_prandom_u32();
		__builtin_memcpy(out + k, &v, 4);
	}
	out[0] |= 1; /* never all zero */
}

/* The thread's request ends at end_ns: its record into the ring; the thread untagged. */
#define ZC_WAKE_GAP_NS 5000000ull /* the least time between two wakeups for requests */
__u64 zc_last_wake_ns = 0;	  /* the last one (CPUs race on it: a wakeup more, at worst) */

static __always_inline void zc_end(struct zc_thread *t, __u64 end_ns, __u16 flags)
{
	struct counter_set *c = counters_here();
	struct task_struct *task = bpf_get_current_task_btf();
	struct tp_sample *s;
	struct tp_http *h;
	__u64 now;

	t->active = 0;
	s = bpf_ringbuf_reserve(&samples, 64 + sizeof(struct tp_http), 0);
	if (!s) {
		if (c)
			c->n[TP_CNT_HTTP_LOST]++;
		return;
	}
	s->kind = TP_REC_HTTP;
	s->py_n = 0;
	s->time_ns = end_ns;
	s->cgroup_id = 0;
	s->pid = task->tgid;
	s->tid = task->pid;
	__builtin_memcpy(s->trace_id, t->hdr.trace_id, sizeof(s->trace_id));
	__builtin_memcpy(s->span_id, t->hdr.span_id, sizeof(s->span_id));
	s->ctx_state = TP_CTX_TAGGED;
	s->trace_flags = t->hdr.trace_flags;
	s->hz = 0;
	s->kern_n = 0;
	s->user_n = 0;
	s->flags = TP_SAMPLE_CTX_HTTP;
	s->off_us = t->status;
	h = (struct tp_http *)s->ips;
	h->start_ns = t->start_ns;
	__builtin_memcpy(h->parent_span_id, t->parent_span_id, 8);
	h->fd = t->fd;
	h->flags = t->flags | flags | (t->answered ? 0 : TP_HTTP_UNANSWERED);
	h->target_len = t->target_len;
	__builtin_memcpy(h->method, t->method, sizeof(h->method));
	__builtin_memcpy(h->target, t->target, sizeof(h->target));
	/*
	 * The reader is woken for a request (samples are batched): a trigger
	 * waits for requests to claim them, and the samples before this record
	 * (submitted without a wakeup) would keep the kernel's adaptive wakeup
	 * from firing. At most once every ZC_WAKE_GAP_NS, though: a wakeup per
	 * request of a busy server would cost its CPUs more than the capture;
	 * the agent's loop sleeps at most ZC_POLL_MS while zero-code
	 * processes exist, which bounds a record's wait.
	 */
	now = bpf_ktime_get_ns();
	if (now - zc_last_wake_ns >= ZC_WAKE_GAP_NS) {
		zc_last_wake_ns = now;
		bpf_ringbuf_submit(s, BPF_RB_FORCE_WAKEUP);
	} else {
		bpf_ringbuf_submit(s, BPF_RB_NO_WAKEUP);
	}
	if (c)
		c->n[TP_CNT_HTTP_REQUESTS]++;
}

/*
 * Whether the head b (n bytes) is one request: its request line whole
 * (else counted: bad, or split over reads) and no second request line
 * right after its blank line (pipelining: counted, neither taken, since
 * the second one's work would carry the first one's trace). Fills f (the
 * traceparent's place, the head's end).
 */
static __always_inline bool zc_head_ok(const char *b, __u32 n, __u32 m, struct zc_find *f)
{
	const char *next;
	int line = zc_request_line(b, n, m);
	__u32 e, m2;

	if (line != ZC_LINE_OK) {
		count(line == ZC_LINE_SPLIT ? TP_CNT_HTTP_SPLIT : TP_CNT_HTTP_BAD_LINE);
		return false;
	}
	bpf_loop(ZC_HEAD, zc_find_tp, f, 0);
	e = f->end;
	if (!e || e >= n)
		return true;
	next = b + (e & (ZC_HEAD - 1));
	m2 = zc_method(next);
	if (m2 && e + m2 < n && (next[m2 & 15] == '/' || next[m2 & 15] == '*')) {
		count(TP_CNT_HTTP_PIPELINED);
		return false;
	}
	return true;
}

/* The end of a read-like call of the thread: maybe a request line. */
static __always_inline void zc_read_done(struct zc_thread *t, struct task_struct *task, __u32 fd,
					 __u64 buf, long ret)
{
	struct zc_scratch *sc;
	struct zc_find f = {};
	__u32 zero = 0, n, m, k;
	char c;

	if (t->active && fd == t->fd)
		return; /* the rest of its head, or its body */
	if (!zc_is_tcp(task, fd))
		return;
	sc = bpf_map_lookup_elem(&zc_scratch, &zero);
	if (!sc)
		return;
	n = ret > ZC_HEAD ? ZC_HEAD : (__u32)ret;
	__builtin_memset(sc->b, 0, 16); /* a short read never matches what an earlier one left */
	if (bpf_probe_read_user(sc->b, n & (ZC_BUF - 1), (void *)buf))
		return;
	m = zc_method(sc->b);
	if (!m || m >= n ||
	    (sc->b[m & 15] != '/' && sc->b[m & 15] != '*' && sc->b[m & 15] != 'h')) {
		/* not a request line: garbage, TLS, another protocol; with a
		 * request open, a downstream call's answer (not counted) */
		if (!t->active)
			count(TP_CNT_HTTP_NOT_HEAD);
		return;
	}
	if (t->active || t->multiplexed) {
		/* a second connection's request while one is open: an event loop */
		count(TP_CNT_HTTP_MULTIPLEX);
		if (t->active)
			zc_end(t, bpf_ktime_get_ns(), TP_HTTP_MULTIPLEXED);
		t->multiplexed = 1;
		return;
	}
	f.b = sc->b;
	f.n = n;
	if (!zc_head_ok(sc->b, n, m, &f))
		return;
	__builtin_memset(t->method, 0, sizeof(t->method));
	for (k = 0; k + 1 < m && k < sizeof(t->method); k++)
		t->method[k] = sc->b[k];
	t->flags = 0;
	t->target_len = 0;
	for (k = 0; k < TP_HTTP_TARGET; k++) {
		c = sc->b[(m + k) & (ZC_BUF - 1)];
		if (m + k >= n || c == ' ' || c == '?' || c == '\r' || c == '\n')
			break;
		t->target[k] = c;
		t->target_len = k + 1;
	}
	if (k == TP_HTTP_TARGET)
		t->flags |= TP_HTTP_TRUNCATED;
	if (!f.end)
		count(TP_CNT_HTTP_HEAD_CUT); /* a traceparent after the bytes read is not seen */
	if (!f.two && zc_traceparent(sc->b, n, f.at, t)) {
		t->flags |= TP_HTTP_TRACEPARENT;
	} else {
		if (f.at)
			count(TP_CNT_HTTP_BAD_TRACEPARENT); /* refused: a new trace */
		zc_random(t->hdr.trace_id, 16);
		__builtin_memset(t->parent_span_id, 0, 8);
		t->hdr.trace_flags = 1;
	}
	zc_random(t->hdr.span_id, 8);
	t->hdr.valid = 1;
	t->fd = fd;
	t->status = 0;
	t->answered = 0;
	t->start_ns = bpf_ktime_get_ns();
	t->last_write_ns = t->start_ns;
	t->active = 1;
}

/* The first iovec's base of an iovec array at iov (user memory), or 0. */
static __always_inline __u64 zc_iov_base(__u64 iov)
{
	__u64 base = 0;

	if (iov)
		bpf_probe_read_user(&base, sizeof(base), (void *)iov);
	return base;
}

/* The iovec array of a struct user_msghdr at msg (user memory), or 0. */
static __always_inline __u64 zc_msg_iov(__u64 msg)
{
	__u64 iov = 0;

	if (msg)
		bpf_probe_read_user(&iov, sizeof(iov),
				    (char *)msg + __builtin_offsetof(struct user_msghdr, msg_iov));
	return iov;
}

/* A write-like call of the thread on fd with data at buf begins. */
static __always_inline void zc_write(struct zc_thread *t, __u32 fd, __u64 buf)
{
	char h[16];
	int st = 0;

	if (!t->active || fd != t->fd || t->answered || !buf)
		return;
	if (bpf_probe_read_user(h, sizeof(h), (void *)buf))
		return;
	if (h[0] != 'H' || h[1] != 'T' || h[2] != 'T' || h[3] != 'P' || h[4] != '/' ||
	    h[5] != '1' || h[6] != '.' || h[8] != ' ')
		return;
	for (int k = 9; k < 12; k++) {
		if (h[k] < '0' || h[k] > '9')
			return;
		st = st * 10 + (h[k] - '0');
	}
	t->status = (__u16)st;
	t->answered = 1;
}

/*
 * Whether the programs follow system call nr: the read-like ones (whose
 * state sys_exit reads), and with reads_only false also the write-like
 * ones and those that can end a request, all seen at their start only.
 */
static __always_inline bool zc_followed(__u64 nr, bool reads_only)
{
	switch (nr) {
	case ZC_NR_READ:
	case ZC_NR_RECVFROM:
	case ZC_NR_READV:
	case ZC_NR_RECVMSG:
		return true;
	case ZC_NR_WRITE:
	case ZC_NR_SENDTO:
	case ZC_NR_WRITEV:
	case ZC_NR_SENDMSG:
	case ZC_NR_SENDFILE:
	case ZC_NR_CLOSE:
	case ZC_NR_SHUTDOWN:
	case ZC_NR_ACCEPT:
	case ZC_NR_ACCEPT4:
		return !reads_only;
	default:
		return false;
	}
}

/*
 * A followed call nr of a target thread begins, with its first two
 * arguments (the libc wrappers take them in the system call's order).
 */
static __always_inline void zc_call_enter(struct task_struct *task, __u32 epoch, long id, __u32 fd,
					  __u64 a1)
{
	struct zc_thread *t;

	t = bpf_task_storage_get(&zc_threads, task, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!t) {
		count(TP_CNT_HTTP_NO_STATE);
		return;
	}
	if (t->epoch != epoch) {
		/* capture of the process stopped and started again since the
		 * thread's state was set: a request open then is stale */
		if (t->active)
			count(TP_CNT_HTTP_STALE);
		t->active = 0;
		t->epoch = epoch;
	}
	t->c_nr = 0;
	switch (id) {
	case ZC_NR_READ:
	case ZC_NR_RECVFROM:
	case ZC_NR_READV:
	case ZC_NR_RECVMSG:
		/* the next request on a kept-alive connection: the answered one ends */
		if (t->active && t->answered && fd == t->fd)
			zc_end(t, t->last_write_ns, 0);
		if (id == ZC_NR_READV)
			a1 = zc_iov_base(a1);
		else if (id == ZC_NR_RECVMSG)
			a1 = zc_iov_base(zc_msg_iov(a1));
		t->c_buf = a1;
		break;
	case ZC_NR_WRITE:
	case ZC_NR_SENDTO:
	case ZC_NR_WRITEV:
	case ZC_NR_SENDMSG:
	case ZC_NR_SENDFILE:
		/*
		 * Only the entry: a write's start stamps the request's end so
		 * far (no return probe, one trap a write less; the last write's
		 * own time is left out: at most a socket buffer's drain)
		 */
		if (id == ZC_NR_WRITEV)
			a1 = zc_iov_base(a1);
		else if (id == ZC_NR_SENDMSG)
			a1 = zc_iov_base(zc_msg_iov(a1));
		if (id != ZC_NR_SENDFILE)
			zc_write(t, fd, a1);
		if (t->active && fd == t->fd)
			t->last_write_ns = bpf_ktime_get_ns();
		return;
	default: /* close, shutdown, accept */
		if (t->active &&
		    (id == ZC_NR_ACCEPT || id == ZC_NR_ACCEPT4 ? t->answered : fd == t->fd))
			zc_end(t, t->answered ? t->last_write_ns : bpf_ktime_get_ns(), 0);
		return;
	}
	t->c_fd = fd;
	t->c_nr = (__u32)id + 1;
}

/* The read zc_call_enter kept state for returns ret (< 0: failed, either hook). */
static __always_inline void zc_call_exit(struct task_struct *task, long ret)
{
	struct zc_thread *t = bpf_task_storage_get(&zc_threads, task, NULL, 0);

	if (!t || !t->c_nr)
		return;
	t->c_nr = 0;
	if (ret <= 0)
		return;
	zc_read_done(t, task, t->c_fd, t->c_buf, ret); /* only reads keep state */
}

/* The current process's entry when it is a target followed by hook, else NULL. */
static __always_inline struct tp_zc_target *zc_hooked(__u8 hook)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct tp_zc_target *z = bpf_map_lookup_elem(&zc_targets, &tgid);

	return z && z->hook == hook ? z : NULL;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(on_zc_enter, struct pt_regs *regs, long id)
{
	struct tp_zc_target *z;

	/* first the call (a compare), then the process (a hash lookup) */
	if (!zc_followed(id, false) || !(z = zc_hooked(TP_ZC_HOOK_SYSCALLS)))
		return 0;
	zc_call_enter(bpf_get_current_task_btf(), z->epoch, id, (__u32)BPF_CORE_READ(regs, di),
		      BPF_CORE_READ(regs, si));
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_zc_exit, struct pt_regs *regs, long ret)
{
	/* a call sys_enter kept state for (orig_ax: the call's number), then the process */
	if (!zc_followed(BPF_CORE_READ(regs, orig_ax), true) || !zc_hooked(TP_ZC_HOOK_SYSCALLS))
		return 0;
	zc_call_exit(bpf_get_current_task_btf(), ret);
	return 0;
}

/*
 * The libc wrapper of a followed call, in a process whose hook is libc
 * (the uprobe is attached to that process only); the cookie is the
 * call's number. The wrappers return -1 with errno set on failure.
 */
SEC("uprobe")
int BPF_KPROBE(on_zc_uenter, long a0, long a1)
{
	struct tp_zc_target *z = zc_hooked(TP_ZC_HOOK_LIBC);

	if (!z)
		return 0;
	zc_call_enter(bpf_get_current_task_btf(), z->epoch, (long)bpf_get_attach_cookie(ctx),
		      (__u32)a0, (__u64)a1);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(on_zc_uexit, long ret)
{
	if (!zc_hooked(TP_ZC_HOOK_LIBC))
		return 0;
	zc_call_exit(bpf_get_current_task_btf(), ret);
	return 0;
}
