/*
 * db_symbols.c - "traceprof-db symbols add FILE...": symbols added after
 * the samples (docs/symbols.md).
 *
 * For each FILE (a separate debug file, e.g. from objcopy --only-keep-debug
 * or /usr/lib/debug/.build-id/xx/yyyy.debug, or an unstripped binary):
 *   1. its GNU build id: the note, or for a file without one the name of a
 *      .build-id/xx/yyyy.debug path; both present and different: refused;
 *   2. its function symbols (.symtab, .dynsym) and DWARF line tables, with
 *      the agent's reader (agent/symbols/elfsyms.c: checked libelf/libdw
 *      calls, a corrupt file gives an error or fewer symbols, never a crash;
 *      compressed sections that would inflate past --max-inflate-section or
 *      --max-inflate refuse the file before anything is inflated);
 *   3. in one transaction: a cursor over traceprof.frames_to_name(build id)
 *      (unnamed frames, and named ones without a source line), fetched
 *      BATCH rows at a time; each batch's addresses are looked up and handed
 *      to traceprof.name_frames() (sql/api/frame_symbols.sql), which renames
 *      the frames, re-derives the stacks' function ids and un-rolls the
 *      cohort rollup minutes that counted the old functions.
 * Memory is the symbol table plus one batch, whatever the database holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "db_symbols.h"
#include "elfsyms.h"
#include "traceprof/hex.h"
#include "traceprof/ids.h"
#include "traceprof/log.h"
#include "traceprof/options.h"
#include "traceprof/store.h"

#define BATCH	     10000		   /* frames fetched and named per statement */
#define BATCH_TEXT   "10000"		   /* the same, for FETCH */
#define MAX_FILE     (64ULL << 30)	   /* bytes: larger files are refused */
#define MAX_NAME     4096		   /* bytes of a function or file name; longer: unknown */
#define BUILDID_TEXT (2 * BUILDID_MAX + 1) /* hex and NUL */

struct sym_args {
	const char *conninfo;		   /* --db */
	struct elf_inflate_limits inflate; /* --max-inflate-section, --max-inflate */
	bool verbose, help;		   /* -v, --help */
};

#define ARG(m) offsetof(struct sym_args, m)
static const struct tp_option sym_options[] = {
    {.name = "db",
     .type = TP_OPT_STR,
     .offset = ARG(conninfo),
     .arg = "CONNINFO",
     .help = "libpq conninfo or URI of the owner role; default: PG* environment"},
    {.name = "max-inflate-section",
     .type = TP_OPT_BYTES,
     .offset = ARG(inflate.section),
     .min = 1 << 20,
     .max = (double)(1ULL << 40),
     .def = TP_OPTS_STR(ELF_INFLATE_SECTION_MIB) "M",
     .arg = "BYTES",
     .help = "largest size one compressed debug section may inflate to; larger: the file is "
	     "refused"},
    {.name = "max-inflate",
     .type = TP_OPT_BYTES,
     .offset = ARG(inflate.total),
     .min = 1 << 20,
     .max = (double)(1ULL << 40),
     .def = TP_OPTS_STR(ELF_INFLATE_TOTAL_MIB) "M",
     .arg = "BYTES",
     .help = "largest size all of a file's compressed sections may inflate to together"},
    TP_OPT_VERBOSE_ROW(ARG(verbose)),
    TP_OPT_HELP_ROW(ARG(help)),
};

static void sym_usage(FILE *out)
{
	fputs("usage: traceprof-db symbols add [--db CONNINFO] FILE...\n"
	      "\n"
	      "Names the stored frames of a stripped build (\"module+0xADDRESS\") from its\n"
	      "symbols: FILE is a separate debug file (objcopy --only-keep-debug, or\n"
	      "/usr/lib/debug/.build-id/xx/yyyy.debug) or an unstripped binary of the same\n"
	      "build, matched by GNU build id. Function, source file and line are filled in\n"
	      "for the frames of that build that have no name (or no line) yet, each FILE in\n"
	      "one transaction; flame graphs, profiles and comparisons show the names from\n"
	      "then on. Running it again changes nothing. Needs the owner role.\n"
	      "\n"
	      "exit status: 0 every FILE matched stored frames, 1 a FILE could not be used\n"
	      "(unreadable, not ELF, corrupt, no build id, no symbols), 2 usage, 3 database,\n"
	      "4 no stored frame has the build id of a FILE (1 and 3 win over 4)\n"
	      "\n"
	      "options:\n",
	      out);
	tp_opts_help(sym_options, TP_OPTS_COUNT(sym_options), out, 15, 0);
}

