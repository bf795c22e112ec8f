/*
 * obi_map.c - finds OBI's pinned trace map and hands it to the sampler
 * (obi_map.h).
 */
#include "obi_map.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "traceprof/log.h"

#define BPF_FS "/sys/fs/bpf"

void obi_map_init(struct obi_map *o, const char *path)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->path, sizeof(o->path), "%s", path ? path : "");
}

/*
 * The pinned map at path, opened read-only (the sampler only reads it, and
 * the BPF filesystem may be mounted read-only): fd, or -errno (-ENOENT:
 * not there).
 */
static int open_pin(const char *path)
{
	LIBBPF_OPTS(bpf_obj_get_opts, opts, .file_flags = BPF_F_RDONLY);
	int fd = bpf_obj_get_opts(path, &opts);

	return fd < 0 ? -errno : fd;
}

/*
 * "auto": BPF_FS/traces_ctx_v1, else the first BPF_FS/DIR/traces_ctx_v1
 * (a loader's pin directory), opened (its path into out), or -errno.
 */
static int find_auto(char *out, size_t len)
{
	struct dirent *de;
	DIR *d;
	int fd;

	snprintf(out, len, "%s/%s", BPF_FS, OBI_MAP_NAME);
	fd = open_pin(out);
	if (fd != -ENOENT || !(d = opendir(BPF_FS)))
		return fd;
	while (fd == -ENOENT && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN))
			continue;
		if ((size_t)snprintf(out, len, "%s/%s/%s", BPF_FS, de->d_name, OBI_MAP_NAME) >= len)
			continue;
		fd = open_pin(out);
		if (fd == -ENOTDIR)
			fd = -ENOENT;
	}
	closedir(d);
	return fd;
}

/* No map pinned (any more): the sampler stops reading the one it had. */
static void drop(struct obi_map *o, struct sampler *s)
{
	if (!o->id)
		return;
	sampler_set_obi_map(s, -1);
	log_info("OBI trace map no longer pinned: its contexts are no longer read path=%s id=%u",
		 o->found, o->id);
	o->id = 0;
	o->found[0] = 0;
	o->st.installed = 0;
	o->st.lost++;
}

/* fd's map, if it has OBI's layout, for the sampler (fd is closed by the caller). */
static void install(struct obi_map *o, struct sampler *s, int fd, const char *path)
{
	struct bpf_map_info info;
	uint32_t len = sizeof(info);
	int err;

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len)) {
		o->st.errors++;
		return;
	}
	if (info.id == o->id)
		return; /* the same map */
	if (info.type != BPF_MAP_TYPE_LRU_HASH || info.key_size != sizeof(uint64_t) ||
	    info.value_size != sizeof(struct tp_obi_ctx)) {
		err = -EINVAL;
	} else {
		err = sampler_set_obi_map(s, fd);
	}
	if (err) {
		o->st.refused++;
		if (o->refused_id != info.id)
			log_warn("OBI trace map refused: not the layout traceprof reads (LRU hash, "
				 "8-byte key, 24-byte value) path=%s id=%u type=%u key=%u value=%u "
				 "flags=0x%x err=%s",
				 path, info.id, info.type, info.key_size, info.value_size,
				 info.map_flags, strerror(-err));
		o->refused_id = info.id;
		drop(o, s);
		return;
	}
	log_info("OBI trace map found: threads without a thread context are tagged from it "
		 "path=%s id=%u max_entries=%u",
		 path, info.id, info.max_entries);
	o->id = info.id;
	snprintf(o->found, sizeof(o->found), "%s", path);
	o->st.installed = 1;
	o->st.changes++;
}

void obi_map_tick(struct obi_map *o, struct sampler *s, int64_t now_us)
{
	char path[sizeof(o->path)];
	int fd;

	if (!o->path[0] || now_us < o->next_us)
		return;
	o->next_us = now_us + OBI_MAP_CHECK_US;
	if (strcmp(o->path, "auto") == 0) {
		fd = find_auto(path, sizeof(path));
	} else {
		snprintf(path, sizeof(path), "%s", o->path);
		fd = open_pin(path);
	}
	if (fd < 0) {
		if (fd != -ENOENT)
			o->st.errors++;
		drop(o, s);
		return;
	}
	install(o, s, fd, path);
	close(fd);
}
