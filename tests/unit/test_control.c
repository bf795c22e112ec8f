/*
 * test_control: the AgentControl server (control/control.h) over the
 * trigger engine (agent/sampling/triggers_control.h) and the client
 * library (traceprof/control_client.h), real gRPC at both ends. An
 * ApplyTriggers / GetStatus round trip; bearer tokens (missing and wrong
 * refused with UNAUTHENTICATED and counted, the right one works); mutual
 * TLS with certificates made here by the openssl command line (a client
 * without a certificate or with one from another CA is refused, the right
 * one works); malformed and oversize messages; a set for another node.
 * Authentication by default: with neither a token file nor TLS the server
 * makes a token file (mode 0600 in a directory of mode 0700) that a client
 * must present, loopback included, and keeps it across restarts; no
 * authentication at all is refused at start. Token files others could
 * write (mode 0666, 0620, owned by nobody) or too short (10 and 1
 * characters) are refused at start by the server and the client, each
 * with what to fix. An unknown method is answered UNIMPLEMENTED at once;
 * 1,000 unauthenticated calls are all counted and logged in a few lines.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>

#include "check.h"
#include "control.h"
#include "control_auth.h"
#include "grpc_unary.h"
#include "traceprof/control_client.h"
#include "traceprof/log.h"
#include "triggers.h"
#include "triggers_control.h"

#define ST(x) TRACEPROF__CONTROL__V1__TRIGGER_STATE__TRIGGER_STATE_##x

static char dir[] = "/tmp/test_control_XXXXXX";

/* The engine t as the server drives it (control_start copies it). */
static const struct control_engine *engine(struct triggers *t)
{
	static struct control_engine e;

	triggers_control_engine(t, &e);
	return &e;
}

static void path(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", dir, name);
}

/* Writes text to the file name of dir with mode 0600. */
static void write_file(const char *name, const char *text)
{
	char p[256];
	FILE *f;

	path(p, sizeof(p), name);
	f = fopen(p, "w");
	fputs(text, f);
	fclose(f);
	chmod(p, 0600);
}

/* Tokens long enough (40 characters) */
#define TOKEN_A "s3cret-token-0123456789abcdefghijklmnopq\n"
#define TOKEN_B "s3cret-token-0123456789abcdefghijklmnopx\n"
/* the file a server started without a token or TLS makes */
#define GENERATED "run/control-token"

static struct control *start(struct triggers *t, const char *listen, const char *token, bool tls,
			     char *err, size_t errlen)
{
	char tok[256], cert[256], key[256], ca[256];
	char gen[256];
	struct control_opts o = {
	    .listen = listen, .node = "node-a", .version = "test", .token_generate = gen};

	path(gen, sizeof(gen), GENERATED);
	path(tok, sizeof(tok), token ? token : "");
	path(cert, sizeof(cert), "server.pem");
	path(key, sizeof(key), "server.key");
	path(ca, sizeof(ca), "ca.pem");
	if (token)
		o.token_file = tok;
	if (tls) {
		o.tls_cert = cert;
		o.tls_key = key;
		o.tls_ca = ca;
	}
	return control_start(&o, engine(t), err, errlen);
}

static struct control_client *client(int port, const char *token, const char *ca, const char *cert,
				     const char *key)
{
	char addr[64], tok[256], pca[256], pcert[256], pkey[256], err[256];
	struct control_auth auth = {0};
	struct control_client *c;

	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	path(tok, sizeof(tok), token ? token : "");
	path(pca, sizeof(pca), ca ? ca : "");
	path(pcert, sizeof(pcert), cert ? cert : "");
	path(pkey, sizeof(pkey), key ? key : "");
	auth.token_file = token ? tok : NULL;
	auth.tls_ca = ca ? pca : NULL;
	auth.tls_cert = cert ? pcert : NULL;
	auth.tls_key = key ? pkey : NULL;
	auth.tls_override = ca ? "localhost" : NULL;
	c = control_client_new(addr, &auth, err, sizeof(err));
	CHECK(c != NULL, "client: %s", err);
	return c;
}