/* ---- a growing text buffer for array literals ---- */

struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void sb_reserve(struct sbuf *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 4096;
	char *p;

	if (b->oom || b->len + more + 1 <= b->cap)
		return;
	while (cap < b->len + more + 1)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return;
	}
	b->p = p;
	b->cap = cap;
}

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
	sb_reserve(b, n);
	if (b->oom)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

/* The separator before an element: '{' for the first, ',' after. */
static void sb_sep(struct sbuf *b)
{
	sb_put(b, b->len ? "," : "{", 1);
}

static void sb_i64(struct sbuf *b, int64_t v)
{
	char t[24];

	sb_sep(b);
	sb_put(b, t, (size_t)snprintf(t, sizeof(t), "%" PRId64, v));
}

/* A text element, quoted for an array literal; NULL is NULL. */
static void sb_text(struct sbuf *b, const char *s)
{
	size_t n = 0;

	sb_sep(b);
	if (!s) {
		sb_put(b, "NULL", 4);
		return;
	}
	sb_put(b, "\"", 1);
	for (; s[n]; n++) {
		if (s[n] == '"' || s[n] == '\\')
			sb_put(b, "\\", 1);
		sb_put(b, &s[n], 1);
	}
	sb_put(b, "\"", 1);
}

static const char *sb_close(struct sbuf *b)
{
	if (!b->len)
		sb_put(b, "{", 1);
	sb_put(b, "}", 1);
	return b->oom ? NULL : b->p;
}

/* The aligned arrays of one batch, in name_frames' argument order. */
enum { A_FRAME, A_FUNCTION, A_NAME, A_MODULE, A_FILE, A_LINE, NARRAYS };

/* ---- the file ---- */

/* What one FILE did, for the line printed. */
struct sym_result {
	char build_id[BUILDID_TEXT];
	long long frames, unnamed, candidates, named, lined, stacks, rollup_minutes;
};

/* The build id in a path ".../.build-id/xx/yyyy.debug" into hex, or "". */
static void path_build_id(const char *path, char *hex, size_t size)
{
	const char *p = strstr(path, ".build-id/"), *last = NULL;
	size_t n = 0;

	hex[0] = '\0';
	for (; p; p = strstr(p + 1, ".build-id/"))
		last = p;
	if (!last)
		return;
	p = last + strlen(".build-id/");
	if (strlen(p) < 11 || p[2] != '/') /* xx/yy.debug at least */
		return;
	for (int i = 0; p[i] && n + 1 < size; i++) {
		char c = p[i];

		if (i == 2)
			continue;
		if (strcmp(p + i, ".debug") == 0)
			break;
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
			n = 0;
			break;
		}
		hex[n++] = c;
	}
	hex[n] = '\0';
	if (n < 4 || n % 2 || strcmp(p + strlen(p) - 6, ".debug") != 0)
		hex[0] = '\0';
}

/* Says why path's compressed sections were refused. */
static void refused_inflate(const char *path, const struct elf_inflate_refusal *why)
{
	if (why->over_total)
		log_error("%s: refused: its compressed sections inflate to %" PRIu64
			  " bytes together (up to %s), over the limit of %" PRIu64
			  " (--max-inflate)",
			  path, why->total, why->section, why->limit);
	else
		log_error("%s: refused: compressed section %s inflates to %" PRIu64
			  " bytes, over the limit of %" PRIu64 " (--max-inflate-section)",
			  path, why->section, why->bytes, why->limit);
}

