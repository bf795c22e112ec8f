// A CPU-bound Java method for the perf map test: hotLoopJava runs in calls
// of about a millisecond each, so the JIT compiles it; first until the
// perf map exists (the test writes it with `jcmd <pid> Compiler.perfmap`;
// at most 20 s), then for the given milliseconds (args[0]) more. Run with
// -XX:+PreserveFramePointer.
import java.io.File;

public class JitWorkload {
	static long hotLoopJava(long n) {
		long x = 0;
		for (long i = 0; i < n; i++) {
			x = x * 6364136223846793005L + i;
			x ^= x >>> 17;
		}
		return x;
	}

	static long runFor(long ms) {
		long end = System.nanoTime() + ms * 1000000L, sum = 0;
		while (System.nanoTime() < end)
			sum += hotLoopJava(1000000);
		return sum;
	}

	public static void main(String[] args) {
		File map = new File("/tmp/perf-" + ProcessHandle.current().pid() + ".map");
		long sum = 0, give_up = System.nanoTime() + 20000L * 1000000L;
		while (!map.exists() && System.nanoTime() < give_up)
			sum += runFor(50);
		System.out.println("map " + map.exists());
		sum += runFor(Long.parseLong(args[0]));
		System.out.println("done " + sum);
	}
}
