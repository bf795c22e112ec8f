/*
 * test_config.c - the agent's settings: defaults, flags' value forms, the
 * config file reader's errors (with line numbers), and that printing the
 * settings never shows the database password.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h> /* with traceprof/log.h: their level names must not clash */
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "otlp.h"
#include "traceprof/log.h"

static int load_text(struct agent_config *cfg, const char *text)
{
	char path[] = "/tmp/tp-config-XXXXXX";
	int fd = mkstemp(path), rc;
	FILE *f = fdopen(fd, "w");

	fputs(text, f);
	fclose(f);
	rc = config_load_file(cfg, path);
	unlink(path);
	return rc;
}

static void printed(const struct agent_config *cfg, char *buf, size_t len)
{
	FILE *f = fmemopen(buf, len, "w");

	config_print(cfg, f);
	fclose(f);
}

int main(void)
{
	struct agent_config cfg;
	char err[256], out[16384];

	log_set_level(TP_LOG_QUIET);
	config_defaults(&cfg);
	CHECK(cfg.frequency == 19, "default frequency %d", cfg.frequency);
	CHECK(cfg.window_s == 15, "default window %d", cfg.window_s);
	CHECK(cfg.target == CONFIG_TARGET_ALL, "default target");
	CHECK(cfg.queue_bytes == 64u << 20, "default queue %zu", cfg.queue_bytes);
	CHECK(cfg.max_keys == 200000, "default max keys %zu", cfg.max_keys);
	CHECK(cfg.node[0] != '\0', "node defaults to the host name");

	/* value forms */
	CHECK(config_set(&cfg, "frequency", "99", err, sizeof(err)) == 0 && cfg.frequency == 99,
	      "frequency 99");
	CHECK(config_set(&cfg, "frequency", "0", err, sizeof(err)) == -EINVAL &&
		  strstr(err, "out of range"),
	      "frequency 0: %s", err);
	CHECK(config_set(&cfg, "frequency", "9x", err, sizeof(err)) == -EINVAL, "frequency 9x");
	CHECK(config_set(&cfg, "window", "2m", err, sizeof(err)) == 0 && cfg.window_s == 120,
	      "window 2m");
	CHECK(config_set(&cfg, "window", "1.5s", err, sizeof(err)) == -EINVAL,
	      "fractional window refused");
	CHECK(config_set(&cfg, "queue-bytes", "1G", err, sizeof(err)) == 0 &&
		  cfg.queue_bytes == 1u << 30,
	      "queue 1G");
	CHECK(config_set(&cfg, "queue-bytes", "12Q", err, sizeof(err)) == -EINVAL &&
		  strstr(err, "size"),
	      "bad size: %s", err);
	/* ring-bytes: auto by default (sized by the CPUs at start), or a size */
	CHECK(cfg.ring_bytes == 0, "default ring auto %zu", cfg.ring_bytes);
	printed(&cfg, out, sizeof(out));
	CHECK(strstr(out, "ring-bytes = auto\n") != NULL, "auto ring printed: %s", out);
	CHECK(config_set(&cfg, "ring-bytes", "4M", err, sizeof(err)) == 0 &&
		  cfg.ring_bytes == 4u << 20,
	      "ring 4M");
	printed(&cfg, out, sizeof(out));
	CHECK(strstr(out, "ring-bytes = 4194304\n") != NULL, "ring printed: %s", out);
	CHECK(config_set(&cfg, "ring-bytes", "auto", err, sizeof(err)) == 0 && cfg.ring_bytes == 0,
	      "ring auto again");
	CHECK(config_set(&cfg, "queue-bytes", "auto", err, sizeof(err)) == -EINVAL &&
		  cfg.queue_bytes == 1u << 30,
	      "auto only where it is the default: %s", err);
	CHECK(config_set(&cfg, "duration", "1.5s", err, sizeof(err)) == 0 && cfg.duration_s == 1.5,
	      "duration 1.5s");
	CHECK(config_set(&cfg, "target", "pid:12,34", err, sizeof(err)) == 0 &&
		  cfg.target == CONFIG_TARGET_PIDS && cfg.npids == 2 && cfg.pids[1] == 34,
	      "pid list");
	CHECK(config_set(&cfg, "target", "pid:12,x", err, sizeof(err)) == -EINVAL &&
		  strstr(err, "pid"),
	      "bad pid list: %s", err);
	CHECK(config_set(&cfg, "target", "cgroup:/sys/fs/cgroup/x", err, sizeof(err)) == 0 &&
		  cfg.target == CONFIG_TARGET_CGROUP && !strcmp(cfg.cgroup, "/sys/fs/cgroup/x"),
	      "cgroup target");
	CHECK(config_set(&cfg, "target", "some", err, sizeof(err)) == -EINVAL, "bad target");
	CHECK(config_set(&cfg, "log-level", "warn", err, sizeof(err)) == 0 &&
		  cfg.log_level == TP_LOG_WARN,
	      "log level");
	CHECK(!strcmp(cfg.otlp_grpc, "127.0.0.1:4317") &&
		  !strcmp(cfg.otlp_http, "127.0.0.1:4318") && cfg.otlp_max_bytes == 4u << 20 &&
		  cfg.otlp_span_kinds == OTLP_KIND_SERVER,
	      "OTLP defaults");
	CHECK(config_set(&cfg, "otlp-span-kinds", "server, client,consumer", err, sizeof(err)) ==
		      0 &&
		  cfg.otlp_span_kinds == (OTLP_KIND_SERVER | OTLP_KIND_CLIENT | OTLP_KIND_CONSUMER),
	      "span kinds list");
	CHECK(config_set(&cfg, "otlp-span-kinds", "server,bogus", err, sizeof(err)) == -EINVAL &&
		  strstr(err, "bogus"),
	      "unknown span kind named: %s", err);
	CHECK(config_set(&cfg, "otlp-span-kinds", "", err, sizeof(err)) == -EINVAL, "no span kind");
	CHECK(config_set(&cfg, "otlp-grpc", "", err, sizeof(err)) == 0 && !cfg.otlp_grpc[0],
	      "otlp-grpc can be turned off");
	CHECK(config_set(&cfg, "nope", "1", err, sizeof(err)) == -ENOENT && strstr(err, "nope"),
	      "unknown setting: %s", err);
	CHECK(config_known("db") && !config_known("config"), "known names");

	/* the file reader */
	config_defaults(&cfg);
	CHECK(load_text(&cfg, "# comment\n\nfrequency = 49\n  window=30s  \n"
			      "db = host=/tmp dbname=x\n") == 0,
	      "a good file");
	CHECK(cfg.frequency == 49 && cfg.window_s == 30 && !strcmp(cfg.db, "host=/tmp dbname=x"),
	      "file values applied");
	config_defaults(&cfg);
	CHECK(load_text(&cfg, "frequency = 49\nfrequency 50\n") == -EINVAL, "line without =");
	CHECK(load_text(&cfg, "window = 7x\n") == -EINVAL, "bad value in file");
	CHECK(load_text(&cfg, "colour = blue\n") == -EINVAL, "unknown name in file");
	CHECK(config_load_file(&cfg, "/nonexistent/traceprof.conf") == -ENOENT, "missing file");

	/* the password never printed */
	config_defaults(&cfg);
	config_set(&cfg, "db", "host=db password=s3cret dbname=tp", NULL, 0);
	printed(&cfg, out, sizeof(out));
	CHECK(!strstr(out, "s3cret") && strstr(out, "password=***") && strstr(out, "dbname=tp"),
	      "conninfo password masked: %s", out);
	config_set(&cfg, "db", "host=db password = 'a b\\' c' dbname=tp", NULL, 0);
	printed(&cfg, out, sizeof(out));
	CHECK(!strstr(out, "a b") && !strstr(out, " c'") && strstr(out, "dbname=tp"),
	      "quoted password masked: %s", out);
	config_set(&cfg, "db", "postgresql://tp:s3cret@db:5432/tp", NULL, 0);
	printed(&cfg, out, sizeof(out));
	CHECK(!strstr(out, "s3cret") && strstr(out, "postgresql://tp:***@db:5432/tp"),
	      "URI password masked: %s", out);

	/* the control port and the connection limits are printed too; a token never is */
	config_defaults(&cfg);
	config_set(&cfg, "control-token-file", "/run/tp/token", NULL, 0);
	config_set(&cfg, "max-conns-per-peer", "16", NULL, 0);
	printed(&cfg, out, sizeof(out));
	{
		static const char *const want[] = {"control-listen = 127.0.0.1:4320\n",
						   "control-tls-cert = \n",
						   "control-tls-key = \n",
						   "control-tls-ca = \n",
						   "control-token-file = /run/tp/token\n",
						   "control-token-generate = ",
						   "max-conns = 256\n",
						   "max-conns-per-peer = 16\n",
						   "conn-idle-timeout = ",
						   "http-header-timeout = ",
						   "http-min-body-rate = ",
						   "grpc-max-conn-age = ",
						   "grpc-keepalive = ",
						   "grpc-handshake-timeout = "};

		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
			CHECK(strstr(out, want[i]) != NULL, "printed: %s in %s", want[i], out);
	}
	return check_done();
}