/* One trigger for service pay, deadline in 5 minutes. */
static void one_set(Traceprof__Control__V1__ApplyTriggersRequest *req,
		    Traceprof__Control__V1__Trigger *tr, Traceprof__Control__V1__Trigger **p,
		    Traceprof__Control__V1__Targets *tg, char **svc)
{
	traceprof__control__v1__apply_triggers_request__init(req);
	traceprof__control__v1__trigger__init(tr);
	traceprof__control__v1__targets__init(tg);
	tr->id = "t1";
	tr->service = "pay";
	tr->targets = tg;
	tr->max_requests = 3;
	tr->deadline_unix_ms = (int64_t)time(NULL) * 1000 + 300000;
	tg->services = svc;
	tg->n_services = 1;
	*p = tr;
	req->generation = 5;
	req->node = "node-a";
	req->n_triggers = 1;
	req->triggers = p;
}

static int status_call(struct control_client *c, char *err, size_t errlen)
{
	Traceprof__Control__V1__AgentStatus *st = NULL;
	int rc = control_client_status(c, 5000, &st, err, errlen);

	if (st)
		traceprof__control__v1__agent_status__free_unpacked(st, NULL);
	return rc;
}

static void test_round_trip(struct triggers *t)
{
	char err[512];
	struct control *s = start(t, "127.0.0.1:0", NULL, false, err, sizeof(err));
	struct control_client *c;
	Traceprof__Control__V1__ApplyTriggersRequest req;
	Traceprof__Control__V1__Trigger tr, *p;
	Traceprof__Control__V1__Targets tg;
	Traceprof__Control__V1__ApplyTriggersResponse *resp = NULL;
	Traceprof__Control__V1__AgentStatus *st = NULL;
	char *svc = "pay";
	struct triggers_proc proc = {77, "pay", "", "", ""};
	int rc;

	CHECK(s != NULL, "start: %s", err);
	if (!s)
		return;
	c = client(control_port(s), GENERATED, NULL, NULL, NULL);
	one_set(&req, &tr, &p, &tg, &svc);
	rc = control_client_apply(c, &req, 5000, &resp, err, sizeof(err));
	CHECK(rc == 0 && resp, "apply: %d %s", rc, err);
	if (resp) {
		CHECK(resp->changed && resp->generation == 5 && resp->n_triggers == 1 &&
			  strcmp(resp->triggers[0]->id, "t1") == 0 &&
			  resp->triggers[0]->state == ST(PENDING),
		      "apply answer: changed %d gen %llu n %zu", resp->changed,
		      (unsigned long long)resp->generation, resp->n_triggers);
		traceprof__control__v1__apply_triggers_response__free_unpacked(resp, NULL);
	}
	rc = control_client_apply(c, &req, 5000, &resp, err, sizeof(err));
	CHECK(rc == 0 && resp && !resp->changed, "the same set again changed something");
	if (resp)
		traceprof__control__v1__apply_triggers_response__free_unpacked(resp, NULL);
	triggers_proc_add(t, &proc);
	{
		struct triggers_sampler smp = {
		    .running = true, .base_hz = 19, .cpus = 2, .samples = 1234};

		triggers_set_sampler(t, &smp);
	}
	rc = control_client_status(c, 5000, &st, err, sizeof(err));
	CHECK(rc == 0 && st, "status: %d %s", rc, err);
	if (st) {
		CHECK(strcmp(st->node, "node-a") == 0 && strcmp(st->version, "test") == 0 &&
			  st->generation == 5,
		      "status: node %s version %s gen %llu", st->node, st->version,
		      (unsigned long long)st->generation);
		CHECK(st->n_triggers == 1 && st->triggers[0]->state == ST(ACTIVE) &&
			  st->triggers[0]->target_processes == 1 &&
			  st->triggers[0]->frequency_hz == 99,
		      "status trigger");
		CHECK(st->sampler && st->sampler->running && st->sampler->base_hz == 19 &&
			  st->sampler->raised_hz == 99 && st->sampler->raised_processes == 1 &&
			  st->sampler->samples == 1234,
		      "sampler health");
		traceprof__control__v1__agent_status__free_unpacked(st, NULL);
	}
	/* another node's set */
	req.node = "node-b";
	req.generation = 6;
	rc = control_client_apply(c, &req, 5000, &resp, err, sizeof(err));
	CHECK(rc == GRPC_STATUS_INVALID_ARGUMENT && strstr(err, "node-b"),
	      "another node's set: %d %s", rc, err);
	CHECK(triggers_generation(t) == 5, "another node's set was applied");
	control_client_free(c);

	/* raw calls: malformed, oversize */
	{
		grpc_channel_credentials *cr = grpc_insecure_credentials_create();
		char addr[64];
		grpc_channel *ch;
		grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
		static const char garbage[] = "\x0a\xff\xff\xff\xff\xff\xff";
		size_t big = (1u << 20) + 100;
		char *bigbuf = calloc(1, big), gen[256], *tok, bearer[128];
		struct {
			const char *buf;
			size_t len;
			grpc_status_code want;
		} cases[] = {{garbage, sizeof(garbage) - 1, GRPC_STATUS_INVALID_ARGUMENT},
			     {bigbuf, big, GRPC_STATUS_RESOURCE_EXHAUSTED}};

		grpc_init();
		path(gen, sizeof(gen), GENERATED);
		tok = control_auth_read_token(gen, err, sizeof(err));
		CHECK(tok != NULL, "generated token: %s", err);
		snprintf(bearer, sizeof(bearer), "Bearer %s", tok ? tok : "");
		free(tok);
		snprintf(addr, sizeof(addr), "127.0.0.1:%d", control_port(s));
		ch = grpc_channel_create(addr, cr, NULL);
		grpc_channel_credentials_release(cr);
		for (size_t i = 0; i < 2; i++) {
			struct grpc_unary_answer ans;

			grpc_unary_call(ch, cq, CONTROL_METHOD_APPLY, bearer, cases[i].buf,
					cases[i].len, 5000, &ans);
			CHECK(ans.code == cases[i].want, "raw case %zu: status %d, want %d (%s)", i,
			      ans.code, cases[i].want, ans.details);
			if (i == 0)
				CHECK(ans.details[0] != '\0', "malformed: no message");
			if (ans.resp)
				grpc_byte_buffer_destroy(ans.resp);
		}
		free(bigbuf);
		grpc_channel_destroy(ch);
		grpc_completion_queue_shutdown(cq);
		grpc_completion_queue_destroy(cq);
		grpc_shutdown();
	}
	{
		struct control_stats cs;

		control_get_stats(s, &cs);
		CHECK(cs.invalid == 2, "invalid calls counted: %llu",
		      (unsigned long long)cs.invalid);
	}
	control_stop(s);
}

