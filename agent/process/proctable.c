/*
 * proctable.c - the agent's process table (proctable.h).
 *
 * First sight of a process (a sample, an exec record, the scan at start):
 * its identity becomes a source in the aggregator, its thread-context
 * location goes to the BPF side, the SDK registration uprobe is tried on
 * the module that defines otel_thread_ctx_v1, the symbolizer snapshots its
 * mappings, and the trigger engine learns who it is. A process that has
 * not published everything yet is looked at again with backoff (1 s, 4 s,
 * then every 2 min while it runs), cut short when its mappings did not
 * change, and soon after its loader maps or unmaps objects (a maps record
 * from the uprobe on the loader's rendezvous, which the first look attaches
 * to the process's loader file). Forked children get their parent's look
 * without reading /proc.
 * Exit records forget a process a second later (its last samples come
 * after the record); a sweep finds those whose record was lost.
 */
#include "unwind.h"
#include "proctable.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aggregate.h"
#include "kubepods.h"
#include "procctx.h"
#include "procmem.h"
#include "pyproc.h"
#include "sampler.h"
#include "symbolize.h"
#include "tlsloc.h"
#include "traceprof/log.h"
#include "triggers.h"
#include "zc_owners.h"

#define RECHECK_MIN_US	    1000000   /* first re-look at an incomplete process */
#define RECHECK_FAST_US	    4000000   /* looks (x4) up to this step... */
#define RECHECK_MAX_US	    120000000 /* ...then every 2 min, only if sampled meanwhile */
#define EXIT_GRACE_US	    1000000 /* an exited process is forgotten this long after its record */
#define MAPS_LOOKS_PER_PASS 32	    /* looks for maps records in one pass; the rest in the next */
#define TLS_RETRIES	    4	    /* quick looks again at a writer whose location is not ready */

int proctable_init(struct proctable *t)
{
	t->next_recheck_us = INT64_MAX;
	t->cap = 1024;
	t->procs = calloc(t->cap, sizeof(*t->procs));
	return t->procs ? 0 : -ENOMEM;
}

void proctable_free(struct proctable *t)
{
	for (size_t i = 0; t->procs && i < t->cap; i++)
		if (t->procs[i].pid)
			free(t->procs[i].pyp);
	free(t->procs);
	t->procs = NULL;
}

static struct proc *proc_slot(struct proctable *t, int pid, bool insert)
{
	size_t mask = t->cap - 1, i = ids_hash_bytes(0, &pid, sizeof(pid)) & mask;

	for (;;) {
		struct proc *p = &t->procs[i];

		if (p->pid == pid)
			return p;
		if (p->pid == 0) {
			if (!insert)
				return NULL;
			memset(p, 0, sizeof(*p));
			p->pid = pid;
			t->n++;
			return p;
		}
		i = (i + 1) & mask;
	}
}

static int procs_grow(struct proctable *t)
{
	struct proc *old = t->procs;
	size_t oldcap = t->cap;

	t->procs = calloc(oldcap * 2, sizeof(*t->procs));
	if (!t->procs) {
		t->procs = old;
		return -ENOMEM;
	}
	t->cap = oldcap * 2;
	t->n = 0;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].pid)
			*proc_slot(t, old[i].pid, true) = old[i];
	free(old);
	return 0;
}

/* Removes p, re-inserting the run of entries after it (linear probing). */
static void proc_remove(struct proctable *t, struct proc *p)
{
	size_t mask = t->cap - 1, i = (size_t)(p - t->procs);

	if (t->trig)
		triggers_proc_remove(t->trig, (uint32_t)p->pid);
	if (t->unwind)
		unwind_forget_process(t->unwind, p->pid);
	if (t->zc)
		zc_owners_gone(t->zc, (uint32_t)p->pid);
	if (p->py == PROC_PY_FOUND) {
		sampler_set_python(t->sampler, (uint32_t)p->pid, NULL);
		if (t->pyc)
			pycache_forget(t->pyc, p->pid);
	}
	free(p->pyp);
	p->pyp = NULL;
	p->py = PROC_PY_UNKNOWN;
	if (p->exited_us)
		t->ndying--;
	p->pid = 0;
	t->n--;
	for (i = (i + 1) & mask; t->procs[i].pid; i = (i + 1) & mask) {
		struct proc tmp = t->procs[i];

		t->procs[i].pid = 0;
		t->n--;
		*proc_slot(t, tmp.pid, true) = tmp;
	}
}

