/*
 * test_kube_client: the Kubernetes client library against the test API
 * server (tests/kube/kube_test_apiserver.py, HTTPS, real TLS): requests and
 * Status decoding, token and client-certificate authentication, the
 * informer (field selector, add/update/delete, bookmarks, 410 and relist
 * with a delete missed while cut off, the server killed and restarted),
 * leader election with contenders in one process, events and status.
 *
 * The informer is cut off from the server by a TCP relay in the test that
 * can drop every connection and refuse new ones; TLS passes through it.
 * Skipped (77) when the server script or python3 is missing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "traceprof/kube.h"

static const char *script;
static char dir[96]; /* state of the token server */
static pid_t server = -1;

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* Starts the server on state directory d; waits for its kubeconfig. */
static pid_t server_start(const char *d, const char *auth)
{
	char kc[256];
	pid_t pid;

	snprintf(kc, sizeof(kc), "%s/kubeconfig", d);
	unlink(kc);
	pid = fork();
	if (pid == 0) {
		char log[256];

		snprintf(log, sizeof(log), "%s/server.log", d);
		execl("/usr/bin/python3", "python3", script, "--state-dir", d, "--history", "5",
		      "--bookmark-interval", "0.3", "--auth", auth, "--log", log, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 300; i++) {
		if (access(kc, R_OK) == 0)
			return pid;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return -1;
		sleep_ms(50);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

static void server_stop(pid_t pid, int sig)
{
	if (pid <= 0)
		return;
	kill(pid, sig);
	waitpid(pid, NULL, 0);
}

static struct kube_config *config_of(const char *d)
{
	char p[256], err[512];
	struct kube_config_opts o = {.path = p};
	struct kube_config *c = NULL;

	snprintf(p, sizeof(p), "%s/kubeconfig", d);
	if (kube_config_load(&o, &c, err, sizeof(err)) != 0)
		fprintf(stderr, "kubeconfig: %s\n", err);
	return c;
}

/* ---- a TCP relay that can cut the informer off ---- */

#define RELAY_MAX 64

struct relay {
	int listen_fd;	      /* 127.0.0.1:port */
	int port;	      /* its port */
	int target;	      /* the server's port */
	atomic_int cut;	      /* refuse and drop everything */
	pthread_mutex_t lock; /* fds */
	int fds[RELAY_MAX];   /* sockets of live connections, -1 free */
	pthread_t thread;     /* the acceptor */
	atomic_int stop;      /* ends the acceptor */
};

static struct relay relay;

struct pump {
	int a, b; /* client and server sockets */
};

static void relay_track(int fd, bool add)
{
	pthread_mutex_lock(&relay.lock);
	for (int i = 0; i < RELAY_MAX; i++) {
		if (add && relay.fds[i] < 0) {
			relay.fds[i] = fd;
			break;
		}
		if (!add && relay.fds[i] == fd) {
			relay.fds[i] = -1;
			break;
		}
	}
	pthread_mutex_unlock(&relay.lock);
}

static void *pump_run(void *arg)
{
	struct pump *p = arg;
	struct pollfd pf[2] = {{p->a, POLLIN, 0}, {p->b, POLLIN, 0}};
	char buf[16384];

	for (;;) {
		ssize_t n;

		if (poll(pf, 2, 200) < 0)
			break;
		if (atomic_load(&relay.cut) || atomic_load(&relay.stop))
			break;
		if (pf[0].revents) {
			n = read(p->a, buf, sizeof(buf));
			if (n <= 0 || write(p->b, buf, (size_t)n) != n)
				break;
		}
		if (pf[1].revents) {
			n = read(p->b, buf, sizeof(buf));
			if (n <= 0 || write(p->a, buf, (size_t)n) != n)
				break;
		}
	}
	relay_track(p->a, false);
	relay_track(p->b, false);
	close(p->a);
	close(p->b);
	free(p);
	return NULL;
}

static void *relay_run(void *arg)
{
	while (!atomic_load(&relay.stop)) {
		struct pollfd pf = {relay.listen_fd, POLLIN, 0};
		struct sockaddr_in sa = {.sin_family = AF_INET};
		struct pump *p;
		pthread_t t;
		int c, s;

		if (poll(&pf, 1, 100) <= 0)
			continue;
		c = accept(relay.listen_fd, NULL, NULL);
		if (c < 0)
			continue;
		if (atomic_load(&relay.cut)) {
			close(c);
			continue;
		}
		s = socket(AF_INET, SOCK_STREAM, 0);
		sa.sin_port = htons((uint16_t)relay.target);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			close(s);
			close(c);
			continue;
		}
		p = malloc(sizeof(*p));
		p->a = c;
		p->b = s;
		relay_track(c, true);
		relay_track(s, true);
		pthread_create(&t, NULL, pump_run, p);
		pthread_detach(t);
	}
	return NULL;
}

static int relay_start(int target)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);

	pthread_mutex_init(&relay.lock, NULL);
	for (int i = 0; i < RELAY_MAX; i++)
		relay.fds[i] = -1;
	relay.target = target;
	relay.listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(relay.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(relay.listen_fd, 16) != 0)
		return -1;
	getsockname(relay.listen_fd, (struct sockaddr *)&sa, &len);
	relay.port = ntohs(sa.sin_port);
	pthread_create(&relay.thread, NULL, relay_run, NULL);
	return 0;
}

