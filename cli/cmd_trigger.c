/*
 * cmd_trigger.c - `traceprof trigger create|list|get|delete`: the command
 * line. Its flags for the spec (--service, --min-duration, ...) and their
 * help come from the spec table (trigger_spec.h); the rest says where
 * triggers live and how to print them.
 *
 * TraceProfileTriggers live in one of two places, and this command reads
 * and writes them where the controller looks:
 *
 *   cluster    the custom resources of the Kubernetes API
 *              (traceprof.dev/v1alpha1), through a kubeconfig or the pod's
 *              service account, as the controller reads them;
 *   directory  the manifests of the controller's local mode (--triggers-dir)
 *              and the status file it writes next to them.
 *
 * Creating: trigger_create.c; the two places: trigger_store.c; what is
 * printed: trigger_view.c.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "trigger.h"

static const char usage_head[] =
    "usage: traceprof trigger create NAME --service S [MATCH] [WHERE]\n"
    "       traceprof trigger create -f FILE [WHERE]\n"
    "       traceprof trigger list [-A] [-o text|json|name] [WHERE]\n"
    "       traceprof trigger get NAME [-o text|json] [WHERE]\n"
    "       traceprof trigger delete NAME [WHERE]\n"
    "\n"
    "Creates and inspects TraceProfileTriggers (traceprof.dev/v1alpha1): in the\n"
    "cluster, through the Kubernetes API, or in a local triggers directory read\n"
    "by traceprof-controller --triggers-dir. A new trigger is checked by the\n"
    "controller's validator before it is sent or written.\n"
    "\n"
    "where (default: the cluster of $KUBECONFIG or ~/.kube/config):\n"
    "  --kubeconfig FILE      the cluster of this kubeconfig\n"
    "  --context NAME         its context (default: current-context)\n"
    "  --in-cluster           the pod's service account\n"
    "  --insecure-skip-tls-verify  accept the kubeconfig's insecure flag\n"
    "  --triggers-dir DIR     a local triggers directory instead of a cluster\n"
    "  --status-file F        its status file (default DIR/.traceprof-status.json)\n"
    "  -n, --namespace NS     namespace (default: the context's, else default)\n"
    "  -A, --all-namespaces   list: every namespace\n"
    "\n"
    "create (from flags; defaults as in the CRD):\n";

static const char usage_tail[] =
    "  -f, --file FILE        create the triggers of a manifest file instead\n"
    "  --dry-run              print the manifest, send or write nothing\n"
    "\n"
    "output:\n"
    "  -o, --output FMT       text (default), json, name (list only)\n"
    "  -h, --help             this help\n"
    "\n"
    "exit status: 0 done, 1 no such trigger, 2 invalid trigger or usage,\n"
    "3 cluster or directory unreachable, 4 output not written.\n"
    "\n"
    "examples:\n"
    "  traceprof trigger create slow-pay --service payment-svc --min-duration 1s \\\n"
    "      --route '/api/pay*' --max-requests 5\n"
    "  traceprof trigger get slow-pay -o json\n"
    "  traceprof trigger list --triggers-dir ./triggers\n";

/* The help of the spec's flags, from the table. */
static void usage_spec_flags(FILE *f)
{
	for (size_t i = 0; i < trigger_spec_n_fields; i++) {
		const struct trigger_spec_field *sf = &trigger_spec_fields[i];
		char flag[64], d[32];

		if (!sf->flag)
			continue;
		snprintf(flag, sizeof(flag), "--%s %s", sf->flag, sf->flag_arg);
		fprintf(f, "  %-22s %s", flag, sf->help);
		if (sf->type == TRIGGER_SPEC_UINT)
			fprintf(f, ", %lld-%lld", (long long)sf->min, (long long)sf->max);
		if (sf->type == TRIGGER_SPEC_DURATION && sf->max) {
			manifest_format_duration((uint64_t)sf->max * 1000, d, sizeof(d));
			fprintf(f, ", at most %s", d);
		}
		if (sf->default_text)
			fprintf(f, " (default %s)", sf->default_text);
		fputc('\n', f);
	}
}

static void usage(FILE *f)
{
	fputs(usage_head, f);
	usage_spec_flags(f);
	fputs(usage_tail, f);
}

void help_trigger(FILE *f)
{
	usage(f);
}

