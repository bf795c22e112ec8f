/*
 * control_auth.h - the credentials files of AgentControl, read the same way
 * by the agent's server (control.c) and the client library
 * (control_client.c): PEM files read whole, the bearer token as the first
 * line of its file.
 */
#ifndef TRACEPROF_AGENT_CONTROL_AUTH_H
#define TRACEPROF_AGENT_CONTROL_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#define CONTROL_AUTH_MAX_FILE  (1u << 20) /* largest PEM file read */
#define CONTROL_AUTH_MAX_TOKEN 4096	  /* longest bearer token */

/*
 * Reads the whole file at path into a new NUL-terminated string (the
 * caller frees). NULL with the reason ("cannot read <path>: ...") in err.
 */
char *control_auth_read_file(const char *path, char *err, size_t errlen);
/*
 * Reads the bearer token: the first line of the file, blanks around it
 * removed. A new string (the caller frees), or NULL with the reason in err
 * (unreadable, empty, longer than CONTROL_AUTH_MAX_TOKEN, not printable).
 */
char *control_auth_read_token(const char *path, char *err, size_t errlen);
/* Compares a and b in time that depends on their lengths only. */
bool control_auth_equal(const char *a, size_t alen, const char *b, size_t blen);

#endif
