/*
 * traceprof-controller - programs traceprof agents from TraceProfileTrigger
 * manifests: the local mode (a directory of manifests, local.c) or the
 * Kubernetes mode (the custom resources through the API server,
 * kube_mode.c), with the same agent, database and TLS flags.
 *
 * The flags are one table (traceprof/options.h) filling struct args:
 * parse_args() reads the command line, run() checks the combination and
 * starts the mode.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "control_auth.h"
#include "kube_mode.h"
#include "local.h"
#include "manifest.h"
#include "traceprof/log.h"
#include "traceprof/options.h"

/* Everything the command line sets. */
struct args {
	struct local_config cfg;		  /* local mode, and the flags of both modes */
	struct kube_mode_config kcfg;		  /* Kubernetes mode */
	const char *agents[KUBE_MODE_MAX_AGENTS]; /* --agent, either form */
	size_t n_agents;
	bool verbose, help;
};

static int bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "traceprof-controller: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'traceprof-controller --help'.\n");
	return 2;
}

/* --agent: host:port (local) or ADDR@NODE (Kubernetes), repeatable. */
static int parse_agent(void *obj, const struct tp_option *o, const char *v, char *err,
		       size_t errlen)
{
	struct args *a = obj;

	(void)o;
	if (!strchr(v, ':')) {
		snprintf(err, errlen, "--agent '%s' is not host:port", v);
		return -EINVAL;
	}
	if (a->n_agents == KUBE_MODE_MAX_AGENTS) {
		snprintf(err, errlen, "more than %s agents", "256");
		return -EINVAL;
	}
	a->agents[a->n_agents++] = v;
	return 0;
}

/* An integer within [min, max] (strtol: decimal digits only). */
static int parse_int(void *obj, const struct tp_option *o, const char *v, char *err, size_t errlen)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || *end || n < o->min || n > o->max) {
		snprintf(err, errlen, o->bad, v);
		return -EINVAL;
	}
	*TP_OPT_PTR(obj, o, int) = (int)n;
	return 0;
}

/* A manifest duration (500ms, 1s, 2m) within [min, max] microseconds, in ms. */
static int parse_ms(void *obj, const struct tp_option *o, const char *v, char *err, size_t errlen)
{
	uint64_t us;

	if (manifest_parse_duration(v, &us) || (double)us < o->min || (double)us > o->max) {
		snprintf(err, errlen, o->bad, v);
		return -EINVAL;
	}
	*TP_OPT_PTR(obj, o, int) = (int)(us / 1000);
	return 0;
}

#define ARG(m) offsetof(struct args, m)
/* A flag whose value is kept as given. */
#define STR(n, m, a, h)                                                                            \
	{                                                                                          \
		.name = n, .type = TP_OPT_STR, .offset = ARG(m), .arg = a, .help = h               \
	}
/* A duration flag between lo and hi microseconds, stored in ms. */
#define MS(n, m, a, lo, hi, b, h)                                                                  \
	{                                                                                          \
		.name = n, .type = TP_OPT_CUSTOM, .offset = ARG(m), .min = lo, .max = hi,          \
		.arg = a, .help = h, .bad = b, .parse = parse_ms                                   \
	}
#define FLAG(n, m, h)                                                                              \
	{                                                                                          \
		.name = n, .type = TP_OPT_FLAG, .offset = ARG(m), .help = h                        \
	}

