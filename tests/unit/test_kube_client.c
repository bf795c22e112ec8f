/*
 * test_kube_client: the Kubernetes client library against the test API
 * server (tests/kube/kube_test_apiserver.py, HTTPS, real TLS): requests and
 * Status decoding, token and client-certificate authentication, the
 * informer (field selector, add/update/delete, bookmarks, 410 and relist
 * with a delete missed while cut off, the server killed and restarted),
 * leader election with contenders in one process, events and status; then
 * the server misbehaving through its faults.json: 429 with Retry-After and
 * 503 (retried, the Retry-After remembered), watches reset, ended or
 * closed at once (resumed at once, or backed off), an in-stream 410, and
 * objects holding an integer beyond int64 in a LIST and a WATCH.
 *
 * The informer is cut off from the server by a TCP relay in the test that
 * can drop every connection and refuse new ones; TLS passes through it.
 * Skipped (77) when the server script or python3 is missing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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
	t0 = now_ms(); /* a bookmark every 0.3 s: wait for one, 3 s at most */
	do {
		sleep_ms(50);
		kube_informer_get_stats(inf, &st2);
	} while ((st2.bookmarks <= st.bookmarks ||
		  atoll(st2.resource_version) <= atoll(st.resource_version)) &&
		 now_ms() - t0 < 3000);
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

/*
 * A leader frozen past its Lease (SIGSTOP) must not act when it wakes, even
 * before its elector's next round has noticed the loss: a child process
 * runs an elector (Lease 2 s, renew deadline 1.5 s, retry 0.3 s) and
 * reports may_act and is_leader every 10 ms; the first report after
 * SIGCONT must say it may not act.
 */
static void test_frozen_leader(void)
{
	int fds[2];
	pid_t pid;
	char line[64];
	FILE *in;
	int may = -1, lead = -1, leading_seen = 0;

	if (pipe(fds) != 0)
		return;
	pid = fork();
	if (pid == 0) {
		struct kube_config *cfg = config_of(dir);
		struct kube_leader_opts o = {.namespace = "default",
					     .name = "frozen",
					     .identity = "frozen-child",
					     .lease_duration_ms = 2000,
					     .renew_deadline_ms = 1500,
					     .retry_period_ms = 300,
					     .no_release = true};
		char err[256];
		struct kube_leader *l = cfg ? kube_leader_start(cfg, &o, err, sizeof(err)) : NULL;

		close(fds[0]);
		if (!l)
			_exit(1);
		for (int i = 0; i < 3000; i++) {
			char b[32];
			int n = snprintf(b, sizeof(b), "%d %d\n", kube_leader_may_act(l),
					 kube_leader_is_leader(l));

			if (write(fds[1], b, (size_t)n) != n)
				break;
			sleep_ms(10);
		}
		_exit(0);
	}
	close(fds[1]);
	in = fdopen(fds[0], "r");
	for (int i = 0; i < 500 && in && fgets(line, sizeof(line), in); i++) {
		if (sscanf(line, "%d %d", &may, &lead) == 2 && may == 1 && lead == 1 &&
		    ++leading_seen == 20)
			break;
	}
	CHECK(leading_seen == 20, "the child leads and may act");
	kill(pid, SIGSTOP);
	sleep_ms(2500);
	/* drop what it wrote before the freeze */
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	while (in && fgets(line, sizeof(line), in))
		;
	clearerr(in);
	fcntl(fds[0], F_SETFL, 0);
	kill(pid, SIGCONT);
	may = lead = -1;
	if (in && fgets(line, sizeof(line), in))
		sscanf(line, "%d %d", &may, &lead);
	CHECK(may == 0, "woken after 2.5 s frozen: may not act at once (may_act %d, is_leader %d)",
	      may, lead);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	if (in)
		fclose(in);
}

/* ---- a server that misbehaves (faults.json of the test API server) ---- */

static void set_faults(const char *json)
{
	char p[256], tmp[260];
	FILE *f;

	snprintf(p, sizeof(p), "%s/faults.json", dir);
	snprintf(tmp, sizeof(tmp), "%s.new", p);
	f = fopen(tmp, "w");
	if (!f || fputs(json, f) < 0 || fclose(f) != 0 || rename(tmp, p) != 0)
		fprintf(stderr, "cannot write %s\n", p);
}

