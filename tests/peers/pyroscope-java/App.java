// A small Java program for profcol's peer tests, run with the Pyroscope Java agent as -javaagent
// (tests/peers/README.md): CPU in named methods, allocations, a contended monitor, and work
// wrapped in Pyroscope.LabelsWrapper with a span_id label. Runs for the seconds given, then exits
// (the agent's shutdown hook uploads what is left).
import io.pyroscope.labels.v2.LabelsSet;
import io.pyroscope.labels.v2.Pyroscope;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;

public class App {
    static volatile long sink;
    static final Object LOCK = new Object();

    static long burnAlpha(long until) throws Exception {
        MessageDigest md = MessageDigest.getInstance("SHA-256");
        byte[] b = new byte[64];
        long n = 0;
        while (System.nanoTime() < until) {
            b = md.digest(b);
            n++;
        }
        return n + b[0];
    }

    static long burnBeta(long until) {
        long x = 1;
        while (System.nanoTime() < until) {
            for (int i = 0; i < 10000; i++) x = x * 31 + i;
        }
        return x;
    }

    static long allocate(int n) {
        List<byte[]> keep = new ArrayList<>();
        long total = 0;
        for (int i = 0; i < n; i++) {
            byte[] a = new byte[1024 + (i % 64) * 1024];
            total += a.length;
            keep.add(a);
            if (keep.size() > 256) keep.clear();
        }
        return total;
    }

    static void contend(long until) {
        while (System.nanoTime() < until) {
            synchronized (LOCK) {
                long end = System.nanoTime() + 2_000_000;
                while (System.nanoTime() < end) sink++;
            }
        }
    }

    static long traced(long until) throws Exception { return burnAlpha(until); }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 5;
        String span = args.length > 1 ? args[1] : "0123456789abcdef";
        long end = System.nanoTime() + (long) (seconds * 1e9);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 3; t++) {
            Thread th = new Thread(() -> contend(end), "contender-" + t);
            th.start();
            threads.add(th);
        }
        while (System.nanoTime() < end) {
            long now = System.nanoTime();
            sink += burnAlpha(now + 20_000_000);
            sink += burnBeta(now + 35_000_000);
            sink += allocate(2000);
            Pyroscope.LabelsWrapper.run(new LabelsSet("span_id", span),
                    () -> { sink += traced(System.nanoTime() + 20_000_000); return null; });
        }
        for (Thread th : threads) th.join();
    }
}