/* Cuts (or restores) the relay; cutting drops every live connection. */
static void relay_cut(bool on)
{
	atomic_store(&relay.cut, on);
	if (!on)
		return;
	pthread_mutex_lock(&relay.lock);
	for (int i = 0; i < RELAY_MAX; i++)
		if (relay.fds[i] >= 0)
			shutdown(relay.fds[i], SHUT_RDWR);
	pthread_mutex_unlock(&relay.lock);
}

static void relay_stop(void)
{
	atomic_store(&relay.stop, 1);
	relay_cut(true);
	pthread_join(relay.thread, NULL);
	close(relay.listen_fd);
	sleep_ms(300); /* pumps notice within 200 ms */
}

/* ---- helpers ---- */

static json_t *pod(const char *name, const char *node, const char *label)
{
	return json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:s, s:[{s:s, s:s}]}}", "apiVersion",
			 "v1", "kind", "Pod", "metadata", "name", name, "labels", "v", label,
			 "spec", "nodeName", node, "containers", "name", "c", "image", "busybox");
}

static long req(struct kube_client *c, enum kube_method m, const char *path, json_t *body,
		json_t **out)
{
	struct kube_response r;
	long st;

	if (kube_request(c, m, path, body, &r) != 0) {
		fprintf(stderr, "request %s failed: %s\n", path, r.error);
		kube_response_clear(&r);
		json_decref(body);
		return 0;
	}
	st = r.http_status;
	if (out)
		*out = json_incref(r.body);
	kube_response_clear(&r);
	json_decref(body);
	return st;
}

/* ---- requests ---- */