static const struct tp_option options[] = {
    {.type = TP_OPT_TEXT, .help = "local mode:\n"},
    STR("triggers-dir", cfg.triggers_dir, "DIR", "directory of *.yaml / *.yml manifests"),
    {.name = "agent",
     .type = TP_OPT_CUSTOM,
     .arg = "ADDR",
     .help = "agent control address host:port; repeatable",
     .parse = parse_agent},
    STR("status-file", cfg.status_file, "F", "status JSON; default DIR/" LOCAL_STATUS_DEFAULT),
    FLAG("once", cfg.once,
	 "one pass, then exit (1 if a manifest, the database\nor an agent had a problem)"),
    {.type = TP_OPT_TEXT, .help = "\nKubernetes mode:\n"},
    STR("kubeconfig", kcfg.kubeconfig, "FILE", "API server and credentials from this kubeconfig"),
    STR("kube-context", kcfg.context, "NAME", "its context to use (default: current-context)"),
    FLAG("in-cluster", kcfg.in_cluster, "the pod's service account instead"),
    {.type = TP_OPT_TEXT,
     .help = "  --agent ADDR@NODE      an agent outside the cluster serving NODE; repeatable\n"},
    STR("agent-selector", kcfg.agent_selector, "SEL",
	"label selector of the agent pods\n(default " KUBE_MODE_AGENT_SELECTOR "; \"\" for none)"),
    STR("agent-namespace", kcfg.agent_namespace, "NS",
	"their namespace (default: the controller's own)"),
    {.name = "agent-port",
     .type = TP_OPT_CUSTOM,
     .offset = ARG(kcfg.agent_port),
     .min = 1,
     .max = 65535,
     .arg = "N",
     .help = "their AgentControl port (default 4320)",
     .bad = "--agent-port '%s' is not a port number",
     .parse = parse_int},
    {.name = "leader-elect",
     .type = TP_OPT_BOOL,
     .offset = ARG(kcfg.leader_elect),
     .arg = "BOOL",
     .help = "campaign for the Lease " KUBE_MODE_LEASE
	     " before acting\n(default true; false for a single replica)",
     .bad = "--leader-elect='%s': true or false"},
    STR("lease-namespace", kcfg.lease_namespace, "NS",
	"namespace of the Lease (default: the controller's own)"),
    STR("identity", kcfg.identity, "ID", "leader election identity (default: hostname_pid)"),
    MS("resync", kcfg.resync_ms, "D", 1e6, 3600e6,
       "--resync '%s' is not a duration between 1s and 1h",
       "reconcile every trigger at least this often (default 30s)"),
    STR("health-addr", kcfg.health_addr, "H:P",
	"serve GET /healthz and /readyz over HTTP on H:P\n(\":8081\": every address; default: "
	"none)"),
    MS("stuck-after", kcfg.stuck_ms, "D", 1e6, 3600e6,
       "--stuck-after '%s' is not a duration between 1s and 1h",
       "/readyz fails once a watch of the API server has\nfailed this long without a success "
       "(default 60s)"),
    {.name = "status-workers",
     .type = TP_OPT_CUSTOM,
     .offset = ARG(kcfg.status_workers),
     .min = 1,
     .max = KUBE_MODE_MAX_WRITERS,
     .arg = "N",
     .help = "threads writing statuses to the API server\n(default 4)",
     .bad =
	 "--status-workers '%s' is not a number between 1 and " TP_OPTS_STR(KUBE_MODE_MAX_WRITERS),
     .parse = parse_int},
    /* tests only: this replica's wall clock offset by S seconds (a skewed node) */
    {.name = "test-clock-offset",
     .type = TP_OPT_CUSTOM,
     .offset = ARG(kcfg.test_clock_offset_s),
     .min = -86400,
     .max = 86400,
     .arg = "S",
     .flags = TP_OPT_HIDDEN,
     .bad = "--test-clock-offset '%s' is not a number of seconds within a day",
     .parse = parse_int},
    {.type = TP_OPT_TEXT, .help = "\nboth modes:\n"},
    STR("agent-token-file", cfg.auth.token_file, "F",
	"send the bearer token in F to the agents (default\nwithout a client certificate: the "
	"file the agent\nmakes, " CONTROL_AUTH_TOKEN_DEFAULT ")"),
    STR("agent-tls-ca", cfg.auth.tls_ca, "F", "verify the agents' certificates with this CA (PEM)"),
    STR("agent-tls-cert", cfg.auth.tls_cert, "F", "client certificate for mutual TLS (PEM)"),
    STR("agent-tls-key", cfg.auth.tls_key, "F", "its private key (PEM)"),
    STR("db", cfg.db, "CONNINFO", "libpq conninfo or URI; default: PG* environment"),
    MS("interval", cfg.interval_ms, "D", 1e5, 3600e6,
       "--interval '%s' is not a duration between 100ms and 1h",
       "database and agents pass period, e.g. 1s, 500ms\n(default 1s)"),
    TP_OPT_VERBOSE_ROW(ARG(verbose)),
    TP_OPT_HELP_ROW(ARG(help)),
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: traceprof-controller --triggers-dir DIR [OPTIONS]\n"
		"       traceprof-controller --kubeconfig FILE | --in-cluster [OPTIONS]\n"
		"\n"
		"Reads TraceProfileTrigger objects (" MANIFEST_API_VERSION "), mirrors them into\n"
		"traceprof.trace_profile_triggers and sends the active ones to the agents.\n"
		"Local mode: manifests in DIR, changes picked up within a second. Kubernetes\n"
		"mode: the custom resources of every namespace, status written to each.\n"
		"\n");
	tp_opts_help(options, TP_OPTS_COUNT(options), out, 22, 0);
}

/*
 * The agents' credentials, checked before anything runs: without a token
 * file or a client certificate, the token the local agent makes (it may
 * not exist yet: every pass tries again). A token file given, or the
 * default one present, that fails the checks of control_auth.h stops the
 * controller with the reason. Returns 0 or 2 (usage).
 */
