/*
 * map_files - maps the executable segments of the ELF files named on
 * stdin (one path a line, at most 120) the way the dynamic loader maps
 * code, then keeps a CPU busy for SECONDS: a process the agent samples
 * whose mappings name those files, so that it builds and places their
 * unwind tables (bench/unwind_memory.sh). Files that are not 64-bit ELF or
 * cannot be mapped are skipped and counted on stderr.
 *
 * usage: map_files SECONDS < list
 */
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 120

static volatile unsigned long sink;

/* Maps fd's executable PT_LOADs; returns how many. */
static int map_code(int fd)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph[64];
	long page = sysconf(_SC_PAGESIZE);
	int n = 0;

	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 64)
		return 0;
	if (pread(fd, ph, eh.e_phnum * sizeof(ph[0]), (off_t)eh.e_phoff) !=
	    (ssize_t)(eh.e_phnum * sizeof(ph[0])))
		return 0;
	for (int i = 0; i < eh.e_phnum; i++) {
		off_t off = (off_t)(ph[i].p_offset & ~(uint64_t)(page - 1));
		size_t len = ph[i].p_filesz + (ph[i].p_offset - (uint64_t)off);

		if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X) || !ph[i].p_filesz)
			continue;
		if (mmap(NULL, len, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, off) != MAP_FAILED)
			n++;
	}
	return n;
}

int main(int argc, char **argv)
{
	char line[4096];
	int files = 0, skipped = 0;
	time_t end;

	if (argc != 2) {
		fprintf(stderr, "usage: map_files SECONDS < list\n");
		return 2;
	}
	while (files < MAX_FILES && fgets(line, sizeof(line), stdin)) {
		int fd;

		line[strcspn(line, "\n")] = '\0';
		fd = open(line, O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && map_code(fd) > 0)
			files++;
		else
			skipped++;
		if (fd >= 0)
			close(fd);
	}
	fprintf(stderr, "map_files: %d files mapped, %d skipped\n", files, skipped);
	end = time(NULL) + atoi(argv[1]);
	while (time(NULL) < end)
		for (int i = 0; i < 1000000; i++)
			sink += (unsigned long)i;
	return 0;
}