static void usage_hint(void)
{
	fprintf(stderr, "try 'traceprof trigger --help'\n");
}

enum {
	OPT_KUBECONFIG = 256,
	OPT_CONTEXT,
	OPT_IN_CLUSTER,
	OPT_INSECURE,
	OPT_DIR,
	OPT_STATUS_FILE,
	OPT_DRY_RUN,
	OPT_SPEC, /* OPT_SPEC + i: the flag of trigger_spec_fields[i] */
};

static const struct option fixed_opts[] = {
    {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},
    {"context", required_argument, NULL, OPT_CONTEXT},
    {"in-cluster", no_argument, NULL, OPT_IN_CLUSTER},
    {"insecure-skip-tls-verify", no_argument, NULL, OPT_INSECURE},
    {"triggers-dir", required_argument, NULL, OPT_DIR},
    {"status-file", required_argument, NULL, OPT_STATUS_FILE},
    {"namespace", required_argument, NULL, 'n'},
    {"all-namespaces", no_argument, NULL, 'A'},
    {"file", required_argument, NULL, 'f'},
    {"output", required_argument, NULL, 'o'},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"help", no_argument, NULL, 'h'},
};

#define N_FIXED (sizeof(fixed_opts) / sizeof(fixed_opts[0]))

/* getopt_long's table: the fixed flags, then one per flag of the spec table. */
static void build_longopts(struct option *opts)
{
	size_t n = 0;

	memcpy(opts, fixed_opts, sizeof(fixed_opts));
	n = N_FIXED;
	for (size_t i = 0; i < trigger_spec_n_fields; i++)
		if (trigger_spec_fields[i].flag)
			opts[n++] = (struct option){trigger_spec_fields[i].flag, required_argument,
						    NULL, OPT_SPEC + (int)i};
	opts[n] = (struct option){NULL, 0, NULL, 0};
}

static int set_output(struct trig_opts *o, const char *sub, const char *v)
{
	if (!strcmp(v, "text"))
		o->out = OUT_TEXT;
	else if (!strcmp(v, "json"))
		o->out = OUT_JSON;
	else if (!strcmp(v, "name") && !strcmp(sub, "list"))
		o->out = OUT_NAME;
	else {
		cli_error("trigger %s: unknown output \"%s\" (text, json%s)", sub, v,
			  strcmp(sub, "list") ? "" : ", name");
		return CLI_USAGE;
	}
	return CLI_OK;
}

/* One flag c with value v into o; CLI_OK, or an exit code (-1: --help shown). */
static int set_flag(struct trig_opts *o, const char *sub, int c, const char *v, char **argv)
{
	if (c >= OPT_SPEC && c < OPT_SPEC + (int)trigger_spec_n_fields) {
		o->spec[c - OPT_SPEC] = v;
		return CLI_OK;
	}
	switch (c) {
	case OPT_KUBECONFIG:
		o->kubeconfig = v;
		break;
	case OPT_CONTEXT:
		o->context = v;
		break;
	case OPT_IN_CLUSTER:
		o->in_cluster = 1;
		break;
	case OPT_INSECURE:
		o->insecure = 1;
		break;
	case OPT_DIR:
		o->dir = v;
		break;
	case OPT_STATUS_FILE:
		o->status_file = v;
		break;
	case 'n':
		o->namespace_ = v;
		break;
	case 'A':
		o->all_namespaces = 1;
		break;
	case 'f':
		o->file = v;
		break;
	case 'o':
		return set_output(o, sub, v);
	case OPT_DRY_RUN:
		o->dry_run = 1;
		break;
	case 'h':
		usage(stdout);
		return -1;
	case ':':
		cli_error("trigger %s: %s needs a value", sub, argv[optind - 1]);
		usage_hint();
		return CLI_USAGE;
	default:
		cli_error("trigger %s: unknown flag %s", sub, argv[optind - 1]);
		usage_hint();
		return CLI_USAGE;
	}
	return CLI_OK;
}

/* The flags and the NAME of subcommand sub (argv[0]); CLI_OK, an exit code, or -1 after --help. */
static int parse_args(int argc, char **argv, const char *sub, struct trig_opts *o,
		      const char **name)
{
	struct option longopts[N_FIXED + TRIGGER_SPEC_N_FIELDS + 1];
	int c, rc;

	build_longopts(longopts);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":n:Af:o:h", longopts, NULL)) != -1)
		if ((rc = set_flag(o, sub, c, optarg, argv)) != CLI_OK)
			return rc;
	if (optind < argc)
		*name = argv[optind++];
	if (optind < argc) {
		cli_error("trigger %s: unexpected argument \"%s\"", sub, argv[optind]);
		return CLI_USAGE;
	}
	return CLI_OK;
}

