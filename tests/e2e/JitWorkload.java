// A CPU-bound Java method for the perf map test: hotLoopJava runs for the
// given milliseconds (args[0]), in calls of about a millisecond each, so
// the JIT compiles it. Run with -XX:+PreserveFramePointer; the test writes
// the perf map with `jcmd <pid> Compiler.perfmap`.
public class JitWorkload {
	static long hotLoopJava(long n) {
		long x = 0;
		for (long i = 0; i < n; i++) {
			x = x * 6364136223846793005L + i;
			x ^= x >>> 17;
		}
		return x;
	}

	public static void main(String[] args) {
		long end = System.nanoTime() + Long.parseLong(args[0]) * 1000000L;
		long sum = 0;
		while (System.nanoTime() < end)
			sum += hotLoopJava(1000000);
		System.out.println("done " + sum);
	}
}
