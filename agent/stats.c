/*
 * stats.c - the agent's stats file (stats.h): one writer per part, each
 * reading its module's counters.
 */
#include "unwind.h"
#include "stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "aggregate.h"
#include "endpoints.h"
#include "gpu.h"
#include "obi_map.h"
#include "zc_requests.h"
#include "kubepods.h"
#include "otlp.h"
#include "otlp_grpc.h"
#include "otlp_http.h"
#include "procctx.h"
#include "proctable.h"
#include "raise.h"
#include "pyproc.h"
#include "zc_owners.h"
#include "sampler.h"
#include "shipper.h"
#include "spool.h"
#include "symbolize.h"
#include "tlsloc.h"
#include "traceprof/log.h"
#include "triggers.h"

/* Off-CPU time (docs/offcpu.md): records received, their µs, what the aggregator kept. */
static void write_offcpu_stats(const struct stats_sources *s, FILE *f, const struct agg_stats *ag)
{
	fprintf(f,
		"offcpu_records=%" PRIu64 "\noffcpu_us=%" PRIu64 "\noffcpu_refused=%" PRIu64
		"\nagg_offcpu=%" PRIu64 "\nagg_offcpu_invalid=%" PRIu64
		"\nagg_offcpu_overflow=%" PRIu64 "\n",
		s->counts->offcpu, s->counts->offcpu_us, s->counts->offcpu_refused, ag->offcpu,
		ag->offcpu_invalid, ag->offcpu_overflow);
}

/*
 * CUDA launches (docs/gpu.md): the uprobe's records (bpf_gpu_*), the join
 * (gpu_*), the rings (gpu_ring_*), the producers' own counters
 * (gpu_producer_*) and what the aggregator kept (agg_gpu_*).
 */
static void write_gpu_stats(const struct stats_sources *s, FILE *f, const struct sampler_stats *ss,
			    const struct agg_stats *ag)
{
	struct gpu_stats g;
	const struct {
		const char *name;
		uint64_t v;
	} * e, rows[] = {
		   {"bpf_gpu_launches", ss->counters[TP_CNT_GPU_LAUNCHES]},
		   {"bpf_gpu_lost", ss->counters[TP_CNT_GPU_LOST]},
		   {"bpf_gpu_filtered", ss->counters[TP_CNT_GPU_FILTERED]},
		   {"bpf_gpu_tagged", ss->counters[TP_CNT_GPU_TAGGED]},
		   {"gpu_probe_files", 0},
		   {"gpu_probed", ss->gpu_probed},
		   {"gpu_probe_no_marker", ss->gpu_no_symbol},
		   {"gpu_probe_failed", ss->gpu_probe_failed},
		   {"gpu_probe_over", ss->gpu_probe_over},
	       };

	gpu_get_stats(s->gpu, &g);
	for (e = rows; e < rows + sizeof(rows) / sizeof(rows[0]); e++)
		fprintf(f, "%s=%" PRIu64 "\n", e->name,
			strcmp(e->name, "gpu_probe_files") ? e->v : g.probe_files);
	fprintf(f,
		"gpu_launches=%" PRIu64 "\ngpu_launches_joined=%" PRIu64
		"\ngpu_launches_unmatched=%" PRIu64 "\ngpu_launches_evicted=%" PRIu64
		"\ngpu_launches_dup=%" PRIu64 "\ngpu_records=%" PRIu64
		"\ngpu_records_joined=%" PRIu64 "\ngpu_records_unmatched=%" PRIu64
		"\ngpu_records_pending_full=%" PRIu64 "\ngpu_records_bad_time=%" PRIu64
		"\ngpu_records_refused=%" PRIu64 "\ngpu_records_stored=%" PRIu64 "\ngpu_ns=%" PRIu64
		"\ngpu_procs_full=%" PRIu64 "\ngpu_stack_frames_dropped=%" PRIu64 "\n",
		g.launches, g.launches_joined, g.launches_unmatched, g.launches_evicted,
		g.launches_dup, g.records, g.records_joined, g.records_unmatched,
		g.records_pending_full, g.records_bad_time, g.records_refused, g.records_stored,
		g.gpu_ns, g.procs_full, g.stack_frames_dropped);
	fprintf(f,
		"gpu_rings_opened=%" PRIu64 "\ngpu_rings_closed=%" PRIu64
		"\ngpu_ring_open_failed=%" PRIu64 "\ngpu_ring_bad_header=%" PRIu64
		"\ngpu_ring_bad_head=%" PRIu64 "\ngpu_ring_skipped=%" PRIu64
		"\ngpu_ring_bad_records=%" PRIu64 "\ngpu_ring_bad_names=%" PRIu64
		"\ngpu_ring_cut_names=%" PRIu64 "\ngpu_ring_read_errors=%" PRIu64 "\n",
		g.ring.opened, g.rings_closed, g.ring.open_failed, g.ring.bad_header,
		g.ring.bad_head, g.ring.skipped, g.ring.bad_records, g.ring.bad_names,
		g.ring.cut_names, g.ring.read_errors);
	fprintf(
	    f,
	    "gpu_producer_launches=%" PRIu64 "\ngpu_producer_records=%" PRIu64
	    "\ngpu_producer_dropped_full=%" PRIu64 "\ngpu_producer_names_lost=%" PRIu64
	    "\ngpu_producer_cupti_dropped=%" PRIu64 "\nagg_gpu_launches=%" PRIu64
	    "\nagg_gpu_ns=%" PRIu64 "\nagg_gpu_invalid=%" PRIu64 "\nagg_gpu_overflow=%" PRIu64 "\n",
	    g.prod_launches, g.prod_records, g.prod_dropped_full, g.prod_names_lost,
	    g.prod_cupti_dropped, ag->gpu_launches, ag->gpu_ns, ag->gpu_invalid, ag->gpu_overflow);
}