static void test_requests(struct kube_config *cfg)
{
	struct kube_client_opts co = {.user_agent = "traceprof-controller/test"};
	char err[256];
	struct kube_client *c = kube_client_new(cfg, &co, err, sizeof(err));
	struct kube_response r;
	json_t *cm = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind",
			       "ConfigMap", "metadata", "name", "cfg-a", "data", "k", "1");
	json_t *stale;
	int rc;

	CHECK(c != NULL, "client: %s", err);
	if (!c)
		return;
	rc = kube_request(c, KUBE_POST, "/api/v1/namespaces/default/configmaps", cm, &r);
	CHECK(rc == 0 && r.http_status == 201, "create: %d %ld %s", rc, r.http_status, r.error);
	stale = json_deep_copy(r.body);
	kube_response_clear(&r);
	rc = kube_request(c, KUBE_POST, "/api/v1/namespaces/default/configmaps", cm, &r);
	CHECK(rc == 0 && kube_is_already_exists(&r) && !kube_is_conflict(&r) &&
		  r.status.code == 409 && strstr(r.status.message, "cfg-a"),
	      "409 AlreadyExists: %ld %s %s", r.http_status, r.status.reason, r.status.message);
	kube_response_clear(&r);
	rc = kube_request(c, KUBE_GET, "/api/v1/namespaces/default/configmaps/nope", NULL, &r);
	CHECK(rc == 0 && kube_is_not_found(&r) && strcmp(r.status.reason, "NotFound") == 0,
	      "404 NotFound: %ld %s", r.http_status, r.status.reason);
	kube_response_clear(&r);
	/* Merge patch moves the resourceVersion: the first copy is stale now. */
	json_t *patch = json_pack("{s:{s:s}}", "data", "k", "2");
	rc = kube_request(c, KUBE_PATCH_MERGE, "/api/v1/namespaces/default/configmaps/cfg-a", patch,
			  &r);
	CHECK(rc == 0 && r.http_status == 200 &&
		  strcmp(json_string_value(json_object_get(json_object_get(r.body, "data"), "k")),
			 "2") == 0,
	      "merge patch: %ld", r.http_status);
	json_decref(patch);
	kube_response_clear(&r);
	rc = kube_request(c, KUBE_PUT, "/api/v1/namespaces/default/configmaps/cfg-a", stale, &r);
	CHECK(rc == 0 && kube_is_conflict(&r) && !kube_is_already_exists(&r) &&
		  strcmp(r.status.reason, "Conflict") == 0,
	      "409 Conflict on a stale resourceVersion: %ld %s", r.http_status, r.status.reason);
	kube_response_clear(&r);
	json_decref(stale);
	/* A JSON patch. */
	patch = json_pack("[{s:s, s:s, s:s}]", "op", "add", "path", "/data/j", "value", "x");
	rc = kube_request(c, KUBE_PATCH_JSON, "/api/v1/namespaces/default/configmaps/cfg-a", patch,
			  &r);
	CHECK(rc == 0 && r.http_status == 200, "json patch: %ld %s", r.http_status,
	      r.status.message);
	json_decref(patch);
	kube_response_clear(&r);
	/* 422: a name that is not a DNS-1123 subdomain. */
	json_object_set_new(json_object_get(cm, "metadata"), "name", json_string("Bad_Name"));
	rc = kube_request(c, KUBE_POST, "/api/v1/namespaces/default/configmaps", cm, &r);
	CHECK(rc == 0 && kube_is_invalid(&r) && strcmp(r.status.reason, "Invalid") == 0,
	      "422 Invalid: %ld %s %s", r.http_status, r.status.reason, r.status.message);
	kube_response_clear(&r);
	json_decref(cm);
	rc = kube_request(c, KUBE_DELETE, "/api/v1/namespaces/default/configmaps/cfg-a", NULL, &r);
	CHECK(rc == 0 && r.http_status == 200, "delete: %ld", r.http_status);
	kube_response_clear(&r);
	/* The response cap: a list bigger than 100 bytes is refused, not buffered. */
	kube_client_free(c);
	co.max_response = 100;
	c = kube_client_new(cfg, &co, err, sizeof(err));
	rc = kube_request(c, KUBE_GET, "/api/v1/namespaces", NULL, &r);
	CHECK(rc == -EFBIG && strstr(r.error, "larger than 100"), "size cap: %d %s", rc, r.error);
	kube_response_clear(&r);
	kube_client_free(c);

	/* A wrong token: 401. */
	struct kube_config *bad = kube_config_dup(cfg);
	free(bad->token);
	bad->token = strdup("wrong");
	c = kube_client_new(bad, NULL, err, sizeof(err));
	rc = kube_request(c, KUBE_GET, "/api/v1/namespaces", NULL, &r);
	CHECK(rc == 0 && kube_is_unauthorized(&r), "401 with a wrong token: %ld", r.http_status);
	kube_response_clear(&r);
	kube_client_free(c);
	/* No CA: the server's certificate is not trusted. */
	free(bad->ca_file);
	bad->ca_file = strdup("/nonexistent/ca.crt");
	c = kube_client_new(bad, NULL, err, sizeof(err));
	rc = kube_request(c, KUBE_GET, "/api/v1/namespaces", NULL, &r);
	CHECK(rc < 0 && r.http_status == 0, "untrusted server refused: %d %s", rc, r.error);
	kube_response_clear(&r);
	kube_client_free(c);
	kube_config_free(bad);
}

static void test_token_file(struct kube_config *cfg)
{
	struct kube_config *tf = kube_config_dup(cfg);
	char path[256], err[256];
	struct kube_client *c;
	struct kube_response r;
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "%s/mytoken", dir);
	f = fopen(path, "w");
	fprintf(f, "stale-token\n");
	fclose(f);
	free(tf->token);
	tf->token = NULL;
	tf->token_file = strdup(path);
	c = kube_client_new(tf, NULL, err, sizeof(err));
	rc = kube_request(c, KUBE_GET, "/api/v1/namespaces", NULL, &r);
	CHECK(rc == 0 && kube_is_unauthorized(&r), "old token refused: %ld", r.http_status);
	kube_response_clear(&r);
	/* The token rotates: a 401 makes the client read the file again. */
	f = fopen(path, "w");
	fprintf(f, "%s\n", cfg->token);
	fclose(f);
	rc = kube_request(c, KUBE_GET, "/api/v1/namespaces", NULL, &r);
	CHECK(rc == 0 && r.http_status == 200, "rotated token used after a 401: %ld",
	      r.http_status);
	kube_response_clear(&r);
	kube_client_free(c);
	kube_config_free(tf);
}

