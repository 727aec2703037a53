// A small Java program for JFR test recordings (record.sh runs it under -XX:StartFlightRecording).
// Every kind of event Pyroscope turns into a profile, from named methods on named threads:
//   alpha-worker  burnAlpha (integer loop) + allocateSmall  -> jdk.ExecutionSample, TLAB events
//   beta-worker   burnBeta (floating loop) + allocateLarge  -> ExecutionSample, OutsideTLAB
//   lock-a, lock-b  contendMonitor: synchronized on one object, held ~3 ms -> jdk.JavaMonitorEnter
//   parker        parkAWhile: LockSupport.parkNanos(~4 ms)                 -> jdk.ThreadPark
//                 (every other one under 80 recursive parkDeep calls: a truncated stack)
// Arguments: seconds to run [rotate]. With "rotate" a second recording is started and stopped
// halfway through: each makes the JDK start a new chunk, so the recording written at exit has
// several chunks (a real multi-chunk file, as the JDK itself writes it).
package profcol.jfrtest;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

public class JfrLoad {
    static volatile boolean stop;
    static volatile long sink;
    static final Object MONITOR = new Object();

    static long burnAlpha(long n) {
        long x = n;
        for (long i = 0; i < n; i++) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
        }
        return x;
    }

    static double burnBeta(long n) {
        double s = 0;
        for (long i = 1; i < n; i++) s += Math.sqrt(i) / (i + 1.0);
        return s;
    }

    // many small arrays: new TLABs (jdk.ObjectAllocationInNewTLAB) and sampled allocations
    static int allocateSmall(List<byte[]> keep) {
        int total = 0;
        for (int i = 0; i < 100; i++) {
            byte[] b = new byte[256 + (i % 32) * 64];
            total += b.length;
            if (i % 25 == 0) keep.add(b);
        }
        if (keep.size() > 200) keep.clear();
        return total;
    }

    // arrays larger than a TLAB: jdk.ObjectAllocationOutsideTLAB
    static int allocateLarge(List<long[]> keep) {
        long[] a = new long[(1 << 17) + (int) (System.nanoTime() & 1023)];
        keep.add(a);
        if (keep.size() > 8) keep.remove(0);
        return a.length;
    }

    static void holdMonitor() throws InterruptedException {
        Thread.sleep(3);
    }

    static void contendMonitor() throws InterruptedException {
        synchronized (MONITOR) {
            holdMonitor();
        }
    }

    static void parkAWhile() {
        LockSupport.parkNanos(4_000_000L);
    }

    // deeper than the JDK's stackdepth (64): these stacks are recorded truncated
    static void parkDeep(int depth) {
        if (depth > 0) parkDeep(depth - 1);
        else parkAWhile();
    }

    static Thread start(String name, Runnable r) {
        Thread t = new Thread(r, name);
        t.start();
        return t;
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 3;
        boolean rotate = args.length > 1 && args[1].equals("rotate");
        List<Thread> threads = new ArrayList<>();
        threads.add(start("alpha-worker", () -> {
            List<byte[]> keep = new ArrayList<>();
            while (!stop) {
                sink += burnAlpha(200_000);
                sink += allocateSmall(keep);
            }
        }));
        threads.add(start("beta-worker", () -> {
            List<long[]> keep = new ArrayList<>();
            for (int i = 0; !stop; i++) {
                sink += (long) burnBeta(200_000);
                if (i % 4 == 0) sink += allocateLarge(keep);
            }
        }));
        for (String name : new String[] {"lock-a", "lock-b"}) {
            threads.add(start(name, () -> {
                while (!stop) {
                    try {
                        contendMonitor();
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }));
        }
        threads.add(start("parker", () -> {
            for (int i = 0; !stop; i++) parkDeep(i % 2 == 0 ? 0 : 80);
        }));
        long end = System.nanoTime() + (long) (seconds * 1e9);
        if (rotate) {
            Thread.sleep((long) (seconds * 400));
            jdk.jfr.Recording r = new jdk.jfr.Recording();
            // lock-a and lock-b wait for the monitor across the rotation: their
            // JavaMonitorEnter events are committed in the new chunk
            synchronized (MONITOR) {
                Thread.sleep(100);
                r.start(); // a new chunk begins
                Thread.sleep(100);
            }
            Thread.sleep((long) (seconds * 200));
            r.stop(); // and another
            r.close();
        }
        long left = end - System.nanoTime();
        if (left > 0) Thread.sleep(left / 1_000_000);
        stop = true;
        for (Thread t : threads) t.join();
        System.out.println("done " + sink);
    }
}