static void test_token(struct triggers *t)
{
	char err[512];
	struct control *s;
	struct control_client *none, *wrong, *right;
	struct control_stats cs;
	int rc;

	write_file("token", TOKEN_A);
	write_file("wrong", TOKEN_B);
	write_file("empty", "\n");
	s = start(t, "127.0.0.1:0", "empty", false, err, sizeof(err));
	CHECK(s == NULL && strstr(err, "token"), "empty token file accepted: %s", err);
	s = start(t, "127.0.0.1:0", "missing", false, err, sizeof(err));
	CHECK(s == NULL && strstr(err, "missing"), "missing token file: %s", err);
	s = start(t, "127.0.0.1:0", "token", false, err, sizeof(err));
	CHECK(s != NULL, "start with token: %s", err);
	if (!s)
		return;
	none = client(control_port(s), NULL, NULL, NULL, NULL);
	wrong = client(control_port(s), "wrong", NULL, NULL, NULL);
	right = client(control_port(s), "token", NULL, NULL, NULL);
	rc = status_call(none, err, sizeof(err));
	CHECK(rc == GRPC_STATUS_UNAUTHENTICATED, "no token: %d %s", rc, err);
	rc = status_call(wrong, err, sizeof(err));
	CHECK(rc == GRPC_STATUS_UNAUTHENTICATED, "wrong token: %d %s", rc, err);
	rc = status_call(right, err, sizeof(err));
	CHECK(rc == 0, "right token: %d %s", rc, err);
	control_get_stats(s, &cs);
	CHECK(cs.unauthenticated == 2 && cs.ok == 1, "counted: unauthenticated %llu ok %llu",
	      (unsigned long long)cs.unauthenticated, (unsigned long long)cs.ok);
	control_client_free(none);
	control_client_free(wrong);
	control_client_free(right);
	{
		struct control_auth a = {.token_file = "/nonexistent/token"};

		CHECK(control_client_new("127.0.0.1:1", &a, err, sizeof(err)) == NULL &&
			  strstr(err, "/nonexistent/token"),
		      "client with a missing token file: %s", err);
	}
	control_stop(s);
}