static void test_cert_auth(void)
{
	char d[128], err[256];
	pid_t pid;
	struct kube_config *cfg;
	struct kube_client *c;
	struct kube_response r;
	int rc;

	snprintf(d, sizeof(d), "%s/cert", dir);
	mkdir(d, 0700);
	pid = server_start(d, "cert");
	CHECK(pid > 0, "cert server started");
	if (pid <= 0)
		return;
	cfg = config_of(d);
	CHECK(cfg && cfg->cert_file && cfg->key_file && !cfg->token, "client cert config");
	c = cfg ? kube_client_new(cfg, NULL, err, sizeof(err)) : NULL;
	if (c) {
		rc = kube_request(c, KUBE_GET, "/api/v1/namespaces/default", NULL, &r);
		CHECK(rc == 0 && r.http_status == 200, "client certificate accepted: %d %ld %s", rc,
		      r.http_status, r.error);
		kube_response_clear(&r);
	}
	kube_client_free(c);
	kube_config_free(cfg);
	server_stop(pid, SIGTERM);
}

/* ---- informer ---- */

struct seen {
	pthread_mutex_t lock;
	int adds, updates, deletes; /* handler calls */
	char last_deleted[128];	    /* name */
	int wrong_node;		    /* objects of another node */
};

static struct seen seen = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void check_node(const json_t *o)
{
	const char *n = json_string_value(json_object_get(json_object_get(o, "spec"), "nodeName"));

	if (!n || strcmp(n, "node-a") != 0)
		seen.wrong_node++;
}

static void on_add(void *arg, const json_t *o)
{
	pthread_mutex_lock(&seen.lock);
	seen.adds++;
	check_node(o);
	pthread_mutex_unlock(&seen.lock);
}

static void on_update(void *arg, const json_t *old, const json_t *o)
{
	pthread_mutex_lock(&seen.lock);
	seen.updates++;
	check_node(o);
	pthread_mutex_unlock(&seen.lock);
}

static void on_delete(void *arg, const json_t *o)
{
	pthread_mutex_lock(&seen.lock);
	seen.deletes++;
	snprintf(seen.last_deleted, sizeof(seen.last_deleted), "%s",
		 json_string_value(json_object_get(json_object_get(o, "metadata"), "name")));
	pthread_mutex_unlock(&seen.lock);
}

static int counter(int *field)
{
	int v;

	pthread_mutex_lock(&seen.lock);
	v = *field;
	pthread_mutex_unlock(&seen.lock);
	return v;
}

/* Waits until the cache holds exactly the names given (a NULL-ended list). */
static bool wait_cache(struct kube_informer *inf, long ms, const char *const *names)
{
	long end = now_ms() + ms;

	do {
		json_t *all = kube_informer_list(inf);
		size_t n = 0, found = 0;
		char key[160];

		for (; names[n]; n++) {
			snprintf(key, sizeof(key), "default/%s", names[n]);
			json_t *o = kube_informer_get(inf, key);

			found += o != NULL;
			json_decref(o);
		}
		bool ok = found == n && json_array_size(all) == n;

		json_decref(all);
		if (ok)
			return true;
		sleep_ms(50);
	} while (now_ms() < end);
	return false;
}

