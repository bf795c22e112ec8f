/*
 * test_identity: container id and pod UID from real-looking cgroup paths
 * (table), OTEL_RESOURCE_ATTRIBUTES parsing (table), the build id against
 * the one this process finds in its own loaded notes, and the service
 * name order (process context, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
 * executable name) on children started with chosen environments.
 *
 * The children are this program again ("child" or "publish" as argv[1]):
 * they write one line when ready and exit at the end of their stdin.
 */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "identity.h"
#include "traceprof/hex.h"
#include "traceprof/sdk.h"

#define CID  "2a4f0c1e9b8d7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a29"
#define UID  "8dbc5577-d0e2-4706-8787-57d52c03ddf2"
#define UID_ "8dbc5577_d0e2_4706_8787_57d52c03ddf2"

static void test_cgroup(void)
{
	static const struct {
		const char *text; /* /proc/<pid>/cgroup */
		const char *cid;  /* expected container id */
		const char *pod;  /* expected pod UID */
	} cases[] = {
	    /* cgroup v2, systemd driver, containerd, burstable */
	    {"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
	     ".slice/cri-containerd-" CID ".scope\n",
	     CID, UID},
	    /* guaranteed QoS (no class slice), CRI-O */
	    {"0::/kubepods.slice/kubepods-pod" UID_ ".slice/crio-" CID ".scope\n", CID, UID},
	    /* besteffort, Docker (dockershim / cri-dockerd) */
	    {"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_
	     ".slice/docker-" CID ".scope\n",
	     CID, UID},
	    /* cgroup v1, cgroupfs driver: several hierarchies */
	    {"12:memory:/kubepods/besteffort/pod" UID "/" CID "\n"
	     "11:cpu,cpuacct:/kubepods/besteffort/pod" UID "/" CID "\n"
	     "1:name=systemd:/kubepods/besteffort/pod" UID "/" CID "\n",
	     CID, UID},
	    /* cgroup v1 guaranteed; the first line names no container */
	    {"13:rdma:/\n4:pids:/kubepods/pod" UID "/" CID "\n", CID, UID},
	    /* kind / nested kubelet */
	    {"0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
	     "kubelet-kubepods-besteffort-pod" UID_ ".slice/cri-containerd-" CID ".scope\n",
	     CID, UID},
	    /* static pod: the UID is a 32-digit hash */
	    {"0::/kubepods.slice/kubepods-burstable.slice/"
	     "kubepods-burstable-pod0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e.slice/cri-containerd-" CID
	     ".scope\n",
	     CID, "0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e"},
	    /* CRI-O's conmon is no container; the pod is still known */
	    {"0::/kubepods.slice/kubepods-pod" UID_ ".slice/crio-conmon-" CID ".scope\n", "", UID},
	    /* Docker without Kubernetes */
	    {"0::/system.slice/docker-" CID ".scope\n", CID, ""},
	    {"9:devices:/docker/" CID "\n", CID, ""},
	    /* Podman, rootless */
	    {"0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" CID
	     ".scope/container\n",
	     CID, ""},
	    /* no container */
	    {"0::/user.slice/user-1000.slice/session-2.scope\n", "", ""},
	    {"0::/\n", "", ""},
	    {"", "", ""},
	    {"garbage without colons\n", "", ""},
	    /* near misses: 63 digits, upper case, a word that only starts with "pod" */
	    {"0::/docker/" CID "0\n", "", ""},
	    {"0::/docker-2A4F0C1E9B8D7A6F5E4D3C2B1A0F9E8D7C6B5A4F3E2D1C0B9A8F7E6D5C4B3A29.scope\n",
	     "", ""},
	    {"0::/podman.service/podcast\n", "", ""},
	    {"0::/system.slice/foo" CID ".scope\n", "", ""},
	};
	char cid[IDENTITY_CONTAINER_ID_LEN + 1], pod[IDENTITY_POD_UID_LEN + 1];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int err = identity_parse_cgroup(cases[i].text, cid, pod);
		bool any = cases[i].cid[0] || cases[i].pod[0];

		CHECK(err == (any ? 0 : -ENOENT), "cgroup #%zu: %d", i, err);
		CHECK(!strcmp(cid, cases[i].cid), "cgroup #%zu: container '%s'", i, cid);
		CHECK(!strcmp(pod, cases[i].pod), "cgroup #%zu: pod '%s'", i, pod);
	}
}