static bool make_certs(void)
{
	char cmd[4096];

	snprintf(cmd, sizeof(cmd),
		 "cd %s && exec >openssl.log 2>&1 && set -e; K='-newkey ec -pkeyopt "
		 "ec_paramgen_curve:prime256v1 -nodes'; "
		 "openssl req -x509 $K -keyout ca.key -out ca.pem -days 1 -subj /CN=test-ca; "
		 "openssl req -x509 $K -keyout other-ca.key -out other-ca.pem -days 1 "
		 "-subj /CN=other-ca; "
		 "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > server.ext; "
		 "openssl req $K -keyout server.key -out server.csr -subj /CN=localhost; "
		 "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
		 "-out server.pem -days 1 -extfile server.ext; "
		 "openssl req $K -keyout client.key -out client.csr -subj /CN=controller; "
		 "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
		 "-out client.pem -days 1; "
		 "openssl req $K -keyout rogue.key -out rogue.csr -subj /CN=controller; "
		 "openssl x509 -req -in rogue.csr -CA other-ca.pem -CAkey other-ca.key "
		 "-CAcreateserial -out rogue.pem -days 1",
		 dir);
	if (system(cmd) == 0)
		return true;
	snprintf(cmd, sizeof(cmd), "cat %s/openssl.log >&2", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "no openssl log\n");
	return false;
}

static void test_mtls(struct triggers *t)
{
	char err[512];
	struct control *s;
	struct control_client *nocert, *rogue, *good;
	int rc;

	if (!make_certs()) {
		CHECK(0, "openssl could not make the test certificates (is openssl installed?)");
		return;
	}
	s = start(t, "127.0.0.1:0", NULL, true, err, sizeof(err));
	CHECK(s != NULL, "start with mutual TLS: %s", err);
	if (!s)
		return;
	nocert = client(control_port(s), NULL, "ca.pem", NULL, NULL);
	rogue = client(control_port(s), NULL, "ca.pem", "rogue.pem", "rogue.key");
	good = client(control_port(s), NULL, "ca.pem", "client.pem", "client.key");
	rc = status_call(nocert, err, sizeof(err));
	CHECK(rc != 0, "a client without a certificate got in");
	rc = status_call(rogue, err, sizeof(err));
	CHECK(rc != 0, "a client with another CA's certificate got in");
	rc = status_call(good, err, sizeof(err));
	CHECK(rc == 0, "the right certificate: %d %s", rc, err);
	control_client_free(nocert);
	control_client_free(rogue);
	control_client_free(good);
	control_stop(s);

	/* TLS settings go together; mutual TLS is authentication off loopback too */
	{
		char cert[256];
		struct control_opts o = {.listen = "127.0.0.1:0", .tls_cert = cert};

		path(cert, sizeof(cert), "server.pem");
		CHECK(control_start(&o, engine(t), err, sizeof(err)) == NULL &&
			  strstr(err, "control-tls-ca"),
		      "half a TLS setup accepted: %s", err);
	}
	s = start(t, "0.0.0.0:0", NULL, true, err, sizeof(err));
	CHECK(s != NULL, "mutual TLS on a non-loopback address: %s", err);
	control_stop(s);
}

/*
 * No token file, no TLS: the server makes a token file, mode 0600 in a
 * directory of mode 0700, that clients must present on loopback too; a
 * restart keeps it; with nowhere to make it, the server does not start.
 */