/*
 * Attaches the SDK registration uprobe to module, the file that defines the
 * process's otel_thread_ctx_v1 (libtraceprof-sdk.so, or an executable
 * linking the static SDK). Other writers have no probe function (-ENOENT):
 * their threads are found through the TLS location alone.
 */
static void attach_sdk_uprobe(struct proctable *t, struct proc *p, const char *module)
{
	char full[PROCMEM_PATH_MAX + 64];
	int rc;

	p->sdk_uprobe = true;
	snprintf(full, sizeof(full), "/proc/%d/root%s", p->pid, module);
	rc = sampler_attach_sdk_uprobe(t->sampler, full, -1);
	p->sdk_probe = rc == 0;
	if (rc != 0 && rc != -ENOENT && !t->uprobe_warned) {
		/* needs CAP_SYS_ADMIN; the TLS location finds the same records */
		log_info("SDK registration uprobe unavailable (%s); threads are found "
			 "through their TLS alone",
			 strerror(-rc));
		t->uprobe_warned = true;
	}
}

/* The address the kernel loaded pid's program interpreter at (AT_BASE), 0 if none or unreadable. */
static uint64_t interp_base(int pid)
{
	char path[64];
	uint64_t av[2 * 64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/auxv", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, av, sizeof(av));
	close(fd);
	for (ssize_t i = 0; n > 0 && (i + 2) * (ssize_t)sizeof(av[0]) <= n; i += 2)
		if (av[i] == AT_BASE)
			return av[i + 1];
	return 0;
}

/*
 * pid's dynamic loader in its maps: the file mapped where the kernel put
 * the program interpreter (AT_BASE: the kernel's word, which the process
 * cannot change), else, when the auxiliary vector cannot be read, a file
 * named like a loader (ld-linux-x86-64.so.2, ld-2.31.so, ld-musl-*.so.1)
 * mapped at offset 0. NULL for a static program or a kernel thread.
 */
static const struct procmem_map *find_loader(int pid, const struct procmem_maps *pm)
{
	uint64_t base = interp_base(pid);

	for (size_t i = 0; base && i < pm->n; i++)
		if (pm->maps[i].start == base && procmem_map_is_file(&pm->maps[i]))
			return &pm->maps[i];
	for (size_t i = 0; !base && i < pm->n; i++) {
		const struct procmem_map *m = &pm->maps[i];
		const char *slash = strrchr(m->path, '/'), *b = slash ? slash + 1 : m->path;

		if (m->offset == 0 && procmem_map_is_file(m) && !strncmp(b, "ld-", 3) &&
		    strstr(b, ".so"))
			return m;
	}
	return NULL;
}

/*
 * Gives the loader of p the rendezvous uprobe (once per loader file, in
 * the sampler), so that its dlopens and dlcloses bring a look at once. The
 * file is reached through the process's root (another mount namespace),
 * or through map_files when that path names another file now.
 */
static void note_loader(struct proctable *t, struct proc *p)
{
	struct procmem_maps pm;
	const struct procmem_map *m;
	char path[PROCMEM_PATH_MAX + 64];
	struct stat st;
	int rc;

	if (procmem_maps_read(p->pid, &pm) != 0)
		return; /* gone, or not readable now: the next look tries again */
	p->loader_tried = true;
	/* the common case, a loader tried before: no auxv, no stat */
	for (size_t i = 0; i < pm.n; i++)
		if (pm.maps[i].offset == 0 && pm.maps[i].inode &&
		    sampler_loader_known(t->sampler, pm.maps[i].dev, pm.maps[i].inode)) {
			t->st.loaders_found++;
			procmem_maps_free(&pm);
			return;
		}
	m = find_loader(p->pid, &pm);
	if (!m) {
		t->st.loaders_missing++;
		procmem_maps_free(&pm);
		return;
	}
	t->st.loaders_found++;
	snprintf(path, sizeof(path), "/proc/%d/root%s", p->pid, m->path);
	if (m->deleted || stat(path, &st) != 0 || st.st_ino != m->inode || st.st_dev != m->dev)
		snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, p->pid,
			 m->start, m->end);
	rc = sampler_attach_loader_probe(t->sampler, path, m->dev, m->inode);
	if (rc == 0 && !p->maps_due_us) {
		/*
		 * The first process of this loader: what it loaded between its
		 * start and now came before the probe (a CUDA runtime's injection
		 * library, dlopened at once). One more look soon finds it.
		 */
		p->maps_due_us = agent_clock_us(CLOCK_REALTIME) + PROCTABLE_MAPS_GAP_US;
		if (p->maps_due_us < t->next_recheck_us)
			t->next_recheck_us = p->maps_due_us;
	}
	if (rc != 0 && rc != -ENOENT && rc != -ENOSPC && !t->loader_warned) {
		/* needs CAP_SYS_ADMIN, as the SDK uprobe */
		log_info("loader uprobe unavailable (%s): libraries loaded later are found by "
			 "looking at processes again (1 s, 5 s, then every 2 minutes)",
			 strerror(-rc));
		t->loader_warned = true;
	}
	procmem_maps_free(&pm);
}

