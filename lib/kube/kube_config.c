/*
 * kube_config.c - where the Kubernetes API server is and how to
 * authenticate: a kubeconfig file (libyaml document API) or the in-cluster
 * service account.
 *
 * A kubeconfig is small (refused over 1 MiB) and read once at start, so
 * the whole document is loaded as a node tree and walked by name. Every
 * error names the file and the field ("clusters[prod].cluster.server").
 * Relative paths are resolved against the kubeconfig's directory, like
 * kubectl does. Only what a JSON/HTTPS client can honour is accepted:
 * exec credential plugins and auth providers are refused with a message
 * naming the user, insecure-skip-tls-verify only when the caller allows it.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "kube_internal.h"
#include "traceprof/kube.h"

#define KUBECONFIG_MAX (1 << 20) /* bytes of a kubeconfig */
#define SA_DIR_DEFAULT "/var/run/secrets/kubernetes.io/serviceaccount"
#define CREDENTIAL_MAX (1 << 20) /* bytes of a token or PEM file */

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

void kube_config_free(struct kube_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->source);
	free(cfg->context);
	free(cfg->user);
	free(cfg->server);
	free(cfg->ca_file);
	free(cfg->ca_data);
	free(cfg->tls_server_name);
	free(cfg->token);
	free(cfg->token_file);
	free(cfg->cert_file);
	free(cfg->cert_data);
	free(cfg->key_file);
	free(cfg->key_data);
	free(cfg->namespace);
	free(cfg);
}

static char *dup_or_null(const char *s, bool *oom)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*oom = true;
	return d;
}

static char *dup_bytes(const char *s, size_t len, bool *oom)
{
	char *d;

	if (!s)
		return NULL;
	d = malloc(len + 1);
	if (!d) {
		*oom = true;
		return NULL;
	}
	memcpy(d, s, len);
	d[len] = '\0';
	return d;
}

struct kube_config *kube_config_dup(const struct kube_config *c)
{
	struct kube_config *d = calloc(1, sizeof(*d));
	bool oom = false;

	if (!d)
		return NULL;
	d->source = dup_or_null(c->source, &oom);
	d->context = dup_or_null(c->context, &oom);
	d->user = dup_or_null(c->user, &oom);
	d->server = dup_or_null(c->server, &oom);
	d->ca_file = dup_or_null(c->ca_file, &oom);
	d->ca_data = dup_bytes(c->ca_data, c->ca_data_len, &oom);
	d->ca_data_len = c->ca_data_len;
	d->tls_server_name = dup_or_null(c->tls_server_name, &oom);
	d->insecure = c->insecure;
	d->token = dup_or_null(c->token, &oom);
	d->token_file = dup_or_null(c->token_file, &oom);
	d->cert_file = dup_or_null(c->cert_file, &oom);
	d->cert_data = dup_bytes(c->cert_data, c->cert_data_len, &oom);
	d->cert_data_len = c->cert_data_len;
	d->key_file = dup_or_null(c->key_file, &oom);
	d->key_data = dup_bytes(c->key_data, c->key_data_len, &oom);
	d->key_data_len = c->key_data_len;
	d->namespace = dup_or_null(c->namespace, &oom);
	if (oom) {
		kube_config_free(d);
		return NULL;
	}
	return d;
}