/* Throttling: Retry-After is waited for, within what a call may wait. */
static void test_retry_after(struct kube_config *cfg)
{
	struct kube_client_opts short_wait = {.retry_wait_ms = 500};
	struct kube_client *c = kube_client_new(cfg, NULL, NULL, 0);
	struct kube_client *s = kube_client_new(cfg, &short_wait, NULL, 0);
	const char *path = "/api/v1/namespaces/default/configmaps";
	struct kube_response r;
	long t0, took;
	int rc;

	CHECK(c && s, "clients");
	if (!c || !s)
		goto out;
	set_faults("{\"refuse\": {\"status\": 429, \"retry_after\": 3, \"count\": 1, "
		   "\"path\": \"/configmaps\"}}");
	t0 = now_ms();
	rc = kube_request(c, KUBE_GET, path, NULL, &r);
	took = now_ms() - t0;
	CHECK(rc == 0 && r.http_status == 200, "429 Retry-After 3: answered after a retry (%d %ld)",
	      rc, r.http_status);
	CHECK(took >= 3000 && took < 6000, "Retry-After: 3 waited for (%ld ms)", took);
	CHECK(kube_client_retries(c) == 1, "one retry (%llu)",
	      (unsigned long long)kube_client_retries(c));
	kube_response_clear(&r);

	set_faults("{\"refuse\": {\"status\": 503, \"count\": 2, \"path\": \"/configmaps\"}}");
	t0 = now_ms();
	rc = kube_request(c, KUBE_GET, path, NULL, &r);
	took = now_ms() - t0;
	CHECK(rc == 0 && r.http_status == 200 && kube_client_retries(c) == 3,
	      "503 twice without Retry-After: a jittered backoff, then answered (%d %ld, %llu "
	      "retries, %ld ms)",
	      rc, r.http_status, (unsigned long long)kube_client_retries(c), took);
	CHECK(took >= 125 + 250 && took < 3000, "backoff of 250 and 500 ms, jittered (%ld ms)",
	      took);
	kube_response_clear(&r);

	/* A call that may wait 0.5 s gets the 429 back; the next one is held. */
	set_faults("{\"refuse\": {\"status\": 429, \"retry_after\": 3, \"count\": 1, "
		   "\"path\": \"/configmaps\"}}");
	t0 = now_ms();
	rc = kube_request(s, KUBE_GET, path, NULL, &r);
	CHECK(rc == 0 && r.http_status == 429 && now_ms() - t0 < 1500,
	      "short budget: the 429 is the answer (%d %ld, %ld ms)", rc, r.http_status,
	      now_ms() - t0);
	kube_response_clear(&r);
	rc = kube_request(s, KUBE_GET, path, NULL, &r);
	CHECK(rc == -EAGAIN, "the next call before the Retry-After passed: -EAGAIN (%d: %s)", rc,
	      r.error);
	kube_response_clear(&r);
	sleep_ms(2700);
	rc = kube_request(s, KUBE_GET, path, NULL, &r);
	CHECK(rc == 0 && r.http_status == 200, "after it passed: answered (%d %ld)", rc,
	      r.http_status);
	kube_response_clear(&r);
	set_faults("{}");
out:
	kube_client_free(c);
	kube_client_free(s);
}

struct arrivals {
	pthread_mutex_t lock;
	char name[32][32]; /* added objects, in order */
	long at[32];	   /* when each was delivered (ms) */
	int n;
};

static struct arrivals arrivals = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void on_arrival(void *arg, const json_t *o)
{
	const char *n = json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));

	pthread_mutex_lock(&arrivals.lock);
	if (n && arrivals.n < 32) {
		snprintf(arrivals.name[arrivals.n], sizeof(arrivals.name[0]), "%s", n);
		arrivals.at[arrivals.n++] = now_ms();
	}
	pthread_mutex_unlock(&arrivals.lock);
}

/* When the object named n was delivered, waiting up to ms; -1 if not. */
static long arrived(const char *n, long ms)
{
	long end = now_ms() + ms, at = -1;

	do {
		pthread_mutex_lock(&arrivals.lock);
		for (int i = 0; i < arrivals.n && at < 0; i++)
			if (strcmp(arrivals.name[i], n) == 0)
				at = arrivals.at[i];
		pthread_mutex_unlock(&arrivals.lock);
		if (at >= 0)
			return at;
		sleep_ms(10);
	} while (now_ms() < end);
	return -1;
}

static json_t *labelled_cm(const char *name)
{
	return json_pack("{s:{s:s, s:{s:s}}}", "metadata", "name", name, "labels", "fault", "1");
}

/*
 * Creates count objects prefix-N, one every gap ms, and returns the
 * longest time until the informer delivered one (ms; 100000 if one never
 * came).
 */
static long worst_latency(struct kube_client *c, const char *prefix, int count, long gap)
{
	long worst = 0;

	for (int i = 0; i < count; i++) {
		char n[32];
		long t0, at;

		snprintf(n, sizeof(n), "%s-%d", prefix, i);
		t0 = now_ms();
		req(c, KUBE_POST, "/api/v1/namespaces/default/configmaps", labelled_cm(n), NULL);
		at = arrived(n, 5000);
		if (at < 0 || at - t0 > worst)
			worst = at < 0 ? 100000 : at - t0;
		sleep_ms(gap);
	}
	return worst;
}

