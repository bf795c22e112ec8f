/*
 * log.h - the one logging module of traceprof.
 *
 * Lines go to stderr as "LEVEL msg key=value ...". Quiet by default (info and
 * above); -v raises to debug. Callers pass the key=value context inside the
 * format string, e.g. log_warn("lost connection host=%s", host).
 */
#ifndef TRACEPROF_LOG_H
#define TRACEPROF_LOG_H

#include <stdarg.h>

/* TP_ prefixed: <syslog.h> defines LOG_DEBUG, LOG_INFO and others as macros. */
enum log_level {
	TP_LOG_DEBUG = 0, /* developer detail, shown with -v */
	TP_LOG_INFO,	  /* normal progress of a daemon */
	TP_LOG_WARN,	  /* something was dropped or retried */
	TP_LOG_ERROR,	  /* an operation failed */
	TP_LOG_QUIET,	  /* nothing is printed */
};

void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* Prefix for every line, e.g. the program name; the string is borrowed. */
void log_set_prefix(const char *prefix);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_vmsg(enum log_level level, const char *fmt, va_list ap);

#define log_debug(...) log_msg(TP_LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msg(TP_LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(TP_LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(TP_LOG_ERROR, __VA_ARGS__)

#endif