static void test_generated(struct triggers *t)
{
	char err[512], gen[256], rundir[256], *tok, *again;
	struct control *s;
	struct control_client *none, *right;
	struct stat st;
	int rc;

	path(gen, sizeof(gen), GENERATED);
	path(rundir, sizeof(rundir), "run");
	unlink(gen);
	rmdir(rundir);
	s = start(t, "127.0.0.1:0", NULL, false, err, sizeof(err));
	CHECK(s != NULL, "start with a generated token: %s", err);
	if (!s)
		return;
	CHECK(stat(rundir, &st) == 0 && (st.st_mode & 07777) == 0700,
	      "token directory mode %04o, want 0700", (unsigned)(st.st_mode & 07777));
	CHECK(stat(gen, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600 &&
		  st.st_uid == geteuid(),
	      "token file mode %04o uid %u, want 0600 and ours", (unsigned)(st.st_mode & 07777),
	      (unsigned)st.st_uid);
	tok = control_auth_read_token(gen, err, sizeof(err));
	CHECK(tok && strlen(tok) >= 32, "generated token: %s (%zu characters)", tok ? "" : err,
	      tok ? strlen(tok) : 0);
	none = client(control_port(s), NULL, NULL, NULL, NULL);
	right = client(control_port(s), GENERATED, NULL, NULL, NULL);
	rc = status_call(none, err, sizeof(err));
	CHECK(rc == GRPC_STATUS_UNAUTHENTICATED, "loopback without a token: %d %s", rc, err);
	rc = status_call(right, err, sizeof(err));
	CHECK(rc == 0, "the generated token: %d %s", rc, err);
	control_client_free(none);
	control_client_free(right);
	control_stop(s);
	s = start(t, "127.0.0.1:0", NULL, false, err, sizeof(err));
	CHECK(s != NULL, "restart: %s", err);
	again = control_auth_read_token(gen, err, sizeof(err));
	CHECK(tok && again && strcmp(tok, again) == 0, "the token changed at restart");
	free(tok);
	free(again);
	control_stop(s);
	{
		struct control_opts o = {.listen = "127.0.0.1:0", .node = "n", .version = "v"};

		s = control_start(&o, engine(t), err, sizeof(err));
		CHECK(s == NULL && strstr(err, "no authentication") &&
			  strstr(err, "control-token-file"),
		      "no authentication at all accepted: %s", err);
		control_stop(s);
	}
	/* the directory others can write into is refused */
	chmod(rundir, 0777);
	s = start(t, "127.0.0.1:0", NULL, false, err, sizeof(err));
	CHECK(s == NULL && strstr(err, "writable by others"),
	      "a world-writable token directory accepted: %s", err);
	control_stop(s);
	chmod(rundir, 0700);
	/* a token on a non-loopback address */
	write_file("token", TOKEN_A);
	s = start(t, "0.0.0.0:0", "token", false, err, sizeof(err));
	CHECK(s != NULL, "token on a non-loopback address: %s", err);
	control_stop(s);
}

/*
 * Token files refused at start by the server and the client, each error
 * naming the fix: writable by others, by the group, readable by others
 * (0644, 0604), owned by another
 * user (nobody), 10 and 1 characters long.
 */
static void test_bad_token_files(struct triggers *t)
{
	static const struct {
		const char *name, *text;
		mode_t mode;
		uid_t uid; /* (uid_t)-1: ours */
		const char *says;
	} bad[] = {
	    {"t-0666", TOKEN_A, 0666, (uid_t)-1, "chmod 600"},
	    {"t-0620", TOKEN_A, 0620, (uid_t)-1, "writable by its group"},
	    {"t-0644", TOKEN_A, 0644, (uid_t)-1,
	     "readable by every user (mode 0644, wanted 600 or 640)"},
	    {"t-0604", TOKEN_A, 0604, (uid_t)-1, "readable by every user"},
	    {"t-nobody", TOKEN_A, 0600, 65534, "owned by uid 65534"},
	    {"t-10", "0123456789\n", 0600, (uid_t)-1, "has 10 characters"},
	    {"t-1", "x\n", 0600, (uid_t)-1, "has 1 characters"},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char p[256], err[512];
		struct control *s;
		struct control_auth a = {.token_file = p};

		write_file(bad[i].name, bad[i].text);
		path(p, sizeof(p), bad[i].name);
		chmod(p, bad[i].mode);
		if (bad[i].uid != (uid_t)-1 && chown(p, bad[i].uid, (gid_t)-1) != 0) {
			printf("skip %s: cannot chown (not root)\n", bad[i].name);
			continue;
		}
		err[0] = 0;
		s = start(t, "127.0.0.1:0", bad[i].name, false, err, sizeof(err));
		CHECK(s == NULL && strstr(err, p) && strstr(err, bad[i].says), "server with %s: %s",
		      bad[i].name, s ? "started" : err);
		control_stop(s);
		printf("server refuses %s: %s\n", bad[i].name, err);
		err[0] = 0;
		CHECK(control_client_new("127.0.0.1:1", &a, err, sizeof(err)) == NULL &&
			  strstr(err, bad[i].says),
		      "client with %s: %s", bad[i].name, err);
	}
}

/* The modes the token file may have: 600, 640, 400 and 440. */
static void test_good_token_modes(void)
{
	static const mode_t good[] = {0600, 0640, 0400, 0440};

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		char p[256], err[512] = "";
		char *tok;

		write_file("t-good", TOKEN_A);
		path(p, sizeof(p), "t-good");
		chmod(p, good[i]);
		tok = control_auth_read_token(p, err, sizeof(err));
		CHECK(tok != NULL, "mode %04o refused: %s", (unsigned)good[i], err);
		free(tok);
		chmod(p, 0600);
	}
}

