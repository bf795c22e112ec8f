/*
 * test_kube_config: kubeconfig variants and the in-cluster config, each
 * mistake refused with a message naming the file and the field.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "traceprof/kube.h"

static char dir[128];

static void put(const char *name, const char *text)
{
	char p[PATH_MAX];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "w");
	fputs(text, f);
	fclose(f);
}

#define HEAD                                                                                       \
	"apiVersion: v1\nkind: Config\ncurrent-context: main\n"                                    \
	"clusters:\n- name: c1\n  cluster:\n    server: https://10.0.0.1:6443/\n"                  \
	"    certificate-authority: ca/ca.crt\n"                                                   \
	"- name: c2\n  cluster:\n    server: https://k8s.example:443\n"                            \
	"    certificate-authority-data: aGVsbG8gY2E=\n    tls-server-name: api.internal\n"        \
	"- name: bad\n  cluster:\n    server: https://1.2.3.4\n    insecure-skip-tls-verify: "     \
	"true\n"                                                                                   \
	"contexts:\n- name: main\n  context: {cluster: c1, user: tok, namespace: prof}\n"          \
	"- name: other\n  context: {cluster: c2, user: cert}\n"                                    \
	"- name: files\n  context: {cluster: c1, user: certfiles}\n"                               \
	"- name: tf\n  context: {cluster: c1, user: tokfile}\n"                                    \
	"- name: ex\n  context: {cluster: c1, user: execuser}\n"                                   \
	"- name: ap\n  context: {cluster: c1, user: authp}\n"                                      \
	"- name: insecure\n  context: {cluster: bad, user: tok}\n"                                 \
	"- name: nouser\n  context: {cluster: c1, user: ghost}\n"                                  \
	"- name: halfcert\n  context: {cluster: c1, user: half}\n"                                 \
	"- name: badb64\n  context: {cluster: c1, user: b64}\n"                                    \
	"users:\n- name: tok\n  user:\n    token: abc123\n"                                        \
	"- name: tokfile\n  user:\n    tokenFile: tokdir/token\n"                                  \
	"- name: cert\n  user:\n    client-certificate-data: Y2VydA==\n"                           \
	"    client-key-data: a2V5\n"                                                              \
	"- name: certfiles\n  user:\n    client-certificate: /abs/c.crt\n    client-key: k.key\n"  \
	"- name: execuser\n  user:\n    exec: {command: aws, apiVersion: "                         \
	"client.authentication.k8s.io/v1}\n"                                                       \
	"- name: authp\n  user:\n    auth-provider: {name: gcp}\n"                                 \
	"- name: half\n  user:\n    client-certificate: c.crt\n"                                   \
	"- name: b64\n  user:\n    client-certificate-data: '!!!'\n    client-key-data: a2V5\n"

static int load(const char *file, const char *ctx, bool insecure, struct kube_config **c, char *err,
		size_t len)
{
	char p[PATH_MAX];
	struct kube_config_opts o = {.path = p, .context = ctx, .allow_insecure = insecure};

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	err[0] = '\0';
	return kube_config_load(&o, c, err, len);
}

static void test_kubeconfig(void)
{
	struct kube_config *c = NULL;
	char err[512], want[PATH_MAX + 64];
	int rc;

	put("config", HEAD);
	mkdir(strcat(strcpy(want, dir), "/tokdir"), 0700);
	put("tokdir/token", "tok-from-file\n");

	rc = load("config", NULL, false, &c, err, sizeof(err));
	CHECK(rc == 0, "current context loads: %s", err);
	if (c) {
		CHECK(strcmp(c->server, "https://10.0.0.1:6443") == 0, "server without slash: %s",
		      c->server);
		snprintf(want, sizeof(want), "%s/ca/ca.crt", dir);
		CHECK(c->ca_file && strcmp(c->ca_file, want) == 0,
		      "relative CA against the file's dir: %s", c->ca_file);
		CHECK(c->token && strcmp(c->token, "abc123") == 0, "token");
		CHECK(strcmp(c->namespace, "prof") == 0, "namespace of the context");
		CHECK(strcmp(c->context, "main") == 0 && strcmp(c->user, "tok") == 0, "names");
		kube_config_free(c);
	}
	rc = load("config", "other", false, &c, err, sizeof(err));
	CHECK(rc == 0, "named context: %s", err);
	if (c) {
		CHECK(c->ca_data && c->ca_data_len == 8 && memcmp(c->ca_data, "hello ca", 8) == 0,
		      "CA data decoded");
		CHECK(c->cert_data && strcmp(c->cert_data, "cert") == 0 && c->key_data &&
			  strcmp(c->key_data, "key") == 0,
		      "client cert and key data decoded");
		CHECK(strcmp(c->tls_server_name, "api.internal") == 0, "tls-server-name");
		CHECK(strcmp(c->namespace, "default") == 0, "default namespace");
		struct kube_config *d = kube_config_dup(c);
		CHECK(d && d->ca_data_len == 8 && strcmp(d->key_data, "key") == 0, "dup");
		kube_config_free(d);
		kube_config_free(c);
	}
	rc = load("config", "files", false, &c, err, sizeof(err));
	CHECK(rc == 0, "cert files: %s", err);
	if (c) {
		snprintf(want, sizeof(want), "%s/k.key", dir);
		CHECK(strcmp(c->cert_file, "/abs/c.crt") == 0, "absolute path kept");
		CHECK(strcmp(c->key_file, want) == 0, "relative key path resolved: %s",
		      c->key_file);
		kube_config_free(c);
	}
	rc = load("config", "tf", false, &c, err, sizeof(err));
	CHECK(rc == 0, "token file: %s", err);
	if (c) {
		snprintf(want, sizeof(want), "%s/tokdir/token", dir);
		CHECK(c->token_file && strcmp(c->token_file, want) == 0 && !c->token,
		      "token file resolved");
		kube_config_free(c);
	}

	rc = load("config", "ex", false, &c, err, sizeof(err));
	CHECK(rc == -ENOTSUP && strstr(err, "users[execuser].user.exec") &&
		  strstr(err, "not supported") && strstr(err, "/config"),
	      "exec refused: %s", err);
	rc = load("config", "ap", false, &c, err, sizeof(err));
	CHECK(rc == -ENOTSUP && strstr(err, "auth-provider") && strstr(err, "authp"),
	      "auth-provider refused: %s", err);
	rc = load("config", "insecure", false, &c, err, sizeof(err));
	CHECK(rc == -EPERM && strstr(err, "clusters[bad].cluster.insecure-skip-tls-verify"),
	      "insecure refused by default: %s", err);
	rc = load("config", "insecure", true, &c, err, sizeof(err));
	CHECK(rc == 0 && c && c->insecure, "insecure when allowed: %s", err);
	kube_config_free(c);
	rc = load("config", "nouser", false, &c, err, sizeof(err));
	CHECK(rc == -ENOENT && strstr(err, "users: no entry named \"ghost\""), "missing user: %s",
	      err);
	rc = load("config", "nosuch", false, &c, err, sizeof(err));
	CHECK(rc == -ENOENT && strstr(err, "contexts: no entry named \"nosuch\""),
	      "missing context: %s", err);
	rc = load("config", "halfcert", false, &c, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "users[half].user.client-key: missing"),
	      "cert without key: %s", err);
	rc = load("config", "badb64", false, &c, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "client-certificate-data: not valid base64"),
	      "bad base64: %s", err);

	put("nocur", "apiVersion: v1\nclusters: []\ncontexts: []\nusers: []\n");
	rc = load("nocur", NULL, false, &c, err, sizeof(err));
	CHECK(rc == -ENOENT && strstr(err, "nocur: current-context: missing"),
	      "missing current-context: %s", err);
	put("bad.yaml", "clusters: [\n  - name: x\n  cluster: {\n");
	rc = load("bad.yaml", NULL, false, &c, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "bad.yaml:") && strstr(err, "invalid YAML"),
	      "malformed YAML: %s", err);
	put("noserver",
	    "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\n"
	    "clusters:\n- name: c\n  cluster: {certificate-authority: x}\n"
	    "users:\n- name: u\n  user: {token: t}\n");
	rc = load("noserver", NULL, false, &c, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "noserver: clusters[c].cluster.server: missing"),
	      "missing server: %s", err);
	put("http", "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\n"
		    "clusters:\n- name: c\n  cluster: {server: 'http://x:80'}\n"
		    "users:\n- name: u\n  user: {token: t}\n");
	rc = load("http", NULL, false, &c, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "server") && strstr(err, "https"), "plain http: %s",
	      err);
	put("nocreds",
	    "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\n"
	    "clusters:\n- name: c\n  cluster: {server: 'https://x'}\n"
	    "users:\n- name: u\n  user: {}\n");
	rc = load("nocreds", NULL, false, &c, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "users[u].user: no credentials"), "no credentials: %s",
	      err);
	rc = load("does-not-exist", NULL, false, &c, err, sizeof(err));
	CHECK(rc == -ENOENT && strstr(err, "does-not-exist: cannot read"), "missing file: %s", err);

	/* $KUBECONFIG: the first entry of the list. */
	snprintf(want, sizeof(want), "%s/config:%s/nocur", dir, dir);
	setenv("KUBECONFIG", want, 1);
	rc = kube_config_load(NULL, &c, err, sizeof(err));
	CHECK(rc == 0 && c && strcmp(c->context, "main") == 0, "KUBECONFIG first entry: %s", err);
	kube_config_free(c);
	unsetenv("KUBECONFIG");
	setenv("HOME", dir, 1);
	rc = kube_config_load(NULL, &c, err, sizeof(err));
	CHECK(rc == -ENOENT && strstr(err, "/.kube/config"), "~/.kube/config looked at: %s", err);
}