/* Opens path and reads its build id and symbols into *es. 0, or logs why not. */
static int open_symbols(const char *path, const struct elf_inflate_limits *lim, int *fd,
			struct elfsyms **es, char *build_id)
{
	struct elfsyms_source src = {.fd = -1};
	struct elf_inflate_refusal why;
	struct elfsyms_header h;
	char from_path[BUILDID_TEXT];
	struct stat st;
	int r;

	*fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (*fd < 0) {
		log_error("%s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(*fd, &st) || !S_ISREG(st.st_mode)) {
		log_error("%s: not a regular file", path);
		return -1;
	}
	if ((unsigned long long)st.st_size > MAX_FILE) {
		log_error("%s: %lld bytes, more than the %llu this command reads", path,
			  (long long)st.st_size, MAX_FILE);
		return -1;
	}
	src.fd = *fd;
	r = elfsyms_read_header(&src, &h);
	if (r == -ENOEXEC) {
		log_error("%s: not an ELF file", path);
		return -1;
	}
	if (r) {
		log_error("%s: a truncated or corrupt ELF file", path);
		return -1;
	}
	path_build_id(path, from_path, sizeof(from_path));
	if (h.build_id_len) {
		tp_hex_encode(h.build_id, h.build_id_len, build_id);
		if (from_path[0] && strcmp(from_path, build_id)) {
			log_error("%s: its build id %s is not the one its path names (%s)", path,
				  build_id, from_path);
			return -1;
		}
	} else if (from_path[0]) {
		snprintf(build_id, BUILDID_TEXT, "%s", from_path);
	} else {
		log_error("%s: no GNU build id (.note.gnu.build-id), nothing to match frames by",
			  path);
		return -1;
	}
	*es = elfsyms_load(&src, NULL, true, lim, &why);
	if (!*es && errno == EFBIG) {
		refused_inflate(path, &why);
		return -1;
	}
	if (!*es) {
		log_error("%s: cannot read its symbols: %s", path,
			  errno == ENOMEM ? "out of memory" : "a corrupt ELF file");
		return -1;
	}
	if (elfsyms_count(*es) == 0 && !elfsyms_has_lines(*es)) {
		log_error("%s: no symbol table and no DWARF: nothing to name frames with", path);
		return -1;
	}
	return 0;
}

/* ---- the database ---- */

static bool db_ok(PGconn *conn, PGresult *res, const char *path, const char *what)
{
	ExecStatusType s = PQresultStatus(res);

	const char *state;

	if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK)
		return true;
	state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	log_error("%s: %s: %s%s", path, what, PQerrorMessage(conn),
		  state && strcmp(state, "42501") == 0
		      ? "(symbols add needs the owner role: traceprof-db conninfo DIR --role owner)"
		      : "");
	return false;
}

static bool exec_ok(PGconn *conn, const char *sql, const char *path, const char *what)
{
	PGresult *res = PQexec(conn, sql);
	bool ok = db_ok(conn, res, path, what);

	PQclear(res);
	return ok;
}

/*
 * Looks up the addresses of one fetched batch (frame_id, address, module,
 * kind) and appends the resolved ones to the arrays. Returns the rows put.
 */
static int resolve_batch(struct elfsyms *es, PGresult *rows, struct sbuf *a)
{
	int put = 0;

	for (int i = 0; i < PQntuples(rows); i++) {
		struct elfsyms_line chain[1];
		const char *module = PQgetvalue(rows, i, 2), *name, *file;
		uint64_t addr = strtoull(PQgetvalue(rows, i, 1), NULL, 10), start;
		int n = elfsyms_has_lines(es) ? elfsyms_lines(es, addr, chain, 1) : 0;
		char line[16];

		/* the root of an inlined chain, named as the agent names it */
		name = elfsyms_lookup(es, addr, &start);
		if (!name && n > 0)
			name = chain[0].function;
		if (!name || !*name)
			continue;
		/* what the store would refuse from an agent stays unknown */
		if (strlen(name) > MAX_NAME || !store_valid_text(name))
			continue;
		file = n > 0 && chain[0].file && strlen(chain[0].file) <= MAX_NAME &&
			       store_valid_text(chain[0].file)
			   ? chain[0].file
			   : NULL;
		sb_sep(&a[A_FRAME]);
		sb_put(&a[A_FRAME], PQgetvalue(rows, i, 0), strlen(PQgetvalue(rows, i, 0)));
		sb_i64(&a[A_FUNCTION], (int64_t)ids_function(module, name));
		sb_text(&a[A_NAME], name);
		sb_text(&a[A_MODULE], module);
		sb_text(&a[A_FILE], file);
		snprintf(line, sizeof(line), "%d", file ? chain[0].line : 0);
		sb_sep(&a[A_LINE]);
		sb_put(&a[A_LINE], line, strlen(line));
		put++;
	}
	return put;
}