/* Tells the trigger engine who the process is (targets by service, container, pod, cgroup). */
static void note_trigger_proc(struct proctable *t, int pid, const struct identity *id)
{
	struct triggers_proc tp = {
	    .pid = (uint32_t)pid,
	    .service = id->service_name,
	    .container_id = id->container_id,
	    .pod_uid = id->pod_uid,
	    .cgroup = id->cgroup_v2 ? id->cgroup_v2 : "", /* read with the identity */
	};

	if (!t->trig)
		return;
	if (triggers_proc_add(t->trig, &tp) != 0)
		log_warn("triggers: out of memory noting pid=%d", pid);
}

/* The next look at an incomplete process: 1 s, 4 s, then every 2 min if it runs. */
static void schedule_recheck(struct proctable *t, struct proc *p, int64_t now_us)
{
	p->recheck_step_us = p->recheck_step_us ? p->recheck_step_us * 4 : RECHECK_MIN_US;
	if (p->recheck_step_us > RECHECK_FAST_US)
		p->recheck_step_us = RECHECK_MAX_US;
	p->recheck_us = now_us + p->recheck_step_us;
	if (p->recheck_us < t->next_recheck_us)
		t->next_recheck_us = p->recheck_us;
}

/* procmem_maps_fingerprint() of pid's mappings, 0 when they cannot be read. */
static uint64_t maps_fingerprint(int pid)
{
	struct procmem_maps pm;
	uint64_t fp;

	if (procmem_maps_read(pid, &pm) != 0)
		return 0;
	fp = procmem_maps_fingerprint(&pm);
	procmem_maps_free(&pm);
	return fp;
}

/*
 * The source of a process from its identity: with the Kubernetes API on
 * and its pod known, the pod's namespace, name and labels; else the pod
 * UID stands in for the name until the pod arrives (proctable_rename_pods).
 */
static void proc_set_source(struct proctable *t, struct proc *p, const struct identity *id)
{
	struct kubepods_pod pod = {0};
	struct store_source src = {0};

	snprintf(p->pod_uid, sizeof(p->pod_uid), "%s", id->pod_uid);
	p->pod_named = id->pod_uid[0] && kubepods_find_uid(t->kube, id->pod_uid, &pod);
	src.service = id->service_name;
	src.namespace_ = p->pod_named ? pod.namespace_ : "";
	src.pod = p->pod_named ? pod.name : id->pod_uid;
	src.container = id->container_id;
	src.node = t->node;
	src.build_id = id->build_id;
	src.labels_json = pod.labels_json;
	p->source_id =
	    ids_source(src.service, src.namespace_, src.pod, src.container, src.node, src.build_id);
	if (!agg_has_source(t->agg, p->source_id))
		agg_add_source(t->agg, p->source_id, &src);
	free(pod.labels_json);
}

/*
 * Pods arrived or changed: processes still under their pod UID get their
 * pod's names from now on (samples already aggregated keep the old source).
 */