static void test_in_cluster(void)
{
	struct kube_config *c = NULL;
	char sa[256], p[PATH_MAX], err[512];
	int rc;

	snprintf(sa, sizeof(sa), "%s/sa", dir);
	mkdir(sa, 0700);
	unsetenv("KUBERNETES_SERVICE_HOST");
	rc = kube_config_in_cluster(sa, &c, err, sizeof(err));
	CHECK(rc == -ENOENT && strstr(err, "KUBERNETES_SERVICE_HOST"), "not in a cluster: %s", err);
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	rc = kube_config_in_cluster(sa, &c, err, sizeof(err));
	CHECK(rc == -ENOENT && strstr(err, "sa/token"), "no token named: %s", err);
	put("sa/token", "eyJhbGc\n");
	rc = kube_config_in_cluster(sa, &c, err, sizeof(err));
	CHECK(rc == -ENOENT && strstr(err, "sa/ca.crt"), "no CA named: %s", err);
	put("sa/ca.crt", "-----BEGIN CERTIFICATE-----\n");
	put("sa/namespace", "traceprof-system\n");
	rc = kube_config_in_cluster(sa, &c, err, sizeof(err));
	CHECK(rc == 0, "in-cluster: %s", err);
	if (c) {
		snprintf(p, sizeof(p), "%s/token", sa);
		CHECK(strcmp(c->server, "https://10.96.0.1:443") == 0, "server %s", c->server);
		CHECK(strcmp(c->token_file, p) == 0, "token file");
		CHECK(strcmp(c->namespace, "traceprof-system") == 0, "namespace trimmed");
		kube_config_free(c);
	}
	setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
	rc = kube_config_in_cluster(sa, &c, err, sizeof(err));
	CHECK(rc == 0 && c && strcmp(c->server, "https://[fd00:10:96::1]:443") == 0,
	      "IPv6 bracketed: %s", c ? c->server : err);
	kube_config_free(c);
	setenv("KUBERNETES_SERVICE_PORT", "https", 1);
	rc = kube_config_in_cluster(sa, &c, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "KUBERNETES_SERVICE_PORT"), "bad port: %s", err);
}

