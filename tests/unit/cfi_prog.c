/*
 * cfi_prog.c - a program built without frame pointers (-O2
 * -fomit-frame-pointer) for test_cfi: leaf functions, functions that push
 * callee-saved registers, one whose frame is addressed from rbp (a
 * variable-length array), recursion, so its .eh_frame has rsp- and
 * rbp-based rules.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static long leaf(long a, long b)
{
	return a * 31 + b;
}

__attribute__((noinline)) static long vla(int n)
{
	volatile char buf[n];
	memset((char *)buf, n & 0x7f, (size_t)n);
	long s = 0;
	for (int i = 0; i < n; i++)
		s += buf[i] * leaf(i, s);
	return s;
}

__attribute__((noinline)) static long many(long a, long b, long c, long d, long e, long f)
{
	long x = leaf(a, b), y = leaf(c, d), z = leaf(e, f);
	long w = leaf(x, y) + leaf(y, z) + leaf(z, x);
	return x ^ y ^ z ^ w ^ leaf(a + f, b + e);
}

__attribute__((noinline)) static long recurse(int depth, long acc)
{
	if (depth <= 0)
		return acc + vla(16 + (int)(acc & 15));
	char pad[64];
	snprintf(pad, sizeof(pad), "%ld", acc);
	return recurse(depth - 1, acc + (long)strlen(pad)) + many(depth, acc, 1, 2, 3, 4);
}

int main(int argc, char **argv)
{
	int depth = argc > 1 ? atoi(argv[1]) : 8;
	printf("%ld\n", recurse(depth, argc));
	return 0;
}
