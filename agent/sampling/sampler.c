/*
 * sampler.c - loads the BPF CPU sampler (bpf/sampler.bpf.c through its
 * skeleton) and delivers its samples.
 *
 * Order: open the skeleton -> configure (rodata options, map sizes) -> load
 * -> attach (exit tracepoint, one CPU-clock perf event per online CPU with
 * the event's Hz as bpf cookie) -> poll or drain; sampler_free is the one
 * cleanup path, and every failure in sampler_open goes through it.
 *
 * The workload: 19-100 samples per second per CPU, a few hundred processes
 * and uprobe targets at most, so the tables here are small fixed arrays.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "loader_probe.h"
#include "offcpu_attach.h"
#include "sampler.skel.h"
#include "tlsloc.h"
#include "traceprof/cuda_ring.h"
#include "traceprof/log.h"
#include "zc_attach.h"

#include "sampler.h"

#define SDK_PROBE_FUNC	  "tp_sdk_probe_thread_registered"
#define KERNEL_BTF	  "/sys/kernel/btf/vmlinux"
#define CPUS_ONLINE	  "/sys/devices/system/cpu/online"
#define PARANOID	  "/proc/sys/kernel/perf_event_paranoid"
#define DEFAULT_HZ	  19
#define MIN_RING	  (1u << 20)   /* the default ring's least size */
#define RING_PER_CPU	  (128u << 10) /* the default ring's size per possible CPU */
#define RAISED_INITIAL_HZ 99	       /* the raised events' frequency until sampler_set_raised */
#define CAP_SYS_ADMIN_B	  21
#define CAP_PERFMON_B	  38
#define CAP_BPF_B	  39
#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL /* linux/pidfd.h since Linux 6.9 */
#endif

/* the header stays 64 bytes: flags took spare room (bpf/sampler.h) */
_Static_assert(offsetof(struct tp_sample, ips) == 64, "tp_sample header size");
_Static_assert(TP_SAMPLE_USER_BYTES == offsetof(struct tp_sample, ips) + TP_MAX_FRAMES * 8,
	       "a user-mode sample's ring record");

/* One attached registration uprobe. */
struct sdk_uprobe {
	char *path;	       /* ELF file the probe is in; owned */
	pid_t pid;	       /* process filter, -1 for all */
	struct bpf_link *link; /* the attachment; owned */
};

struct sampler {
	struct sampler_bpf *skel;	/* the loaded BPF object; owned */
	struct sampler_opts opts;	/* options with defaults filled in */
	struct bpf_link **cpu_links;	/* one perf event link per online CPU */
	int ncpu_links;			/* entries used in cpu_links */
	struct bpf_link **raised_links; /* raised events, one per online CPU */
	int *raised_fds;		/* their perf event fds (owned by the links) */
	int *cpu_fds;			/* the base events' fds (owned by cpu_links) */
	int nraised;			/* entries used in raised_links/fds */
	unsigned raised_hz;		/* 0: raised events disabled */
	struct bpf_link *exit_link;	/* on_sched_process_exit attachment */
	struct bpf_link *exec_link;	/* on_sched_process_exec attachment */
	struct bpf_link *fork_link;	/* on_sched_process_fork attachment */
	sampler_event_fn event_cb;	/* told about execs and exits, or NULL */
	void *event_ctx;		/* its context */
	struct ring_buffer *ring;	/* the sample ring's reader; owned */
	int wake_fd;			/* eventfd: sampler_wake ends a sampler_poll early */
	struct zc_attach zc;		/* zero-code HTTP hooks, per process */
	long clock_ticks;		/* sysconf(_SC_CLK_TCK): /proc's start time unit */
	sampler_sample_fn poll_cb;	/* callback of the sampler_poll running */
	void *poll_ctx;			/* its context */
	int poll_n;			/* samples delivered by this poll */
	struct sdk_uprobe uprobes[SAMPLER_MAX_UPROBES]; /* attached registration uprobes */
	int nuprobes;					/* entries used in uprobes */
	/*
	 * Off-CPU targets of triggers (sampler_set_offcpu_targets). The
	 * scheduler programs must be attached while offcpu_targets_n > 0
	 * even when the mode of sampler_set_offcpu is OFF, and may be
	 * detached only when both are off, so each of the two functions
	 * reads the other's state before it attaches or detaches them.
	 */
	size_t offcpu_targets_n;	/* processes in the offcpu_targets map */
	uint32_t offcpu_targets_min_us; /* their threshold; 0 when none */
	unsigned offcpu_mode;		/* sampler_set_offcpu's mode */
	uint32_t offcpu_min_us;		/* and threshold */
	size_t unwind_rows;		/* rows of the unwind area; 0: no CFI unwinding */
	struct loader_probes loaders;	/* the loader rendezvous uprobe, per loader file */
	struct loader_probes gpu;	/* the CUDA launch marker's uprobe, per library file */
	struct offcpu_links offcpu;	/* off-CPU programs while capture is on */
};

static int libbpf_to_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	log_vmsg(level == LIBBPF_WARN ? TP_LOG_WARN : TP_LOG_DEBUG, fmt, ap);
	return 0;
}

static int read_int_file(const char *path, long *v)
{
	FILE *f = fopen(path, "r");
	int ok;

	if (!f)
		return -errno;
	ok = fscanf(f, "%ld", v) == 1;
	fclose(f);
	return ok ? 0 : -EINVAL;
}