/* Context sources other than the thread context: OBI's trace map (obi_map.h). */
static void write_obi_stats(const struct stats_sources *s, FILE *f, const struct sampler_stats *ss)
{
	const struct obi_map_stats *o = s->obi;

	if (!o)
		return;
	fprintf(
	    f,
	    "obi_map_installed=%" PRIu64 "\nobi_map_changes=%" PRIu64 "\nobi_map_lost=%" PRIu64
	    "\nobi_map_refused=%" PRIu64 "\nobi_map_errors=%" PRIu64 "\nbpf_ctx_obi=%" PRIu64 "\n",
	    o->installed, o->changes, o->lost, o->refused, o->errors, ss->counters[TP_CNT_CTX_OBI]);
}

/* Process contexts read (OTEP 4719), by payload form, and their retries. */
static void write_procctx_stats(FILE *f)
{
	struct procctx_stats p;

	procctx_stats_get(&p);
	fprintf(f,
		"procctx_merged=%" PRIu64 "\nprocctx_draft=%" PRIu64 "\nprocctx_updating=%" PRIu64
		"\nprocctx_changed=%" PRIu64 "\nprocctx_gave_up=%" PRIu64
		"\nprocctx_bad_payload=%" PRIu64 "\nprocctx_key_refreshes=%" PRIu64
		"\nprocctx_key_refresh_limited=%" PRIu64 "\nprocctx_key_map_rewritten=%" PRIu64
		"\n",
		p.reads_merged, p.reads_draft, p.updating, p.changed, p.gave_up, p.bad_payload,
		p.key_refreshes, p.key_refresh_limited, p.key_map_rewritten);
}

/* Python frames (docs/python.md): the sampler's walk, the processes, the symbolizing. */
static void write_py_stats(const struct stats_sources *s, FILE *f, const struct sampler_stats *ss)
{
	struct pycache_stats pc = {0};

	if (s->pyc)
		pycache_get_stats(s->pyc, &pc);
	fprintf(f,
		"bpf_py_stacks=%" PRIu64 "\nbpf_py_no_tstate=%" PRIu64 "\nbpf_py_frames=%" PRIu64
		"\nbpf_py_trunc=%" PRIu64 "\nbpf_py_fault=%" PRIu64 "\npy_processes=%" PRIu64
		"\npy_unsupported=%" PRIu64 "\npy_refused=%" PRIu64 "\npy_stacks=%" PRIu64
		"\npy_eval_mismatch=%" PRIu64 "\npy_unknown=%" PRIu64 "\npy_code_hits=%" PRIu64
		"\npy_code_misses=%" PRIu64 "\npy_code_faults=%" PRIu64 "\npy_code_flushes=%" PRIu64
		"\npy_code_stale=%" PRIu64 "\npy_code_share_evicts=%" PRIu64
		"\npy_code_bytes=%" PRIu64 "\npy_code_budget_bytes=%" PRIu64 "\n",
		ss->counters[TP_CNT_PY_STACKS], ss->counters[TP_CNT_PY_NO_TSTATE],
		ss->counters[TP_CNT_PY_FRAMES], ss->counters[TP_CNT_PY_TRUNC],
		ss->counters[TP_CNT_PY_FAULT], s->procs->st.py_found, s->procs->st.py_unsupported,
		s->procs->st.py_refused, s->counts->py_stacks, s->counts->py_eval_mismatch,
		s->counts->py_unknown, pc.hits, pc.misses, pc.faults, pc.flushes, pc.stale,
		pc.share_evicts, pc.bytes, pc.budget_bytes);
}