void proctable_rename_pods(struct proctable *t)
{
	uint64_t gen = kubepods_generation(t->kube);

	if (gen == t->kube_gen)
		return;
	t->kube_gen = gen;
	for (size_t i = 0; i < t->cap; i++) {
		struct proc *p = &t->procs[i];
		struct identity id;

		if (!p->pid || !p->pod_uid[0] || p->pod_named)
			continue;
		if (identity_read(p->pid, &id) != 0)
			continue;
		proc_set_source(t, p, &id);
		if (p->pod_named) {
			t->st.kube_renamed++;
			log_debug("process pid=%d now named after its pod uid=%s", p->pid,
				  p->pod_uid);
		}
		identity_clear(&id);
	}
}

/*
 * A module of p defines otel_thread_ctx_v1 but its location could not be
 * had: a look amid a dlopen (the loader has not listed the module or
 * given it a TLS module id yet), or a placement not supported. The next
 * look reads everything again rather than stopping at unchanged mappings,
 * and comes PROCTABLE_MAPS_GAP_US from now, up to TLS_RETRIES times.
 */
static void tls_not_ready(struct proctable *t, struct proc *p, int64_t now_us)
{
	t->st.tls_not_ready++;
	p->maps_fp = 0;
	if (p->tls_retries >= TLS_RETRIES || p->maps_due_us)
		return;
	p->tls_retries++;
	p->maps_due_us = now_us + PROCTABLE_MAPS_GAP_US;
	if (p->maps_due_us < t->next_recheck_us)
		t->next_recheck_us = p->maps_due_us;
}

/*
 * Whether p runs a CPython traceprof reads; if so its interpreter goes to
 * the sampler (docs/python.md). False while the answer may still change
 * (the interpreter not initialized yet): look again.
 */
static bool note_python(struct proctable *t, struct proc *p)
{
	struct procmem_maps maps = {0};
	struct pyproc pp;
	int rc;

	if (t->no_python || p->py == PROC_PY_FOUND || p->py == PROC_PY_UNSUPPORTED)
		return true;
	if (procmem_maps_read(p->pid, &maps))
		return true; /* gone: its exit record follows */
	rc = pyproc_detect(p->pid, &maps, &pp);
	procmem_maps_free(&maps);
	if (rc == -ENOENT) {
		p->py = PROC_PY_NOT;
		return true;
	}
	if (rc == -ENOTSUP) {
		p->py = PROC_PY_UNSUPPORTED;
		t->st.py_unsupported++;
		log_info("pid=%d runs Python %u.%u, whose layout traceprof does not know: native "
			 "frames only",
			 p->pid, pp.version >> 24, (pp.version >> 16) & 0xff);
		return true;
	}
	if (rc)
		return false; /* not initialized yet, or not consistent: again */
	if (sampler_set_python(t->sampler, (uint32_t)p->pid, &pp.bpf)) {
		t->st.py_refused++;
		return true;
	}
	p->pyp = malloc(sizeof(*p->pyp));
	if (!p->pyp) {
		sampler_set_python(t->sampler, (uint32_t)p->pid, NULL);
		return false;
	}
	*p->pyp = pp;
	p->py = PROC_PY_FOUND;
	t->st.py_found++;
	log_debug("python pid=%d version=%#x", p->pid, pp.version);
	return true;
}

/*
 * Looks at a process: identity -> source, thread-context location -> BPF,
 * symbols snapshot. Called at first sight and again, with backoff, while
 * the process has not published everything yet (an SDK that starts after
 * the agent first saw the process).
 */