/* Whether the effective capability set holds bit cap. */
static bool have_cap(int cap)
{
	unsigned long long eff = 0;
	char line[256];
	bool found = false;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1) {
			found = true;
			break;
		}
	fclose(f);
	return found && (eff >> cap) & 1;
}

/* The reasons sampling cannot start that a user can fix, with the fix. */
static int check_privileges(void)
{
	struct stat st;

	if (stat(KERNEL_BTF, &st) != 0) {
		log_error("no kernel BTF path=%s: the BPF sampler needs a kernel built with "
			  "CONFIG_DEBUG_INFO_BTF=y",
			  KERNEL_BTF);
		return -ENOTSUP;
	}
	if (!have_cap(CAP_SYS_ADMIN_B) && !(have_cap(CAP_BPF_B) && have_cap(CAP_PERFMON_B))) {
		log_error("not permitted to load BPF programs: run as root, or grant CAP_BPF and "
			  "CAP_PERFMON");
		return -EPERM;
	}
	return 0;
}

/* Parses /sys/devices/system/cpu/online ("0-3,5"); the caller frees *cpus. */
static int online_cpus(int **cpus, int *n)
{
	char buf[1024], *p, *tok, *save = NULL;
	int *list = NULL, cap = 0, cnt = 0, a, b, fd;
	ssize_t len;

	fd = open(CPUS_ONLINE, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return -EIO;
	buf[len] = '\0';
	for (p = buf; (tok = strtok_r(p, ",\n", &save)); p = NULL) {
		int m = sscanf(tok, "%d-%d", &a, &b);

		if (m < 1 || a < 0)
			goto out_inval;
		if (m == 1)
			b = a;
		for (int c = a; c <= b; c++) {
			if (cnt == cap) {
				int *nl = realloc(list, (cap ? 2 * cap : 64) * sizeof(*list));

				if (!nl) {
					free(list);
					return -ENOMEM;
				}
				list = nl;
				cap = cap ? 2 * cap : 64;
			}
			list[cnt++] = c;
		}
	}
	if (!cnt)
		goto out_inval;
	*cpus = list;
	*n = cnt;
	return 0;
out_inval:
	free(list);
	return -EINVAL;
}

static int perf_clock_open(int cpu, int hz, bool disabled)
{
	struct perf_event_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_CPU_CLOCK;
	attr.freq = 1;
	attr.sample_freq = hz;
	attr.disabled = disabled;
	/*
	 * The idle task is never sampled: the kernel skips its ticks before
	 * the program runs (on a mostly idle node, most ticks), instead of the
	 * program returning at once after its dispatch: 1.4-2.4 us less per
	 * idle tick here (bench/results.md).
	 */
	attr.exclude_idle = 1;
	fd = syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static void explain_perf_error(int err, int cpu)
{
	long paranoid = -1;

	if (err == -EACCES || err == -EPERM) {
		read_int_file(PARANOID, &paranoid);
		log_error("perf_event_open refused cpu=%d perf_event_paranoid=%ld: run as root or "
			  "grant CAP_PERFMON (or lower kernel.perf_event_paranoid)",
			  cpu, paranoid);
	} else {
		log_error("perf_event_open failed cpu=%d err=%s", cpu, strerror(-err));
	}
}

/*
 * Opens and attaches one CPU-clock event per online CPU at hz to prog,
 * cookie = hz; *links (and *fds when not NULL) get one entry per CPU. A
 * disabled set is enabled by libbpf at attach and disabled again here.
 */
static int attach_cpu_events(struct bpf_program *prog, int hz, bool disabled,
			     struct bpf_link ***links, int **fds, int *n)
{
	LIBBPF_OPTS(bpf_perf_event_opts, popts, .bpf_cookie = (__u64)hz);
	int *cpus = NULL, ncpus = 0, err, fd;

	err = online_cpus(&cpus, &ncpus);
	if (err) {
		log_error("cannot read online cpus path=%s err=%s", CPUS_ONLINE, strerror(-err));
		return err;
	}
	*links = calloc(ncpus, sizeof(**links));
	if (fds)
		*fds = calloc(ncpus, sizeof(**fds));
	if (!*links || (fds && !*fds)) {
		err = -ENOMEM;
		goto out_free_cpus;
	}
	for (int i = 0; i < ncpus; i++) {
		struct bpf_link *link;

		fd = perf_clock_open(cpus[i], hz, disabled);
		if (fd == -ENODEV) /* went offline since we read the list */
			continue;
		if (fd < 0) {
			err = fd;
			explain_perf_error(err, cpus[i]);
			goto out_free_cpus;
		}
		link = bpf_program__attach_perf_event_opts(prog, fd, &popts);
		if (!link) {
			err = -errno;
			close(fd);
			log_error("cannot attach sampler cpu=%d err=%s", cpus[i], strerror(-err));
			goto out_free_cpus;
		}
		if (disabled && ioctl(fd, PERF_EVENT_IOC_DISABLE, 0) != 0) {
			err = -errno;
			bpf_link__destroy(link);
			log_error("cannot disable perf event cpu=%d err=%s", cpus[i],
				  strerror(-err));
			goto out_free_cpus;
		}
		if (fds)
			(*fds)[*n] = fd;
		(*links)[(*n)++] = link; /* the link owns fd now */
	}
	err = 0;
out_free_cpus:
	free(cpus);
	return err;
}

static int ring_sample(void *ctx, void *data, size_t len)
{
	struct sampler *s = ctx;
	int err;

	if (len < offsetof(struct tp_sample, ips))
		return 0; /* never written by sampler.bpf.c */
	/* off-CPU, HTTP and GPU records are samples of other kinds: the callback tells them apart
	 */
	if (((const struct tp_sample *)data)->kind != TP_REC_SAMPLE &&
	    ((const struct tp_sample *)data)->kind != TP_REC_OFFCPU &&
	    ((const struct tp_sample *)data)->kind != TP_REC_HTTP &&
	    ((const struct tp_sample *)data)->kind != TP_REC_GPU) {
		const struct tp_sample *r = data;
		struct sampler_event ev = {.kind = (enum tp_record_kind)r->kind,
					   .pid = (pid_t)r->pid};

		if (r->kind == TP_REC_FORK) {
			if (len < offsetof(struct tp_sample, ips) + sizeof(__u64))
				return 0;
			ev.parent = (pid_t)r->tid;
			ev.start_time = r->ips[0] / (1000000000ull / (uint64_t)s->clock_ticks);
		}
		return s->event_cb ? s->event_cb(s->event_ctx, &ev) : 0;
	}
	err = s->poll_cb(s->poll_ctx, data, len);
	if (err < 0)
		return err;
	s->poll_n++;
	return 0;
}

static int configure(struct sampler *s)
{
	struct sampler_bpf *skel = s->skel;
	int err;

	skel->rodata->filter_mode = s->opts.filter;
	skel->rodata->base_hz = (__u32)s->opts.hz;
	skel->rodata->wakeup_bytes =
	    s->opts.wakeup_bytes == SAMPLER_WAKEUP_EVERY ? 0 : (__u32)s->opts.wakeup_bytes;
	err = bpf_map__set_max_entries(skel->maps.samples, s->opts.ring_bytes);
	if (!err) /* 1 row when off: a map cannot be empty */
		err = bpf_map__set_max_entries(skel->maps.unwind_rows,
					       s->unwind_rows ? (uint32_t)s->unwind_rows : 1);
	if (!err) /* one row per CPU, indexed by its number */
		err = bpf_map__set_max_entries(skel->maps.counters,
					       (uint32_t)libbpf_num_possible_cpus());
	return err;
}

/*
 * The ring when none is asked for: 128 KiB per possible CPU, at least
 * 1 MiB, rounded up to a power of two. A sample of user mode takes 1,088
 * bytes of ring (room for 127 frames is reserved: bpf/sampler.bpf.c,
 * emit_record), so 128 KiB is 6 s of one CPU at 19 Hz and 1.2 s at 99 Hz.
 * The reader is woken when half the ring is pending: each wakeup of the
 * agent costs ~70 us here (the poll, the switch, the caches it finds cold),
 * 59 passes a minute at a quarter against 33 at half at 99 Hz on two busy
 * CPUs, and the other half is still 2.4 s of headroom for a reader held up
 * (bench/results.md).
 */
static size_t default_ring_bytes(void)
{
	int ncpu = libbpf_num_possible_cpus();
	size_t want = (size_t)(ncpu > 0 ? ncpu : 1) * RING_PER_CPU, ring = MIN_RING;

	while (ring < want)
		ring *= 2;
	return ring;
}

static int fill_defaults(const struct sampler_opts *in, struct sampler_opts *out)
{
	long page = sysconf(_SC_PAGESIZE);

	memset(out, 0, sizeof(*out));
	if (in)
		*out = *in;
	if (!out->hz)
		out->hz = DEFAULT_HZ;
	if (!out->ring_bytes)
		out->ring_bytes = default_ring_bytes();
	if (!out->wakeup_bytes)
		out->wakeup_bytes = out->ring_bytes / 2;
	if (out->hz < 1 || out->hz > SAMPLER_MAX_HZ) {
		log_error("sampling frequency out of range hz=%d max=%d", out->hz, SAMPLER_MAX_HZ);
		return -EINVAL;
	}
	if (out->ring_bytes < (size_t)page || out->ring_bytes > (1u << 30) ||
	    (out->ring_bytes & (out->ring_bytes - 1))) {
		log_error("ring buffer size must be a power of 2 of at least a page bytes=%zu",
			  out->ring_bytes);
		return -EINVAL;
	}
	if (out->wakeup_bytes != SAMPLER_WAKEUP_EVERY && out->wakeup_bytes > out->ring_bytes) {
		log_error("wakeup threshold larger than the ring bytes=%zu ring=%zu",
			  out->wakeup_bytes, out->ring_bytes);
		return -EINVAL;
	}
	if ((unsigned)out->filter > TP_FILTER_CGROUP)
		return -EINVAL;
	if (out->unwind_bytes > (size_t)UINT32_MAX * sizeof(struct tp_unwind_row)) {
		log_error("unwind table memory too large bytes=%zu", out->unwind_bytes);
		return -EINVAL;
	}
	return 0;
}

/* Rows of the unwind area: whole pages of opts.unwind_bytes (0: none). */
static size_t unwind_rows_of(size_t bytes)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return bytes / page * page / sizeof(struct tp_unwind_row);
}

int sampler_unwind_maps(struct sampler *s, struct sampler_unwind_maps *out)
{
	memset(out, 0, sizeof(*out));
	if (!s->unwind_rows)
		return -ENOTSUP;
	out->rows_fd = bpf_map__fd(s->skel->maps.unwind_rows);
	out->nrows = s->unwind_rows;
	out->tables_fd = bpf_map__fd(s->skel->maps.unwind_tables);
	out->procs_fd = bpf_map__fd(s->skel->maps.unwind_procs);
	return 0;
}

struct sampler *sampler_open(const struct sampler_opts *opts)
{
	struct sampler *s;
	int err;

	libbpf_set_print(libbpf_to_log);
	s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->clock_ticks = sysconf(_SC_CLK_TCK);
	if (s->clock_ticks <= 0 || 1000000000L % s->clock_ticks)
		s->clock_ticks = 100; /* USER_HZ on every Linux architecture */
	s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->wake_fd < 0) {
		err = -errno;
		log_error("cannot create the sampler's wake-up eventfd err=%s", strerror(-err));
		goto out_free;
	}
	err = fill_defaults(opts, &s->opts);
	if (err)
		goto out_free;
	s->unwind_rows = unwind_rows_of(s->opts.unwind_bytes);
	s->zc.syscalls_only = s->opts.zc_syscalls_only;
	err = check_privileges();
	if (err)
		goto out_free;
	s->skel = sampler_bpf__open();
	if (!s->skel) {
		err = -errno;
		log_error("cannot open the BPF sampler err=%s", strerror(-err));
		goto out_free;
	}
	err = configure(s);
	if (err) {
		log_error("cannot size the BPF sampler maps err=%s", strerror(-err));
		goto out_free;
	}
	err = sampler_bpf__load(s->skel);
	if (err) {
		log_error("cannot load the BPF sampler err=%s (run with -v for the verifier log)",
			  strerror(-err));
		goto out_free;
	}
	s->exit_link = bpf_program__attach(s->skel->progs.on_sched_process_exit);
	if (!s->exit_link) {
		err = -errno;
		log_error("cannot attach to sched_process_exit err=%s", strerror(-err));
		goto out_free;
	}
	s->exec_link = bpf_program__attach(s->skel->progs.on_sched_process_exec);
	if (!s->exec_link) {
		err = -errno;
		log_error("cannot attach to sched_process_exec err=%s", strerror(-err));
		goto out_free;
	}
	s->fork_link = bpf_program__attach(s->skel->progs.on_sched_process_fork);
	if (!s->fork_link) {
		err = -errno;
		log_error("cannot attach to sched_process_fork err=%s", strerror(-err));
		goto out_free;
	}
	s->ring = ring_buffer__new(bpf_map__fd(s->skel->maps.samples), ring_sample, s, NULL);
	if (!s->ring) {
		err = -errno;
		log_error("cannot map the sample ring err=%s", strerror(-err));
		goto out_free;
	}
	err = attach_cpu_events(s->skel->progs.on_cpu_clock, s->opts.hz, s->opts.paused,
				&s->cpu_links, &s->cpu_fds, &s->ncpu_links);
	/* the raised set, off until sampler_set_raised */
	if (!err)
		err = attach_cpu_events(s->skel->progs.on_cpu_clock_raised, RAISED_INITIAL_HZ, true,
					&s->raised_links, &s->raised_fds, &s->nraised);
	if (err)
		goto out_free;
	log_debug("sampler started hz=%d cpus=%d", s->opts.hz, s->ncpu_links);
	return s;
out_free:
	sampler_free(s);
	errno = -err;
	return NULL;
}