static void test_informer(struct kube_config *cfg, struct kube_client *c)
{
	struct kube_informer_opts o = {
	    .path = "/api/v1/pods",
	    .field_selector = "spec.nodeName=node-a",
	    .page_size = 2,
	    .watch_min_s = 5,
	    .watch_max_s = 10,
	    .handlers = {on_add, on_update, on_delete, NULL},
	};
	const char *pods_path = "/api/v1/namespaces/default/pods";
	struct kube_config *via_relay = kube_config_dup(cfg);
	struct kube_informer_stats st, st2;
	struct kube_informer *inf;
	char err[256], url[64];
	long t0;
	int rc, port;

	/* Three pods on node-a (more than a page) and one on node-b exist first. */
	req(c, KUBE_POST, pods_path, pod("a1", "node-a", "1"), NULL);
	req(c, KUBE_POST, pods_path, pod("a2", "node-a", "1"), NULL);
	req(c, KUBE_POST, pods_path, pod("a3", "node-a", "1"), NULL);
	req(c, KUBE_POST, pods_path, pod("b1", "node-b", "1"), NULL);

	sscanf(cfg->server, "https://127.0.0.1:%d", &port);
	rc = relay_start(port);
	CHECK(rc == 0, "relay");
	snprintf(url, sizeof(url), "https://127.0.0.1:%d", relay.port);
	free(via_relay->server);
	via_relay->server = strdup(url);

	inf = kube_informer_start(via_relay, &o, err, sizeof(err));
	CHECK(inf != NULL, "informer: %s", err);
	if (!inf)
		goto out;
	CHECK(kube_informer_wait_synced(inf, 10000), "synced");
	CHECK(wait_cache(inf, 1000, (const char *const[]){"a1", "a2", "a3", NULL}),
	      "paged list: node-a's three pods only");
	CHECK(counter(&seen.adds) == 3, "3 adds, got %d", counter(&seen.adds));

	/* Watch: add, update, delete, and a pod of another node not seen. */
	req(c, KUBE_POST, pods_path, pod("a4", "node-a", "1"), NULL);
	req(c, KUBE_POST, pods_path, pod("b2", "node-b", "1"), NULL);
	req(c, KUBE_PATCH_MERGE, "/api/v1/namespaces/default/pods/a1",
	    json_pack("{s:{s:{s:s}}}", "metadata", "labels", "v", "2"), NULL);
	req(c, KUBE_DELETE, "/api/v1/namespaces/default/pods/a2", NULL, NULL);
	CHECK(wait_cache(inf, 5000, (const char *const[]){"a1", "a3", "a4", NULL}),
	      "watch: a4 added, a2 deleted");
	t0 = now_ms();
	while (counter(&seen.updates) < 1 && now_ms() - t0 < 3000)
		sleep_ms(20);
	json_t *a1 = kube_informer_get(inf, "default/a1");
	CHECK(a1 && strcmp(json_string_value(json_object_get(
			       json_object_get(json_object_get(a1, "metadata"), "labels"), "v")),
			   "2") == 0,
	      "the cache has the update");
	json_decref(a1);
	CHECK(counter(&seen.adds) == 4 && counter(&seen.updates) == 1 &&
		  counter(&seen.deletes) == 1 && strcmp(seen.last_deleted, "a2") == 0,
	      "handlers: adds %d updates %d deletes %d", counter(&seen.adds),
	      counter(&seen.updates), counter(&seen.deletes));
	CHECK(counter(&seen.wrong_node) == 0, "no pod of node-b delivered");

	/* Bookmarks move the resourceVersion without any pod event. */
	kube_informer_get_stats(inf, &st);
	req(c, KUBE_POST, "/api/v1/namespaces/default/configmaps",
	    json_pack("{s:{s:s}}", "metadata", "name", "rv-mover"), NULL);
	sleep_ms(1200);
	kube_informer_get_stats(inf, &st2);
	CHECK(st2.bookmarks > st.bookmarks, "bookmarks received (%llu)",
	      (unsigned long long)st2.bookmarks);
	CHECK(atoll(st2.resource_version) > atoll(st.resource_version),
	      "resourceVersion advanced by a bookmark: %s -> %s", st.resource_version,
	      st2.resource_version);

	/* Cut off: more changes than the history keeps, a delete among them. */
	relay_cut(true);
	sleep_ms(300);
	req(c, KUBE_DELETE, "/api/v1/namespaces/default/pods/a3", NULL, NULL);
	req(c, KUBE_POST, pods_path, pod("a5", "node-a", "1"), NULL);
	req(c, KUBE_PATCH_MERGE, "/api/v1/namespaces/default/pods/a4",
	    json_pack("{s:{s:{s:s}}}", "metadata", "labels", "v", "3"), NULL);
	for (int i = 0; i < 8; i++) {
		char n[32];

		snprintf(n, sizeof(n), "filler-%d", i);
		req(c, KUBE_POST, "/api/v1/namespaces/default/configmaps",
		    json_pack("{s:{s:s}}", "metadata", "name", n), NULL);
	}
	int deletes = counter(&seen.deletes), updates = counter(&seen.updates);
	kube_informer_get_stats(inf, &st);
	relay_cut(false);
	CHECK(wait_cache(inf, 40000, (const char *const[]){"a1", "a4", "a5", NULL}),
	      "after the 410 the cache is exact");
	kube_informer_get_stats(inf, &st2);
	CHECK(st2.relists > st.relists, "relisted after 410 (%llu)",
	      (unsigned long long)st2.relists);
	CHECK(counter(&seen.deletes) == deletes + 1 && strcmp(seen.last_deleted, "a3") == 0,
	      "the delete missed while cut off was delivered (%s)", seen.last_deleted);
	CHECK(counter(&seen.updates) == updates + 1, "the update too (%d)",
	      counter(&seen.updates) - updates);

	/* The server killed and restarted mid-watch: reconnect and resume. */
	server_stop(server, SIGKILL);
	server = server_start(dir, "token");
	CHECK(server > 0, "server restarted");
	req(c, KUBE_POST, pods_path, pod("a6", "node-a", "1"), NULL);
	CHECK(wait_cache(inf, 40000, (const char *const[]){"a1", "a4", "a5", "a6", NULL}),
	      "after the restart the informer resumed");
	kube_informer_get_stats(inf, &st);
	CHECK(st.reconnects > 0, "reconnects counted (%llu)", (unsigned long long)st.reconnects);

	t0 = now_ms();
	kube_informer_stop(inf);
	CHECK(now_ms() - t0 < 1500, "stopped within a second (%ld ms)", now_ms() - t0);
out:
	relay_stop();
	kube_config_free(via_relay);
}

