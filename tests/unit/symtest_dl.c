/*
 * symtest_dl.c - a library symtest_prog loads with dlopen after the
 * symbolizer took its snapshot: its address must trigger a maps refresh.
 */
int tp_symtest_dl_func(int x);

__attribute__((noinline)) int tp_symtest_dl_func(int x)
{
	volatile int acc = x;

	for (int i = 0; i < 5; i++)
		acc += i * x;
	return acc;
}
