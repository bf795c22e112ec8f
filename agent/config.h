/*
 * config.h - traceprof-agent's settings: one table of names, types, defaults
 * and help, read from a config file ("name = value" lines) and from command
 * line flags with the same names ("--name value" or "--name=value"). Flags
 * win over the file; the file wins over defaults.
 */
#ifndef TRACEPROF_AGENT_CONFIG_H
#define TRACEPROF_AGENT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define CONFIG_MAX_PIDS 64

/* Which processes are sampled. */
enum config_target {
	CONFIG_TARGET_ALL = 0,	  /* every process on the node */
	CONFIG_TARGET_PIDS = 1,	  /* only the processes in pids[] */
	CONFIG_TARGET_CGROUP = 2, /* only processes in the cgroup (v2) at cgroup */
};

/* A setting that may follow the environment. */
enum config_auto {
	CONFIG_AUTO = 0, /* decided at start (see the setting) */
	CONFIG_ON = 1,
	CONFIG_OFF = 2,
};

struct agent_config {
	int frequency;		   /* base sampling frequency, Hz (1..1000) */
	int window_s;		   /* aggregation window, seconds */
	enum config_target target; /* which processes are sampled */
	int pids[CONFIG_MAX_PIDS]; /* CONFIG_TARGET_PIDS: the processes */
	int npids;		   /* entries in pids */
	char cgroup[4096];	   /* CONFIG_TARGET_CGROUP: cgroup v2 directory */
	char db[4096];		   /* libpq conninfo or URI; "" = PG* environment */
	size_t queue_bytes;	   /* bound of windows waiting for the database */
	size_t ring_bytes;	   /* BPF ring buffer size (power of two pages); 0: auto */
	size_t symbol_cache_bytes; /* bound of cached symbol tables */
	size_t python_cache_bytes; /* bound of cached Python code objects (names, line tables) */
	size_t unwind_table_bytes; /* kernel memory for unwind table rows; 0: frame pointers only */
	size_t max_keys;	   /* distinct aggregation keys per window */
	int offcpu;		   /* enum sampler_offcpu_mode: off, requests, all */
	size_t offcpu_min_us;	   /* off-CPU intervals shorter are summed without a stack */
	char obi_map[4096];	   /* OBI's pinned trace map: a path, "auto" or "" (off) */
	int zero_code_http;	  /* HTTP/1.x requests from system calls: 0 off, 1 on, 2 syscalls */
	int python;		  /* 1: Python frames of CPython processes (docs/python.md) */
	int gpu;		  /* 1: CUDA kernel launches of libtraceprof-cuda (docs/gpu.md) */
	int perf_maps;		  /* 1: JIT frames named from perf maps (docs/symbols.md) */
	char node[256];		  /* node name recorded with every source */
	int log_level;		  /* enum log_level */
	double duration_s;	  /* stop after this long (0 = until SIGTERM) */
	char stats_file[4096];	  /* write counters here at exit ("" = none) */
	char otlp_grpc[256];	  /* OTLP/gRPC listen address, "" = off */
	char otlp_http[256];	  /* OTLP/HTTP listen address, "" = off */
	size_t otlp_max_bytes;	  /* largest OTLP export accepted */
	unsigned otlp_span_kinds; /* OTLP_KIND_* mask of spans stored as requests */
	char otlp_forward[256];	  /* upstream OTLP/gRPC host:port for every export, "" = none */
	char control_listen[256]; /* AgentControl listen address, "" = off */
	char control_tls_cert[4096];	   /* PEM server certificate (mutual TLS), or "" */
	char control_tls_key[4096];	   /* its PEM private key, or "" */
	char control_tls_ca[4096];	   /* PEM CA that signs controller certificates, or "" */
	char control_token_file[4096];	   /* file holding the bearer token, or "" */
	char control_token_generate[4096]; /* the token made without token file or TLS, or "" */
	int max_conns;			   /* per listening port (OTLP, control) */
	int max_conns_per_peer;		   /* per port and peer address */
	int conn_idle_timeout_s;	   /* no request in progress: closed after this */
	int http_header_timeout_s;	   /* OTLP/HTTP request line + headers deadline */
	size_t http_min_body_rate;	   /* OTLP/HTTP bytes/s a body must keep */
	int grpc_max_conn_age_s;	   /* gRPC: connections closed (GOAWAY) after this */
	int grpc_keepalive_s;		   /* gRPC: keepalive ping after this long idle */
	int grpc_handshake_timeout_s;	   /* gRPC TLS: handshake deadline */
	size_t trigger_hold_bytes; /* bound of raised samples held until their request is decided */
	char kubeconfig[4096];	   /* kubeconfig for the node's pods, "" = none */
	enum config_auto kube_in_cluster; /* service account of the pod (auto: in a cluster) */
	char spool_dir[4096];		  /* windows kept on disk until committed, "" = off */
	size_t spool_bytes;		  /* bound of the spool's window files */
};

/* Sets every field to its default. */
void config_defaults(struct agent_config *cfg);
/*
 * Reads a config file. Unknown names, bad values and unreadable files are
 * errors, reported with the file name and line. Returns 0 or -errno
 * (-EINVAL for content errors).
 */
int config_load_file(struct agent_config *cfg, const char *path);
/*
 * Applies one setting by name; value is the text form. Returns 0, -ENOENT
 * for an unknown name or -EINVAL for a bad value; err (may be NULL) gets the
 * reason.
 */
int config_set(struct agent_config *cfg, const char *name, const char *value, char *err,
	       size_t errlen);
/* True when name is a setting (for flag parsing). */
bool config_known(const char *name);
/* Prints the settings with their defaults and help, for --help. */
void config_print_help(FILE *out);
/* Copies cfg->db with any password replaced by "***" (names the database in messages, files). */
void config_db_masked(const struct agent_config *cfg, char *out, size_t outlen);
/* Prints the effective settings in config-file form (never the database password). */
void config_print(const struct agent_config *cfg, FILE *out);

#endif
