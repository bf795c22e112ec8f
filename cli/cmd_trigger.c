/*
 * cmd_trigger.c - `traceprof trigger create|list|get|delete`: the command
 * line, one traceprof/options.h table parsed before anything runs: the
 * rows of where triggers live, the flags of the spec (--service,
 * --min-duration, ...: trigger_flags.c makes their rows from the spec
 * table of trigger_spec.h), then the rest of create and the output.
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
#include <stddef.h>
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
    "where (default: the cluster of $KUBECONFIG or ~/.kube/config):\n";

static const char usage_tail[] =
    "\n"
    "exit status: 0 done, 1 no such trigger, 2 invalid trigger or usage,\n"
    "3 cluster or directory unreachable, 4 output not written.\n"
    "\n"
    "examples:\n"
    "  traceprof trigger create slow-pay --service payment-svc --min-duration 1s \\\n"
    "      --route '/api/pay*' --max-requests 5\n"
    "  traceprof trigger get slow-pay -o json\n"
    "  traceprof trigger list --triggers-dir ./triggers\n";

/* Width of the flag column of --help. */
#define TRIG_HELP_WIDTH 22

/* -o FMT: text, json, or name for list (which the subcommand allows). */
static int parse_output(void *obj, const struct tp_option *o, const char *v, char *err,
			size_t errlen)
{
	const struct trig_opts *t = obj;
	int list = !strcmp(t->sub, "list");

	if (!strcmp(v, "text"))
		*TP_OPT_PTR(obj, o, enum trig_out) = OUT_TEXT;
	else if (!strcmp(v, "json"))
		*TP_OPT_PTR(obj, o, enum trig_out) = OUT_JSON;
	else if (!strcmp(v, "name") && list)
		*TP_OPT_PTR(obj, o, enum trig_out) = OUT_NAME;
	else {
		snprintf(err, errlen, "trigger %s: unknown output \"%s\" (text, json%s)", t->sub, v,
			 list ? ", name" : "");
		return -EINVAL;
	}
	return 0;
}

#define T struct trig_opts
/* Where triggers live; then the heading of the spec's flags. */
static const struct tp_option where_rows[] = {
    {.name = "kubeconfig",
     .type = TP_OPT_STR,
     .offset = offsetof(T, kubeconfig),
     .arg = "FILE",
     .help = "the cluster of this kubeconfig"},
    {.name = "context",
     .type = TP_OPT_STR,
     .offset = offsetof(T, context),
     .arg = "NAME",
     .help = "its context (default: current-context)"},
    {.name = "in-cluster",
     .type = TP_OPT_FLAG,
     .offset = offsetof(T, in_cluster),
     .help = "the pod's service account"},
    /* wider than the flag column: the leading space keeps two before the help */
    {.name = "insecure-skip-tls-verify",
     .type = TP_OPT_FLAG,
     .offset = offsetof(T, insecure),
     .help = " accept the kubeconfig's insecure flag"},
    {.name = "triggers-dir",
     .type = TP_OPT_STR,
     .offset = offsetof(T, dir),
     .arg = "DIR",
     .help = "a local triggers directory instead of a cluster"},
    {.name = "status-file",
     .type = TP_OPT_STR,
     .offset = offsetof(T, status_file),
     .arg = "F",
     .help = "its status file (default DIR/" TRIG_STATUS_FILE ")"},
    {.name = "namespace",
     .short_name = 'n',
     .type = TP_OPT_STR,
     .offset = offsetof(T, namespace_),
     .arg = "NS",
     .help = "namespace (default: the context's, else default)"},
    {.name = "all-namespaces",
     .short_name = 'A',
     .type = TP_OPT_FLAG,
     .offset = offsetof(T, all_namespaces),
     .help = "list: every namespace"},
    {.type = TP_OPT_TEXT, .help = "\ncreate (from flags; defaults as in the CRD):\n"},
};

/* After the spec's flags (trig_spec_options): the rest of create, output. */
static const struct tp_option what_rows[] = {
    {.name = "file",
     .short_name = 'f',
     .type = TP_OPT_STR,
     .offset = offsetof(T, file),
     .arg = "FILE",
     .help = "create the triggers of a manifest file instead"},
    {.name = "dry-run",
     .type = TP_OPT_FLAG,
     .offset = offsetof(T, dry_run),
     .help = "print the manifest, send or write nothing"},
    {.type = TP_OPT_TEXT, .help = "\noutput:\n"},
    {.name = "output",
     .short_name = 'o',
     .type = TP_OPT_CUSTOM,
     .offset = offsetof(T, out),
     .arg = "FMT",
     .help = "text (default), json, name (list only)",
     .parse = parse_output},
    CLI_OPT_HELP(T),
};
#undef T

#define N_WHERE	  TP_OPTS_COUNT(where_rows)
#define N_WHAT	  TP_OPTS_COUNT(what_rows)
#define TRIG_ROWS (N_WHERE + TRIGGER_SPEC_N_FIELDS + N_WHAT)
_Static_assert(TRIG_ROWS <= TP_OPTS_MAX, "too many rows for tp_opts_getopt");

/* The command line's table: where, the spec's flags, the rest; its length. */
static size_t trig_options(struct tp_option rows[TRIG_ROWS])
{
	size_t n = 0;

	memcpy(rows, where_rows, sizeof(where_rows));
	n = N_WHERE;
	n += trig_spec_options(rows + n, TRIGGER_SPEC_N_FIELDS);
	memcpy(rows + n, what_rows, sizeof(what_rows));
	return n + N_WHAT;
}

static void usage(FILE *f)
{
	struct tp_option rows[TRIG_ROWS];

	fputs(usage_head, f);
	tp_opts_help(rows, trig_options(rows), f, TRIG_HELP_WIDTH, 0);
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

/* The flags and the NAME of subcommand o->sub (argv[0]) into o; CLI_OK, an
 * exit code, or -1 after --help. */
static int parse_args(int argc, char **argv, struct trig_opts *o, const char **name)
{
	struct tp_option rows[TRIG_ROWS];
	struct tp_opts_result res;
	int next;

	switch (tp_opts_getopt(rows, trig_options(rows), o, argc, argv, TP_OPTS_QUIET, &res)) {
	case TP_OPTS_DONE:
		break;
	case TP_OPTS_STOPPED: /* --help */
		usage(stdout);
		return -1;
	case TP_OPTS_BAD_VALUE: /* -o FMT */
		cli_error("%s", res.err);
		return CLI_USAGE;
	case TP_OPTS_MISSING:
		cli_error("trigger %s: %s needs a value", o->sub, argv[res.next - 1]);
		usage_hint();
		return CLI_USAGE;
	default:
		cli_error("trigger %s: unknown flag %s", o->sub, argv[res.next - 1]);
		usage_hint();
		return CLI_USAGE;
	}
	next = res.next;
	if (next < argc)
		*name = argv[next++];
	if (next < argc) {
		cli_error("trigger %s: unexpected argument \"%s\"", o->sub, argv[next]);
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
	o.sub = sub;
	rc = parse_args(argc - 1, argv + 1, &o, &name);
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
