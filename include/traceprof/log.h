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

enum log_level {
	LOG_DEBUG = 0, /* developer detail, shown with -v */
	LOG_INFO,      /* normal progress of a daemon */
	LOG_WARN,      /* something was dropped or retried */
	LOG_ERROR,     /* an operation failed */
	LOG_QUIET,     /* nothing is printed */
};

void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* Prefix for every line, e.g. the program name; the string is borrowed. */
void log_set_prefix(const char *prefix);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_vmsg(enum log_level level, const char *fmt, va_list ap);

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
