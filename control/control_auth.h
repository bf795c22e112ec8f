/*
 * control_auth.h - the credentials files of AgentControl, read the same way
 * by the agent's server (control.c) and the client library
 * (control_client.c): PEM files read whole, the bearer token as the first
 * line of its file.
 *
 * A token file is trusted only when nobody else could have written it: a
 * regular file, not writable by group or others nor readable by others
 * (mode 600 or 640; 400 and 440 too), owned by the reading
 * process's effective user or by root, holding at least
 * CONTROL_AUTH_MIN_TOKEN characters. Anything else is refused with a
 * message that says what to fix; symbolic links are followed (Kubernetes
 * mounts Secrets through them) and the file they reach is checked.
 *
 * An agent given neither a token file nor mutual TLS makes its own token
 * (control_auth_make_token) in CONTROL_AUTH_TOKEN_DEFAULT, the file every
 * client in the tree reads when it is given no credentials.
 */
#ifndef TRACEPROF_CONTROL_AUTH_H
#define TRACEPROF_CONTROL_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#define CONTROL_AUTH_MAX_FILE  (1u << 20) /* largest PEM file read */
#define CONTROL_AUTH_MAX_TOKEN 4096	  /* longest bearer token */
#define CONTROL_AUTH_MIN_TOKEN 32	  /* shortest bearer token accepted */
#define CONTROL_AUTH_GEN_BYTES 32	  /* random bytes of a generated token (64 hex digits) */
/* where the agent writes its generated token, and where clients look by default */
#define CONTROL_AUTH_TOKEN_DEFAULT "/run/traceprof/control-token"

/*
 * Reads the whole file at path into a new NUL-terminated string (the
 * caller frees). NULL with the reason ("cannot read <path>: ...") in err.
 */
char *control_auth_read_file(const char *path, char *err, size_t errlen);
/*
 * Reads the bearer token: the first line of the file, blanks around it
 * removed. A new string (the caller frees), or NULL with the reason in err
 * and errno set: ENOENT and the like when it cannot be opened, EPERM for a
 * file others could have written or read (see above), EINVAL for a token that is
 * shorter than CONTROL_AUTH_MIN_TOKEN, longer than CONTROL_AUTH_MAX_TOKEN
 * or not printable.
 */
char *control_auth_read_token(const char *path, char *err, size_t errlen);
/*
 * The agent's own token in path: the token already there when the file
 * passes control_auth_read_token's checks (so clients that read it keep
 * working across restarts; delete the file to get a new one), else a new
 * one of CONTROL_AUTH_GEN_BYTES random bytes from getrandom, written as
 * hex with mode 0600 and linked into place atomically (two agents starting
 * at once end up with the same token). The directory is made with mode
 * 0700 when missing and refused when group or others can write it or it
 * belongs to another user. *created tells which happened. A new string
 * (the caller frees), or NULL with the reason in err.
 */
char *control_auth_make_token(const char *path, bool *created, char *err, size_t errlen);
/* Compares a and b in time that depends on their lengths only. */
bool control_auth_equal(const char *a, size_t alen, const char *b, size_t blen);

#endif
