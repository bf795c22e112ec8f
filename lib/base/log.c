/*
 * log.c - leveled logging to stderr. One write(2)-sized fprintf per line so
 * lines from several threads do not interleave.
 */
#include <stdio.h>
#include <string.h>

#include "traceprof/log.h"

static enum log_level current_level = TP_LOG_INFO;
static const char *current_prefix = "traceprof";
static const char *const level_names[] = {"debug", "info", "warn", "error", ""};

void log_set_level(enum log_level level)
{
	current_level = level;
}

enum log_level log_get_level(void)
{
	return current_level;
}

void log_set_prefix(const char *prefix)
{
	current_prefix = prefix;
}

void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
	char line[2048];
	int n;

	if (level < current_level || level >= TP_LOG_QUIET)
		return;
	n = snprintf(line, sizeof(line), "%s: %s: ", current_prefix, level_names[level]);
	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	n = strlen(line);
	while (n > 0 && line[n - 1] == '\n')
		line[--n] = '\0';
	fprintf(stderr, "%s\n", line);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}