/*
 * Watches ended the ways real API servers and proxies end them: a watch
 * that was open and ends (its end, a reset) is resumed at once and is no
 * error; one that the server closes at once is backed off, not spun on; an
 * in-stream 410 relists.
 */
static void test_watch_faults(struct kube_config *cfg, struct kube_client *c)
{
	struct kube_informer_opts o = {
	    .path = "/api/v1/configmaps",
	    .label_selector = "fault=1",
	    .watch_min_s = 300,
	    .watch_max_s = 300,
	    .handlers = {on_arrival, NULL, NULL, NULL},
	};
	struct kube_informer_stats a, b;
	struct kube_informer *inf;
	char err[256];
	long worst;

	inf = kube_informer_start(cfg, &o, err, sizeof(err));
	CHECK(inf != NULL, "informer: %s", err);
	if (!inf)
		return;
	CHECK(kube_informer_wait_synced(inf, 10000), "synced");

	set_faults("{\"watch_reset_after\": [0.5, 1.5]}");
	kube_informer_get_stats(inf, &a);
	worst = worst_latency(c, "reset", 8, 700);
	kube_informer_get_stats(inf, &b);
	CHECK(worst < 1000,
	      "watches reset every 0.5-1.5 s: every new object within 1 s (worst %ld ms)", worst);
	CHECK(b.watch_ends - a.watch_ends >= 3 && b.errors == a.errors &&
		  b.reconnects == a.reconnects,
	      "resets are normal ends: %llu ends, %llu errors, %llu waits",
	      (unsigned long long)(b.watch_ends - a.watch_ends),
	      (unsigned long long)(b.errors - a.errors),
	      (unsigned long long)(b.reconnects - a.reconnects));

	set_faults("{\"watch_close_after\": [0.5, 1.5]}");
	kube_informer_get_stats(inf, &a);
	worst = worst_latency(c, "close", 5, 700);
	kube_informer_get_stats(inf, &b);
	CHECK(worst < 1000 && b.reconnects == a.reconnects,
	      "watches ended by the server: every new object within 1 s, no wait (worst %ld ms, "
	      "%llu waits)",
	      worst, (unsigned long long)(b.reconnects - a.reconnects));

	set_faults("{\"watch_close_at_once\": true}");
	kube_informer_get_stats(inf, &a);
	sleep_ms(5000);
	kube_informer_get_stats(inf, &b);
	CHECK(b.watches - a.watches <= 15 && b.short_watches > a.short_watches,
	      "watches closed at once: backed off, %llu watch requests in 5 s",
	      (unsigned long long)(b.watches - a.watches));

	/*
	 * The backoff those 5 s built (at most one 3.2-6.4 s wait) is still
	 * running: once the server behaves, the informer is back within it,
	 * and the next phase starts from a watch that is open.
	 */
	set_faults("{}");
	{
		long t0 = now_ms(), at;

		req(c, KUBE_POST, "/api/v1/namespaces/default/configmaps", labelled_cm("calm"),
		    NULL);
		at = arrived("calm", 15000);
		CHECK(at >= 0, "watches served again: back within the backoff (%ld ms)",
		      at < 0 ? -1 : at - t0);
	}

	set_faults("{\"watch_gone_after\": 0.3}");
	kube_informer_get_stats(inf, &a);
	worst = worst_latency(c, "gone", 2, 1000);
	kube_informer_get_stats(inf, &b);
	CHECK(worst < 10000 && b.relists > a.relists,
	      "in-stream 410: relisted (%llu), new objects still delivered (worst %ld ms)",
	      (unsigned long long)(b.relists - a.relists), worst);
	set_faults("{}");
	kube_informer_stop(inf);
}

/*
 * An object jansson refuses (an integer beyond int64, as the API server
 * prints a stored 1e20 of a schema-less field) neither stalls the LIST nor
 * the WATCH: it arrives with that number as a real, the others as usual.
 */