static void test_resource_attrs(void)
{
	static const struct {
		const char *text; /* OTEL_RESOURCE_ATTRIBUTES */
		int err;	  /* expected result */
		size_t n;	  /* attributes */
		const char *kv;	  /* expected "k=v;k=v" */
	} cases[] = {
	    {"service.name=cart", 0, 1, "service.name=cart;"},
	    {"service.name=cart,deployment.environment.name=prod", 0, 2,
	     "service.name=cart;deployment.environment.name=prod;"},
	    {" team = a%20b , x=%2C%3D%25 ", 0, 2, "team=a b;x=,=%;"},
	    {"a=1,,b=2,", 0, 2, "a=1;b=2;"},
	    {"k=caf%C3%A9", 0, 1, "k=caf\xc3\xa9;"},
	    {"k=", 0, 1, "k=;"},
	    {"", 0, 0, ""},
	    {"novalue", -EINVAL, 0, ""},
	    {"a=1,broken", -EINVAL, 0, ""},
	    {"=v", -EINVAL, 0, ""},
	    {"k=%zz", -EINVAL, 0, ""},
	    {"k=%2", -EINVAL, 0, ""},
	    {"k=%00", -EINVAL, 0, ""},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct identity_attr *a;
		char got[256] = "";
		size_t n;
		int err = identity_parse_resource_attrs(cases[i].text, &a, &n);

		CHECK(err == cases[i].err && n == cases[i].n, "attrs #%zu: %d, %zu", i, err, n);
		for (size_t j = 0; !err && j < n; j++)
			snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s=%s;", a[j].key,
				 a[j].value);
		CHECK(err || !strcmp(got, cases[i].kv), "attrs #%zu: '%s'", i, got);
		CHECK(!err || (!a && !n), "attrs #%zu: nothing on error", i);
		identity_attrs_free(a, n);
	}
}

/* The build id of the main program from its loaded PT_NOTE segments. */
static int own_build_id(struct dl_phdr_info *info, size_t size, void *data)
{
	char *hex = data;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		const uint8_t *end = p + ph->p_memsz;

		if (ph->p_type != PT_NOTE)
			continue;
		while (p + 12 <= end) {
			uint32_t namesz, descsz, type;

			memcpy(&namesz, p, 4);
			memcpy(&descsz, p + 4, 4);
			memcpy(&type, p + 8, 4);
			p += 12;
			if (type == NT_GNU_BUILD_ID && namesz == 4 && !memcmp(p, "GNU", 4)) {
				tp_hex_encode(p + 4, descsz, hex);
				hex[2 * descsz] = '\0';
				return 1;
			}
			p += ((namesz + 3) & ~3u) + ((descsz + 3) & ~3u);
		}
	}
	return 1; /* the first object is the main program: stop there */
}

static void test_build_id(void)
{
	char want[2 * BUILDID_MAX + 1] = "", got[sizeof(want)], small[8];
	int fd = open("/proc/self/exe", O_RDONLY);

	dl_iterate_phdr(own_build_id, want);
	CHECK(want[0] != '\0', "this test has a build id");
	CHECK(buildid_read_hex(fd, got, sizeof(got)) == 0 && !strcmp(got, want),
	      "build id of the executable file '%s' = loaded '%s'", got, want);
	CHECK(buildid_read_hex(fd, small, sizeof(small)) == -ENOSPC, "small buffer");
	close(fd);
	fd = open("/proc/self/cmdline", O_RDONLY);
	CHECK(buildid_read_hex(fd, got, sizeof(got)) == -EINVAL, "no ELF: -EINVAL");
	close(fd);
}

