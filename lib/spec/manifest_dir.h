/*
 * manifest_dir.h - the manifests of a triggers directory, read pass after
 * pass with a cache (local mode).
 *
 * A pass reads the directory's names (*.yaml, *.yml, no dot files) and
 * looks at each with fstatat without following links. A name whose
 * identity (device, inode, mode, size, mtime, ctime) is the one of the
 * last pass keeps what its file gave then: a pass over 10,000 unchanged
 * files costs one readdir and 10,000 fstatat, no open and no parse. A new
 * or changed regular file is opened without following links and without
 * blocking (O_NOFOLLOW | O_NONBLOCK), checked again with fstat and parsed;
 * anything else (symbolic link, FIFO, socket, device, directory) is
 * refused with an error naming the file and counted, and never opened.
 * The result is the list of the whole directory in file-name order, as if
 * every file had been parsed again.
 *
 * Bounds: at most MANIFEST_DIR_MAX_FILES names (more are counted and
 * reported; removals then wait), and at most MANIFEST_DIR_PASS_BYTES of
 * new or changed files parsed per pass, the most recently changed first;
 * the rest wait for the next pass (counted as deferred; removals wait too).
 */
#ifndef TRACEPROF_SPEC_MANIFEST_DIR_H
#define TRACEPROF_SPEC_MANIFEST_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "manifest.h"

#define MANIFEST_DIR_MAX_FILES	100000		   /* manifest names handled per pass */
#define MANIFEST_DIR_PASS_BYTES (64 * 1024 * 1024) /* new or changed bytes parsed per pass */

struct manifest_dir_stats {
	uint64_t passes;	/* passes made */
	uint64_t files;		/* manifest names in the directory, last pass */
	uint64_t parsed_last;	/* files parsed in the last pass (new or changed) */
	uint64_t parsed;	/* files parsed since start */
	uint64_t refused_now;	/* names refused in the last pass: not regular files */
	uint64_t refused;	/* refusals since start (each new or changed such name once) */
	uint64_t deferred;	/* new or changed files left for the next pass, last pass */
	uint64_t over_limit;	/* names past MANIFEST_DIR_MAX_FILES, last pass */
	uint64_t not_excerpted; /* files parsed whose text messages may not quote, since start */
};

struct manifest_dir_entry;

struct manifest_dir {
	struct manifest_dir_entry *v;	 /* one per name, sorted by name */
	size_t n;			 /* entries of v */
	struct manifest_dir_stats stats; /* counters */
};

/*
 * One pass over dir: appends every trigger and error of its manifests to m
 * (which the caller frees), in file-name order. Returns 0, or -errno when
 * the directory cannot be read (also reported as an error in m, with
 * m->broken_files set, so that nothing is removed).
 */
int manifest_dir_scan(struct manifest_dir *d, const char *dir, struct manifest_list *m);
/* A manifest's name: *.yaml or *.yml, not starting with a dot. */
bool manifest_dir_is_manifest_name(const char *name);
/* The file name, as the directory has it, of the file messages call display; NULL if none. */
const char *manifest_dir_file_name(const struct manifest_dir *d, const char *display);
/*
 * Writes len bytes of text as DIR/base without ever replacing a file: a
 * hidden temporary file first (which a pass ignores), synced, then link().
 * Returns 0, -EEXIST when DIR/base exists, or another -errno; err says
 * what went wrong.
 */
int manifest_dir_create(const char *dir, const char *base, const char *text, size_t len, char *err,
			size_t errlen);
/* Frees what d holds; d itself is the caller's. */
void manifest_dir_free(struct manifest_dir *d);

#endif