/* HTTP/1.x requests found from system calls (docs/zero-code-http.md). */
static void write_zc_stats(const struct stats_sources *s, FILE *f, const struct sampler_stats *ss)
{
	const struct zc_requests_stats *z = s->zc;

	if (!z)
		return;
	fprintf(f,
		"zc_attached=%" PRIu64 "\nbpf_ctx_http=%" PRIu64 "\nbpf_http_requests=%" PRIu64
		"\nbpf_http_lost=%" PRIu64 "\nbpf_http_multiplexed=%" PRIu64
		"\nbpf_http_no_state=%" PRIu64 "\n",
		ss->zc_attached, ss->counters[TP_CNT_CTX_HTTP], ss->counters[TP_CNT_HTTP_REQUESTS],
		ss->counters[TP_CNT_HTTP_LOST], ss->counters[TP_CNT_HTTP_MULTIPLEX],
		ss->counters[TP_CNT_HTTP_NO_STATE]);
	fprintf(f,
		"bpf_http_not_head=%" PRIu64 "\nbpf_http_bad_line=%" PRIu64
		"\nbpf_http_split=%" PRIu64 "\nbpf_http_pipelined=%" PRIu64
		"\nbpf_http_head_cut=%" PRIu64 "\nbpf_http_stale=%" PRIu64
		"\nbpf_http_bad_traceparent=%" PRIu64 "\n",
		ss->counters[TP_CNT_HTTP_NOT_HEAD], ss->counters[TP_CNT_HTTP_BAD_LINE],
		ss->counters[TP_CNT_HTTP_SPLIT], ss->counters[TP_CNT_HTTP_PIPELINED],
		ss->counters[TP_CNT_HTTP_HEAD_CUT], ss->counters[TP_CNT_HTTP_STALE],
		ss->counters[TP_CNT_HTTP_BAD_TRACEPARENT]);
	fprintf(f,
		"zc_hook_libc=%" PRIu64 "\nzc_hook_syscalls=%" PRIu64 "\nzc_uprobe_links=%" PRIu64
		"\nzc_libc_fallbacks=%" PRIu64 "\nzc_attaches=%" PRIu64 "\n",
		ss->zc_hook_libc, ss->zc_hook_syscalls, ss->zc_uprobe_links, ss->zc_libc_fallbacks,
		ss->zc_attaches);
	fprintf(f,
		"zc_requests=%" PRIu64 "\nzc_invalid=%" PRIu64 "\nzc_dropped=%" PRIu64
		"\nzc_traceparent=%" PRIu64 "\nzc_unanswered=%" PRIu64 "\nzc_multiplexed=%" PRIu64
		"\nzc_truncated=%" PRIu64 "\nzc_bad_target=%" PRIu64 "\nzc_windows=%" PRIu64
		"\nzc_forwarded=%" PRIu64 "\nzc_forward_lost=%" PRIu64 "\n",
		z->requests, z->invalid, z->dropped, z->traceparent, z->unanswered, z->multiplexed,
		z->truncated, z->bad_target, z->windows, z->forwarded, z->forward_lost);
}

/* The Kubernetes API side: kube_synced is 1 once the node's pods were listed. */
static void write_kube_stats(const struct stats_sources *s, FILE *f)
{
	struct kubepods_stats ks;

	if (!s->ep->kube)
		return;
	kubepods_get_stats(s->ep->kube, &ks);
	fprintf(f,
		"kube_pods_known=%" PRIu64 "\nkube_errors=%" PRIu64 "\nkube_synced=%d\n"
		"kube_pods_dropped=%" PRIu64 "\nkube_labels_dropped=%" PRIu64
		"\nkube_renamed=%" PRIu64 "\n",
		ks.pods_known, ks.errors, ks.synced ? 1 : 0, ks.pods_dropped, ks.labels_dropped,
		s->procs->st.kube_renamed);
}