/* Raw notes as the kernel exports them, 4- and 8-aligned, and cut short. */
static void test_build_id_notes(void)
{
	/* a 6-byte name ("Linux") before the GNU note tests the padding */
	static const uint8_t n4[] = {
	    6, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 'L', 'i', 'n', 'u', 'x', 0, 0,	  0,	1,    2,
	    3, 4, 4, 0, 0, 0, 3, 0, 0, 0, 3, 0, 0,   0,	  'G', 'N', 'U', 0, 0xab, 0xcd, 0xef, 0};
	static const uint8_t n8[] = {4,	  0,   0, 0, 16, 0,   0,   0,	5, 0,	 0,   0, 'G',
				     'N', 'U', 0, 0, 0,	 0,   0,   0,	0, 0,	 0,   0, 0,
				     0,	  0,   0, 0, 0,	 0,   4,   0,	0, 0,	 2,   0, 0,
				     0,	  3,   0, 0, 0,	 'G', 'N', 'U', 0, 0x12, 0x34};
	uint8_t big[12 + 4 + BUILDID_MAX + 4] = {
	    4, 0, 0, 0, BUILDID_MAX + 4, 0, 0, 0, 3, 0, 0, 0, 'G', 'N', 'U', 0};
	uint8_t id[BUILDID_MAX];

	CHECK(buildid_from_notes(n4, sizeof(n4), 4, id) == 3 && id[0] == 0xab && id[2] == 0xef,
	      "4-aligned notes");
	CHECK(buildid_from_notes(n4, sizeof(n4) - 2, 4, id) == 0, "cut short: none");
	CHECK(buildid_from_notes(n8, sizeof(n8), 8, id) == 2 && id[0] == 0x12 && id[1] == 0x34,
	      "8-aligned notes");
	CHECK(buildid_from_notes(big, sizeof(big), 4, id) == -ENOSPC, "too long: -ENOSPC");
	CHECK(buildid_from_notes(n4, 5, 4, id) == 0, "no whole header");
}

/* A child: this program with argv[1] = mode, in environment env. */
struct child {
	pid_t pid; /* its pid */
	int in;	   /* its stdin: closing it ends the child */
};

