/*
 * gpu_ring.c - see gpu_ring.h.
 */
#include "gpu_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "traceprof/log.h"
#include "traceprof/utf8.h"

#define RING_MAPPING "/memfd:" TP_CUDA_RING_NAME " (deleted)"
#define READ_CHUNK   256 /* records read with one pread */

_Static_assert(sizeof(struct tp_cuda_rec) == 48, "the ring's record");

/* The START-END of the ring's mapping in pid's maps; -ENOENT when none. */
static int find_mapping(int pid, char *range, size_t cap)
{
	char path[64], line[512];
	int err = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *nl = strchr(line, '\n'), *sp;

		if (nl)
			*nl = 0;
		if (!strstr(line, RING_MAPPING))
			continue;
		sp = strchr(line, ' ');
		if (!sp || (size_t)(sp - line) >= cap)
			continue;
		memcpy(range, line, (size_t)(sp - line));
		range[sp - line] = 0;
		err = 0;
		break;
	}
	fclose(f);
	return err;
}

static bool pread_all(int fd, void *buf, size_t n, uint64_t off)
{
	return pread(fd, buf, n, (off_t)off) == (ssize_t)n;
}

/* The header's checks: every size and offset against the file's size. */
static bool header_ok(const struct tp_cuda_ring_hdr *h, uint64_t size)
{
	uint64_t recs_end;

	if (h->magic != TP_CUDA_RING_MAGIC || h->version != TP_CUDA_RING_VERSION ||
	    h->rec_bytes != sizeof(struct tp_cuda_rec) || !h->nrecs ||
	    (h->nrecs & (h->nrecs - 1)) || h->nrecs > GPU_RING_MAX_RECS ||
	    h->recs_off < TP_CUDA_HDR_BYTES || h->recs_off % 8 || h->recs_off > size)
		return false;
	recs_end = h->recs_off + (uint64_t)h->nrecs * sizeof(struct tp_cuda_rec);
	if (recs_end > size || h->names_off < TP_CUDA_HDR_BYTES || h->names_off > size ||
	    h->names_bytes > size - h->names_off)
		return false;
	/* the names may not overlap the records */
	return h->names_off >= recs_end || h->names_off + h->names_bytes <= h->recs_off;
}

int gpu_ring_open(struct gpu_ring *r, int pid, struct gpu_ring_stats *st)
{
	struct tp_cuda_ring_hdr h;
	char range[64], path[128];
	uint64_t me;
	struct stat sb;
	int fd, err;

	memset(r, 0, sizeof(*r));
	r->fd = -1;
	r->pid = pid;
	err = find_mapping(pid, range, sizeof(range));
	if (err)
		return err;
	snprintf(path, sizeof(path), "/proc/%d/map_files/%s", pid, range);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		st->open_failed++;
		log_debug("cannot open the GPU ring of pid=%d path=%s: %s", pid, path,
			  strerror(-err));
		return err;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) ||
	    (uint64_t)sb.st_size < TP_CUDA_HDR_BYTES || (uint64_t)sb.st_size > GPU_RING_MAX_BYTES ||
	    !pread_all(fd, &h, sizeof(h), 0) || !header_ok(&h, (uint64_t)sb.st_size)) {
		st->bad_header++;
		log_info("GPU ring of pid=%d refused: not a valid %s header", pid,
			 TP_CUDA_RING_NAME);
		close(fd);
		return -EPROTO;
	}
	r->fd = fd;
	r->size = (uint64_t)sb.st_size;
	r->nrecs = h.nrecs;
	r->names_bytes = h.names_bytes;
	r->recs_off = h.recs_off;
	r->names_off = h.names_off;
	r->tail = h.tail;
	if (h.head - h.tail > h.nrecs) { /* also head < tail: a huge difference */
		st->bad_head++;
		r->tail = h.head;
	}
	me = (uint64_t)getpid();
	if (pwrite(fd, &me, 8, offsetof(struct tp_cuda_ring_hdr, consumer_pid)) != 8)
		st->read_errors++;
	st->opened++;
	log_debug("GPU ring of pid=%d opened: %u records, %u bytes of names", pid, r->nrecs,
		  r->names_bytes);
	return 0;
}

bool gpu_utf8_ok(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0, u; i < n; i += u)
		if (!p[i] || !(u = tp_utf8_len(p + i, n - i)))
			return false;
	return true;
}

/* A record's name into out->name, checked; false when its bounds are refused. */
static bool read_name(struct gpu_ring *r, const struct tp_cuda_rec *in, uint64_t names_used,
		      struct gpu_krec *out, struct gpu_ring_stats *st)
{
	uint32_t len = in->name_len;
	uint64_t used = names_used < r->names_bytes ? names_used : r->names_bytes;
	struct gpu_name_ent *e;