static void write_trigger_stats(const struct stats_sources *s, FILE *f)
{
	struct triggers_stats ts;

	if (!s->ep->trig)
		return;
	triggers_get_stats(s->ep->trig, &ts);
	fprintf(f,
		"trigger_applies=%" PRIu64 "\ntrigger_applies_changed=%" PRIu64
		"\ntrigger_applies_fenced=%" PRIu64 "\ntrigger_requests=%" PRIu64
		"\ntrigger_requests_target=%" PRIu64 "\ntrigger_claims_queued=%" PRIu64
		"\ntrigger_claims_dropped=%" PRIu64 "\ntrigger_claims_abandoned=%" PRIu64
		"\ntrigger_claims_ok=%" PRIu64 "\ntrigger_claims_null=%" PRIu64
		"\ntrigger_claims_skipped=%" PRIu64 "\ntrigger_claim_errors=%" PRIu64 "\n",
		ts.applies, ts.applies_changed, ts.applies_fenced, ts.requests, ts.requests_target,
		ts.claims_queued, ts.claims_dropped, ts.claims_abandoned, ts.claims_ok,
		ts.claims_null, ts.claims_skipped, ts.claim_errors);
	fprintf(f,
		"control_calls=%" PRIu64 "\ncontrol_ok=%" PRIu64
		"\ncontrol_unauthenticated=%" PRIu64 "\ncontrol_invalid=%" PRIu64
		"\ncontrol_unimplemented=%" PRIu64 "\ncontrol_log_suppressed=%" PRIu64 "\n",
		s->ep->control_stats.calls, s->ep->control_stats.ok,
		s->ep->control_stats.unauthenticated, s->ep->control_stats.invalid,
		s->ep->control_stats.unimplemented, s->ep->control_stats.log_suppressed);
}

/*
 * Every listening port's connection counters, live while it runs (the
 * stats file at exit and the SIGUSR1 snapshot): <port>_conns_accepted,
 * _refused_full, _refused_peer, _evicted, _timeouts, _open, the evictions
 * by reason, and on gRPC ports the calls refused for breaking the spec.
 */
static void write_conn_stats(const struct stats_sources *s, FILE *f)
{
	static const char *const names[3] = {"otlp_grpc", "otlp_http", "control"};

	for (int i = 0; i < 3; i++) {
		struct tp_conn_stats st = s->ep->conns_stopped[i];

		if (i == CONN_PORT_OTLP_GRPC && s->ep->otlp_grpc)
			otlp_grpc_conn_stats(s->ep->otlp_grpc, &st);
		else if (i == CONN_PORT_OTLP_HTTP && s->ep->otlp_http)
			otlp_http_conn_stats(s->ep->otlp_http, &st);
		else if (i == CONN_PORT_CONTROL && s->ep->control)
			control_conn_stats(s->ep->control, &st);
		fprintf(f,
			"%s_conns_accepted=%" PRIu64 "\n%s_conns_refused_full=%" PRIu64
			"\n%s_conns_refused_peer=%" PRIu64 "\n%s_conns_evicted=%" PRIu64
			"\n%s_conns_timeouts=%" PRIu64 "\n%s_conns_open=%" PRIu64 "\n",
			names[i], st.accepted, names[i], st.refused_full, names[i], st.refused_peer,
			names[i], st.evicted, names[i], st.timeouts, names[i], st.open);
		fprintf(f,
			"%s_conns_evicted_idle=%" PRIu64 "\n%s_conns_evicted_slow_head=%" PRIu64
			"\n%s_conns_evicted_slow_body=%" PRIu64 "\n%s_conns_evicted_slow=%" PRIu64
			"\n",
			names[i], st.evicted_idle, names[i], st.evicted_slow_head, names[i],
			st.evicted_slow_body, names[i], st.evicted_slow);
		if (i == CONN_PORT_OTLP_HTTP)
			fprintf(f, "otlp_http_bodies_refused=%" PRIu64 "\n", st.bodies_refused);
		else
			fprintf(f,
				"%s_calls_no_encoding=%" PRIu64 "\n%s_calls_extra_messages=%" PRIu64
				"\n",
				names[i], st.no_encoding, names[i], st.extra_messages);
	}
}

static void write_otlp_stats(const struct stats_sources *s, FILE *f)
{
	struct otlp_stats os;

	if (!s->ep->otlp)
		return;
	otlp_receiver_get_stats(s->ep->otlp, &os);
	for (int i = 0; i < OTLP_STATUS__COUNT; i++)
		fprintf(f, "otlp_exports_%s=%" PRIu64 "\n", otlp_status_name(i), os.exports[i]);
	fprintf(f,
		"otlp_exports_partial=%" PRIu64 "\notlp_bytes=%" PRIu64 "\notlp_spans=%" PRIu64
		"\notlp_rows=%" PRIu64 "\notlp_rows_unqueued=%" PRIu64
		"\notlp_ignored_kind=%" PRIu64 "\n",
		os.exports_partial, os.bytes, os.spans, os.rows, os.rows_unqueued, os.ignored_kind);
	for (int i = 0; i < OTLP_REJ__COUNT; i++)
		fprintf(f, "otlp_rejected_%s=%" PRIu64 "\n", otlp_reject_name(i), os.rejected[i]);
	fprintf(f, "otlp_rows_status_none=%" PRIu64 "\n", os.rows_by_status[0]);
	for (int i = 1; i < 6; i++)
		fprintf(f, "otlp_rows_status_%dxx=%" PRIu64 "\n", i, os.rows_by_status[i]);
	fprintf(f, "otlp_compressed=%" PRIu64 "\n", os.compressed);
	for (int i = 0; i < OTLP_REFUSE__COUNT; i++)
		fprintf(f, "otlp_refused_%s=%" PRIu64 "\n", otlp_refusal_name(i), os.refused[i]);
	fprintf(f, "otlp_http_timeouts=%" PRIu64 "\notlp_http_refused=%" PRIu64 "\n",
		s->ep->http_timeouts, s->ep->http_refused);
	fprintf(f,
		"otlp_forward_submitted=%" PRIu64 "\notlp_forward_sent=%" PRIu64
		"\notlp_forward_failed=%" PRIu64 "\notlp_forward_dropped=%" PRIu64 "\n",
		s->ep->fwd_stats.submitted, s->ep->fwd_stats.sent, s->ep->fwd_stats.failed,
		s->ep->fwd_stats.dropped);
}

