/*
 * traceprof-controller - programs traceprof agents from TraceProfileTrigger
 * manifests: the local mode (a directory of manifests, local.c) or the
 * Kubernetes mode (the custom resources through the API server,
 * kube_mode.c), with the same agent, database and TLS flags.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "control_auth.h"
#include "kube_mode.h"
#include "local.h"
#include "manifest.h"
#include "traceprof/log.h"

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: traceprof-controller --triggers-dir DIR [OPTIONS]\n"
	    "       traceprof-controller --kubeconfig FILE | --in-cluster [OPTIONS]\n"
	    "\n"
	    "Reads TraceProfileTrigger objects (" MANIFEST_API_VERSION "), mirrors them into\n"
	    "traceprof.trace_profile_triggers and sends the active ones to the agents.\n"
	    "Local mode: manifests in DIR, changes picked up within a second. Kubernetes\n"
	    "mode: the custom resources of every namespace, status written to each.\n"
	    "\n"
	    "local mode:\n"
	    "  --triggers-dir DIR     directory of *.yaml / *.yml manifests\n"
	    "  --agent ADDR           agent control address host:port; repeatable\n"
	    "  --status-file F        status JSON; default DIR/" LOCAL_STATUS_DEFAULT "\n"
	    "  --once                 one pass, then exit (1 if a manifest, the database\n"
	    "                         or an agent had a problem)\n"
	    "\n"
	    "Kubernetes mode:\n"
	    "  --kubeconfig FILE      API server and credentials from this kubeconfig\n"
	    "  --kube-context NAME    its context to use (default: current-context)\n"
	    "  --in-cluster           the pod's service account instead\n"
	    "  --agent ADDR@NODE      an agent outside the cluster serving NODE; repeatable\n"
	    "  --agent-selector SEL   label selector of the agent pods\n"
	    "                         (default " KUBE_MODE_AGENT_SELECTOR "; \"\" for none)\n"
	    "  --agent-namespace NS   their namespace (default: the controller's own)\n"
	    "  --agent-port N         their AgentControl port (default 4320)\n"
	    "  --leader-elect[=BOOL]  campaign for the Lease " KUBE_MODE_LEASE " before acting\n"
	    "                         (default true; false for a single replica)\n"
	    "  --lease-namespace NS   namespace of the Lease (default: the controller's own)\n"
	    "  --identity ID          leader election identity (default: hostname_pid)\n"
	    "  --resync D             reconcile every trigger at least this often (default 30s)\n"
	    "  --health-addr H:P      serve GET /healthz and /readyz over HTTP on H:P\n"
	    "                         (\":8081\": every address; default: none)\n"
	    "  --stuck-after D        /readyz fails once a watch of the API server has\n"
	    "                         failed this long without a success (default 60s)\n"
	    "\n"
	    "both modes:\n"
	    "  --agent-token-file F   send the bearer token in F to the agents (default\n"
	    "                         without a client certificate: the file the agent\n"
	    "                         makes, " CONTROL_AUTH_TOKEN_DEFAULT ")\n"
	    "  --agent-tls-ca F       verify the agents' certificates with this CA (PEM)\n"
	    "  --agent-tls-cert F     client certificate for mutual TLS (PEM)\n"
	    "  --agent-tls-key F      its private key (PEM)\n"
	    "  --db CONNINFO          libpq conninfo or URI; default: PG* environment\n"
	    "  --interval D           database and agents pass period, e.g. 1s, 500ms\n"
	    "                         (default 1s)\n"
	    "  -v, --verbose          debug output\n"
	    "  -h, --help             this help\n");
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

static int bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "traceprof-controller: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'traceprof-controller --help'.\n");
	return 2;
}

int main(int argc, char **argv)
{
	enum {
		OPT_DIR = 256,
		OPT_AGENT,
		OPT_TOKEN,
		OPT_CA,
		OPT_CERT,
		OPT_KEY,
		OPT_DB,
		OPT_STATUS,
		OPT_INTERVAL,
		OPT_ONCE,
		OPT_KUBECONFIG,
		OPT_CONTEXT,
		OPT_IN_CLUSTER,
		OPT_AGENT_SELECTOR,
		OPT_AGENT_NAMESPACE,
		OPT_AGENT_PORT,
		OPT_LEADER_ELECT,
		OPT_LEASE_NAMESPACE,
		OPT_IDENTITY,
		OPT_RESYNC,
		OPT_HEALTH_ADDR,
		OPT_STUCK_AFTER
	};
	static const struct option longopts[] = {
	    {"triggers-dir", required_argument, NULL, OPT_DIR},
	    {"agent", required_argument, NULL, OPT_AGENT},
	    {"agent-token-file", required_argument, NULL, OPT_TOKEN},
	    {"agent-tls-ca", required_argument, NULL, OPT_CA},
	    {"agent-tls-cert", required_argument, NULL, OPT_CERT},
	    {"agent-tls-key", required_argument, NULL, OPT_KEY},
	    {"db", required_argument, NULL, OPT_DB},
	    {"status-file", required_argument, NULL, OPT_STATUS},
	    {"interval", required_argument, NULL, OPT_INTERVAL},
	    {"once", no_argument, NULL, OPT_ONCE},
	    {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},
	    {"kube-context", required_argument, NULL, OPT_CONTEXT},
	    {"in-cluster", no_argument, NULL, OPT_IN_CLUSTER},
	    {"agent-selector", required_argument, NULL, OPT_AGENT_SELECTOR},
	    {"agent-namespace", required_argument, NULL, OPT_AGENT_NAMESPACE},
	    {"agent-port", required_argument, NULL, OPT_AGENT_PORT},
	    {"leader-elect", optional_argument, NULL, OPT_LEADER_ELECT},
	    {"lease-namespace", required_argument, NULL, OPT_LEASE_NAMESPACE},
	    {"identity", required_argument, NULL, OPT_IDENTITY},
	    {"resync", required_argument, NULL, OPT_RESYNC},
	    {"health-addr", required_argument, NULL, OPT_HEALTH_ADDR},
	    {"stuck-after", required_argument, NULL, OPT_STUCK_AFTER},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct local_config cfg = {.interval_ms = 1000};
	struct kube_mode_config kcfg = {.agent_selector = KUBE_MODE_AGENT_SELECTOR,
					.agent_port = KUBE_MODE_AGENT_PORT,
					.leader_elect = true,
					.resync_ms = 30000};
	const char *agents[KUBE_MODE_MAX_AGENTS];
	size_t n_agents = 0;
	bool once_or_status = false;
	struct stat st;
	char *end;
	uint64_t us;
	int c;

	log_set_prefix("traceprof-controller");
	while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_DIR:
			cfg.triggers_dir = optarg;
			break;
		case OPT_AGENT:
			if (!strchr(optarg, ':'))
				return bad_usage("--agent '%s' is not host:port", optarg);
			if (n_agents == KUBE_MODE_MAX_AGENTS)
				return bad_usage("more than %s agents", "256");
			agents[n_agents++] = optarg;
			break;
		case OPT_KUBECONFIG:
			kcfg.kubeconfig = optarg;
			break;
		case OPT_CONTEXT:
			kcfg.context = optarg;
			break;
		case OPT_IN_CLUSTER:
			kcfg.in_cluster = true;
			break;
		case OPT_AGENT_SELECTOR:
			kcfg.agent_selector = optarg;
			break;
		case OPT_AGENT_NAMESPACE:
			kcfg.agent_namespace = optarg;
			break;
		case OPT_AGENT_PORT:
			errno = 0;
			kcfg.agent_port = (int)strtol(optarg, &end, 10);
			if (errno || *end || kcfg.agent_port < 1 || kcfg.agent_port > 65535)
				return bad_usage("--agent-port '%s' is not a port number", optarg);
			break;
		case OPT_LEADER_ELECT:
			if (!optarg || strcmp(optarg, "true") == 0)
				kcfg.leader_elect = true;
			else if (strcmp(optarg, "false") == 0)
				kcfg.leader_elect = false;
			else
				return bad_usage("--leader-elect='%s': true or false", optarg);
			break;
		case OPT_LEASE_NAMESPACE:
			kcfg.lease_namespace = optarg;
			break;
		case OPT_IDENTITY:
			kcfg.identity = optarg;
			break;
		case OPT_HEALTH_ADDR:
			kcfg.health_addr = optarg;
			break;
		case OPT_STUCK_AFTER:
			if (manifest_parse_duration(optarg, &us) || us < 1000000 ||
			    us > 3600000000ULL)
				return bad_usage(
				    "--stuck-after '%s' is not a duration between 1s and 1h",
				    optarg);
			kcfg.stuck_ms = (int)(us / 1000);
			break;
		case OPT_RESYNC:
			if (manifest_parse_duration(optarg, &us) || us < 1000000 ||
			    us > 3600000000ULL)
				return bad_usage(
				    "--resync '%s' is not a duration between 1s and 1h", optarg);
			kcfg.resync_ms = (int)(us / 1000);
			break;
		case OPT_TOKEN:
			cfg.auth.token_file = optarg;
			break;
		case OPT_CA:
			cfg.auth.tls_ca = optarg;
			break;
		case OPT_CERT:
			cfg.auth.tls_cert = optarg;
			break;
		case OPT_KEY:
			cfg.auth.tls_key = optarg;
			break;
		case OPT_DB:
			cfg.db = optarg;
			break;
		case OPT_STATUS:
			once_or_status = true;
			cfg.status_file = optarg;
			break;
		case OPT_INTERVAL:
			if (manifest_parse_duration(optarg, &us) || us < 100000 ||
			    us > 3600000000ULL)
				return bad_usage(
				    "--interval '%s' is not a duration between 100ms and 1h",
				    optarg);
			cfg.interval_ms = (int)(us / 1000);
			break;
		case OPT_ONCE:
			once_or_status = true;
			cfg.once = true;
			break;
		case 'v':
			log_set_level(LOG_DEBUG);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'traceprof-controller --help'.\n");
			return 2;
		}
	}
	if (optind < argc)
		return bad_usage("unexpected argument '%s'", argv[optind]);
	if (!cfg.auth.tls_cert != !cfg.auth.tls_key)
		return bad_usage("%s", "--agent-tls-cert and --agent-tls-key go together");
	if (kcfg.kubeconfig || kcfg.in_cluster) {
		if (cfg.triggers_dir)
			return bad_usage("%s", "--triggers-dir (local mode) and --kubeconfig / "
					       "--in-cluster (Kubernetes mode) exclude each other");
		if (kcfg.kubeconfig && kcfg.in_cluster)
			return bad_usage("%s", "--kubeconfig and --in-cluster exclude each other");
		if (once_or_status)
			return bad_usage("%s", "--once and --status-file are local mode flags");
		for (size_t i = 0; i < n_agents; i++) {
			const char *at = strrchr(agents[i], '@');

			if (!at || at == agents[i] || !at[1])
				return bad_usage("--agent '%s' is not ADDR@NODE in Kubernetes mode",
						 agents[i]);
			kcfg.agents[kcfg.n_agents++] = agents[i];
		}
		if (check_agent_auth(&cfg.auth))
			return 2;
		kcfg.auth = cfg.auth;
		kcfg.db = cfg.db;
		kcfg.interval_ms = cfg.interval_ms;
		return kube_mode_run(&kcfg);
	}
	if (kcfg.health_addr)
		return bad_usage("%s", "--health-addr is a Kubernetes mode flag");
	if (!cfg.triggers_dir) {
		usage(stderr);
		return 2;
	}
	if (n_agents > LOCAL_MAX_AGENTS)
		return bad_usage("more than %s agents", "64");
	for (size_t i = 0; i < n_agents; i++)
		cfg.agents[cfg.n_agents++] = agents[i];
	if (stat(cfg.triggers_dir, &st) || !S_ISDIR(st.st_mode))
		return bad_usage("--triggers-dir '%s' is not a directory", cfg.triggers_dir);
	if (cfg.n_agents && check_agent_auth(&cfg.auth))
		return 2;
	return local_run(&cfg);
}
