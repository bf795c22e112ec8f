/*
 * config.c - the agent's settings table and its two readers (file, flags).
 *
 * One table lists every setting once: name, type, bounds, default and help.
 * The file reader, the flag parser (main.c), --help and config_print all
 * walk it, so a setting cannot exist in one place and not another.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control_auth.h"
#include "otlp.h"
#include "traceprof/log.h"

enum setting_type {
	SET_INT,       /* integer within [min, max] */
	SET_BYTES,     /* size with an optional K, M or G suffix (binary units) */
	SET_COUNT,     /* non-negative integer stored in a size_t, within [min, max] */
	SET_SECONDS,   /* duration: number with s, m or h suffix; plain = seconds; int field */
	SET_SECONDS_F, /* the same, stored in a double field */
	SET_STRING,    /* text copied into a char array */
	SET_TARGET,    /* all | pid:N[,N...] | cgroup:PATH */
	SET_LOGLEVEL,  /* debug | info | warn | error */
	SET_SPANKINDS, /* comma list of server, client, internal, producer, consumer */
	SET_AUTOBOOL,  /* auto | on | off, stored as enum config_auto */
};

struct setting {
	const char *name;	/* file key and flag name (--name) */
	enum setting_type type; /* how the value is parsed */
	size_t offset;		/* field in struct agent_config */
	size_t size;		/* SET_STRING: size of the char array */
	double min, max;	/* bounds for numbers */
	const char *def;	/* default, in text form */
	const char *help;	/* one line for --help */
};

#define FIELD(f) offsetof(struct agent_config, f)
#define STR(f)	 FIELD(f), sizeof(((struct agent_config *)0)->f)

