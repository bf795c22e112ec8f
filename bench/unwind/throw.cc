// A C++ program that throws and catches exceptions in a hot loop, four
// frames below the catch: most of its time is the exception runtime
// (__cxa_throw, libgcc_s's _Unwind_RaiseException and the personality
// routine), built without frame pointers as -O2 builds are.
// usage: unwind_throw [SECONDS] (default 10)
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

static volatile std::uint64_t sink;

struct bad_value : std::runtime_error {
	explicit bad_value(std::uint64_t v) : std::runtime_error("bad value"), value(v)
	{
	}
	std::uint64_t value;
};

static __attribute__((noipa)) std::uint64_t throw_check(std::uint64_t v)
{
	for (int i = 0; i < 200; i++)
		v = v * 6364136223846793005ULL + 1442695040888963407ULL;
	if (v & 1)
		throw bad_value(v);
	return v;
}

static __attribute__((noipa)) std::uint64_t throw_level3(std::uint64_t v)
{
	return throw_check(v | 1) + 1;
}
static __attribute__((noipa)) std::uint64_t throw_level2(std::uint64_t v)
{
	return throw_level3(v * 3) + 2;
}
static __attribute__((noipa)) std::uint64_t throw_level1(std::uint64_t v)
{
	return throw_level2(v ^ 7) + 3;
}

static __attribute__((noipa)) std::uint64_t throw_catch(std::uint64_t v)
{
	try {
		return throw_level1(v);
	} catch (const bad_value &e) {
		return e.value;
	}
}

int main(int argc, char **argv)
{
	using clock = std::chrono::steady_clock;
	double seconds = argc > 1 ? std::atof(argv[1]) : 10;
	auto end = clock::now() + std::chrono::duration<double>(seconds);
	std::uint64_t v = 1, n = 0;

	while (clock::now() < end) {
		for (int i = 0; i < 1000; i++)
			v = throw_catch(v + (std::uint64_t)i);
		n += 1000;
	}
	sink = v;
	std::printf("exceptions: %llu\n", (unsigned long long)n);
	return 0;
}