/* ---- leader election ---- */

struct contender {
	const char *id;
	atomic_int started, stopped; /* callbacks */
	char leader[64];	     /* new_leader's last value */
	pthread_mutex_t lock;
};

static void started(void *arg)
{
	atomic_fetch_add(&((struct contender *)arg)->started, 1);
}

static void stopped(void *arg)
{
	atomic_fetch_add(&((struct contender *)arg)->stopped, 1);
}

static void new_leader(void *arg, const char *id)
{
	struct contender *k = arg;

	pthread_mutex_lock(&k->lock);
	snprintf(k->leader, sizeof(k->leader), "%s", id);
	pthread_mutex_unlock(&k->lock);
}

static struct kube_leader *contend(struct kube_config *cfg, struct contender *k, bool no_release)
{
	struct kube_leader_opts o = {
	    .namespace = "default",
	    .name = "traceprof-controller",
	    .identity = k->id,
	    .lease_duration_ms = 3000,
	    .renew_deadline_ms = 2000,
	    .retry_period_ms = 300,
	    .no_release = no_release,
	    .started_leading = started,
	    .stopped_leading = stopped,
	    .new_leader = new_leader,
	    .arg = k,
	};
	char err[256];
	struct kube_leader *l;

	pthread_mutex_init(&k->lock, NULL);
	l = kube_leader_start(cfg, &o, err, sizeof(err));
	CHECK(l != NULL, "leader %s: %s", k->id, err);
	return l;
}

static struct kube_leader *wait_leader(struct kube_leader **ls, int n, long ms)
{
	long end = now_ms() + ms;

	do {
		for (int i = 0; i < n; i++)
			if (ls[i] && kube_leader_is_leader(ls[i]))
				return ls[i];
		sleep_ms(20);
	} while (now_ms() < end);
	return NULL;
}