static int child_start(struct child *ch, const char *mode, char *const env[])
{
	int in[2], out[2];
	char c;

	if (pipe(in) || pipe(out))
		return -errno;
	ch->pid = fork();
	if (ch->pid < 0)
		return -errno;
	if (ch->pid == 0) {
		char *const argv[] = {"test_identity", (char *)mode, NULL};

		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execve("/proc/self/exe", argv, env);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	ch->in = in[1];
	if (read(out[0], &c, 1) != 1) {
		close(out[0]);
		return -EIO;
	}
	close(out[0]);
	return 0;
}

static void child_stop(struct child *ch)
{
	int status;

	close(ch->in);
	waitpid(ch->pid, &status, 0);
}

static int child_main(const char *mode)
{
	char buf[16];

	if (!strcmp(mode, "publish")) {
		struct tp_sdk_kv kv = {"service.version", "9.9"};

		if (tp_sdk_process_publish("from-ctx", &kv, 1))
			return 1;
	}
	if (write(1, "R", 1) != 1)
		return 1;
	while (read(0, buf, sizeof(buf)) > 0)
		;
	return 0;
}

static void check_identity(const char *name, const char *mode, char *const env[],
			   const char *want_name, enum identity_source want_src,
			   const char *want_attr_key, const char *want_attr_value)
{
	struct identity id;
	struct child ch = {0};
	bool found = !want_attr_key;

	if (child_start(&ch, mode, env)) {
		CHECK(false, "%s: child started", name);
		return;
	}
	CHECK(identity_read(ch.pid, &id) == 0, "%s: read", name);
	CHECK(!strcmp(id.service_name, want_name) && id.source == want_src,
	      "%s: service '%s' from %d", name, id.service_name, id.source);
	for (size_t i = 0; i < id.nattrs; i++) {
		CHECK(strcmp(id.attrs[i].key, "service.name") &&
			  strncmp(id.attrs[i].key, "threadlocal.", 12),
		      "%s: only resource attributes (%s)", name, id.attrs[i].key);
		if (want_attr_key && !strcmp(id.attrs[i].key, want_attr_key))
			found = !strcmp(id.attrs[i].value, want_attr_value);
	}
	CHECK(found, "%s: attribute %s", name, want_attr_key ? want_attr_key : "-");
	CHECK(strlen(id.build_id) >= 16, "%s: build id '%s'", name, id.build_id);
	child_stop(&ch);
	identity_clear(&id);
	identity_clear(&id);
}

static void test_processes(void)
{
	char *env_sn[] = {"OTEL_SERVICE_NAME=orders",
			  "OTEL_RESOURCE_ATTRIBUTES=service.name=ignored,team=a%20b", NULL};
	char *env_ra[] = {"PATH=/usr/bin", "OTEL_RESOURCE_ATTRIBUTES=service.name=cart%2Fv2", NULL};
	char *env_bad[] = {"OTEL_RESOURCE_ATTRIBUTES=service.name=x,broken", NULL};
	char *env_none[] = {NULL};
	char self[4096], *base;
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	struct identity id;
	char cg[4096] = "", cid[IDENTITY_CONTAINER_ID_LEN + 1], pod[IDENTITY_POD_UID_LEN + 1];
	FILE *f;

	self[len > 0 ? len : 0] = '\0';
	base = strrchr(self, '/') ? strrchr(self, '/') + 1 : self;
	check_identity("process context", "publish", env_sn, "from-ctx", IDENTITY_FROM_PROCCTX,
		       "service.version", "9.9");
	check_identity("OTEL_SERVICE_NAME", "child", env_sn, "orders", IDENTITY_FROM_ENV, "team",
		       "a b");
	check_identity("OTEL_RESOURCE_ATTRIBUTES", "child", env_ra, "cart/v2", IDENTITY_FROM_ENV,
		       NULL, NULL);
	check_identity("malformed attributes", "child", env_bad, base, IDENTITY_FROM_EXE, NULL,
		       NULL);
	check_identity("no environment", "child", env_none, base, IDENTITY_FROM_EXE, NULL, NULL);

	/* this process: the container fields are what its cgroup file says */
	f = fopen("/proc/self/cgroup", "r");
	if (f) {
		size_t n = fread(cg, 1, sizeof(cg) - 1, f);

		cg[n] = '\0';
		fclose(f);
	}
	identity_parse_cgroup(cg, cid, pod);
	CHECK(identity_read(getpid(), &id) == 0 && !strcmp(id.container_id, cid) &&
		  !strcmp(id.pod_uid, pod),
	      "self: container '%s' pod '%s'", id.container_id, id.pod_uid);
	{
		/* the cgroup v2 path comes with it; the build id again from memory */
		const char *v2 = strstr(cg, "0::");
		char want[4096] = "", bid[sizeof(id.build_id)];
		struct identity again;

		if (v2 && (v2 == cg || v2[-1] == '\n'))
			snprintf(want, sizeof(want), "%.*s", (int)strcspn(v2 + 3, "\n"), v2 + 3);
		CHECK(want[0] ? id.cgroup_v2 && !strcmp(id.cgroup_v2, want) : !id.cgroup_v2,
		      "self: cgroup v2 path '%s' (want '%s')", id.cgroup_v2 ? id.cgroup_v2 : "-",
		      want);
		snprintf(bid, sizeof(bid), "%s", id.build_id);
		CHECK(identity_read(getpid(), &again) == 0 && !strcmp(again.build_id, bid) &&
			  bid[0],
		      "self: the same build id twice ('%s')", bid);
		identity_clear(&again);
	}
	identity_clear(&id);
	CHECK(identity_read(0x3ffffff0, &id) == -ENOENT, "no such process: -ENOENT");
}

int main(int argc, char **argv)
{
	if (argc > 1)
		return child_main(argv[1]);
	test_cgroup();
	test_resource_attrs();
	test_build_id();
	test_build_id_notes();
	test_processes();
	return check_done();
}