void sampler_free(struct sampler *s)
{
	if (!s)
		return;
	/* perf events first: no new samples while the rest goes away */
	for (int i = 0; i < s->ncpu_links; i++)
		bpf_link__destroy(s->cpu_links[i]);
	free(s->cpu_links);
	for (int i = 0; i < s->nraised; i++)
		bpf_link__destroy(s->raised_links[i]);
	free(s->raised_links);
	free(s->raised_fds);
	free(s->cpu_fds);
	for (int i = 0; i < s->nuprobes; i++) {
		bpf_link__destroy(s->uprobes[i].link);
		free(s->uprobes[i].path);
	}
	loader_probes_free(&s->loaders);
	loader_probes_free(&s->gpu);
	offcpu_links_free(&s->offcpu);
	bpf_link__destroy(s->exit_link);
	bpf_link__destroy(s->exec_link);
	bpf_link__destroy(s->fork_link);
	zc_attach_free(&s->zc);
	ring_buffer__free(s->ring);
	sampler_bpf__destroy(s->skel);
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	free(s);
}

static int map_update(struct bpf_map *map, const void *key, size_t ksz, const void *val, size_t vsz)
{
	int err = bpf_map__update_elem(map, key, ksz, val, vsz, BPF_ANY);

	return err == -E2BIG ? -ENOSPC : err;
}