	out->name[0] = 0;
	if (!len)
		return true;
	if (in->name_off > used || len > used - in->name_off)
		return false;
	e = &r->names[(in->name_off * 2654435761u) >> 28 & (GPU_NAME_CACHE - 1)];
	if (e->ok && e->off == in->name_off && e->len == in->name_len) {
		memcpy(out->name, e->name, sizeof(out->name));
		return true;
	}
	if (len > GPU_NAME_MAX) {
		len = GPU_NAME_MAX;
		st->cut_names++;
	}
	if (!pread_all(r->fd, out->name, len, r->names_off + in->name_off)) {
		st->read_errors++;
		return false;
	}
	/* a cut in the middle of a character: back to its first byte (cut there) */
	if (len < in->name_len) {
		uint32_t k = len;

		while (k > 0 && k > len - 4 && ((unsigned char)out->name[k - 1] & 0xc0) == 0x80)
			k--;
		if (k > 0 && ((unsigned char)out->name[k - 1] & 0xc0) == 0xc0)
			len = k - 1;
	}
	out->name[len] = 0;
	if (!gpu_utf8_ok(out->name, len)) {
		st->bad_names++;
		snprintf(out->name, sizeof(out->name), "[bad name]");
	}
	e->ok = 1;
	e->off = in->name_off;
	e->len = in->name_len;
	memcpy(e->name, out->name, sizeof(e->name));
	return true;
}

int gpu_ring_drain(struct gpu_ring *r, struct gpu_krec *out, int max, struct gpu_ring_stats *st)
{
	struct tp_cuda_rec buf[READ_CHUNK];
	uint64_t head, names_used, end;
	int n = 0;

	if (r->fd < 0 || r->broken)
		return -EIO;
	/* head, then names_used (published before head): the syscall orders the reads */
	if (!pread_all(r->fd, &head, 8, offsetof(struct tp_cuda_ring_hdr, head)) ||
	    !pread_all(r->fd, &names_used, 8, offsetof(struct tp_cuda_ring_hdr, names_used))) {
		st->read_errors++;
		return -EIO;
	}
	if (head - r->tail > r->nrecs) {
		/* behind the tail, or more than a ring ahead: resynchronized, what lies between
		 * lost */
		st->bad_head++;
		if (head > r->tail && head - r->tail <= UINT32_MAX)
			st->skipped += head - r->tail;
		r->tail = head;
	}
	end = head - r->tail > (uint64_t)max ? r->tail + (uint64_t)max : head;
	while (r->tail < end) {
		uint32_t at = (uint32_t)(r->tail & (r->nrecs - 1)), k;
		uint64_t want = end - r->tail;

		if (want > READ_CHUNK)
			want = READ_CHUNK;
		if (want > r->nrecs - at)
			want = r->nrecs - at; /* up to the ring's end; the rest from index 0 */
		if (!pread_all(r->fd, buf, want * sizeof(buf[0]),
			       r->recs_off + at * sizeof(buf[0]))) {
			st->read_errors++; /* the file shrank under its header */
			r->broken = true;
			break;
		}
		for (k = 0; k < want; k++) {
			const struct tp_cuda_rec *in = &buf[k];
			struct gpu_krec *o = &out[n];

			if (in->kind != TP_CUDA_REC_KERNEL ||
			    (in->flags & ~TP_CUDA_REC_NAME_LOST) ||
			    !read_name(r, in, names_used, o, st)) {
				st->bad_records++;
				continue;
			}
			o->start_ns = in->start_ns;
			o->end_ns = in->end_ns;
			o->stream = in->stream;
			o->correlation_id = in->correlation_id;
			o->device = in->device;
			n++;
		}
		r->tail += want;
	}
	if (pwrite(r->fd, &r->tail, 8, offsetof(struct tp_cuda_ring_hdr, tail)) != 8)
		st->read_errors++;
	return n;
}

int gpu_ring_counters(struct gpu_ring *r)
{
	uint64_t v[5];

	if (r->fd < 0 ||
	    !pread_all(r->fd, v, sizeof(v), offsetof(struct tp_cuda_ring_hdr, launches)))
		return -EIO;
	for (int i = 0; i < 5; i++)
		if (v[i] >= r->prod[i])
			r->prod[i] = v[i];
	return 0;
}

void gpu_ring_close(struct gpu_ring *r)
{
	uint64_t zero = 0;

	if (r->fd >= 0) {
		if (pwrite(r->fd, &zero, 8, offsetof(struct tp_cuda_ring_hdr, consumer_pid)) != 8)
			log_debug("GPU ring of pid=%d: consumer not cleared", r->pid);
		close(r->fd);
	}
	r->fd = -1;
}