static const char *proc_inspect_now(struct proctable *t, struct proc *p, int64_t now_us)
{
	const char *what = "again: mappings changed";
	struct identity id;
	struct tp_tls_loc loc;
	struct tlsloc_info info;
	bool has_ctx = false, has_tls = false, kernel_thread = false;
	uint64_t fp;
	int rc;

	p->inspected_us = now_us;
	fp = maps_fingerprint(p->pid);
	if (p->start_time == 0) {
		what = "first look";
		if (t->zerocode && t->zc)
			zc_owners_agent_add(t->zc, (uint32_t)p->pid);
		t->st.procs_seen++;
		p->start_time = procmem_start_time(p->pid);
		sym_note_process(t->sym, p->pid);
	} else if (fp && fp == p->maps_fp) {
		/*
		 * A recheck, and no library came or went and nothing was published
		 * since the last look (the environment cannot change without an
		 * exec, which starts over): what it would find is what it found.
		 */
		t->st.rechecks_unchanged++;
		if (!p->complete)
			schedule_recheck(t, p, now_us);
		return "again: mappings unchanged";
	}
	p->maps_fp = fp;
	p->unwind_noted = false; /* first look, or the mappings changed: at its next sample */
	if (t->target_pids)	 /* named targets are sampled: now */
		proctable_note_unwind(t, p);
	if (!p->loader_tried)
		note_loader(t, p);
	if (identity_read(p->pid, &id) == 0) {
		proc_set_source(t, p, &id);
		note_trigger_proc(t, p->pid, &id);
		has_ctx = id.source == IDENTITY_FROM_PROCCTX;
		kernel_thread = id.source == IDENTITY_FROM_COMM && !id.build_id[0];
		log_debug("process pid=%d service=%s from=%d ctx_form=%s build_id=%s", p->pid,
			  id.service_name, (int)id.source,
			  procctx_form_name((enum procctx_form)id.ctx_form), id.build_id);
		identity_clear(&id);
	} else if (p->source_id == 0) {
		p->source_id = ids_source("[unknown]", "", "", "", t->node, "");
		if (!agg_has_source(t->agg, p->source_id)) {
			struct store_source unk = {"[unknown]", "", "", "", t->node, "", ""};

			agg_add_source(t->agg, p->source_id, &unk);
		}
	}
	if (t->on_look && t->on_look(t->look_ctx, p->pid, p->source_id) && !p->unwind_noted)
		proctable_note_unwind(t, p);
	rc = tlsloc_resolve(p->pid, 0, &loc, &info);
	/* first the uprobe: the location says whether it is attached */
	if (!p->sdk_uprobe && info.module[0])
		attach_sdk_uprobe(t, p, info.module);
	/* a DTV location without a module id: the loader has not given it one yet */
	if (rc == 0 && loc.kind != TP_TLS_NONE && !(loc.kind == TP_TLS_DTV && loc.modid == 0)) {
		has_tls = true;
		loc.sdk_probe = p->sdk_probe;
		if (sampler_set_tls(t->sampler, p->pid, &loc) == 0 && !p->tls_known) {
			p->tls_known = true;
			t->st.tls_found++;
		}
		log_debug("thread context pid=%d module=%s kind=%u", p->pid, info.module, loc.kind);
	} else if (rc == -EOPNOTSUPP && p->recheck_step_us == 0) {
		t->st.tls_unsupported++;
		log_info("thread context of pid=%d is in %s, whose TLS placement is not "
			 "supported; its samples stay untagged unless it uses the traceprof SDK",
			 p->pid, info.module);
	}
	if (info.module[0] && !has_tls)
		tls_not_ready(t, p, now_us);
	else
		p->tls_retries = 0;
	p->complete = ((has_ctx && has_tls) || kernel_thread) & /* kernel threads never change */
		      note_python(t, p);
	if (!p->complete)
		schedule_recheck(t, p, now_us);
	return what;
}

void proctable_note_unwind(struct proctable *t, struct proc *p)
{
	p->unwind_noted = true; /* also when it failed (gone): the exit record follows */
	if (t->unwind)
		unwind_note_process(t->unwind, p->pid);
}

/* proc_inspect_now, with its maps read once and its CPU time counted. */
static void proc_inspect(struct proctable *t, struct proc *p, int64_t now_us)
{
	uint64_t t0 = agent_thread_cpu_ns(), ns;
	const char *what;

	procmem_maps_scope_begin(p->pid); /* one read of its maps for every part of the look */
	what = proc_inspect_now(t, p, now_us);
	procmem_maps_scope_end();
	t->st.inspections++;
	ns = agent_thread_cpu_ns() - t0;
	t->st.cpu_inspect_ns += ns;
	log_debug("looked at pid=%d (%s) in %" PRIu64 " us", p->pid, what, ns / 1000);
}