static int map_delete(struct bpf_map *map, const void *key, size_t ksz)
{
	int err = bpf_map__delete_elem(map, key, ksz, 0);

	return err == -ENOENT ? 0 : err;
}

int sampler_add_target_pid(struct sampler *s, pid_t pid)
{
	__u32 k = pid;
	__u8 one = 1;

	if (pid <= 0)
		return -EINVAL;
	return map_update(s->skel->maps.targets, &k, sizeof(k), &one, sizeof(one));
}

int sampler_add_target_cgroup(struct sampler *s, uint64_t cgroup_id)
{
	__u64 k = cgroup_id;
	__u8 one = 1;

	return map_update(s->skel->maps.target_cgroups, &k, sizeof(k), &one, sizeof(one));
}

int sampler_add_target_cgroup_path(struct sampler *s, const char *path)
{
	struct stat st;

	/* on cgroup v2 the directory's inode number is the cgroup id */
	if (stat(path, &st) != 0) {
		log_error("cannot find cgroup path=%s err=%s", path, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	return sampler_add_target_cgroup(s, st.st_ino);
}

/*
 * A pidfd of process or thread id (flags: 0 or PIDFD_THREAD), the key of its
 * task local storage in user space; -ESRCH when it is gone.
 */
static int task_fd(pid_t id, unsigned int flags)
{
	int fd = (int)syscall(SYS_pidfd_open, id, flags);

	return fd < 0 ? -errno : fd;
}

int sampler_set_tls(struct sampler *s, pid_t pid, const struct tp_tls_loc *loc)
{
	struct tp_tls_loc next;
	int fd, err;

	if (pid <= 0 || !loc || loc->kind > TP_TLS_DTV)
		return -EINVAL;
	next = *loc;
	next.sdk_probe = loc->sdk_probe ? 1 : 0;
	next.reserved = 0;
	fd = task_fd(pid, 0);
	if (fd < 0)
		return fd;
	if (next.kind == TP_TLS_NONE)
		err = map_delete(s->skel->maps.tls_locs, &fd, sizeof(fd));
	else
		err = map_update(s->skel->maps.tls_locs, &fd, sizeof(fd), &next, sizeof(next));
	close(fd);
	return err;
}

int sampler_forget_pid(struct sampler *s, pid_t pid)
{
	__u32 k = pid;
	int fd = task_fd(pid, 0), err = 0;

	if (fd >= 0) { /* a process that is gone took its location with it */
		err = map_delete(s->skel->maps.tls_locs, &fd, sizeof(fd));
		close(fd);
	}
	if (!err)
		err = map_delete(s->skel->maps.targets, &k, sizeof(k));
	return err;
}

int sampler_attach_sdk_uprobe(struct sampler *s, const char *binary_path, pid_t pid)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uopts, .func_name = SDK_PROBE_FUNC);
	struct sdk_uprobe *u;
	uint64_t value;
	int err, type;

	if (!binary_path || pid == 0 || pid < -1)
		return -EINVAL;
	for (int i = 0; i < s->nuprobes; i++)
		if (s->uprobes[i].pid == pid && !strcmp(s->uprobes[i].path, binary_path))
			return 0;
	if (s->nuprobes == SAMPLER_MAX_UPROBES) {
		log_warn("too many sdk uprobes max=%d path=%s", SAMPLER_MAX_UPROBES, binary_path);
		return -ENOSPC;
	}
	if (access(binary_path, R_OK) != 0) {
		err = -errno;
		log_debug("cannot read binary path=%s err=%s", binary_path, strerror(-err));
		return err;
	}
	/*
	 * Only the SDK defines the probe function; asking libbpf about any
	 * other writer (the usual case) makes it log a warning.
	 */
	err = tlsloc_file_symbol(binary_path, SDK_PROBE_FUNC, &value, &type);
	if (err <= 0 || type != STT_FUNC) {
		err = err < 0 ? err : -ENOENT;
		log_debug("no sdk uprobe path=%s func=%s err=%s", binary_path, SDK_PROBE_FUNC,
			  strerror(-err));
		return err;
	}
	u = &s->uprobes[s->nuprobes];
	u->path = strdup(binary_path);
	if (!u->path)
		return -ENOMEM;
	u->pid = pid;
	/* the caller decides how loud a failure is: the uprobe is an optional shortcut */
	u->link = bpf_program__attach_uprobe_opts(s->skel->progs.on_thread_registered, pid,
						  binary_path, 0, &uopts);
	if (!u->link) {
		err = -errno;
		free(u->path);
		/* libbpf says ENOENT when the ELF has no such function */
		log_debug("cannot attach sdk uprobe path=%s func=%s err=%s", binary_path,
			  SDK_PROBE_FUNC, strerror(-err));
		return err;
	}
	s->nuprobes++;
	log_debug("sdk uprobe attached path=%s pid=%d", binary_path, (int)pid);
	return 0;
}