static int has_spec_flags(const struct trig_opts *o)
{
	for (size_t i = 0; i < trigger_spec_n_fields; i++)
		if (o->spec[i])
			return 1;
	return 0;
}

/* Which flags go together; CLI_OK or CLI_USAGE after saying why. */
static int check_args(const struct trig_opts *o, const char *sub, const char *name)
{
	int creating = !strcmp(sub, "create"), spec = has_spec_flags(o);

	if (!creating && (spec || o->file || o->dry_run)) {
		cli_error("trigger %s: trigger flags belong to create", sub);
		return CLI_USAGE;
	}
	if (creating && o->file && (spec || name)) {
		cli_error("trigger create: -f FILE takes the triggers from the file; give no NAME "
			  "or trigger flags with it");
		return CLI_USAGE;
	}
	if (creating && !o->file && !name) {
		cli_error("trigger create: give the trigger's NAME (or -f FILE)");
		return CLI_USAGE;
	}
	if ((!strcmp(sub, "get") || !strcmp(sub, "delete")) && !name) {
		cli_error("trigger %s: give the trigger's NAME", sub);
		return CLI_USAGE;
	}
	if (!strcmp(sub, "list") && name) {
		cli_error("trigger list: takes no NAME (use trigger get NAME)");
		return CLI_USAGE;
	}
	if (o->all_namespaces && strcmp(sub, "list")) {
		cli_error("trigger %s: -A belongs to list", sub);
		return CLI_USAGE;
	}
	if (o->dir && (o->kubeconfig || o->context || o->in_cluster)) {
		cli_error("trigger %s: --triggers-dir is a local directory; give it or a cluster "
			  "(--kubeconfig, --context, --in-cluster), not both",
			  sub);
		return CLI_USAGE;
	}
	if (o->status_file && !o->dir) {
		cli_error("trigger %s: --status-file needs --triggers-dir", sub);
		return CLI_USAGE;
	}
	if (o->spec[trigger_spec_flag("selector") - trigger_spec_fields] && o->dir) {
		cli_error("trigger create: --selector needs the Kubernetes API; use --service with "
			  "--triggers-dir");
		return CLI_USAGE;
	}
	return CLI_OK;
}

int cmd_trigger(int argc, char **argv)
{
	struct trig_opts o = {0};
	struct trig_kube k = {0};
	const char *sub, *name = NULL, *ns;
	int rc;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? CLI_USAGE : CLI_OK;
	}
	sub = argv[1];
	if (strcmp(sub, "create") && strcmp(sub, "list") && strcmp(sub, "get") &&
	    strcmp(sub, "delete")) {
		cli_error("trigger: unknown subcommand \"%s\" (create, list, get, delete)", sub);
		usage_hint();
		return CLI_USAGE;
	}
	rc = parse_args(argc - 1, argv + 1, sub, &o, &name);
	if (rc != CLI_OK)
		return rc < 0 ? CLI_OK : rc;
	if ((rc = check_args(&o, sub, name)))
		return rc;

	/* create connects once the triggers are valid (and a dry run never) */
	if (!o.dir && strcmp(sub, "create") && (rc = trig_kube_open(&o, &k)))
		goto out;
	ns = o.namespace_ ? o.namespace_ : k.cfg && k.cfg->namespace ? k.cfg->namespace : "default";

	if (!strcmp(sub, "create"))
		rc = trig_create(&o, name, ns, &k);
	else if (!strcmp(sub, "list"))
		rc = trig_list(&o, ns, &k);
	else if (!strcmp(sub, "get"))
		rc = trig_get(&o, ns, name, &k);
	else
		rc = trig_delete(&o, ns, name, &k);
	if (rc == CLI_OK && (fflush(stdout) != 0 || ferror(stdout))) {
		cli_error("cannot write the output: %s", strerror(errno));
		rc = CLI_IO;
	}
out:
	if (k.client || k.cfg)
		trig_kube_close(&k);
	return rc;
}