static const struct setting settings[] = {
    {"frequency", SET_INT, FIELD(frequency), 0, 1, 1000, "19", "sampling frequency, Hz"},
    {"window", SET_SECONDS, FIELD(window_s), 0, 1, 3600, "15s",
     "aggregation window sent to the database"},
    {"target", SET_TARGET, 0, 0, 0, 0, "all",
     "processes sampled: all, pid:N[,N...] or cgroup:PATH (cgroup v2 directory)"},
    {"db", SET_STRING, STR(db), 0, 0, "", "PostgreSQL conninfo or URI; empty: the PG* environment"},
    {"queue-bytes", SET_BYTES, FIELD(queue_bytes), 0, 4096, (double)(1ull << 40), "64M",
     "memory for windows waiting for the database; the oldest are dropped beyond it"},
    {"ring-bytes", SET_BYTES, FIELD(ring_bytes), 0, 1 << 16, 1 << 30, "auto",
     "BPF ring buffer size (rounded up to a power of two); auto: 128K per CPU, at least 1M"},
    {"symbol-cache-bytes", SET_BYTES, FIELD(symbol_cache_bytes), 0, 1 << 20, (double)(1ull << 40),
     "32M", "memory for cached symbol tables"},
    {"max-keys", SET_COUNT, FIELD(max_keys), 0, 1024, 1 << 24, "200000",
     "distinct (source, trace, span, stack, Hz) keys per window; more are counted and dropped"},
    {"node", SET_STRING, STR(node), 0, 0, "", "node name stored with samples; default: hostname"},
    {"log-level", SET_LOGLEVEL, FIELD(log_level), 0, 0, 0, "info", "debug, info, warn or error"},
    {"duration", SET_SECONDS_F, FIELD(duration_s), 0, 0, 1e9, "0",
     "stop after this long (tests, benchmarks); 0: run until SIGTERM"},
    {"stats-file", SET_STRING, STR(stats_file), 0, 0, "",
     "write the agent's counters here as key=value lines at exit"},
    {"otlp-grpc", SET_STRING, STR(otlp_grpc), 0, 0, "127.0.0.1:4317",
     "OTLP/gRPC trace receiver listen address (host:port); empty: off"},
    {"otlp-http", SET_STRING, STR(otlp_http), 0, 0, "127.0.0.1:4318",
     "OTLP/HTTP trace receiver listen address (POST /v1/traces); empty: off"},
    {"otlp-max-bytes", SET_BYTES, FIELD(otlp_max_bytes), 0, 1024, 1 << 30, "4M",
     "largest OTLP export accepted, also once a gzip export is inflated; larger ones are "
     "refused"},
    {"otlp-span-kinds", SET_SPANKINDS, FIELD(otlp_span_kinds), 0, 0, 0, "server",
     "span kinds stored as requests: comma list of server, client, internal, producer, "
     "consumer"},
    {"otlp-forward", SET_STRING, STR(otlp_forward), 0, 0, "",
     "forward every OTLP trace export unchanged to this OTLP/gRPC host:port; empty: none"},
    {"trigger-hold-bytes", SET_BYTES, FIELD(trigger_hold_bytes), 0, 4096, (double)(1ull << 40),
     "16M",
     "memory for raised samples held until their request is decided; the oldest traces are "
     "dropped beyond it"},
    {"control-listen", SET_STRING, STR(control_listen), 0, 0, "127.0.0.1:4320",
     "AgentControl gRPC listen address (the controller programs triggers); empty: off"},
    {"control-tls-cert", SET_STRING, STR(control_tls_cert), 0, 0, "",
     "PEM certificate of the control port; with control-tls-key and control-tls-ca: mutual "
     "TLS"},
    {"control-tls-key", SET_STRING, STR(control_tls_key), 0, 0, "",
     "PEM private key of control-tls-cert"},
    {"control-tls-ca", SET_STRING, STR(control_tls_ca), 0, 0, "",
     "PEM CA whose certificates the control port accepts from clients"},
    {"control-token-file", SET_STRING, STR(control_token_file), 0, 0, "",
     "file whose first line is the bearer token every control call must carry (32 to 4096 "
     "characters; the file owned by this user or root, mode 600 or 640)"},
    {"control-token-generate", SET_STRING, STR(control_token_generate), 0, 0,
     CONTROL_AUTH_TOKEN_DEFAULT,
     "with neither control-token-file nor mutual TLS: the token file the agent makes (mode "
     "600, directory 700) or reuses, which the controller reads by default; empty: none"},
    {"max-conns", SET_INT, FIELD(max_conns), 0, 1, 1 << 20, "256",
     "concurrent connections per listening port (OTLP, control), before any authentication; "
     "at most 1/16 of the open file limit"},
    {"max-conns-per-peer", SET_INT, FIELD(max_conns_per_peer), 0, 1, 1 << 20, "64",
     "concurrent connections per port from one peer address"},
    {"conn-idle-timeout", SET_SECONDS, FIELD(conn_idle_timeout_s), 0, 1, 86400, "30s",
     "a connection with no request in progress (none yet, or kept alive) is closed after this"},
    {"http-header-timeout", SET_SECONDS, FIELD(http_header_timeout_s), 0, 1, 3600, "5s",
     "OTLP/HTTP: request line and headers must arrive within this of their first byte"},
    {"http-min-body-rate", SET_BYTES, FIELD(http_min_body_rate), 0, 1, 1 << 30, "64K",
     "OTLP/HTTP: a body must arrive within http-header-timeout + its length at this rate "
     "(bytes/s)"},
    {"grpc-max-conn-age", SET_SECONDS, FIELD(grpc_max_conn_age_s), 0, 1, 20 * 86400, "30m",
     "gRPC ports: a connection is asked to go away after this (30 s grace to finish calls)"},
    {"grpc-keepalive", SET_SECONDS, FIELD(grpc_keepalive_s), 0, 1, 86400, "1m",
     "gRPC ports: ping a connection idle this long; closed when unanswered in 20 s"},
    {"grpc-handshake-timeout", SET_SECONDS, FIELD(grpc_handshake_timeout_s), 0, 1, 3600, "10s",
     "gRPC TLS port (control with TLS): the TLS handshake must finish within this"},
    {"kubeconfig", SET_STRING, STR(kubeconfig), 0, 0, "",
     "kubeconfig to read the node's pods from (namespace, name, labels); empty: see "
     "kube-in-cluster"},
    {"kube-in-cluster", SET_AUTOBOOL, FIELD(kube_in_cluster), 0, 0, 0, "auto",
     "read the node's pods with the pod's service account: auto (when "
     "KUBERNETES_SERVICE_HOST is set), on or off"},
    {"spool-dir", SET_STRING, STR(spool_dir), 0, 0, "/var/lib/traceprof/spool",
     "closed windows are kept here until the database has them, so a crash loses at most the "
     "open window; empty: off"},
    {"spool-bytes", SET_BYTES, FIELD(spool_bytes), 0, 1 << 16, (double)(1ull << 40), "64M",
     "disk for spooled windows; beyond it windows are kept in memory only (counted)"},
};

#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

static const struct setting *find(const char *name)
{
	for (size_t i = 0; i < NSETTINGS; i++)
		if (strcmp(settings[i].name, name) == 0)
			return &settings[i];
	return NULL;
}

bool config_known(const char *name)
{
	return find(name) != NULL;
}

static int parse_number(const char *v, double *out, char *suffix)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(v, &end);
	if (end == v || errno || d != d)
		return -EINVAL;
	*suffix = *end;
	if (*end && end[1])
		return -EINVAL;
	*out = d;
	return 0;
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