static void write_spool_stats(const struct stats_sources *s, FILE *f,
			      const struct shipper_stats *sh)
{
	struct spool_stats sp = {0};
	const struct spool_state *lost = &s->spool_prev->lost;

	if (s->spool)
		spool_get_stats(s->spool, &sp);
	fprintf(f,
		"spool_on=%d\nspool_windows_written=%" PRIu64 "\nspool_windows_removed=%" PRIu64
		"\nspool_windows_full=%" PRIu64 "\nspool_write_errors=%" PRIu64
		"\nspool_commit_errors=%" PRIu64 "\nspool_files_bad=%" PRIu64
		"\nspool_files=%zu\nspool_bytes=%zu\nspool_windows_recovered=%" PRIu64
		"\nspool_windows_resumed=%" PRIu64 "\nsamples_unspooled=%" PRIu64
		"\nrequests_unspooled=%" PRIu64 "\n",
		s->spool != NULL, sp.windows_written, sp.windows_removed, sp.windows_full,
		sp.write_errors, sp.commit_errors, sp.files_bad, sp.files, sp.bytes,
		sh->windows_recovered, sh->windows_resumed, sh->samples_unspooled,
		sh->requests_unspooled);
	fprintf(f,
		"prev_run_unclean=%d\nprev_run_samples_lost=%" PRIu64
		"\nprev_run_spans_lost=%" PRIu64 "\nprev_run_raised_lost=%" PRIu64 "\n",
		s->spool_prev->unclean, lost->samples_open + lost->samples_unspooled,
		lost->requests_unspooled, lost->raised_held);
}

static void write_hold_stats(const struct stats_sources *s, FILE *f)
{
	struct sampler_stats ss = {0};
	struct hold_stats hs;

	sampler_get_stats(s->sampler, &ss);
	hold_get_stats(s->raise->hold, &hs);
	fprintf(f,
		"bpf_raised=%" PRIu64 "\nbpf_raised_base=%" PRIu64 "\nbpf_raised_other=%" PRIu64
		"\nbpf_raised_idle=%" PRIu64 "\nbpf_base_covered=%" PRIu64 "\nraised=%" PRIu64
		"\nraised_unheld=%" PRIu64 "\n",
		ss.counters[TP_CNT_RAISED], ss.counters[TP_CNT_RAISED_BASE],
		ss.counters[TP_CNT_RAISED_OTHER], ss.counters[TP_CNT_RAISED_IDLE],
		ss.counters[TP_CNT_BASE_COVERED], s->raise->raised, s->raise->raised_unheld);
	fprintf(f,
		"hold_samples=%" PRIu64 "\nhold_traces=%" PRIu64 "\nhold_traces_kept=%" PRIu64
		"\nhold_traces_dropped=%" PRIu64 "\nhold_traces_evicted=%" PRIu64
		"\nhold_traces_expired=%" PRIu64 "\nhold_decide_unknown=%" PRIu64
		"\nhold_samples_kept=%" PRIu64 "\nhold_samples_lost=%" PRIu64 "\nhold_rows=%" PRIu64
		"\nhold_bytes=%" PRIu64 "\n",
		hs.samples, hs.traces, hs.traces_kept, hs.traces_dropped, hs.traces_evicted,
		hs.traces_expired, hs.decide_unknown, hs.samples_kept, hs.samples_lost, hs.rows,
		hs.held_bytes);
	fprintf(f,
		"trigger_rows_queued=%" PRIu64 "\ntrigger_rows_lost=%" PRIu64
		"\ntrigger_raise_errors=%" PRIu64 "\ntrigger_offcpu_errors=%" PRIu64
		"\ntrigger_zerocode_errors=%" PRIu64 "\ntrigger_decisions_dropped=%" PRIu64
		"\nzc_refused=%" PRIu64 "\n",
		s->raise->hold_rows - s->raise->hold_rows_lost, s->raise->hold_rows_lost,
		s->raise->raise_errors, s->raise->offcpu_errors, s->raise->zerocode_errors,
		s->raise->decisions_dropped, s->raise->zc ? s->raise->zc->refused : 0);
}