static int check_agent_auth(struct control_auth *auth)
{
	char err[512];
	char *tok;

	if (!auth->token_file && !auth->tls_cert)
		auth->token_file = CONTROL_AUTH_TOKEN_DEFAULT;
	if (!auth->token_file)
		return 0;
	tok = control_auth_read_token(auth->token_file, err, sizeof(err));
	if (tok) {
		free(tok);
		return 0;
	}
	if (errno == ENOENT && strcmp(auth->token_file, CONTROL_AUTH_TOKEN_DEFAULT) == 0) {
		log_info("no agent token in %s yet (the local agent makes it when it starts); "
			 "each pass looks again",
			 auth->token_file);
		return 0;
	}
	fprintf(stderr, "traceprof-controller: %s\n", err);
	return 2;
}

/*
 * Reads the command line into a. Returns -1 to go on, or the exit status
 * (0 after --help, 2 for a usage error).
 */
static int parse_args(int argc, char **argv, struct args *a)
{
	struct tp_opts_result res;

	switch (tp_opts_getopt(options, TP_OPTS_COUNT(options), a, argc, argv, 0, &res)) {
	case TP_OPTS_DONE:
		break;
	case TP_OPTS_STOPPED: /* --help */
		usage(stdout);
		return 0;
	case TP_OPTS_BAD_VALUE:
		return bad_usage("%s", res.err);
	default: /* getopt said what was wrong */
		fprintf(stderr, "Try 'traceprof-controller --help'.\n");
		return 2;
	}
	if (a->verbose)
		log_set_level(TP_LOG_DEBUG);
	if (res.next < argc)
		return bad_usage("unexpected argument '%s'", argv[res.next]);
	return -1;
}

/* Kubernetes mode: checks its flags, then runs. */
static int run_kube(struct args *a)
{
	struct local_config *cfg = &a->cfg;
	struct kube_mode_config *kcfg = &a->kcfg;

	if (cfg->triggers_dir)
		return bad_usage("%s", "--triggers-dir (local mode) and --kubeconfig / "
				       "--in-cluster (Kubernetes mode) exclude each other");
	if (kcfg->kubeconfig && kcfg->in_cluster)
		return bad_usage("%s", "--kubeconfig and --in-cluster exclude each other");
	if (cfg->once || cfg->status_file)
		return bad_usage("%s", "--once and --status-file are local mode flags");
	for (size_t i = 0; i < a->n_agents; i++) {
		const char *at = strrchr(a->agents[i], '@');

		if (!at || at == a->agents[i] || !at[1])
			return bad_usage("--agent '%s' is not ADDR@NODE in Kubernetes mode",
					 a->agents[i]);
		kcfg->agents[kcfg->n_agents++] = a->agents[i];
	}
	if (check_agent_auth(&cfg->auth))
		return 2;
	kcfg->auth = cfg->auth;
	kcfg->db = cfg->db;
	kcfg->interval_ms = cfg->interval_ms;
	return kube_mode_run(kcfg);
}

/* Checks the combination of flags and runs the mode they select. */
static int run(struct args *a)
{
	struct local_config *cfg = &a->cfg;
	struct stat st;

	if (!cfg->auth.tls_cert != !cfg->auth.tls_key)
		return bad_usage("%s", "--agent-tls-cert and --agent-tls-key go together");
	if (a->kcfg.kubeconfig || a->kcfg.in_cluster)
		return run_kube(a);
	if (a->kcfg.health_addr)
		return bad_usage("%s", "--health-addr is a Kubernetes mode flag");
	if (!cfg->triggers_dir) {
		usage(stderr);
		return 2;
	}
	if (a->n_agents > LOCAL_MAX_AGENTS)
		return bad_usage("more than %s agents", "64");
	for (size_t i = 0; i < a->n_agents; i++)
		cfg->agents[cfg->n_agents++] = a->agents[i];
	if (stat(cfg->triggers_dir, &st) || !S_ISDIR(st.st_mode))
		return bad_usage("--triggers-dir '%s' is not a directory", cfg->triggers_dir);
	if (cfg->n_agents && check_agent_auth(&cfg->auth))
		return 2;
	return local_run(cfg);
}

int main(int argc, char **argv)
{
	static struct args a = {.cfg = {.interval_ms = 1000},
				.kcfg = {.agent_selector = KUBE_MODE_AGENT_SELECTOR,
					 .agent_port = KUBE_MODE_AGENT_PORT,
					 .leader_elect = true,
					 .resync_ms = 30000,
					 .status_workers = 4}};
	int rc;

	log_set_prefix("traceprof-controller");
	rc = parse_args(argc, argv, &a);
	return rc >= 0 ? rc : run(&a);
}
