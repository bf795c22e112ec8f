/*
 * config.c - the agent's settings table and its two readers (file, flags).
 *
 * One table lists every setting once: name, type, bounds, default and help.
 * The file reader, the flag parser (main.c), --help and config_print all
 * walk it, so a setting cannot exist in one place and not another. The
 * generic machinery (value types, config files, help, printing) is
 * traceprof/options.h; the agent's own value forms (target, span kinds)
 * and the masked database are here.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control_auth.h"
#include "otlp.h"
#include "traceprof/log.h"
#include "traceprof/options.h"

/* Copies a conninfo or URI with any password replaced by "***". */
static void mask_password(const char *in, char *out, size_t outlen)
{
	const char *scheme = strstr(in, "://");
	size_t o = 0;

	if (scheme) {
		const char *at = strchr(scheme + 3, '@');
		const char *colon = strchr(scheme + 3, ':');

		if (at && colon && colon < at) {
			snprintf(out, outlen, "%.*s:***%s", (int)(colon - in), in, at);
			return;
		}
		snprintf(out, outlen, "%s", in);
		return;
	}
	for (const char *p = in; *p && o + 1 < outlen;) {
		if (strncmp(p, "password", 8) == 0) {
			const char *q = p + 8;

			while (*q == ' ')
				q++;
			if (*q == '=') {
				q++;
				while (*q == ' ')
					q++;
				if (*q == '\'') {
					for (q++; *q && *q != '\''; q++)
						if (*q == '\\' && q[1])
							q++;
					if (*q)
						q++;
				} else {
					while (*q && *q != ' ')
						q++;
				}
				o += (size_t)snprintf(out + o, outlen - o, "password=***");
				if (o >= outlen)
					return;
				p = q;
				continue;
			}
		}
		out[o++] = *p++;
	}
	out[o < outlen ? o : outlen - 1] = '\0';
}

static const struct {
	const char *name;
	unsigned bit;
} span_kinds[] = {{"server", OTLP_KIND_SERVER},
		  {"client", OTLP_KIND_CLIENT},
		  {"internal", OTLP_KIND_INTERNAL},
		  {"producer", OTLP_KIND_PRODUCER},
		  {"consumer", OTLP_KIND_CONSUMER}};

#define NKINDS (sizeof(span_kinds) / sizeof(span_kinds[0]))

static int parse_span_kinds(void *obj, const struct tp_option *o, const char *v, char *err,
			    size_t errlen)
{
	struct agent_config *cfg = obj;

	unsigned mask = 0;

	(void)o;
	while (*v) {
		const char *end = strchr(v, ',');
		size_t n = end ? (size_t)(end - v) : strlen(v);
		bool found = false;

		while (n && *v == ' ')
			v++, n--;
		while (n && v[n - 1] == ' ')
			n--;
		for (size_t i = 0; i < NKINDS; i++)
			if (strlen(span_kinds[i].name) == n &&
			    strncmp(span_kinds[i].name, v, n) == 0) {
				mask |= span_kinds[i].bit;
				found = true;
			}
		if (!found) {
			snprintf(err, errlen,
				 "otlp-span-kinds: unknown kind \"%.*s\": want a comma list of "
				 "server, client, internal, producer, consumer",
				 (int)n, v);
			return -EINVAL;
		}
		v = end ? end + 1 : v + strlen(v);
	}
	if (!mask) {
		snprintf(err, errlen, "otlp-span-kinds: give at least one kind");
		return -EINVAL;
	}
	cfg->otlp_span_kinds = mask;
	return 0;
}

static int parse_target(void *obj, const struct tp_option *o, const char *v, char *err,
			size_t errlen)
{
	struct agent_config *cfg = obj;

	(void)o;
	if (strcmp(v, "all") == 0) {
		cfg->target = CONFIG_TARGET_ALL;
		cfg->npids = 0;
		return 0;
	}
	if (strncmp(v, "cgroup:", 7) == 0) {
		if (!v[7] || strlen(v + 7) >= sizeof(cfg->cgroup)) {
			snprintf(err, errlen, "cgroup: needs a directory path");
			return -EINVAL;
		}
		cfg->target = CONFIG_TARGET_CGROUP;
		strcpy(cfg->cgroup, v + 7);
		return 0;
	}
	if (strncmp(v, "pid:", 4) == 0) {
		const char *p = v + 4;
		int n = 0;

		while (*p) {
			char *end;
			long pid;

			errno = 0;
			pid = strtol(p, &end, 10);
			if (end == p || errno || pid <= 0 || pid > INT32_MAX ||
			    (*end && *end != ',')) {
				snprintf(err, errlen, "bad pid list \"%s\": want pid:N[,N...]",
					 v + 4);
				return -EINVAL;
			}
			if (n == CONFIG_MAX_PIDS) {
				snprintf(err, errlen, "at most %d pids", CONFIG_MAX_PIDS);
				return -EINVAL;
			}
			cfg->pids[n++] = (int)pid;
			p = *end ? end + 1 : end;
		}
		if (n == 0) {
			snprintf(err, errlen, "pid: needs at least one pid");
			return -EINVAL;
		}
		cfg->target = CONFIG_TARGET_PIDS;
		cfg->npids = n;
		return 0;
	}
	snprintf(err, errlen, "want all, pid:N[,N...] or cgroup:PATH, not \"%s\"", v);
	return -EINVAL;
}