/* CFI unwinding: the kernel walker's counters and the table placement's. */
static void write_unwind_stats(const struct stats_sources *s, FILE *f,
			       const struct sampler_stats *ss)
{
	struct unwind_stats u;

	fprintf(f,
		"bpf_uw_stacks=%" PRIu64 "\nbpf_uw_root=%" PRIu64 "\nbpf_uw_fp_end=%" PRIu64
		"\nbpf_uw_cut=%" PRIu64 "\nbpf_uw_truncated=%" PRIu64 "\nbpf_uw_frames_cfi=%" PRIu64
		"\nbpf_uw_frames_fp=%" PRIu64 "\nbpf_uw_frames_not_ready=%" PRIu64 "\n",
		ss->counters[TP_CNT_UW_STACKS], ss->counters[TP_CNT_UW_ROOT],
		ss->counters[TP_CNT_UW_FP_END], ss->counters[TP_CNT_UW_CUT],
		ss->counters[TP_CNT_UW_TRUNC], ss->counters[TP_CNT_UW_FRAMES_CFI],
		ss->counters[TP_CNT_UW_FRAMES_FP], ss->counters[TP_CNT_UW_NOT_READY]);
	if (!s->unwind)
		return;
	unwind_get_stats(s->unwind, &u);
	fprintf(f,
		"unwind_procs=%" PRIu64 "\nunwind_notes=%" PRIu64 "\nunwind_maps_placed=%" PRIu64
		"\nunwind_maps_pending=%" PRIu64 "\nunwind_maps_no_table=%" PRIu64
		"\nunwind_maps_dropped=%" PRIu64 "\nunwind_tables_placed=%" PRIu64
		"\nunwind_tables=%" PRIu64 "\nunwind_rows=%" PRIu64 "\nunwind_rows_cap=%" PRIu64
		"\nunwind_evictions=%" PRIu64 "\nunwind_no_room=%" PRIu64
		"\nunwind_too_large=%" PRIu64 "\nunwind_rows_narrowed=%" PRIu64
		"\nunwind_map_errors=%" PRIu64 "\nunwind_gave_up=%" PRIu64
		"\nunwind_place_ns=%" PRIu64 "\nunwind_note_ns=%" PRIu64
		"\nunwind_share_refused=%" PRIu64 "\n",
		u.procs, u.notes, u.maps_placed, u.maps_pending, u.maps_no_table, u.maps_dropped,
		u.tables_placed, u.tables, u.rows, u.rows_cap, u.evictions, u.no_room, u.too_large,
		u.rows_narrowed, u.map_errors, u.gave_up, u.place_ns, u.note_ns, u.share_refused);
	fprintf(f,
		"cfi_builds=%" PRIu64 "\ncfi_build_failures=%" PRIu64 "\ncfi_refused=%" PRIu64
		"\ncfi_queue_full=%" PRIu64 "\ncfi_no_room=%" PRIu64 "\ncfi_cache_bytes=%" PRIu64
		"\n",
		u.cache.builds, u.cache.build_failures, u.cache.refused, u.cache.queue_full,
		u.cache.no_room, u.cache.bytes);
}