static int parse_span_kinds(struct agent_config *cfg, const char *v, char *err, size_t errlen)
{
	unsigned mask = 0;

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

static int parse_target(struct agent_config *cfg, const char *v, char *err, size_t errlen)
{
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

int config_set(struct agent_config *cfg, const char *name, const char *value, char *err,
	       size_t errlen)
{
	const struct setting *s = find(name);
	char dummy[8];
	double d;
	char suffix;

	if (!err) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	if (!s) {
		snprintf(err, errlen, "unknown setting \"%s\"", name);
		return -ENOENT;
	}
	switch (s->type) {
	case SET_INT:
		if (parse_number(value, &d, &suffix) || suffix || d != (double)(long long)d)
			goto bad_number;
		if (d < s->min || d > s->max)
			goto out_of_range;
		*(int *)((char *)cfg + s->offset) = (int)d;
		return 0;
	case SET_COUNT:
		if (parse_number(value, &d, &suffix) || suffix || d != (double)(long long)d)
			goto bad_number;
		if (d < s->min || d > s->max)
			goto out_of_range;
		*(size_t *)((char *)cfg + s->offset) = (size_t)d;
		return 0;
	case SET_BYTES: {
		double mult = 1;

		/* a size whose default is "auto" also takes "auto", stored as 0 */
		if (!strcmp(value, "auto") && !strcmp(s->def, "auto")) {
			*(size_t *)((char *)cfg + s->offset) = 0;
			return 0;
		}
		if (parse_number(value, &d, &suffix) || d < 0)
			goto bad_number;
		switch (toupper((unsigned char)suffix)) {
		case 0:
			break;
		case 'K':
			mult = 1024;
			break;
		case 'M':
			mult = 1024.0 * 1024;
			break;
		case 'G':
			mult = 1024.0 * 1024 * 1024;
			break;
		default:
			goto bad_number;
		}
		d *= mult;
		if (d < s->min || d > s->max)
			goto out_of_range;
		*(size_t *)((char *)cfg + s->offset) = (size_t)d;
		return 0;
	}
	case SET_SECONDS:
	case SET_SECONDS_F: {
		double mult = 1;

		if (parse_number(value, &d, &suffix) || d < 0)
			goto bad_number;
		switch (suffix) {
		case 0:
		case 's':
			break;
		case 'm':
			mult = 60;
			break;
		case 'h':
			mult = 3600;
			break;
		default:
			goto bad_number;
		}
		d *= mult;
		if (s->type == SET_SECONDS_F) {
			if (d > s->max)
				goto out_of_range;
			*(double *)((char *)cfg + s->offset) = d;
			return 0;
		}
		if (d != (double)(int)d || d < s->min || d > s->max)
			goto out_of_range;
		*(int *)((char *)cfg + s->offset) = (int)d;
		return 0;
	}
	case SET_STRING:
		if (strlen(value) >= s->size) {
			snprintf(err, errlen, "%s: value longer than %zu bytes", name, s->size - 1);
			return -EINVAL;
		}
		strcpy((char *)cfg + s->offset, value);
		return 0;
	case SET_TARGET:
		return parse_target(cfg, value, err, errlen);
	case SET_SPANKINDS:
		return parse_span_kinds(cfg, value, err, errlen);
	case SET_AUTOBOOL: {
		static const char *const words[] = {"auto", "on", "off"};

		for (int i = 0; i < 3; i++)
			if (strcmp(value, words[i]) == 0) {
				*(enum config_auto *)((char *)cfg + s->offset) =
				    (enum config_auto)i;
				return 0;
			}
		snprintf(err, errlen, "%s: want auto, on or off, not \"%s\"", name, value);
		return -EINVAL;
	}
	case SET_LOGLEVEL: {
		static const char *const levels[] = {"debug", "info", "warn", "error"};

		for (int i = 0; i < 4; i++)
			if (strcmp(value, levels[i]) == 0) {
				cfg->log_level = i;
				return 0;
			}
		snprintf(err, errlen, "log-level: want debug, info, warn or error, not \"%s\"",
			 value);
		return -EINVAL;
	}
	}
	return -EINVAL;

bad_number:
	snprintf(err, errlen, "%s: \"%s\" is not a valid %s", name, value,
		 s->type == SET_BYTES					? "size (e.g. 64M)"
		 : (s->type == SET_SECONDS || s->type == SET_SECONDS_F) ? "duration (e.g. 15s, 2m)"
									: "integer");
	return -EINVAL;
out_of_range:
	snprintf(err, errlen, "%s: %s is out of range", name, value);
	return -EINVAL;
}

void config_defaults(struct agent_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < NSETTINGS; i++) {
		int rc = config_set(cfg, settings[i].name, settings[i].def, NULL, 0);

		(void)rc; /* the defaults are valid by construction (a unit test checks) */
	}
	if (gethostname(cfg->node, sizeof(cfg->node) - 1) != 0)
		strcpy(cfg->node, "localhost");
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

int config_load_file(struct agent_config *cfg, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[8192];
	int lineno = 0, rc = 0;

	if (!f) {
		rc = -errno;
		log_error("cannot read config file %s: %s", path, strerror(errno));
		return rc;
	}
	while (fgets(line, sizeof(line), f)) {
		char *p, *eq, *name, *value, err[256];
		size_t len = strlen(line);

		lineno++;
		if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
			log_error("%s:%d: line too long", path, lineno);
			rc = -EINVAL;
			break;
		}
		p = trim(line);
		if (!*p || *p == '#')
			continue;
		eq = strchr(p, '=');
		if (!eq) {
			log_error("%s:%d: want \"name = value\"", path, lineno);
			rc = -EINVAL;
			break;
		}
		*eq = '\0';
		name = trim(p);
		value = trim(eq + 1);
		if (config_set(cfg, name, value, err, sizeof(err)) != 0) {
			log_error("%s:%d: %s", path, lineno, err);
			rc = -EINVAL;
			break;
		}
	}
	fclose(f);
	return rc;
}

void config_print_help(FILE *out)
{
	for (size_t i = 0; i < NSETTINGS; i++) {
		const struct setting *s = &settings[i];

		fprintf(out, "  --%-20s %s", s->name, s->help);
		if (s->def[0])
			fprintf(out, " (default %s)", s->def);
		fputc('\n', out);
	}
}

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

void config_db_masked(const struct agent_config *cfg, char *out, size_t outlen)
{
	mask_password(cfg->db, out, outlen);
}

void config_print(const struct agent_config *cfg, FILE *out)
{
	static const char *const levels[] = {"debug", "info", "warn", "error"};
	char db[4096 + 16];

	mask_password(cfg->db, db, sizeof(db));
	fprintf(out, "frequency = %d\nwindow = %ds\n", cfg->frequency, cfg->window_s);
	if (cfg->target == CONFIG_TARGET_ALL) {
		fprintf(out, "target = all\n");
	} else if (cfg->target == CONFIG_TARGET_CGROUP) {
		fprintf(out, "target = cgroup:%s\n", cfg->cgroup);
	} else {
		fprintf(out, "target = pid:");
		for (int i = 0; i < cfg->npids; i++)
			fprintf(out, "%s%d", i ? "," : "", cfg->pids[i]);
		fputc('\n', out);
	}
	fprintf(out, "db = %s\nqueue-bytes = %zu\n", db, cfg->queue_bytes);
	if (cfg->ring_bytes)
		fprintf(out, "ring-bytes = %zu\n", cfg->ring_bytes);
	else
		fprintf(out, "ring-bytes = auto\n");
	fprintf(out, "symbol-cache-bytes = %zu\n", cfg->symbol_cache_bytes);
	fprintf(out, "max-keys = %zu\nnode = %s\nlog-level = %s\nduration = %gs\n", cfg->max_keys,
		cfg->node, levels[cfg->log_level < 4 ? cfg->log_level : 1], cfg->duration_s);
	fprintf(out, "stats-file = %s\n", cfg->stats_file);
	fprintf(out, "otlp-grpc = %s\notlp-http = %s\notlp-max-bytes = %zu\notlp-span-kinds = ",
		cfg->otlp_grpc, cfg->otlp_http, cfg->otlp_max_bytes);
	for (size_t i = 0, n = 0; i < NKINDS; i++)
		if (cfg->otlp_span_kinds & span_kinds[i].bit)
			fprintf(out, "%s%s", n++ ? "," : "", span_kinds[i].name);
	fprintf(out, "\notlp-forward = %s\n", cfg->otlp_forward);
	fprintf(out, "trigger-hold-bytes = %zu\n", cfg->trigger_hold_bytes);
	fprintf(out, "kubeconfig = %s\nkube-in-cluster = %s\n", cfg->kubeconfig,
		cfg->kube_in_cluster == CONFIG_ON    ? "on"
		: cfg->kube_in_cluster == CONFIG_OFF ? "off"
						     : "auto");
	fprintf(out, "spool-dir = %s\nspool-bytes = %zu\n", cfg->spool_dir, cfg->spool_bytes);
}