int sampler_attach_loader_probe(struct sampler *s, const char *path, uint64_t dev, uint64_t ino)
{
	if (!path)
		return -EINVAL;
	return loader_probes_attach(&s->loaders, s->skel->progs.on_dl_debug_state, path, dev, ino);
}

int sampler_attach_gpu_probe(struct sampler *s, const char *path, uint64_t dev, uint64_t ino)
{
	if (!path)
		return -EINVAL;
	uint64_t value;
	int type;

	/* The nop the library puts in its marker, where it has one (cuda_ring.h). */
	s->gpu.func =
	    tlsloc_file_symbol(path, TP_CUDA_MARKER_PROBE, &value, &type) > 0 && type == STT_FUNC
		? TP_CUDA_MARKER_PROBE
		: TP_CUDA_MARKER;
	return loader_probes_attach(&s->gpu, s->skel->progs.on_gpu_launch, path, dev, ino);
}

bool sampler_gpu_probe_known(const struct sampler *s, uint64_t dev, uint64_t ino)
{
	return loader_probes_known(&s->gpu, dev, ino);
}

bool sampler_loader_known(const struct sampler *s, uint64_t dev, uint64_t ino)
{
	return loader_probes_known(&s->loaders, dev, ino);
}

int sampler_thread_record(struct sampler *s, pid_t tid, uint64_t *record)
{
	__u64 v = 0;
	int fd, err;

	/* a thread other than the leader needs PIDFD_THREAD (Linux 6.9) */
	fd = task_fd(tid, PIDFD_THREAD);
	if (fd == -EINVAL)
		fd = task_fd(tid, 0);
	if (fd < 0)
		return fd == -ESRCH ? -ENOENT : fd;
	err = bpf_map__lookup_elem(s->skel->maps.thread_records, &fd, sizeof(fd), &v, sizeof(v), 0);
	close(fd);
	if (err)
		return err;
	*record = v;
	return 0;
}