/* New mappings as they happen: the loader uprobe, its records, the looks they bring. */
static void write_maps_stats(const struct stats_sources *s, FILE *f, const struct sampler_stats *ss)
{
	const struct proctable_stats *ps = &s->procs->st;

	fprintf(f,
		"bpf_maps=%" PRIu64 "\nbpf_maps_limited=%" PRIu64 "\nloaders_probed=%" PRIu64
		"\nloaders_no_symbol=%" PRIu64 "\nloaders_failed=%" PRIu64 "\nloaders_over=%" PRIu64
		"\nloaders_found=%" PRIu64 "\nloaders_missing=%" PRIu64 "\n",
		ss->counters[TP_CNT_MAPS], ss->counters[TP_CNT_MAPS_LIMITED], ss->loaders_probed,
		ss->loaders_no_symbol, ss->loaders_failed, ss->loaders_over, ps->loaders_found,
		ps->loaders_missing);
	fprintf(f,
		"maps_events=%" PRIu64 "\nmaps_coalesced=%" PRIu64 "\nmaps_unknown=%" PRIu64
		"\nmaps_looks=%" PRIu64 "\nmaps_deferred=%" PRIu64 "\ntls_not_ready=%" PRIu64 "\n",
		ps->maps_events, ps->maps_coalesced, ps->maps_unknown, ps->maps_looks,
		ps->maps_deferred, ps->tls_not_ready);
	fprintf(f,
		"bpf_off_records=%" PRIu64 "\nbpf_off_short=%" PRIu64 "\nbpf_off_lost=%" PRIu64
		"\nbpf_off_lost_us=%" PRIu64 "\nbpf_off_state_full=%" PRIu64
		"\nbpf_off_no_wakeup=%" PRIu64 "\nbpf_off_ustack_lost=%" PRIu64
		"\nbpf_off_run_time_ns=%" PRIu64 "\nbpf_off_run_cnt=%" PRIu64 "\n",
		ss->counters[TP_CNT_OFF_RECORDS], ss->counters[TP_CNT_OFF_SHORT],
		ss->counters[TP_CNT_OFF_LOST], ss->counters[TP_CNT_OFF_LOST_US],
		ss->counters[TP_CNT_OFF_STATE_FULL], ss->counters[TP_CNT_OFF_NO_WAKEUP],
		ss->counters[TP_CNT_OFF_USTACK_LOST], ss->offcpu_run_time_ns, ss->offcpu_run_cnt);
}