static void test_leader(struct kube_config *cfg, struct kube_client *c)
{
	static struct contender ka = {.id = "alpha"}, kb = {.id = "beta"}, kc = {.id = "gamma"};
	struct kube_leader *ls[3];
	struct kube_leader *lead, *other;
	json_t *lease = NULL;
	const char *lpath = "/apis/coordination.k8s.io/v1/namespaces/default/leases/"
			    "traceprof-controller";
	long t0;
	int both = 0;

	ls[0] = contend(cfg, &ka, true);
	ls[1] = contend(cfg, &kb, true);
	ls[2] = NULL;
	lead = wait_leader(ls, 2, 5000);
	CHECK(lead != NULL, "one contender leads");
	if (!lead)
		return;
	for (int i = 0; i < 50; i++) {
		both += kube_leader_is_leader(ls[0]) && kube_leader_is_leader(ls[1]);
		sleep_ms(20);
	}
	CHECK(both == 0, "never both leading");
	other = lead == ls[0] ? ls[1] : ls[0];
	CHECK(req(c, KUBE_GET, lpath, NULL, &lease) == 200, "lease readable");
	const char *holder =
	    json_string_value(json_object_get(json_object_get(lease, "spec"), "holderIdentity"));
	CHECK(holder && strcmp(holder, kube_leader_identity(lead)) == 0, "holder is the leader");
	const char *rt =
	    json_string_value(json_object_get(json_object_get(lease, "spec"), "renewTime"));
	CHECK(rt && strlen(rt) == 27 && rt[19] == '.' && rt[26] == 'Z', "MicroTime renewTime %s",
	      rt ? rt : "");
	json_decref(lease);

	/* The leader stops renewing (no release): the other waits out the lease. */
	t0 = now_ms();
	kube_leader_stop(lead);
	ls[lead == ls[0] ? 0 : 1] = NULL;
	CHECK(wait_leader(&other, 1, 8000) == other, "the other took over");
	CHECK(now_ms() - t0 >= 2000, "not before the lease ran out (%ld ms)", now_ms() - t0);
	CHECK(req(c, KUBE_GET, lpath, NULL, &lease) == 200 &&
		  json_integer_value(
		      json_object_get(json_object_get(lease, "spec"), "leaseTransitions")) >= 1,
	      "leaseTransitions incremented");
	json_decref(lease);

	/* Writes by someone else while it renews: 409s, re-read, still leader. */
	struct kube_leader_stats ls0, ls1;
	kube_leader_get_stats(other, &ls0);
	for (int i = 0; i < 40; i++) {
		json_t *cur = NULL;
		char v[16];

		if (req(c, KUBE_GET, lpath, NULL, &cur) != 200)
			continue;
		snprintf(v, sizeof(v), "%d", i);
		json_object_set_new(json_object_get(cur, "metadata"), "annotations",
				    json_pack("{s:s}", "poke", v));
		req(c, KUBE_PUT, lpath, cur, NULL);
		sleep_ms(25);
	}
	sleep_ms(700);
	kube_leader_get_stats(other, &ls1);
	CHECK(ls1.renewals > ls0.renewals, "renewals went on (%llu)",
	      (unsigned long long)(ls1.renewals - ls0.renewals));
	CHECK(kube_leader_is_leader(other), "still leader after concurrent writes (409s: %llu)",
	      (unsigned long long)(ls1.conflicts - ls0.conflicts));

	/* Released on stop: a new contender takes over at once (gamma first
	 * waits out the lease the previous leader left without releasing). */
	kube_leader_stop(other == ls[0] ? ls[0] : ls[1]);
	ls[0] = ls[1] = NULL;
	ls[2] = contend(cfg, &kc, false);
	CHECK(wait_leader(&ls[2], 1, 8000) == ls[2], "gamma leads");
	struct kube_leader *ld = contend(cfg, &ka, true); /* alpha again, waiting */
	sleep_ms(400);
	t0 = now_ms();
	kube_leader_stop(ls[2]);
	CHECK(wait_leader(&ld, 1, 2500) == ld, "released lease taken at once (%ld ms)",
	      now_ms() - t0);
	CHECK(atomic_load(&kc.started) == 1 && atomic_load(&kc.stopped) == 1,
	      "gamma: started and stopped once each");

	/* Someone else takes the lease: the leader notices and stops. */
	lease = NULL;
	if (req(c, KUBE_GET, lpath, NULL, &lease) == 200) {
		char now[32];
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		kube_format_microtime(now, &ts);
		json_t *spec = json_object_get(lease, "spec");
		json_object_set_new(spec, "holderIdentity", json_string("intruder"));
		json_object_set_new(spec, "renewTime", json_string(now));
		json_object_set_new(spec, "leaseDurationSeconds", json_integer(30));
		req(c, KUBE_PUT, lpath, lease, NULL);
	}
	t0 = now_ms();
	while (kube_leader_is_leader(ld) && now_ms() - t0 < 5000)
		sleep_ms(20);
	CHECK(!kube_leader_is_leader(ld), "lost the lease to another holder");
	pthread_mutex_lock(&ka.lock);
	CHECK(strcmp(ka.leader, "intruder") == 0, "new_leader told: %s", ka.leader);
	pthread_mutex_unlock(&ka.lock);
	kube_leader_stop(ld);
}

/* ---- events and status ---- */

static void test_events(struct kube_config *cfg, struct kube_client *c)
{
	struct kube_events_opts o = {.component = "traceprof-controller"};
	struct kube_object_ref ref = {.api_version = "v1",
				      .kind = "ConfigMap",
				      .namespace = "default",
				      .name = "ev-target",
				      .uid = "1234-5678"};
	struct kube_events_stats st;
	char err[256], big[3000];
	struct kube_events *ev = kube_events_new(cfg, &o, err, sizeof(err));
	json_t *list = NULL, *item;
	size_t i;
	int found = 0;

	CHECK(ev != NULL, "events: %s", err);
	if (!ev)
		return;
	CHECK(kube_event_emit(ev, &ref, "Warning", "TriggerRejected", "limit of %d reached", 3) ==
		  0,
	      "event created");
	CHECK(kube_event_emit(ev, &ref, "Warning", "TriggerRejected", "limit of %d reached", 3) ==
		  0,
	      "repeat sent");
	/* A message of 2-byte characters, cut on a character boundary. */
	for (i = 0; i + 2 < sizeof(big); i += 2)
		memcpy(big + i, "\xc3\xa9", 2);
	big[i] = '\0';
	CHECK(kube_event_emit(ev, &ref, "Normal", "Long", "x%s", big) == 0, "long message");
	kube_events_get_stats(ev, &st);
	CHECK(st.created == 2 && st.aggregated == 1 && st.failed == 0,
	      "2 created, 1 aggregated: %llu %llu %llu", (unsigned long long)st.created,
	      (unsigned long long)st.aggregated, (unsigned long long)st.failed);
	CHECK(req(c, KUBE_GET, "/api/v1/namespaces/default/events", NULL, &list) == 200,
	      "events listed");
	json_array_foreach(json_object_get(list, "items"), i, item)
	{
		const char *reason = json_string_value(json_object_get(item, "reason"));
		const char *msg = json_string_value(json_object_get(item, "message"));
		json_t *io = json_object_get(item, "involvedObject");

		if (!reason || strcmp(json_string_value(json_object_get(io, "name")), "ev-target"))
			continue;
		found++;
		if (strcmp(reason, "TriggerRejected") == 0) {
			CHECK(json_integer_value(json_object_get(item, "count")) == 2,
			      "count 2 on the aggregated event");
			CHECK(strcmp(json_string_value(json_object_get(io, "uid")), "1234-5678") ==
				  0,
			      "involvedObject uid");
			CHECK(strcmp(json_string_value(json_object_get(item, "reportingComponent")),
				     "traceprof-controller") == 0,
			      "reportingComponent");
		} else {
			CHECK(strlen(msg) <= 1024 && strlen(msg) >= 1022 &&
				  ((unsigned char)msg[strlen(msg) - 1] == 0xa9),
			      "message cut to %zu bytes on a character boundary", strlen(msg));
		}
	}
	CHECK(found == 2, "two Events stored, got %d", found);
	json_decref(list);
	kube_events_free(ev);
}