static void test_wide_integer(struct kube_config *cfg, struct kube_client *c)
{
	struct kube_informer_opts o = {
	    .path = "/api/v1/configmaps",
	    .label_selector = "wide=1",
	    .handlers = {on_arrival, NULL, NULL, NULL},
	};
	struct kube_informer *inf;
	char cmd[1024], err[256];
	json_t *w;

	for (int i = 0; i < 2; i++) {
		snprintf(cmd, sizeof(cmd),
			 "curl -sf -o /dev/null --cacert '%s/ca.crt' -H \"Authorization: Bearer "
			 "$(cat '%s/token')\" -H 'Content-Type: application/json' --data-binary "
			 "'{\"metadata\": {\"name\": \"wide-%d\", \"labels\": {\"wide\": \"1\"}}, "
			 "\"spec\": {\"n\": 100000000000000000000, \"m\": 7}}' "
			 "%s/api/v1/namespaces/default/configmaps",
			 dir, dir, i, cfg->server);
		if (i == 0)
			CHECK(system(cmd) == 0, "a configmap holding 1e20 as an integer");
		if (i == 0) {
			req(c, KUBE_POST, "/api/v1/namespaces/default/configmaps",
			    json_pack("{s:{s:s, s:{s:s}}}", "metadata", "name", "narrow", "labels",
				      "wide", "1"),
			    NULL);
			inf = kube_informer_start(cfg, &o, err, sizeof(err));
			CHECK(inf != NULL, "informer: %s", err);
			if (!inf)
				return;
			CHECK(kube_informer_wait_synced(inf, 5000),
			      "the LIST holding it is decoded: synced");
		} else {
			CHECK(system(cmd) == 0, "another one, after the LIST");
			CHECK(arrived("wide-1", 5000) >= 0, "the WATCH event holding it delivered");
		}
	}
	CHECK(arrived("narrow", 100) >= 0 && arrived("wide-0", 100) >= 0,
	      "the LIST delivered both objects");
	w = kube_informer_get(inf, "default/wide-0");
	CHECK(json_is_real(json_object_get(json_object_get(w, "spec"), "n")) &&
		  json_real_value(json_object_get(json_object_get(w, "spec"), "n")) == 1e20 &&
		  json_integer_value(json_object_get(json_object_get(w, "spec"), "m")) == 7,
	      "1e20 is a real, 7 still an integer");
	json_decref(w);
	kube_informer_stop(inf);
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
	CHECK(kube_events_flush(ev, 10000) == 0, "sent");
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

	/*
	 * A burst of 500s (not retried by the client) on Event creation: each
	 * event is queued again with backoff and every one lands; emitting never
	 * waits for the server.
	 */
	set_faults("{\"refuse\": {\"status\": 500, \"count\": 6, \"methods\": [\"POST\"], "
		   "\"path\": \"/events\"}}");
	long t0 = now_ms();

	for (int k = 0; k < 4; k++)
		CHECK(kube_event_emit(ev, &ref, "Normal", "Burst", "event %d", k) == 0, "queued");
	CHECK(now_ms() - t0 < 200, "emitting did not wait for the server (%ld ms)", now_ms() - t0);
	CHECK(kube_events_flush(ev, 20000) == 0, "the burst flushed");
	kube_events_get_stats(ev, &st);
	CHECK(st.created == 6 && st.retried == 6 && st.failed == 0,
	      "4 events through 6 failed sends: %llu created, %llu retried, %llu failed",
	      (unsigned long long)st.created, (unsigned long long)st.retried,
	      (unsigned long long)st.failed);
	/* a server that keeps failing: given up after 5 tries, counted */
	set_faults("{\"refuse\": {\"status\": 500, \"methods\": [\"POST\"], "
		   "\"path\": \"/events\"}}");
	CHECK(kube_event_emit(ev, &ref, "Normal", "Doomed", "never stored") == 0, "queued");
	CHECK(kube_events_flush(ev, 30000) == 0, "given up within the backoff");
	kube_events_get_stats(ev, &st);
	CHECK(st.failed == 1 && st.retried == 10,
	      "failed after 5 tries (%llu failed, %llu retried)", (unsigned long long)st.failed,
	      (unsigned long long)st.retried);
	set_faults("{}");
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

/* The status the fresh object has already: nothing to write. */
static int already_there(void *arg, const json_t *fresh, json_t **status)
{
	(void)arg;
	(void)fresh;
	*status = NULL;
	return KUBE_STATUS_UNCHANGED;
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
	/* first is stale again: a 409, and the callback finds its status there */
	rc = kube_update_status(c, path, first, already_there, NULL, 3, &r);
	CHECK(rc == KUBE_STATUS_UNCHANGED && r.http_status == 200,
	      "no write when the fresh object has the status: %d %ld", rc, r.http_status);
	kube_response_clear(&r);
	{
		json_t *again = NULL;

		req(c, KUBE_GET, path, NULL, &again);
		CHECK(json_equal(json_object_get(again, "metadata"),
				 json_object_get(now, "metadata")),
		      "nothing written: the resourceVersion unchanged");
		json_decref(again);
	}
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
		test_retry_after(cfg);
		test_watch_faults(cfg, c);
		test_wide_integer(cfg, c);
		test_frozen_leader();
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