void stats_write(const struct stats_sources *s)
{
	struct sampler_stats ss = {0};
	struct agg_stats ag;
	struct shipper_stats sh;
	struct sym_stats sy;
	struct rusage ru;
	char tmp[4096 + 16]; /* agent_config.stats_file and ".tmp" */
	FILE *f;

	if (!s->path[0])
		return;
	/* replaced atomically: a reader sees the previous file or this one, whole */
	snprintf(tmp, sizeof(tmp), "%s.tmp", s->path);
	f = fopen(tmp, "w");
	if (!f) {
		log_warn("cannot write stats file %s: %s", tmp, strerror(errno));
		return;
	}
	endpoints_copy_counts(s->ep);
	sampler_get_stats(s->sampler, &ss);
	agg_get_stats(s->agg, &ag);
	shipper_get_stats(s->shipper, &sh);
	sym_get_stats(s->sym, &sy);
	getrusage(RUSAGE_SELF, &ru);
	fprintf(f, "elapsed_s=%.3f\n", s->elapsed_s);
	fprintf(f, "cpu_user_s=%.6f\ncpu_sys_s=%.6f\nmax_rss_kb=%ld\n",
		(double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
		(double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6, ru.ru_maxrss);
	fprintf(f,
		"bpf_samples=%" PRIu64 "\nbpf_filtered=%" PRIu64 "\nbpf_ringbuf_full=%" PRIu64
		"\nbpf_tagged=%" PRIu64 "\nbpf_ctx_fault=%" PRIu64 "\nbpf_no_ustack=%" PRIu64
		"\nbpf_run_time_ns=%" PRIu64 "\nbpf_run_cnt=%" PRIu64 "\nbpf_stack_retakes=%" PRIu64
		"\n",
		ss.counters[TP_CNT_SAMPLES], ss.counters[TP_CNT_FILTERED],
		ss.counters[TP_CNT_RINGBUF_FULL], ss.counters[TP_CNT_TAGGED],
		ss.counters[TP_CNT_CTX_FAULT], ss.counters[TP_CNT_NO_USTACK], ss.run_time_ns,
		ss.run_cnt, ss.counters[TP_CNT_STACK_RETAKE]);
	fprintf(f,
		"samples=%" PRIu64 "\nsamples_self=%" PRIu64 "\ntagged=%" PRIu64
		"\ninvalid_ctx=%" PRIu64 "\nctx_faults=%" PRIu64 "\nstack_hits=%" PRIu64
		"\nstack_misses=%" PRIu64 "\nagg_refused=%" PRIu64 "\nprocesses=%" PRIu64
		"\ntls_found=%" PRIu64 "\ntls_unsupported=%" PRIu64 "\nexecs=%" PRIu64
		"\nexits=%" PRIu64 "\nswept=%" PRIu64 "\nsym_renewals=%" PRIu64 "\n",
		s->counts->samples, s->counts->samples_self, s->counts->tagged,
		s->counts->invalid_ctx, s->counts->ctx_faults, s->counts->stack_hits,
		s->counts->stack_misses, s->counts->agg_refused, s->procs->st.procs_seen,
		s->procs->st.tls_found, s->procs->st.tls_unsupported, s->procs->st.execs,
		s->procs->st.exits, s->procs->st.swept, s->counts->sym_renewals);
	fprintf(f,
		"agg_samples=%" PRIu64 "\nagg_late=%" PRIu64 "\nagg_overflow=%" PRIu64
		"\nagg_windows=%" PRIu64 "\nagg_names_sanitized=%" PRIu64 "\n",
		ag.samples, ag.samples_late, ag.samples_overflow, ag.windows, ag.names_sanitized);
	fprintf(f,
		"windows_submitted=%" PRIu64 "\nwindows_delivered=%" PRIu64
		"\nwindows_dropped=%" PRIu64 "\nsamples_submitted=%" PRIu64
		"\nsamples_delivered=%" PRIu64 "\nsamples_dropped=%" PRIu64
		"\nsamples_undelivered=%" PRIu64 "\nflush_errors=%" PRIu64 "\n",
		sh.windows_submitted, sh.windows_delivered, sh.windows_dropped,
		sh.samples_submitted, sh.samples_delivered, sh.samples_dropped,
		sh.samples_undelivered, sh.flush_errors);
	fprintf(f,
		"requests_submitted=%" PRIu64 "\nrequests_delivered=%" PRIu64
		"\nrequests_dropped=%" PRIu64 "\nrequests_invalid=%" PRIu64
		"\nrequests_undelivered=%" PRIu64 "\nrequests_refused=%" PRIu64 "\n",
		sh.requests_submitted, sh.requests_delivered, sh.requests_dropped,
		sh.requests_invalid, sh.requests_undelivered, sh.requests_refused);
	write_offcpu_stats(s, f, &ag);
	write_unwind_stats(s, f, &ss);
	write_maps_stats(s, f, &ss);
	write_obi_stats(s, f, &ss);
	write_procctx_stats(f);
	write_zc_stats(s, f, &ss);
	write_py_stats(s, f, &ss);
	write_gpu_stats(s, f, &ss, &ag);
	write_spool_stats(s, f, &sh);
	write_otlp_stats(s, f);
	write_hold_stats(s, f);
	write_trigger_stats(s, f);
	write_kube_stats(s, f);
	write_conn_stats(s, f);
	fprintf(f,
		"sym_lookups=%" PRIu64 "\nsym_cache_hits=%" PRIu64 "\nsym_elf_loads=%" PRIu64
		"\nsym_elf_bytes=%" PRIu64 "\nsym_unknown_frames=%" PRIu64
		"\nsym_map_refreshes=%" PRIu64 "\nsym_elf_refused=%" PRIu64 "\n",
		sy.lookups, sy.cache_hits, sy.elf_loads, sy.elf_bytes, sy.unknown_frames,
		sy.map_refreshes, sy.elf_refused);
	fprintf(f,
		"perfmap_processes=%" PRIu64 "\nperfmap_entries=%" PRIu64 "\nperfmap_bytes=%" PRIu64
		"\nperfmap_lines=%" PRIu64 "\nperfmap_bad_lines=%" PRIu64
		"\nperfmap_dropped=%" PRIu64 "\nperfmap_rereads=%" PRIu64
		"\nperfmap_refused=%" PRIu64 "\nperfmap_frames=%" PRIu64 "\n",
		sy.perfmap_processes, sy.perfmap_entries, sy.perfmap_bytes, sy.perfmap_lines,
		sy.perfmap_bad_lines, sy.perfmap_dropped, sy.perfmap_rereads, sy.perfmap_refused,
		sy.perfmap_frames);
	fprintf(f,
		"forks=%" PRIu64 "\nprocs_inherited=%" PRIu64 "\nsym_inherited=%" PRIu64
		"\nloop_passes=%" PRIu64 "\ntls_files_read=%" PRIu64 "\n",
		s->procs->st.forks, s->procs->st.procs_inherited, sy.inherited,
		s->counts->loop_passes, tlsloc_files_read());
	fprintf(f,
		"inspections=%" PRIu64 "\nrechecks_unchanged=%" PRIu64 "\nmain_cpu_ns=%" PRIu64
		"\nmain_cpu_inspect_ns=%" PRIu64 "\nmain_cpu_symbolize_ns=%" PRIu64
		"\nmain_cpu_poll_ns=%" PRIu64 "\nmain_cpu_window_ns=%" PRIu64 "\n",
		s->procs->st.inspections, s->procs->st.rechecks_unchanged, agent_thread_cpu_ns(),
		s->procs->st.cpu_inspect_ns, s->counts->cpu_symbolize_ns, s->counts->cpu_poll_ns,
		s->counts->cpu_window_ns);
	if (fclose(f) != 0 || rename(tmp, s->path) != 0) {
		log_warn("cannot write stats file %s: %s", s->path, strerror(errno));
		unlink(tmp);
	}
}