static void print_target(FILE *out, const void *obj, const struct tp_option *o)
{
	const struct agent_config *cfg = obj;

	(void)o;
	if (cfg->target == CONFIG_TARGET_ALL) {
		fprintf(out, "all");
	} else if (cfg->target == CONFIG_TARGET_CGROUP) {
		fprintf(out, "cgroup:%s", cfg->cgroup);
	} else {
		fprintf(out, "pid:");
		for (int i = 0; i < cfg->npids; i++)
			fprintf(out, "%s%d", i ? "," : "", cfg->pids[i]);
	}
}

static void print_span_kinds(FILE *out, const void *obj, const struct tp_option *o)
{
	const struct agent_config *cfg = obj;

	(void)o;
	for (size_t i = 0, n = 0; i < NKINDS; i++)
		if (cfg->otlp_span_kinds & span_kinds[i].bit)
			fprintf(out, "%s%s", n++ ? "," : "", span_kinds[i].name);
}

/* The database, never with its password. */
static void print_db(FILE *out, const void *obj, const struct tp_option *o)
{
	char db[4096 + 16];

	(void)o;
	mask_password(((const struct agent_config *)obj)->db, db, sizeof(db));
	fputs(db, out);
}

static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const auto_words[] = {"auto", "on", "off", NULL}; /* enum config_auto */
/* enum sampler_offcpu_mode */
static const char *const offcpu_words[] = {"off", "requests", "all", NULL};
static const char *const onoff_words[] = {"off", "on", NULL};
static const char *const zerocode_words[] = {"off", "on", "syscalls", NULL};

#define FIELD(f) offsetof(struct agent_config, f)
/* A number of one of the numeric types. */
#define NUM(n, t, f, lo, hi, d, h)                                                                 \
	{                                                                                          \
		.name = n, .type = t, .offset = FIELD(f), .min = lo, .max = hi, .def = d,          \
		.help = h                                                                          \
	}
/* Text kept in a char array. */
#define TEXT(n, f, d, h)                                                                           \
	{                                                                                          \
		.name = n, .type = TP_OPT_STRBUF, TP_OPT_STRFIELD(struct agent_config, f),         \
		.def = d, .help = h                                                                \
	}