int sampler_poll(struct sampler *s, int timeout_ms, sampler_sample_fn cb, void *ctx)
{
	int err;

	if (!s->ring || !cb)
		return -EINVAL;
	s->poll_cb = cb;
	s->poll_ctx = ctx;
	s->poll_n = 0;
	/*
	 * Sleep until the ring has wakeup_bytes pending (or an exec record),
	 * sampler_wake, or the timeout; then read everything pending, also
	 * what is below the threshold.
	 */
	struct pollfd pf[2] = {{.fd = ring_buffer__epoll_fd(s->ring), .events = POLLIN},
			       {.fd = s->wake_fd, .events = POLLIN}};

	err = poll(pf, 2, timeout_ms);
	if (err < 0)
		return -errno;
	if (pf[1].revents & POLLIN) {
		uint64_t v;

		if (read(s->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			return -errno;
	}
	err = ring_buffer__consume(s->ring);
	return err < 0 ? err : s->poll_n;
}

int sampler_zerocode_add(struct sampler *s, uint32_t tgid)
{
	return zc_attach_add(&s->zc, s->skel, tgid);
}

void sampler_zerocode_remove(struct sampler *s, uint32_t tgid)
{
	zc_attach_remove(&s->zc, s->skel, tgid);
}

void sampler_zerocode_clear(struct sampler *s)
{
	uint32_t key;

	/* entries the fork program added for children the agent never owned */
	while (bpf_map__get_next_key(s->skel->maps.zc_targets, NULL, &key, sizeof(key)) == 0) {
		sampler_zerocode_remove(s, key);
		map_delete(s->skel->maps.zc_targets, &key, sizeof(key));
	}
}

int sampler_set_obi_map(struct sampler *s, int fd)
{
	int outer = bpf_map__fd(s->skel->maps.obi_maps);
	uint32_t zero = 0;

	if (fd < 0) {
		s->skel->bss->obi_on = 0;
		if (bpf_map_delete_elem(outer, &zero) && errno != ENOENT)
			return -errno;
		return 0;
	}
	if (bpf_map_update_elem(outer, &zero, &fd, BPF_ANY))
		return -errno;
	s->skel->bss->obi_on = 1;
	return 0;
}

int sampler_set_python(struct sampler *s, uint32_t tgid, const struct tp_py_proc *pp)
{
	uint32_t key;
	int err;

	if (!pp) {
		map_delete(s->skel->maps.py_procs, &tgid, sizeof(tgid));
		if (bpf_map__get_next_key(s->skel->maps.py_procs, NULL, &key, sizeof(key)) ==
		    -ENOENT)
			s->skel->bss->py_on = 0;
		return 0;
	}
	err = map_update(s->skel->maps.py_procs, &tgid, sizeof(tgid), pp, sizeof(*pp));
	if (!err)
		s->skel->bss->py_on = 1;
	return err;
}

void sampler_wake(struct sampler *s)
{
	uint64_t one = 1;

	/* no log (signal handlers call this); EAGAIN: a wake-up is pending anyway */
	if (s && write(s->wake_fd, &one, sizeof(one)) < 0)
		return;
}

void sampler_set_event_fn(struct sampler *s, sampler_event_fn cb, void *ctx)
{
	s->event_cb = cb;
	s->event_ctx = ctx;
}

int sampler_get_stats(struct sampler *s, struct sampler_stats *st)
{
	int ncpu = libbpf_num_possible_cpus(), err = 0;
	struct bpf_prog_info info;
	__u32 info_len = sizeof(info);
	/* a row per CPU, TP_CNT_MAX counters padded to the row's size */
	size_t row = bpf_map__value_size(s->skel->maps.counters);
	__u64 *vals;

	if (ncpu <= 0)
		return ncpu ? ncpu : -EINVAL;
	if (row < TP_CNT_MAX * sizeof(__u64))
		return -EINVAL;
	vals = calloc(1, row);
	if (!vals)
		return -ENOMEM;
	memset(st, 0, sizeof(*st));
	st->loaders_probed = s->loaders.attached;
	st->loaders_no_symbol = s->loaders.no_symbol;
	st->loaders_failed = s->loaders.failed;
	st->loaders_over = s->loaders.full;
	st->gpu_probed = s->gpu.attached;
	st->gpu_no_symbol = s->gpu.no_symbol;
	st->gpu_probe_failed = s->gpu.failed;
	st->gpu_probe_over = s->gpu.full;
	st->zc_attached = s->zc.tp_enter != NULL;
	st->zc_hook_libc = zc_attach_libc(&s->zc);
	st->zc_hook_syscalls = s->zc.n_syscalls;
	st->zc_uprobe_links = __atomic_load_n(&s->zc.links, __ATOMIC_RELAXED);
	st->zc_libc_fallbacks = s->zc.libc_fallbacks;
	st->zc_attaches = s->zc.attaches;
	for (__u32 c = 0; c < (__u32)ncpu; c++) {
		err = bpf_map__lookup_elem(s->skel->maps.counters, &c, sizeof(c), vals, row, 0);
		if (err)
			goto out_free_vals;
		for (int k = 0; k < TP_CNT_MAX; k++)
			st->counters[k] += vals[k];
	}
	memset(&info, 0, sizeof(info));
	err =
	    bpf_obj_get_info_by_fd(bpf_program__fd(s->skel->progs.on_cpu_clock), &info, &info_len);
	if (!err) {
		st->run_time_ns = info.run_time_ns;
		st->run_cnt = info.run_cnt;
	}
	memset(&info, 0, sizeof(info));
	info_len = sizeof(info);
	if (!err && !bpf_obj_get_info_by_fd(bpf_program__fd(s->skel->progs.on_cpu_clock_raised),
					    &info, &info_len)) {
		st->raised_run_time_ns = info.run_time_ns;
		st->raised_run_cnt = info.run_cnt;
	}
	offcpu_links_run_stats(s->skel, &st->offcpu_run_time_ns, &st->offcpu_run_cnt);
out_free_vals:
	free(vals);
	return err;
}

/*
 * What sampler_set_offcpu and the trigger targets ask for together: the
 * programs attached while either is on, one threshold (the smaller of
 * the two), the filter's processes in the mode asked for, the targets'
 * in the requests mode.
 */
static int offcpu_apply(struct sampler *s)
{
	bool targets = s->offcpu_targets_n > 0;
	uint32_t min_us = 0;

	if (s->offcpu_mode)
		min_us = s->offcpu_min_us;
	if (targets && (!min_us || s->offcpu_targets_min_us < min_us))
		min_us = s->offcpu_targets_min_us;
	if (!min_us)
		min_us = SAMPLER_OFFCPU_MIN_US_DEFAULT;
	if (s->offcpu_mode == s->offcpu.mode && targets == s->offcpu.targets &&
	    min_us == s->offcpu.min_us && (s->offcpu.attached || (!s->offcpu_mode && !targets)))
		return 0;
	return offcpu_links_set(&s->offcpu, s->skel, s->offcpu_mode, targets, min_us);
}

int sampler_set_offcpu(struct sampler *s, enum sampler_offcpu_mode mode, uint32_t min_us)
{
	int err;

	if ((unsigned)mode > SAMPLER_OFFCPU_ALL || min_us < SAMPLER_OFFCPU_MIN_US_LO ||
	    min_us > SAMPLER_OFFCPU_MIN_US_HI) {
		log_error("bad off-CPU capture mode=%d min_us=%u (%d..%d)", (int)mode, min_us,
			  SAMPLER_OFFCPU_MIN_US_LO, SAMPLER_OFFCPU_MIN_US_HI);
		return -EINVAL;
	}
	s->offcpu_mode = (unsigned)mode;
	s->offcpu_min_us = min_us;
	err = offcpu_apply(s);
	if (!err)
		log_debug("off-CPU capture mode=%d min_us=%u", (int)mode, min_us);
	return err;
}

/* Every raised event: PERF_EVENT_IOC_<req> with arg; stops at the first failure. */
int sampler_resume(struct sampler *s)
{
	for (int i = 0; i < s->ncpu_links; i++)
		if (ioctl(s->cpu_fds[i], PERF_EVENT_IOC_ENABLE, 0) != 0)
			return -errno;
	return 0;
}

static int raised_ioctl(struct sampler *s, unsigned long req, const void *arg)
{
	for (int i = 0; i < s->nraised; i++)
		if (ioctl(s->raised_fds[i], req, arg) != 0)
			return -errno;
	return 0;
}

/*
 * Order keeps every sample counted once: raised samples are kept only while
 * raised_on, and base samples are skipped only while raised_on, so raised_on
 * goes up after the events run at the new rate and down before they stop.
 */
int sampler_set_raised(struct sampler *s, unsigned hz)
{
	/*
	 * The events are opened in frequency mode, but the kernel turns a
	 * CPU-clock event's frequency into a fixed hrtimer period at creation
	 * (and clears attr.freq): PERF_EVENT_IOC_PERIOD takes nanoseconds.
	 */
	__u64 period_ns = hz ? 1000000000ull / hz : 0;
	int err;

	if (!s->nraised)
		return -EOPNOTSUPP;
	if (hz && (hz < (unsigned)s->opts.hz || hz > SAMPLER_MAX_HZ)) {
		log_error("raised frequency out of range hz=%u base=%d max=%d", hz, s->opts.hz,
			  SAMPLER_MAX_HZ);
		return -EINVAL;
	}
	if (hz == s->raised_hz)
		return 0;
	s->skel->bss->raised_on = 0;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	err = raised_ioctl(s, PERF_EVENT_IOC_DISABLE, 0);
	if (err || !hz)
		goto out;
	err = raised_ioctl(s, PERF_EVENT_IOC_PERIOD, &period_ns);
	if (err)
		goto out;
	s->skel->bss->raised_hz = hz;
	err = raised_ioctl(s, PERF_EVENT_IOC_ENABLE, 0);
	if (err)
		goto out;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	s->skel->bss->raised_on = 1;
	s->raised_hz = hz;
	log_debug("raised sampling on hz=%u cpus=%d", hz, s->nraised);
	return 0;
out:
	if (err) {
		raised_ioctl(s, PERF_EVENT_IOC_DISABLE, 0);
		log_error("cannot switch raised sampling hz=%u err=%s", hz, strerror(-err));
	} else {
		log_debug("raised sampling off");
	}
	s->raised_hz = 0;
	return err;
}

unsigned sampler_raised_hz(const struct sampler *s)
{
	return s->raised_hz;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/*
 * Replaces the keys of the tgid-keyed hash map with tgids[0..n) (at most
 * max), each with the value val (vsz bytes): removals first, then every
 * wanted key written (a changed value too). 0, -ENOSPC, -EINVAL (a tgid
 * 0), -ENOMEM or what the kernel said.
 */
static int set_tgid_map(struct bpf_map *map, const uint32_t *tgids, size_t n, size_t max,
			const void *val, size_t vsz)
{
	uint32_t *want = NULL, *have = NULL;
	size_t nhave = 0;
	int err = 0;

	if (n > max)
		return -ENOSPC;
	if (n && !tgids)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (tgids[i] == 0)
			return -EINVAL;
	want = malloc((n ? n : 1) * sizeof(*want));
	have = malloc(max * sizeof(*have));
	if (!want || !have) {
		err = -ENOMEM;
		goto out_free;
	}
	if (n)
		memcpy(want, tgids, n * sizeof(*want));
	qsort(want, n, sizeof(*want), cmp_u32);
	/* keys first (deleting while walking restarts the walk), removals before additions */
	while (nhave < max && bpf_map__get_next_key(map, nhave ? &have[nhave - 1] : NULL,
						    &have[nhave], sizeof(*have)) == 0)
		nhave++;
	for (size_t i = 0; i < nhave; i++)
		if (!bsearch(&have[i], want, n, sizeof(*want), cmp_u32))
			map_delete(map, &have[i], sizeof(have[i]));
	for (size_t i = 0; i < n && !err; i++)
		err = map_update(map, &want[i], sizeof(want[i]), val, vsz);
out_free:
	free(want);
	free(have);
	return err;
}

int sampler_set_raised_targets(struct sampler *s, const uint32_t *tgids, size_t n)
{
	__u8 one = 1;
	int err = set_tgid_map(s->skel->maps.raised_targets, tgids, n, TP_MAX_RAISED_TARGETS, &one,
			       sizeof(one));

	if (err == -ENOSPC)
		log_error("too many raised targets n=%zu max=%d", n, TP_MAX_RAISED_TARGETS);
	else if (err && err != -EINVAL)
		log_error("cannot set raised targets n=%zu err=%s", n, strerror(-err));
	return err;
}

int sampler_set_offcpu_targets(struct sampler *s, const uint32_t *tgids, size_t n, uint32_t min_us)
{
	int err;

	if (n && (min_us < SAMPLER_OFFCPU_MIN_US_LO || min_us > SAMPLER_OFFCPU_MIN_US_HI))
		return -EINVAL;
	err = set_tgid_map(s->skel->maps.offcpu_targets, tgids, n, TP_MAX_OFFCPU_TARGETS, &min_us,
			   sizeof(min_us));
	if (err == -ENOSPC) {
		log_error("too many off-CPU targets n=%zu max=%d", n, TP_MAX_OFFCPU_TARGETS);
		return err;
	}
	if (err) {
		if (err != -EINVAL)
			log_error("cannot set off-CPU targets n=%zu err=%s", n, strerror(-err));
		return err;
	}
	s->offcpu_targets_n = n;
	s->offcpu_targets_min_us = n ? min_us : 0;
	log_debug("off-CPU targets n=%zu min_us=%u", n, s->offcpu_targets_min_us);
	/* the scheduler programs stay attached while n > 0, whatever the mode */
	return offcpu_apply(s);
}

int sampler_offcpu_targets(struct sampler *s, uint32_t *tgids, uint32_t *min_us, size_t max)
{
	struct bpf_map *map = s->skel->maps.offcpu_targets;
	uint32_t key, prev = 0;
	size_t n = 0;

	while (n < TP_MAX_OFFCPU_TARGETS &&
	       bpf_map__get_next_key(map, n ? &prev : NULL, &key, sizeof(key)) == 0) {
		uint32_t v = 0;

		if (n < max) {
			int err = 0;

			tgids[n] = key;
			if (min_us)
				err =
				    bpf_map__lookup_elem(map, &key, sizeof(key), &v, sizeof(v), 0);
			if (err)
				return err;
			if (min_us)
				min_us[n] = v;
		}
		prev = key;
		n++;
	}
	return (int)n;
}