struct proc *proctable_add(struct proctable *t, int pid, int64_t now_us)
{
	struct proc *p;

	if ((t->n + 1) * 2 > t->cap && procs_grow(t) != 0)
		return NULL;
	p = proc_slot(t, pid, true);
	p->gen = ++t->next_gen;
	proc_inspect(t, p, now_us);
	return p;
}

/*
 * Forgets the processes whose exit record was read EXIT_GRACE_US ago or
 * more. Called after the ring was read: the samples of the end of their
 * exit, taken microseconds after the record, have been read by then.
 */
void proctable_forget_exited(struct proctable *t, int64_t real)
{
	int64_t first = 0;

	/* nothing is due before the earliest exit's grace ends: no walk of the table */
	if (t->first_exited_us && real - t->first_exited_us < EXIT_GRACE_US)
		return;
	for (size_t i = 0; t->ndying && i < t->cap; i++) {
		struct proc *p = &t->procs[i];

		if (!p->pid || !p->exited_us)
			continue;
		if (real - p->exited_us < EXIT_GRACE_US) {
			if (!first || p->exited_us < first)
				first = p->exited_us;
			continue;
		}
		sym_forget_process(t->sym, p->pid);
		proc_remove(t, p);
		i--; /* the slot may now hold an entry moved back */
	}
	t->first_exited_us = first; /* 0 (walk next time) if an entry moved past the walk */
}

/* Forgets processes that exited (or whose pid now names another process). */
void proctable_sweep(struct proctable *t)
{
	for (size_t i = 0; i < t->cap; i++) {
		struct proc *p = &t->procs[i];
		uint64_t st;

		if (!p->pid)
			continue;
		st = procmem_start_time(p->pid);
		if (st != 0 && st == p->start_time)
			continue;
		log_debug("process gone pid=%d", p->pid);
		t->st.swept++;
		sampler_forget_pid(t->sampler, p->pid);
		sym_forget_process(t->sym, p->pid);
		if (t->target_pids && st != 0)
			sampler_add_target_pid(t->sampler, p->pid); /* still a target by pid */
		proc_remove(t, p);
		i--; /* the slot may now hold an entry moved back */
	}
}

/*
 * Process pid was forked by parent: it runs the parent's program in a copy
 * of its memory, so it is the parent's service with the parent's symbols,
 * and the BPF side already gave it the parent's thread-context location.
 * It gets the parent's look at once, without reading /proc, so a child
 * gone before its samples are read (a forked worker, a database backend of
 * a short connection) keeps its name and symbols. An unknown parent leaves
 * the child to be looked at on its first sample, as any new process.
 */
static void proc_inherit(struct proctable *t, pid_t pid, pid_t parent, uint64_t start_time)
{
	struct proc *from = proc_slot(t, parent, false), copy, *p;
	int64_t now = agent_clock_us(CLOCK_REALTIME);

	if (!from || !from->start_time)
		return;
	copy = *from; /* proc_slot may move the table */
	p = proc_slot(t, pid, false);
	if (p) {
		/* the pid was reused (the old process's exit record was lost); the
		 * sampler's entries for pid are already the child's */
		sym_forget_process(t->sym, pid);
		proc_remove(t, p);
	}
	if ((t->n + 1) * 2 > t->cap && procs_grow(t) != 0)
		return;
	p = proc_slot(t, pid, true);
	p->start_time = start_time;
	p->gen = ++t->next_gen;
	p->source_id = copy.source_id;
	p->complete = copy.complete;
	p->sdk_uprobe = copy.sdk_uprobe; /* attached for every process */
	p->sdk_probe = copy.sdk_probe;
	p->tls_known = copy.tls_known;
	p->unwind_noted = copy.unwind_noted; /* the kernel copied the parent's mapping list */
	p->inspected_us = now;
	p->maps_fp = copy.maps_fp;
	memcpy(p->pod_uid, copy.pod_uid, sizeof(p->pod_uid));
	p->pod_named = copy.pod_named;
	p->loader_tried = copy.loader_tried; /* the same loader file */
	if (copy.py == PROC_PY_FOUND && (p->pyp = malloc(sizeof(*p->pyp))) != NULL &&
	    sampler_set_python(t->sampler, (uint32_t)pid, &copy.pyp->bpf) == 0) {
		*p->pyp = *copy.pyp; /* the same interpreter at the same addresses */
		p->py = PROC_PY_FOUND;
	} else {
		free(p->pyp);
		p->pyp = NULL;
	}
	if (!p->complete)
		schedule_recheck(t, p, now);
	/* zero-code capture of the parent's target: the child's own libc probes now */
	if (t->zerocode && t->zc)
		zc_owners_agent_add(t->zc, (uint32_t)pid);
	sym_inherit_process(t->sym, pid, parent, start_time);
	if (t->unwind)
		unwind_inherit(t->unwind, pid, parent);
	t->st.procs_inherited++;
}