static int recompute_calls;

static int recompute(void *arg, const json_t *fresh, json_t **status)
{
	const char *v = json_string_value(
	    json_object_get(json_object_get(json_object_get(fresh, "metadata"), "labels"), "v"));

	recompute_calls++;
	*status = json_pack("{s:s, s:s}", "phase", "Running", "message", v ? v : "");
	return 0;
}

static void test_status(struct kube_client *c)
{
	const char *path = "/api/v1/namespaces/default/pods/st1";
	struct kube_response r;
	json_t *first = NULL, *now = NULL;
	int rc;

	req(c, KUBE_POST, "/api/v1/namespaces/default/pods", pod("st1", "node-z", "1"), &first);
	/* Someone else changes the pod: our copy is stale. */
	req(c, KUBE_PATCH_MERGE, path, json_pack("{s:{s:{s:s}}}", "metadata", "labels", "v", "7"),
	    NULL);
	json_object_set_new(first, "status", json_pack("{s:s}", "phase", "Pending"));
	rc = kube_update_status(c, path, first, recompute, NULL, 3, &r);
	CHECK(rc == 0 && r.http_status == 200, "status written after a 409: %d %ld", rc,
	      r.http_status);
	CHECK(recompute_calls == 1, "recomputed once from the fresh object (%d)", recompute_calls);
	kube_response_clear(&r);
	req(c, KUBE_GET, path, NULL, &now);
	json_t *s = json_object_get(now, "status");
	const char *phase = json_string_value(json_object_get(s, "phase"));
	const char *msg = json_string_value(json_object_get(s, "message"));
	CHECK(phase && strcmp(phase, "Running") == 0 && msg && strcmp(msg, "7") == 0,
	      "the recomputed status, from the fresh labels");
	json_decref(now);
	json_decref(first);
}

int main(void)
{
	char tmpl[] = "/tmp/test_kube_client.XXXXXX", cmd[256], err[256];
	struct kube_config *cfg;
	struct kube_client *c;

	script = getenv("TRACEPROF_KUBE_TEST_APISERVER");
	if (!script || !*script)
		script = KUBE_TEST_APISERVER;
	if (access(script, R_OK) != 0 || access("/usr/bin/python3", X_OK) != 0) {
		printf("skip: no test API server at %s (or no python3); set "
		       "TRACEPROF_KUBE_TEST_APISERVER\n",
		       script);
		return 77;
	}
	if (!mkdtemp(tmpl))
		return 1;
	snprintf(dir, sizeof(dir), "%s", tmpl);
	server = server_start(dir, "token");
	if (server <= 0) {
		fprintf(stderr, "the test API server did not start (see %s/server.log)\n", dir);
		return 1;
	}
	cfg = config_of(dir);
	c = cfg ? kube_client_new(cfg, NULL, err, sizeof(err)) : NULL;
	CHECK(c != NULL, "client");
	if (c) {
		test_requests(cfg);
		test_token_file(cfg);
		test_cert_auth();
		test_events(cfg, c);
		test_status(c);
		test_leader(cfg, c);
		test_informer(cfg, c);
	}
	kube_client_free(c);
	kube_config_free(cfg);
	server_stop(server, SIGTERM);
	if (check_failed == 0) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", dir);
	} else {
		fprintf(stderr, "state and server log kept in %s\n", dir);
	}
	return check_done();
}