/* Hands one batch to name_frames(); adds its counts to *r. */
static bool name_batch(PGconn *conn, const char *path, struct sbuf *a, struct sym_result *r)
{
	const char *params[1 + NARRAYS] = {r->build_id};
	PGresult *res;
	bool ok;

	for (int k = 0; k < NARRAYS; k++) {
		params[1 + k] = sb_close(&a[k]);
		if (!params[1 + k]) {
			log_error("%s: out of memory", path);
			return false;
		}
	}
	res = PQexecParams(conn,
			   "SELECT named, lined, stacks, rollup_minutes FROM traceprof.name_frames("
			   "$1, $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], "
			   "$7::integer[])",
			   1 + NARRAYS, NULL, params, NULL, NULL, 0);
	ok = db_ok(conn, res, path, "naming frames") && PQntuples(res) == 1;
	if (ok) {
		r->named += atoll(PQgetvalue(res, 0, 0));
		r->lined += atoll(PQgetvalue(res, 0, 1));
		r->stacks += atoll(PQgetvalue(res, 0, 2));
		r->rollup_minutes += atoll(PQgetvalue(res, 0, 3));
	}
	PQclear(res);
	return ok;
}

/* The cursor, batch by batch. false: a statement failed (logged). */
static bool name_all(PGconn *conn, const char *path, struct elfsyms *es, struct sym_result *r)
{
	struct sbuf a[NARRAYS] = {0};
	char sql[512];
	bool ok = true;

	/* the id is lower case hex (checked): safe to put in the text */
	snprintf(sql, sizeof(sql),
		 "DECLARE tp_frames NO SCROLL CURSOR FOR "
		 "SELECT frame_id, address, module, kind FROM traceprof.frames_to_name('%s')",
		 r->build_id);
	if (!exec_ok(conn, sql, path, "reading frames"))
		return false;
	for (;;) {
		PGresult *rows = PQexec(conn, "FETCH " BATCH_TEXT " FROM tp_frames");
		int n;

		if (!db_ok(conn, rows, path, "reading frames")) {
			PQclear(rows);
			ok = false;
			break;
		}
		n = PQntuples(rows);
		r->candidates += n;
		for (int i = 0; i < n; i++)
			r->unnamed += strcmp(PQgetvalue(rows, i, 3), "2") == 0;
		for (int k = 0; k < NARRAYS; k++)
			a[k].len = 0;
		if (resolve_batch(es, rows, a) > 0)
			ok = name_batch(conn, path, a, r);
		PQclear(rows);
		if (!ok || n < BATCH)
			break;
	}
	for (int k = 0; k < NARRAYS; k++)
		free(a[k].p);
	return ok && exec_ok(conn, "CLOSE tp_frames", path, "reading frames");
}

/* How many frames of the build are stored. -1: a statement failed. */
static long long count_frames(PGconn *conn, const char *path, const char *build_id)
{
	const char *params[1] = {build_id};
	PGresult *res =
	    PQexecParams(conn, "SELECT count(*) FROM traceprof.frames WHERE build_id = $1", 1, NULL,
			 params, NULL, NULL, 0);
	long long n = -1;

	if (db_ok(conn, res, path, "counting frames") && PQntuples(res) == 1)
		n = atoll(PQgetvalue(res, 0, 0));
	PQclear(res);
	return n;
}