static const struct tp_option settings[] = {
    NUM("frequency", TP_OPT_INT, frequency, 1, 1000, "19", "sampling frequency, Hz"),
    NUM("window", TP_OPT_SECONDS, window_s, 1, 3600, "15s",
	"aggregation window sent to the database"),
    {.name = "target",
     .type = TP_OPT_CUSTOM,
     .def = "all",
     .help = "processes sampled: all, pid:N[,N...] or cgroup:PATH (cgroup v2 directory)",
     .parse = parse_target,
     .print = print_target},
    {.name = "db",
     .type = TP_OPT_STRBUF,
     TP_OPT_STRFIELD(struct agent_config, db),
     .def = "",
     .help = "PostgreSQL conninfo or URI; empty: the PG* environment",
     .print = print_db},
    NUM("queue-bytes", TP_OPT_BYTES, queue_bytes, 4096, (double)(1ull << 40), "64M",
	"memory for windows waiting for the database; the oldest are dropped beyond it"),
    NUM("ring-bytes", TP_OPT_BYTES, ring_bytes, 1 << 16, 1 << 30, "auto",
	"BPF ring buffer size (rounded up to a power of two); auto: 128K per CPU, at least 1M"),
    NUM("symbol-cache-bytes", TP_OPT_BYTES, symbol_cache_bytes, 1 << 20, (double)(1ull << 40),
	"32M", "memory for cached symbol tables"),
    NUM("python-cache-bytes", TP_OPT_BYTES, python_cache_bytes, 1 << 20, 1 << 30, "16M",
	"memory for the names and line tables of Python code objects; one process may hold a "
	"quarter of it"),
    NUM("unwind-table-bytes", TP_OPT_BYTES, unwind_table_bytes, 0, 1 << 30, "30M",
	"kernel memory for the unwind tables of sampled code built without frame pointers "
	"(CFI unwinding, 8 bytes a row); 0: frame pointers only"),
    NUM("max-keys", TP_OPT_COUNT, max_keys, 1024, 1 << 24, "200000",
	"distinct (source, trace, span, stack, Hz) keys per window; more are counted and dropped"),
    {.name = "offcpu",
     .type = TP_OPT_ENUM,
     .offset = FIELD(offcpu),
     .def = "off",
     .help = "off-CPU time of the sampled processes (docs/offcpu.md): off; requests (threads "
	     "while they serve a request); all (every thread)",
     .words = offcpu_words},
    NUM("offcpu-min-us", TP_OPT_COUNT, offcpu_min_us, 1, 10000000, "1000",
	"off-CPU intervals at least this long (µs) are stored with their stack; shorter ones "
	"are summed per request without one"),
    {.name = "zero-code-http",
     .type = TP_OPT_ENUM,
     .offset = FIELD(zero_code_http),
     .def = "off",
     .help = "HTTP/1.x requests of the targeted processes found from their system calls "
	     "(docs/zero-code-http.md), for services without the SDK (needs --target pid: or "
	     "cgroup:): off; on (uprobes on the process's libc, else the syscall tracepoints); "
	     "syscalls (the syscall tracepoints for every process)",
     .words = zerocode_words},
    {.name = "python",
     .type = TP_OPT_ENUM,
     .offset = FIELD(python),
     .def = "on",
     .help = "Python frames of CPython processes read with their native ones (docs/python.md): "
	     "on or off",
     .words = onoff_words},
    {.name = "gpu",
     .type = TP_OPT_ENUM,
     .offset = FIELD(gpu),
     .def = "on",
     .help = "CUDA kernel launches per request (docs/gpu.md): on (the launch marker of "
	     "libtraceprof-cuda is probed in every process that loads it, and its kernels' GPU "
	     "time is stored per request and launch stack) or off (nothing attached)",
     .words = onoff_words},
    {.name = "perf-maps",
     .type = TP_OPT_ENUM,
     .offset = FIELD(perf_maps),
     .def = "on",
     .help = "JIT frames (Node.js, Java, Python 3.12+) named from the process's "
	     "/tmp/perf-<pid>.map (docs/symbols.md, \"Perf maps (JIT)\"): on or off",
     .words = onoff_words},
    TEXT("obi-map", obi_map, "auto",
	 "OBI's pinned trace map (traces_ctx_v1), read for threads without a thread context: "
	 "a path under the BPF filesystem; auto: /sys/fs/bpf/traces_ctx_v1 or "
	 "/sys/fs/bpf/*/traces_ctx_v1, looked for every 10 s; empty: off"),
    TEXT("node", node, "", "node name stored with samples; default: hostname"),
    {.name = "log-level",
     .type = TP_OPT_ENUM,
     .offset = FIELD(log_level),
     .def = "info",
     .help = "debug, info, warn or error",
     .words = log_levels},
    NUM("duration", TP_OPT_SECONDS_F, duration_s, 0, 1e9, "0",
	"stop after this long (tests, benchmarks); 0: run until SIGTERM"),
    TEXT("stats-file", stats_file, "",
	 "write the agent's counters here as key=value lines at exit"),
    TEXT("otlp-grpc", otlp_grpc, "127.0.0.1:4317",
	 "OTLP/gRPC trace receiver listen address (host:port); empty: off"),
    TEXT("otlp-http", otlp_http, "127.0.0.1:4318",
	 "OTLP/HTTP trace receiver listen address (POST /v1/traces); empty: off"),
    NUM("otlp-max-bytes", TP_OPT_BYTES, otlp_max_bytes, 1024, 1 << 30, "4M",
	"largest OTLP export accepted, also once a gzip export is inflated; larger ones are "
	"refused"),
    {.name = "otlp-span-kinds",
     .type = TP_OPT_CUSTOM,
     .offset = FIELD(otlp_span_kinds),
     .def = "server",
     .help = "span kinds stored as requests: comma list of server, client, internal, producer, "
	     "consumer",
     .parse = parse_span_kinds,
     .print = print_span_kinds},
    TEXT("otlp-forward", otlp_forward, "",
	 "forward every OTLP trace export unchanged to this OTLP/gRPC host:port; empty: none"),
    NUM("trigger-hold-bytes", TP_OPT_BYTES, trigger_hold_bytes, 4096, (double)(1ull << 40), "16M",
	"memory for raised samples held until their request is decided; the oldest traces are "
	"dropped beyond it"),
    TEXT("control-listen", control_listen, "127.0.0.1:4320",
	 "AgentControl gRPC listen address (the controller programs triggers); empty: off"),
    TEXT("control-tls-cert", control_tls_cert, "",
	 "PEM certificate of the control port; with control-tls-key and control-tls-ca: mutual "
	 "TLS"),
    TEXT("control-tls-key", control_tls_key, "", "PEM private key of control-tls-cert"),
    TEXT("control-tls-ca", control_tls_ca, "",
	 "PEM CA whose certificates the control port accepts from clients"),
    TEXT("control-token-file", control_token_file, "",
	 "file whose first line is the bearer token every control call must carry (32 to 4096 "
	 "characters; the file owned by this user or root, mode 600 or 640)"),
    TEXT("control-token-generate", control_token_generate, CONTROL_AUTH_TOKEN_DEFAULT,
	 "with neither control-token-file nor mutual TLS: the token file the agent makes (mode "
	 "600, directory 700) or reuses, which the controller reads by default; empty: none"),
    NUM("max-conns", TP_OPT_INT, max_conns, 1, 1 << 20, "256",
	"concurrent connections per listening port (OTLP, control), before any authentication; "
	"at most 1/16 of the open file limit"),
    NUM("max-conns-per-peer", TP_OPT_INT, max_conns_per_peer, 1, 1 << 20, "64",
	"concurrent connections per port from one peer address"),
    NUM("conn-idle-timeout", TP_OPT_SECONDS, conn_idle_timeout_s, 1, 86400, "30s",
	"a connection with no request in progress (none yet, or kept alive) is closed after this"),
    NUM("http-header-timeout", TP_OPT_SECONDS, http_header_timeout_s, 1, 3600, "5s",
	"OTLP/HTTP: request line and headers must arrive within this of their first byte"),
    NUM("http-min-body-rate", TP_OPT_BYTES, http_min_body_rate, 1, 1 << 30, "64K",
	"OTLP/HTTP: a body must arrive within http-header-timeout + its length at this rate "
	"(bytes/s)"),
    NUM("grpc-max-conn-age", TP_OPT_SECONDS, grpc_max_conn_age_s, 1, 20 * 86400, "30m",
	"gRPC ports: a connection is asked to go away after this (30 s grace to finish calls)"),
    NUM("grpc-keepalive", TP_OPT_SECONDS, grpc_keepalive_s, 1, 86400, "1m",
	"gRPC ports: ping a connection idle this long; closed when unanswered in 20 s"),
    NUM("grpc-handshake-timeout", TP_OPT_SECONDS, grpc_handshake_timeout_s, 1, 3600, "10s",
	"gRPC TLS port (control with TLS): the TLS handshake must finish within this"),
    TEXT("kubeconfig", kubeconfig, "",
	 "kubeconfig to read the node's pods from (namespace, name, labels); empty: see "
	 "kube-in-cluster"),
    {.name = "kube-in-cluster",
     .type = TP_OPT_ENUM,
     .offset = FIELD(kube_in_cluster),
     .def = "auto",
     .help = "read the node's pods with the pod's service account: auto (when "
	     "KUBERNETES_SERVICE_HOST is set), on or off",
     .words = auto_words},
    TEXT("spool-dir", spool_dir, "/var/lib/traceprof/spool",
	 "closed windows are kept here until the database has them, so a crash loses at most the "
	 "open window; empty: off"),
    NUM("spool-bytes", TP_OPT_BYTES, spool_bytes, 1 << 16, (double)(1ull << 40), "64M",
	"disk for spooled windows; beyond it windows are kept in memory only (counted)"),
};