/* A method AgentControl does not have: UNIMPLEMENTED well within a second, counted. */
static void test_unknown_method(struct triggers *t)
{
	char err[512], addr[64];
	struct control *s = start(t, "127.0.0.1:0", NULL, false, err, sizeof(err));
	grpc_channel_credentials *cr;
	grpc_completion_queue *cq;
	struct grpc_unary_answer ans;
	struct control_stats cs;
	struct timespec a, b;
	grpc_channel *ch;
	double ms;

	CHECK(s != NULL, "start: %s", err);
	if (!s)
		return;
	grpc_init();
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", control_port(s));
	cr = grpc_insecure_credentials_create();
	ch = grpc_channel_create(addr, cr, NULL);
	grpc_channel_credentials_release(cr);
	cq = grpc_completion_queue_create_for_pluck(NULL);
	clock_gettime(CLOCK_MONOTONIC, &a);
	grpc_unary_call(ch, cq, "/traceprof.control.v1.AgentControl/DropAllTriggers", NULL, "", 0,
			5000, &ans);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
	CHECK(ans.code == GRPC_STATUS_UNIMPLEMENTED, "unknown method: status %d (%s)", ans.code,
	      ans.details);
	CHECK(ms < 1000, "unknown method answered after %.0f ms", ms);
	printf("unknown method: status %d in %.1f ms\n", ans.code, ms);
	if (ans.resp)
		grpc_byte_buffer_destroy(ans.resp);
	control_get_stats(s, &cs);
	CHECK(cs.unimplemented == 1, "unknown method counted: %llu",
	      (unsigned long long)cs.unimplemented);
	grpc_channel_destroy(ch);
	grpc_completion_queue_shutdown(cq);
	grpc_completion_queue_destroy(cq);
	grpc_shutdown();
	control_stop(s);
}

/*
 * 1,000 calls without a token: all refused and counted, the log gets at
 * most CONTROL_LOG_BURST lines plus the one that says the rest are only
 * counted (stderr is captured in a file meanwhile).
 */