/*
 * p's loader mapped or unmapped objects: a look PROCTABLE_MAPS_SETTLE_US
 * from now (the record may come before the loader is done: glibc calls
 * the rendezvous before it maps the objects and again before it
 * relocates them and places their TLS), and at least PROCTABLE_MAPS_GAP_US
 * after the last look. Records until then fold into that look.
 */
static void note_maps_change(struct proctable *t, struct proc *p, int64_t now_us)
{
	int64_t due = now_us + PROCTABLE_MAPS_SETTLE_US;

	if (p->maps_due_us) {
		t->st.maps_coalesced++;
		return;
	}
	if (p->inspected_us + PROCTABLE_MAPS_GAP_US > due)
		due = p->inspected_us + PROCTABLE_MAPS_GAP_US;
	p->maps_due_us = due;
	if (due < t->next_recheck_us)
		t->next_recheck_us = due;
}

/*
 * A sampled process started a new program: what the agent knew about it
 * (symbols, thread-context location, identity) is of the old one. Look at
 * it afresh now, while it runs, so its symbols are cached even if it exits
 * before its samples are read. A process that ended (its last thread
 * exited; all its samples came before this record) is forgotten.
 */
int proctable_on_event(void *ctx, const struct sampler_event *ev)
{
	struct proctable *t = ctx;
	enum tp_record_kind kind = ev->kind;
	pid_t pid = ev->pid;
	struct proc *p = proc_slot(t, pid, false);
	bool noted;

	if (pid == t->self_pid)
		return 0;
	if (kind == TP_REC_FORK) {
		t->st.forks++;
		if (!p || p->start_time != ev->start_time)
			proc_inherit(t, pid, ev->parent, ev->start_time);
		return 0;
	}
	if (kind == TP_REC_EXIT) {
		t->st.exits++;
		/*
		 * The BPF side already dropped its TLS location and target entry.
		 * The kernel still runs the rest of the exit (freeing the memory,
		 * telling the parent) after the record, and samples of that come
		 * after it in the ring: the process is forgotten a little later
		 * (proctable_forget_exited), so they keep its name.
		 */
		if (p && !p->exited_us) {
			p->exited_us = agent_clock_us(CLOCK_REALTIME);
			if (!t->ndying++ || p->exited_us < t->first_exited_us)
				t->first_exited_us = p->exited_us;
		}
		return 0;
	}
	if (kind == TP_REC_MAPS) {
		t->st.maps_events++;
		if (p && p->start_time && !p->exited_us)
			note_maps_change(t, p, agent_clock_us(CLOCK_REALTIME));
		else /* its first sample brings its first look */
			t->st.maps_unknown++;
		return 0;
	}
	if (kind != TP_REC_EXEC)
		return 0;
	t->st.execs++;
	noted = p && p->unwind_noted;
	if (p) {
		sampler_forget_pid(t->sampler, pid);
		sym_forget_process(t->sym, pid);
		if (t->target_pids)
			sampler_add_target_pid(t->sampler, pid);
		proc_remove(t, p);
	}
	p = proctable_get(t, pid, agent_clock_us(CLOCK_REALTIME));
	if (p && !p->maps_due_us) {
		/*
		 * The look above came as the program started; the loader's
		 * calls within TP_MAPS_GAP_NS of the exec give no maps record
		 * (bpf/sampler.bpf.c), so a library dlopened that early (a CUDA
		 * runtime's injection library) is found by one more look after
		 * the gap. Its mappings unchanged, that look stops at once.
		 */
		p->maps_due_us = agent_clock_us(CLOCK_REALTIME) + PROCTABLE_MAPS_GAP_US;
		if (p->maps_due_us < t->next_recheck_us)
			t->next_recheck_us = p->maps_due_us;
	}
	/*
	 * It ran and now runs a new program: its tables now, not at its next
	 * sample read (also when the record comes after a look at the new
	 * program, whose list proc_remove dropped).
	 */
	if (noted && p && !p->unwind_noted)
		proctable_note_unwind(t, p);
	return 0;
}