#define NSETTINGS TP_OPTS_COUNT(settings)

bool config_known(const char *name)
{
	return tp_opts_find(settings, NSETTINGS, name) != NULL;
}

int config_set(struct agent_config *cfg, const char *name, const char *value, char *err,
	       size_t errlen)
{
	return tp_opts_set_name(settings, NSETTINGS, cfg, name, value, err, errlen);
}

void config_defaults(struct agent_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	tp_opts_defaults(settings, NSETTINGS, cfg);
	if (gethostname(cfg->node, sizeof(cfg->node) - 1) != 0)
		strcpy(cfg->node, "localhost");
}

int config_load_file(struct agent_config *cfg, const char *path)
{
	char err[512];
	int rc = tp_opts_load_file(settings, NSETTINGS, cfg, path, err, sizeof(err));

	if (rc)
		log_error("%s", err);
	return rc;
}

void config_print_help(FILE *out)
{
	tp_opts_help(settings, NSETTINGS, out, 22, TP_OPTS_HELP_DEFAULTS);
}

void config_db_masked(const struct agent_config *cfg, char *out, size_t outlen)
{
	mask_password(cfg->db, out, outlen);
}

void config_print(const struct agent_config *cfg, FILE *out)
{
	tp_opts_print(settings, NSETTINGS, cfg, out);
}
