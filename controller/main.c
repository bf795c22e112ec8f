/*
 * traceprof-controller - programs traceprof agents from TraceProfileTrigger
 * manifests. This binary has the local mode (a directory of manifests, see
 * local.c); the Kubernetes mode comes later behind the same flags.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "local.h"
#include "manifest.h"
#include "traceprof/log.h"

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: traceprof-controller --triggers-dir DIR [OPTIONS]\n"
	    "\n"
	    "Reads TraceProfileTrigger manifests (" MANIFEST_API_VERSION
	    ") from DIR, mirrors them\n"
	    "into traceprof.trace_profile_triggers and sends the active ones to the agents.\n"
	    "Changes in DIR are picked up within a second.\n"
	    "\n"
	    "options:\n"
	    "  --triggers-dir DIR     directory of *.yaml / *.yml manifests (required)\n"
	    "  --agent ADDR           agent control address host:port; repeatable\n"
	    "  --agent-token-file F   send the bearer token in F to the agents\n"
	    "  --agent-tls-ca F       verify the agents' certificates with this CA (PEM)\n"
	    "  --agent-tls-cert F     client certificate for mutual TLS (PEM)\n"
	    "  --agent-tls-key F      its private key (PEM)\n"
	    "  --db CONNINFO          libpq conninfo or URI; default: PG* environment\n"
	    "  --status-file F        status JSON; default DIR/" LOCAL_STATUS_DEFAULT "\n"
	    "  --interval D           reconcile and status period, e.g. 1s, 500ms (default 1s)\n"
	    "  --once                 one pass, then exit (1 if a manifest, the database\n"
	    "                         or an agent had a problem)\n"
	    "  -v, --verbose          debug output\n"
	    "  -h, --help             this help\n");
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
		OPT_ONCE
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
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct local_config cfg = {.interval_ms = 1000};
	struct stat st;
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
			if (cfg.n_agents == LOCAL_MAX_AGENTS)
				return bad_usage("more than %s agents", "64");
			cfg.agents[cfg.n_agents++] = optarg;
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
	if (!cfg.triggers_dir) {
		usage(stderr);
		return 2;
	}
	if (stat(cfg.triggers_dir, &st) || !S_ISDIR(st.st_mode))
		return bad_usage("--triggers-dir '%s' is not a directory", cfg.triggers_dir);
	if (!cfg.auth.tls_cert != !cfg.auth.tls_key)
		return bad_usage("%s", "--agent-tls-cert and --agent-tls-key go together");
#ifndef TRACEPROF_HAVE_CONTROL_CLIENT
	if (cfg.n_agents)
		return bad_usage("%s", "--agent: this build has no AgentControl client (the gRPC "
				       "client library was not found at build time)");
#endif
	return local_run(&cfg);
}