/* Looks at every running process (all-process mode), so their first samples are tagged. */
void proctable_scan_all(struct proctable *t)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int64_t now = agent_clock_us(CLOCK_REALTIME);

	if (!d)
		return;
	while ((de = readdir(d)) != NULL) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (*end || pid <= 0 || pid == t->self_pid)
			continue;
		proctable_get(t, (int)pid, now);
	}
	closedir(d);
}

/* Looks at the processes of a cgroup v2 directory and of its descendants. */
void proctable_scan_cgroup(struct proctable *t, const char *dir, int depth)
{
	char path[PATH_MAX];
	struct dirent *de;
	FILE *f;
	DIR *d;
	int pid;

	if (snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= (int)sizeof(path))
		return;
	f = fopen(path, "r");
	if (f) {
		int64_t now = agent_clock_us(CLOCK_REALTIME);

		while (fscanf(f, "%d", &pid) == 1)
			if (pid > 0 && pid != t->self_pid)
				proctable_get(t, pid, now);
		fclose(f);
	}
	if (depth >= 16 || !(d = opendir(dir)))
		return;
	while ((de = readdir(d)) != NULL)
		if (de->d_type == DT_DIR && de->d_name[0] != '.' &&
		    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) < (int)sizeof(path))
			proctable_scan_cgroup(t, path, depth + 1);
	closedir(d);
}

/*
 * The look a maps record asked for. It does not count as a step of the
 * incomplete process's backoff: that schedule waits for what the loader
 * does not announce (a process context published in a new mapping).
 */
static void maps_look(struct proctable *t, struct proc *p, int64_t real)
{
	int64_t step = p->recheck_step_us, at = p->recheck_us;

	p->maps_due_us = 0;
	t->st.maps_looks++;
	proc_inspect(t, p, real);
	if (!p->complete && at > real) { /* one that was due anyway keeps its new step */
		p->recheck_step_us = step;
		p->recheck_us = at;
	}
}

/* Looks again at the processes that are due; finds the next due time. */
void proctable_recheck(struct proctable *t, int64_t real)
{
	int looks = 0;

	t->next_recheck_us = INT64_MAX;
	for (size_t i = 0; i < t->cap; i++) {
		struct proc *p = &t->procs[i];

		if (!p->pid || p->exited_us)
			continue;
		if (p->maps_due_us && real >= p->maps_due_us) {
			if (looks < MAPS_LOOKS_PER_PASS) {
				looks++;
				maps_look(t, p, real);
			} else {
				t->st.maps_deferred++; /* due now: the next pass comes at once */
			}
		} else if (!p->complete && p->recheck_us && real >= p->recheck_us) {
			/* after the first seconds, only processes that run are worth a look */
			if (p->recheck_step_us > RECHECK_FAST_US &&
			    p->last_sample_us <= p->inspected_us) {
				if (p->maps_due_us && p->maps_due_us < t->next_recheck_us)
					t->next_recheck_us = p->maps_due_us;
				continue; /* due, but waits for a sample (on_sample) */
			}
			proc_inspect(t, p, real); /* sets a new recheck_us when still incomplete */
		}
		if (p->maps_due_us && p->maps_due_us < t->next_recheck_us)
			t->next_recheck_us = p->maps_due_us;
		if (!p->complete && p->recheck_us && p->recheck_us < t->next_recheck_us)
			t->next_recheck_us = p->recheck_us;
	}
}