int kube_read_file(const char *path, size_t max, char **out, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n;
	int rc;

	if (!f)
		return -errno;
	buf = malloc(max + 1);
	if (!buf) {
		fclose(f);
		return -ENOMEM;
	}
	n = fread(buf, 1, max + 1, f);
	rc = ferror(f) ? -EIO : 0;
	fclose(f);
	if (!rc && n > max)
		rc = -EFBIG;
	if (rc) {
		free(buf);
		return rc;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

/* Standard base64 (padding optional, whitespace skipped); -EINVAL if bad. */
static int base64_decode(const char *in, char **out, size_t *outlen)
{
	size_t n = strlen(in), o = 0;
	char *buf = malloc(n / 4 * 3 + 4);
	unsigned acc = 0;
	int bits = 0;

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)in[i];
		int v;

		if (ch >= 'A' && ch <= 'Z')
			v = ch - 'A';
		else if (ch >= 'a' && ch <= 'z')
			v = ch - 'a' + 26;
		else if (ch >= '0' && ch <= '9')
			v = ch - '0' + 52;
		else if (ch == '+')
			v = 62;
		else if (ch == '/')
			v = 63;
		else if (ch == '=')
			break;
		else if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')
			continue;
		else {
			free(buf);
			return -EINVAL;
		}
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			buf[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	if (o == 0) {
		free(buf);
		return -EINVAL;
	}
	buf[o] = '\0';
	*out = buf;
	*outlen = o;
	return 0;
}

/* ---- the YAML node tree ---- */

static yaml_node_t *map_get(yaml_document_t *doc, yaml_node_t *map, const char *key)
{
	yaml_node_pair_t *p;

	if (!map || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(doc, p->key);

		if (k && k->type == YAML_SCALAR_NODE &&
		    strcmp((char *)k->data.scalar.value, key) == 0)
			return yaml_document_get_node(doc, p->value);
	}
	return NULL;
}

static const char *scalar(yaml_node_t *n)
{
	if (!n || n->type != YAML_SCALAR_NODE)
		return NULL;
	return (const char *)n->data.scalar.value;
}

struct kc_ctx {
	const char *file;   /* the kubeconfig path, for messages */
	char dir[PATH_MAX]; /* its directory, for relative paths */
	yaml_document_t *doc;
	char *err;
	size_t errlen;
};

/* The string field key of map, NULL if absent; -EINVAL if not a scalar. */
static int get_str(struct kc_ctx *k, yaml_node_t *map, const char *where, const char *key,
		   const char **out)
{
	yaml_node_t *n = map_get(k->doc, map, key);

	*out = NULL;
	if (!n)
		return 0;
	if (n->type != YAML_SCALAR_NODE)
		return fail(k->err, k->errlen, -EINVAL, "%s: %s.%s: must be a string", k->file,
			    where, key);
	*out = scalar(n);
	return 0;
}

/* The entry of list `section` whose name is name: its `inner` mapping. */
static int find_named(struct kc_ctx *k, const char *section, const char *inner, const char *name,
		      yaml_node_t **out)
{
	yaml_node_t *root = yaml_document_get_root_node(k->doc);
	yaml_node_t *list = map_get(k->doc, root, section);
	yaml_node_item_t *it;

	if (!list)
		return fail(k->err, k->errlen, -ENOENT, "%s: %s: missing (looking for %s)", k->file,
			    section, name);
	if (list->type != YAML_SEQUENCE_NODE)
		return fail(k->err, k->errlen, -EINVAL, "%s: %s: must be a list", k->file, section);
	for (it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++) {
		yaml_node_t *e = yaml_document_get_node(k->doc, *it);
		const char *n = scalar(map_get(k->doc, e, "name"));

		if (n && strcmp(n, name) == 0) {
			*out = map_get(k->doc, e, inner);
			if (!*out || (*out)->type != YAML_MAPPING_NODE)
				return fail(k->err, k->errlen, -EINVAL,
					    "%s: %s[%s].%s: missing or not a mapping", k->file,
					    section, name, inner);
			return 0;
		}
	}
	return fail(k->err, k->errlen, -ENOENT, "%s: %s: no entry named \"%s\"", k->file, section,
		    name);
}

/* A path relative to the kubeconfig's directory, made absolute. */
static char *resolve(struct kc_ctx *k, const char *p, bool *oom)
{
	char *out;

	if (!p)
		return NULL;
	if (p[0] == '/' || !k->dir[0])
		return dup_or_null(p, oom);
	if (asprintf(&out, "%s/%s", k->dir, p) < 0) {
		*oom = true;
		return NULL;
	}
	return out;
}

static int decode_field(struct kc_ctx *k, const char *where, const char *key, const char *v,
			char **out, size_t *len)
{
	int rc = base64_decode(v, out, len);

	if (rc == -EINVAL)
		return fail(k->err, k->errlen, rc, "%s: %s.%s: not valid base64", k->file, where,
			    key);
	return rc;
}

static int load_cluster(struct kc_ctx *k, struct kube_config *c, const char *name,
			const struct kube_config_opts *o)
{
	yaml_node_t *cl;
	char where[300];
	const char *server, *ca, *ca_data, *insecure, *sni;
	bool oom = false;
	int rc;

	rc = find_named(k, "clusters", "cluster", name, &cl);
	if (rc)
		return rc;
	snprintf(where, sizeof(where), "clusters[%s].cluster", name);
	if ((rc = get_str(k, cl, where, "server", &server)) ||
	    (rc = get_str(k, cl, where, "certificate-authority", &ca)) ||
	    (rc = get_str(k, cl, where, "certificate-authority-data", &ca_data)) ||
	    (rc = get_str(k, cl, where, "insecure-skip-tls-verify", &insecure)) ||
	    (rc = get_str(k, cl, where, "tls-server-name", &sni)))
		return rc;
	if (!server || !*server)
		return fail(k->err, k->errlen, -EINVAL, "%s: %s.server: missing", k->file, where);
	if (strncmp(server, "https://", 8) != 0)
		return fail(k->err, k->errlen, -EINVAL,
			    "%s: %s.server: \"%s\" is not an https:// URL (plain HTTP is not "
			    "supported)",
			    k->file, where, server);
	c->server = strdup(server);
	if (c->server && c->server[strlen(c->server) - 1] == '/')
		c->server[strlen(c->server) - 1] = '\0';
	if (insecure && strcmp(insecure, "true") == 0) {
		if (!o->allow_insecure)
			return fail(k->err, k->errlen, -EPERM,
				    "%s: %s.insecure-skip-tls-verify: TLS verification is off for "
				    "cluster %s; refused unless insecure connections are allowed "
				    "explicitly",
				    k->file, where, name);
		c->insecure = true;
	}
	if (ca_data) {
		rc = decode_field(k, where, "certificate-authority-data", ca_data, &c->ca_data,
				  &c->ca_data_len);
		if (rc)
			return rc;
	} else {
		c->ca_file = resolve(k, ca, &oom);
	}
	c->tls_server_name = dup_or_null(sni, &oom);
	return (oom || !c->server) ? -ENOMEM : 0;
}

static int load_user(struct kc_ctx *k, struct kube_config *c, const char *name)
{
	yaml_node_t *u;
	char where[300];
	const char *token, *token_file, *cert, *cert_data, *key, *key_data;
	bool oom = false;
	int rc;

	rc = find_named(k, "users", "user", name, &u);
	if (rc)
		return rc;
	snprintf(where, sizeof(where), "users[%s].user", name);
	if (map_get(k->doc, u, "exec"))
		return fail(k->err, k->errlen, -ENOTSUP,
			    "%s: %s.exec: exec credential plugins are not supported (user %s); use "
			    "a token, a token file or a client certificate",
			    k->file, where, name);
	if (map_get(k->doc, u, "auth-provider"))
		return fail(k->err, k->errlen, -ENOTSUP,
			    "%s: %s.auth-provider: auth providers are not supported (user %s); use "
			    "a token, a token file or a client certificate",
			    k->file, where, name);
	if ((rc = get_str(k, u, where, "token", &token)) ||
	    (rc = get_str(k, u, where, "tokenFile", &token_file)) ||
	    (rc = get_str(k, u, where, "client-certificate", &cert)) ||
	    (rc = get_str(k, u, where, "client-certificate-data", &cert_data)) ||
	    (rc = get_str(k, u, where, "client-key", &key)) ||
	    (rc = get_str(k, u, where, "client-key-data", &key_data)))
		return rc;
	if ((cert || cert_data) && !(key || key_data))
		return fail(k->err, k->errlen, -EINVAL,
			    "%s: %s.client-key: missing (a client certificate needs its key)",
			    k->file, where);
	if ((key || key_data) && !(cert || cert_data))
		return fail(k->err, k->errlen, -EINVAL,
			    "%s: %s.client-certificate: missing (a client key needs its "
			    "certificate)",
			    k->file, where);
	if (!token && !token_file && !cert && !cert_data)
		return fail(k->err, k->errlen, -EINVAL,
			    "%s: %s: no credentials (token, tokenFile or "
			    "client-certificate/client-key)",
			    k->file, where);
	c->token = dup_or_null(token, &oom);
	if (!token)
		c->token_file = resolve(k, token_file, &oom);
	if (cert_data) {
		rc = decode_field(k, where, "client-certificate-data", cert_data, &c->cert_data,
				  &c->cert_data_len);
		if (rc)
			return rc;
	} else {
		c->cert_file = resolve(k, cert, &oom);
	}
	if (key_data) {
		rc = decode_field(k, where, "client-key-data", key_data, &c->key_data,
				  &c->key_data_len);
		if (rc)
			return rc;
	} else {
		c->key_file = resolve(k, key, &oom);
	}
	if (c->token_file && access(c->token_file, R_OK) != 0)
		return fail(k->err, k->errlen, -errno, "%s: %s.tokenFile: cannot read %s: %s",
			    k->file, where, c->token_file, strerror(errno));
	return oom ? -ENOMEM : 0;
}

static int load_doc(struct kc_ctx *k, struct kube_config *c, const struct kube_config_opts *o)
{
	yaml_node_t *root = yaml_document_get_root_node(k->doc);
	yaml_node_t *ctx;
	const char *name = o->context, *cluster, *user, *ns;
	char where[300];
	int rc;

	if (!root || root->type != YAML_MAPPING_NODE)
		return fail(k->err, k->errlen, -EINVAL, "%s: not a kubeconfig (expected a mapping)",
			    k->file);
	if (!name) {
		name = scalar(map_get(k->doc, root, "current-context"));
		if (!name || !*name)
			return fail(k->err, k->errlen, -ENOENT,
				    "%s: current-context: missing or empty; name a context",
				    k->file);
	}
	rc = find_named(k, "contexts", "context", name, &ctx);
	if (rc)
		return rc;
	snprintf(where, sizeof(where), "contexts[%s].context", name);
	if ((rc = get_str(k, ctx, where, "cluster", &cluster)) ||
	    (rc = get_str(k, ctx, where, "user", &user)) ||
	    (rc = get_str(k, ctx, where, "namespace", &ns)))
		return rc;
	if (!cluster || !*cluster)
		return fail(k->err, k->errlen, -EINVAL, "%s: %s.cluster: missing", k->file, where);
	if (!user || !*user)
		return fail(k->err, k->errlen, -EINVAL, "%s: %s.user: missing", k->file, where);
	c->context = strdup(name);
	c->user = strdup(user);
	c->namespace = strdup(ns && *ns ? ns : "default");
	if (!c->context || !c->user || !c->namespace)
		return -ENOMEM;
	rc = load_cluster(k, c, cluster, o);
	if (rc)
		return rc;
	return load_user(k, c, user);
}

static int default_path(char *buf, size_t len, char *err, size_t errlen)
{
	const char *env = getenv("KUBECONFIG");
	const char *home;

	if (env && *env) {
		const char *colon = strchr(env, ':');
		size_t n = colon ? (size_t)(colon - env) : strlen(env);

		if (n == 0 || n >= len)
			return fail(err, errlen, -EINVAL,
				    "KUBECONFIG: first entry empty or too long");
		memcpy(buf, env, n);
		buf[n] = '\0';
		return 0;
	}
	home = getenv("HOME");
	if (!home || !*home)
		return fail(err, errlen, -ENOENT,
			    "no kubeconfig: KUBECONFIG and HOME are unset; give a path");
	if ((size_t)snprintf(buf, len, "%s/.kube/config", home) >= len)
		return fail(err, errlen, -ENAMETOOLONG, "HOME: too long");
	return 0;
}

int kube_config_load(const struct kube_config_opts *opts, struct kube_config **out, char *err,
		     size_t errlen)
{
	struct kube_config_opts none = {0};
	const struct kube_config_opts *o = opts ? opts : &none;
	char path[PATH_MAX];
	struct kc_ctx k = {.err = err, .errlen = errlen};
	yaml_parser_t parser;
	yaml_document_t doc;
	struct kube_config *c;
	char *text, *slash;
	size_t len;
	int rc;

	*out = NULL;
	if (o->path) {
		if (strlen(o->path) >= sizeof(path))
			return fail(err, errlen, -ENAMETOOLONG, "kubeconfig path too long");
		strcpy(path, o->path);
	} else if ((rc = default_path(path, sizeof(path), err, errlen))) {
		return rc;
	}
	k.file = path;
	rc = kube_read_file(path, KUBECONFIG_MAX, &text, &len);
	if (rc == -EFBIG)
		return fail(err, errlen, rc, "%s: larger than %d bytes", path, KUBECONFIG_MAX);
	if (rc)
		return fail(err, errlen, rc, "%s: cannot read: %s", path, strerror(-rc));
	snprintf(k.dir, sizeof(k.dir), "%s", path);
	slash = strrchr(k.dir, '/');
	if (slash)
		*(slash == k.dir ? slash + 1 : slash) = '\0';
	else
		k.dir[0] = '\0';

	if (!yaml_parser_initialize(&parser)) {
		free(text);
		return -ENOMEM;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		rc = fail(err, errlen, -EINVAL, "%s:%zu:%zu: invalid YAML: %s", path,
			  parser.problem_mark.line + 1, parser.problem_mark.column + 1,
			  parser.problem ? parser.problem : "syntax error");
		yaml_parser_delete(&parser);
		free(text);
		return rc;
	}
	k.doc = &doc;
	c = calloc(1, sizeof(*c));
	if (!c) {
		rc = -ENOMEM;
	} else {
		c->source = strdup(path);
		rc = c->source ? load_doc(&k, c, o) : -ENOMEM;
	}
	if (rc == -ENOMEM && err && errlen && !err[0])
		fail(err, errlen, rc, "%s: out of memory", path);
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	free(text);
	if (rc) {
		kube_config_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* Reads a whole small file, trailing newlines and spaces cut. */
static int read_trimmed(const char *path, char **out, size_t *len)
{
	int rc = kube_read_file(path, CREDENTIAL_MAX, out, len);

	if (rc)
		return rc;
	while (*len > 0 && strchr(" \t\r\n", (*out)[*len - 1]))
		(*out)[--*len] = '\0';
	return 0;
}

int kube_config_in_cluster(const char *sa_dir, struct kube_config **out, char *err, size_t errlen)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	const char *dir = sa_dir ? sa_dir : SA_DIR_DEFAULT;
	struct kube_config *c;
	char path[PATH_MAX];
	char *ns = NULL;
	size_t len;
	int rc;

	*out = NULL;
	if (!host || !*host || !port || !*port)
		return fail(err, errlen, -ENOENT,
			    "not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
			    "must both be set");
	for (const char *p = port; *p; p++)
		if (*p < '0' || *p > '9')
			return fail(err, errlen, -EINVAL,
				    "KUBERNETES_SERVICE_PORT: \"%s\" is not a port number", port);
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->source = strdup("in-cluster");
	if (strchr(host, ':') && host[0] != '[')
		rc = asprintf(&c->server, "https://[%s]:%s", host, port);
	else
		rc = asprintf(&c->server, "https://%s:%s", host, port);
	if (rc < 0 || !c->source) {
		c->server = NULL;
		rc = -ENOMEM;
		goto out_free;
	}
	snprintf(path, sizeof(path), "%s/token", dir);
	if (access(path, R_OK) != 0) {
		rc = fail(err, errlen, -errno, "%s: service account token: %s", path,
			  strerror(errno));
		goto out_free;
	}
	c->token_file = strdup(path);
	snprintf(path, sizeof(path), "%s/ca.crt", dir);
	if (access(path, R_OK) != 0) {
		rc = fail(err, errlen, -errno, "%s: service account CA: %s", path, strerror(errno));
		goto out_free;
	}
	c->ca_file = strdup(path);
	snprintf(path, sizeof(path), "%s/namespace", dir);
	rc = read_trimmed(path, &ns, &len);
	if (rc == 0 && len > 0) {
		c->namespace = ns;
	} else {
		free(ns);
		c->namespace = strdup("default");
	}
	if (!c->token_file || !c->ca_file || !c->namespace) {
		rc = -ENOMEM;
		goto out_free;
	}
	*out = c;
	return 0;
out_free:
	kube_config_free(c);
	return rc;
}
