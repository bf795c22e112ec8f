/*
 * threadrec.c - parsing an OTEP 4947 thread context record (threadrec.h).
 */
#include <errno.h>
#include <string.h>

#include "threadrec.h"

#define OFF_VALID	24
#define OFF_FLAGS	25
#define OFF_ATTRS_SIZE	26
#define ENTRY_HEAD_SIZE 2 /* key index, length */

int threadrec_parse(const uint8_t *rec, size_t len, size_t nkeys, struct threadrec *out)
{
	size_t avail, off = 0;
	const uint8_t *a;

	memset(out, 0, sizeof(*out));
	if (len < THREADREC_HEADER_SIZE)
		return -EINVAL;
	if (len > THREADREC_MAX_SIZE)
		len = THREADREC_MAX_SIZE;
	memcpy(out->trace_id, rec, sizeof(out->trace_id));
	memcpy(out->span_id, rec + sizeof(out->trace_id), sizeof(out->span_id));
	out->valid = rec[OFF_VALID];
	out->trace_flags = rec[OFF_FLAGS];
	memcpy(&out->attrs_data_size, rec + OFF_ATTRS_SIZE, sizeof(out->attrs_data_size));
	if (out->valid != 1)
		return -ENODATA;
	avail = len - THREADREC_HEADER_SIZE;
	if (out->attrs_data_size > avail)
		out->clipped = true;
	else
		avail = out->attrs_data_size;
	a = rec + THREADREC_HEADER_SIZE;
	while (off < avail) {
		uint8_t key, vlen;

		if (avail - off < ENTRY_HEAD_SIZE ||
		    avail - off - ENTRY_HEAD_SIZE < (size_t)a[off + 1]) {
			out->partial = true; /* the rest cannot hold a complete entry */
			break;
		}
		key = a[off];
		vlen = a[off + 1];
		if (key >= nkeys) {
			out->unknown++;
		} else {
			struct threadrec_value *v = &out->by_key[key];

			if (v->set)
				out->duplicates++;
			else
				out->nkeys_set++;
			v->off = (uint16_t)(THREADREC_HEADER_SIZE + off + ENTRY_HEAD_SIZE);
			v->len = vlen;
			v->set = 1; /* the last entry of a key wins */
		}
		off += ENTRY_HEAD_SIZE + vlen;
	}
	return 0;
}

int threadrec_resolve(pid_t pid, const uint8_t *rec, size_t len, struct procctx *ctx,
		      uint64_t *last_ns, uint64_t now_ns, struct threadrec *out, bool *refreshed)
{
	int ret = threadrec_parse(rec, len, ctx->nkeys, out);

	*refreshed = false;
	if (ret || !out->unknown)
		return ret;
	if (procctx_refresh_keys(pid, ctx, last_ns, now_ns))
		return ret; /* too soon or unreadable: unknown entries stay ignored */
	*refreshed = true;
	return threadrec_parse(rec, len, ctx->nkeys, out);
}

const uint8_t *threadrec_value(const struct threadrec *r, const uint8_t *rec, unsigned key,
			       size_t *len)
{
	if (key >= THREADREC_KEYS || !r->by_key[key].set)
		return NULL;
	*len = r->by_key[key].len;
	return rec + r->by_key[key].off;
}