static void test_paths(void)
{
	char p[256];

	CHECK(kube_path(p, sizeof(p), "/api/v1", "ns", "pods", "a", "status") == 0 &&
		  strcmp(p, "/api/v1/namespaces/ns/pods/a/status") == 0,
	      "path %s", p);
	CHECK(kube_path(p, sizeof(p), "/apis/coordination.k8s.io/v1", NULL, "leases", NULL, NULL) ==
		      0 &&
		  strcmp(p, "/apis/coordination.k8s.io/v1/leases") == 0,
	      "cluster path %s", p);
	CHECK(kube_path(p, sizeof(p), "/api/v1", "a/b", "pods", NULL, NULL) == -EINVAL,
	      "slash in a segment refused");
	CHECK(kube_path(p, 10, "/api/v1", "ns", "pods", NULL, NULL) == -ENAMETOOLONG, "too long");
	strcpy(p, "/api/v1/pods");
	kube_query_add(p, sizeof(p), "labelSelector", "app in (a,b),tier!=web");
	kube_query_add(p, sizeof(p), "fieldSelector", "spec.nodeName=node-1");
	CHECK(strcmp(p, "/api/v1/pods?labelSelector=app%20in%20%28a%2Cb%29%2Ctier%21%3Dweb"
			"&fieldSelector=spec.nodeName%3Dnode-1") == 0,
	      "selectors escaped: %s", p);
	CHECK(kube_query_add(p, 40, "x", "y") == -ENAMETOOLONG, "query too long");
}

static void test_times(void)
{
	struct timespec ts = {1700000000, 123456789}, back;
	char b[32];

	kube_format_microtime(b, &ts);
	CHECK(strcmp(b, "2023-11-14T22:13:20.123456Z") == 0, "MicroTime %s", b);
	CHECK(kube_parse_time(b, &back) == 0 && back.tv_sec == ts.tv_sec &&
		  back.tv_nsec == 123456000,
	      "parsed back");
	kube_format_time(b, &ts);
	CHECK(strcmp(b, "2023-11-14T22:13:20Z") == 0, "Time %s", b);
	CHECK(kube_parse_time("2023-11-14 22:13:20", &back) == -EINVAL, "bad time refused");
}

int main(void)
{
	char tmpl[] = "/tmp/test_kube_config.XXXXXX";
	char cmd[PATH_MAX + 16];

	if (!mkdtemp(tmpl))
		return 1;
	snprintf(dir, sizeof(dir), "%s", tmpl);
	test_kubeconfig();
	test_in_cluster();
	test_paths();
	test_times();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
	return check_done();
}