static void print_result(const char *path, const struct sym_result *r)
{
	printf("%s: build id %s: %lld frame%s stored, %lld unnamed: %lld named now, %lld still "
	       "unknown; %lld given a source line; %lld stack%s and %lld rolled-up minute%s "
	       "updated\n",
	       path, r->build_id, r->frames, r->frames == 1 ? "" : "s", r->unnamed, r->named,
	       r->unnamed - r->named, r->lined, r->stacks, r->stacks == 1 ? "" : "s",
	       r->rollup_minutes, r->rollup_minutes == 1 ? "" : "s");
}

/* One FILE. Returns its status. */
static int add_file(PGconn *conn, const char *path, const struct elf_inflate_limits *lim)
{
	struct sym_result r;
	struct elfsyms *es = NULL;
	int fd = -1, rc = SYMBOLS_DB;

	memset(&r, 0, sizeof(r));
	if (open_symbols(path, lim, &fd, &es, r.build_id)) {
		rc = SYMBOLS_BAD_FILE;
		goto out;
	}
	log_debug("%s: build id %s, %zu symbols%s", path, r.build_id, elfsyms_count(es),
		  elfsyms_has_lines(es) ? ", DWARF" : "");
	if (!exec_ok(conn, "BEGIN", path, "starting a transaction"))
		goto out;
	r.frames = count_frames(conn, path, r.build_id);
	if (r.frames == 0) {
		printf("%s: build id %s: no stored frame has this build id\n", path, r.build_id);
		rc = SYMBOLS_NO_MATCH;
	} else if (r.frames > 0 && name_all(conn, path, es, &r) &&
		   exec_ok(conn, "COMMIT", path, "committing")) {
		log_debug("%s: %lld frames looked up", path, r.candidates);
		print_result(path, &r);
		rc = SYMBOLS_OK;
	}
	if (rc != SYMBOLS_OK)
		PQclear(PQexec(conn, "ROLLBACK"));
out:
	elfsyms_free(es);
	if (fd >= 0)
		close(fd);
	return rc;
}

int db_symbols_main(int argc, char **argv)
{
	static struct sym_args a;
	struct tp_opts_result res;
	int rc = SYMBOLS_OK, next;
	bool bad = false, nomatch = false;
	PGconn *conn;

	switch (tp_opts_getopt(sym_options, TP_OPTS_COUNT(sym_options), &a, argc, argv, 0, &res)) {
	case TP_OPTS_DONE:
		break;
	case TP_OPTS_STOPPED: /* --help */
		sym_usage(stdout);
		return SYMBOLS_OK;
	case TP_OPTS_BAD_VALUE:
		log_error("%s", res.err);
		return SYMBOLS_USAGE;
	default:
		sym_usage(stderr);
		return SYMBOLS_USAGE;
	}
	if (a.verbose)
		log_set_level(TP_LOG_DEBUG);
	next = res.next;
	if (next >= argc || strcmp(argv[next], "add") != 0) {
		if (next >= argc)
			log_error("symbols: which subcommand? (add)");
		else
			log_error("symbols: unknown subcommand '%s' (add)", argv[next]);
		sym_usage(stderr);
		return SYMBOLS_USAGE;
	}
	if (++next >= argc) {
		log_error("symbols add: which FILE? (a debug file or an unstripped binary)");
		sym_usage(stderr);
		return SYMBOLS_USAGE;
	}
	conn = PQconnectdb(a.conninfo ? a.conninfo : "");
	if (PQstatus(conn) != CONNECTION_OK) {
		log_error("cannot connect to the database: %s", PQerrorMessage(conn));
		PQfinish(conn);
		return SYMBOLS_DB;
	}
	for (; next < argc && rc != SYMBOLS_DB; next++) {
		rc = add_file(conn, argv[next], &a.inflate);
		bad |= rc == SYMBOLS_BAD_FILE;
		nomatch |= rc == SYMBOLS_NO_MATCH;
	}
	PQfinish(conn);
	if (rc == SYMBOLS_DB)
		return SYMBOLS_DB;
	return bad ? SYMBOLS_BAD_FILE : nomatch ? SYMBOLS_NO_MATCH : SYMBOLS_OK;
}
