/*
 * db_symbols.h - "traceprof-db symbols add FILE...": names the stored
 * frames of a build from its debug file or an unstripped copy, matched by
 * GNU build id (docs/symbols.md).
 */
#ifndef TRACEPROF_CLI_DB_SYMBOLS_H
#define TRACEPROF_CLI_DB_SYMBOLS_H

/* Exit statuses of "traceprof-db symbols add". */
enum {
	SYMBOLS_OK = 0,	      /* every FILE matched stored frames (named or not) */
	SYMBOLS_BAD_FILE = 1, /* a FILE could not be used: unreadable, not ELF, corrupt,
				 no build id, no symbols */
	SYMBOLS_USAGE = 2,    /* command line */
	SYMBOLS_DB = 3,	      /* connecting or a statement failed (nothing of that FILE kept) */
	SYMBOLS_NO_MATCH = 4, /* no stored frame has the build id of a FILE */
};

/* argv[0] is "symbols". Returns one of the statuses above. */
int db_symbols_main(int argc, char **argv);

#endif
