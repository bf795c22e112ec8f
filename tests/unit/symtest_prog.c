/*
 * symtest_prog.c - the program test_symbolize symbolizes, built several
 * ways (PIE, non-PIE, stripped, without build id, a second build).
 *
 * It prints "key hex-address [numbers]" lines: its own distinctly named
 * functions, a return address inside an inlined function (with the source
 * lines the chain must report), getpid in libc, clock_gettime in the vdso,
 * an anonymous executable mapping, and each file given as --map=PATH
 * mapped executable; then "ready". Afterwards it reads commands on stdin:
 * "dlopen PATH" loads a library and prints "dl ADDR" of its function; end
 * of input makes it exit.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef TP_SYMTEST_VARIANT
#define TP_SYMTEST_VARIANT 1
#endif

void *tp_symtest_pc(int line);
void *tp_symtest_outer(void);
int tp_symtest_alpha(int x);
int tp_symtest_beta(int x);

int tp_symtest_line_pc;	  /* line of the tp_symtest_pc() call in the inlined function */
int tp_symtest_line_call; /* line where tp_symtest_inner is inlined into tp_symtest_outer */

__attribute__((noinline)) void *tp_symtest_pc(int line)
{
	tp_symtest_line_pc = line;
	return __builtin_return_address(0);
}

static inline __attribute__((always_inline)) void *tp_symtest_inner(int line)
{
	void *pc;

	tp_symtest_line_call = line;
	pc = tp_symtest_pc(__LINE__);
	__asm__ volatile("" ::: "memory"); /* keeps the call out of tail position */
	return pc;
}

__attribute__((noinline)) void *tp_symtest_outer(void)
{
	void *pc = tp_symtest_inner(__LINE__);

	__asm__ volatile("" ::: "memory");
	return pc;
}

__attribute__((noinline)) int tp_symtest_alpha(int x)
{
	volatile int acc = x;

	for (int i = 0; i < 8; i++)
		acc = acc * 31 + i;
	return acc + TP_SYMTEST_VARIANT;
}

__attribute__((noinline)) int tp_symtest_beta(int x)
{
	volatile int acc = tp_symtest_alpha(x);

	for (int i = 0; i < 4; i++)
		acc = acc ^ (i << 3);
	return acc + 7;
}

static void print_addr(const char *key, const void *addr)
{
	printf("%s %" PRIxPTR "\n", key, (uintptr_t)addr);
}

static void map_file(const char *path)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	void *p;

	if (fd < 0 || fstat(fd, &st) != 0) {
		printf("map-error %s\n", path);
		return;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		printf("map-error %s\n", path);
	else
		printf("map %" PRIxPTR " %s\n", (uintptr_t)p, path);
}

int main(int argc, char **argv)
{
	void *vdso = dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_NOLOAD);
	void *anon = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char cmd[4096];
	void *pc;

	pc = tp_symtest_outer();
	printf("alpha %" PRIxPTR "\n", (uintptr_t)&tp_symtest_alpha);
	printf("beta %" PRIxPTR "\n", (uintptr_t)&tp_symtest_beta);
	printf("inline %" PRIxPTR " %d %d\n", (uintptr_t)pc, tp_symtest_line_call,
	       tp_symtest_line_pc);
	print_addr("getpid", dlsym(RTLD_DEFAULT, "getpid"));
	if (vdso)
		print_addr("vdso", dlsym(vdso, "__vdso_clock_gettime"));
	if (anon != MAP_FAILED)
		print_addr("anon", anon);
	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--map=", 6) == 0)
			map_file(argv[i] + 6);
	}
	printf("ready %d\n", tp_symtest_beta(argc));
	fflush(stdout);
	while (fgets(cmd, sizeof(cmd), stdin)) {
		cmd[strcspn(cmd, "\n")] = '\0';
		if (strncmp(cmd, "dlopen ", 7) == 0) {
			void *h = dlopen(cmd + 7, RTLD_NOW);

			print_addr("dl", h ? dlsym(h, "tp_symtest_dl_func") : NULL);
			fflush(stdout);
		}
	}
	return 0;
}
