/*
 * threadrec.h - an OTEP 4947 thread context record read from another
 * process, parsed by the rules of the merged text: a packed 28-byte header
 * (trace-id[16], span-id[8], valid u8 at 24, trace-flags u8 at 25,
 * attrs-data-size u16 native endian at 26) then attrs-data, entries of
 * {key index u8, length u8, length bytes of UTF-8} packed back to back.
 *
 * Rules: only valid == 1 is valid; a partial entry ends the list; an
 * entry whose key index is outside the key map is ignored (and counted,
 * so the caller can refresh its map and parse again: threadrec_resolve);
 * the last entry of a key wins. The draft form of the record has the same
 * bytes (byte 25 was reserved there and is read as trace-flags: drafts
 * wrote 0 or, in traceprof's SDK, the flags already).
 *
 * Parsing allocates nothing and reads only the bytes it is given.
 */
#ifndef TRACEPROF_AGENT_THREADREC_H
#define TRACEPROF_AGENT_THREADREC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "procctx.h"

#define THREADREC_HEADER_SIZE 28  /* through attrs-data-size */
#define THREADREC_MAX_SIZE    640 /* the size the spec recommends; more is not read */
#define THREADREC_KEYS	      256 /* key indexes are u8 */

/* The value of one key in a parsed record. */
struct threadrec_value {
	uint16_t off; /* offset of the value in the record */
	uint8_t len;  /* its length in bytes */
	uint8_t set;  /* 1: the record holds this key */
};

/* A parsed record; values point into the bytes given to threadrec_parse. */
struct threadrec {
	uint8_t trace_id[16];	  /* W3C trace id */
	uint8_t span_id[8];	  /* W3C span id */
	uint8_t valid;		  /* as read: 1 is valid, anything else is not */
	uint8_t trace_flags;	  /* W3C trace-flags byte */
	uint16_t attrs_data_size; /* as written */
	uint16_t nkeys_set;	  /* distinct keys with a value */
	uint16_t unknown;	  /* entries with a key index outside the key map */
	uint16_t duplicates;	  /* entries that replaced an earlier one of their key */
	bool partial;		  /* an incomplete entry ended the list */
	bool clipped;		  /* attrs-data-size went past the bytes given */
	struct threadrec_value by_key[THREADREC_KEYS]; /* key index -> value */
};

/*
 * Parses the len bytes at rec (a record read from the process, at most
 * THREADREC_MAX_SIZE used) with a key map of nkeys names into *out.
 * Returns 0 for a valid record; -ENODATA when valid is not 1 (the header
 * fields are filled, the attributes are not parsed); -EINVAL when len is
 * under THREADREC_HEADER_SIZE.
 */
int threadrec_parse(const uint8_t *rec, size_t len, size_t nkeys, struct threadrec *out);

/*
 * threadrec_parse with the key map of ctx (the process context of pid);
 * when an entry's key index is unknown, refreshes ctx with
 * procctx_refresh_keys (bounded by *last_ns, now_ns) and parses again.
 * Returns what the last parse returned; *refreshed says whether ctx changed.
 */
int threadrec_resolve(pid_t pid, const uint8_t *rec, size_t len, struct procctx *ctx,
		      uint64_t *last_ns, uint64_t now_ns, struct threadrec *out, bool *refreshed);

/* The value of key index key in r (borrowed from rec), or NULL; *len set. */
const uint8_t *threadrec_value(const struct threadrec *r, const uint8_t *rec, unsigned key,
			       size_t *len);

#endif