static void test_flood(struct triggers *t)
{
	char err[512], logp[256], line[512];
	struct control *s = start(t, "127.0.0.1:0", NULL, false, err, sizeof(err));
	struct control_client *none;
	struct control_stats cs;
	int saved, fd, lines = 0, logged = 0, refused = 0;
	FILE *f;

	CHECK(s != NULL, "start: %s", err);
	if (!s)
		return;
	none = client(control_port(s), NULL, NULL, NULL, NULL);
	path(logp, sizeof(logp), "flood.log");
	fflush(stderr);
	saved = dup(2);
	fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	dup2(fd, 2);
	close(fd);
	log_set_level(TP_LOG_INFO);
	for (int i = 0; i < 1000; i++) {
		if (status_call(none, err, sizeof(err)) == GRPC_STATUS_UNAUTHENTICATED)
			refused++;
	}
	log_set_level(TP_LOG_ERROR);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	control_get_stats(s, &cs);
	f = fopen(logp, "r");
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "control:") && strstr(line, "refused")) {
			lines++;
			logged += strstr(line, " refused: ") != NULL;
		}
	if (f)
		fclose(f);
	printf("1000 unauthenticated calls: %d refused, counted %llu, %d log lines, %llu not "
	       "logged\n",
	       refused, (unsigned long long)cs.unauthenticated, lines,
	       (unsigned long long)cs.log_suppressed);
	CHECK(refused == 1000, "refused %d of 1000", refused);
	CHECK(cs.unauthenticated == 1000, "counted %llu", (unsigned long long)cs.unauthenticated);
	CHECK(lines >= 1 && lines <= CONTROL_LOG_BURST + 1, "%d log lines for 1000 refusals",
	      lines);
	CHECK(cs.log_suppressed + (uint64_t)logged == 1000, "%d logged + %llu not logged != 1000",
	      logged, (unsigned long long)cs.log_suppressed);
	control_client_free(none);
	control_stop(s);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * An agent that was down for a while and comes back is reached within
 * about a second by a client that kept calling meanwhile (the controller's
 * tick), not after gRPC's default reconnect backoff, which grows past 10 s
 * in that time.
 */
static void test_reconnect(struct triggers *t)
{
	char err[512], addr[64];
	struct control *s = start(t, "127.0.0.1:0", NULL, false, err, sizeof(err));
	struct control_client *c;
	int port, rc = -1;
	int64_t t0, up;

	CHECK(s != NULL, "start: %s", err);
	if (!s)
		return;
	port = control_port(s);
	c = client(port, GENERATED, NULL, NULL, NULL);
	CHECK(status_call(c, err, sizeof(err)) == GRPC_STATUS_OK, "status: %s", err);
	control_stop(s);
	for (t0 = mono_ms(); mono_ms() - t0 < 15000;) {
		Traceprof__Control__V1__AgentStatus *st = NULL;

		CHECK(control_client_status(c, 200, &st, err, sizeof(err)) != GRPC_STATUS_OK,
		      "a stopped agent answered");
		usleep(500000);
	}
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	s = start(t, addr, NULL, false, err, sizeof(err));
	CHECK(s != NULL, "restart on port %d: %s", port, err);
	for (up = mono_ms(); s && mono_ms() - up < 20000; usleep(100000)) {
		Traceprof__Control__V1__AgentStatus *st = NULL;

		rc = control_client_status(c, 200, &st, err, sizeof(err));
		if (st)
			traceprof__control__v1__agent_status__free_unpacked(st, NULL);
		if (rc == GRPC_STATUS_OK)
			break;
	}
	CHECK(rc == GRPC_STATUS_OK && mono_ms() - up < 2500,
	      "reached again %ld ms after the agent came back (after 15 s down)",
	      (long)(mono_ms() - up));
	control_client_free(c);
	control_stop(s);
}

int main(void)
{
	struct triggers_opts o = {.no_claims = true};
	struct triggers *t;
	char cmd[128];

	log_set_level(TP_LOG_ERROR);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 2;
	}
	t = triggers_new(&o);
	test_round_trip(t);
	test_token(t);
	test_generated(t);
	test_bad_token_files(t);
	test_good_token_modes();
	test_unknown_method(t);
	test_flood(t);
	test_mtls(t);
	test_reconnect(t);
	triggers_free(t);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
	return check_done();
}
