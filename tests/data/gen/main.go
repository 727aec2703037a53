// Command gen writes the pprof fixtures used by tests/unit/test_pprof.c:
//
//	go-cpu.pb.gz   CPU profile (samples/count, cpu/nanoseconds) with goroutine labels
//	go-heap.pb.gz  heap profile (alloc_objects, alloc_space, inuse_objects, inuse_space)
//
// Standard library only. Regenerate (offline) with:
//
//	cd tests/data/gen && GO111MODULE=off go run main.go
package main

import (
	"context"
	"log"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"
)

var sink []byte
var sinkMu sync.Mutex

//go:noinline
func busy(d time.Duration) uint64 {
	var x uint64 = 1
	for end := time.Now().Add(d); time.Now().Before(end); {
		for i := 0; i < 10000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	return x
}

//go:noinline
func busyLeaf(d time.Duration) uint64 { return busy(d) }

//go:noinline
func allocate(n, size int) {
	for i := 0; i < n; i++ {
		b := make([]byte, size)
		sinkMu.Lock()
		if i%4 == 0 {
			sink = append(sink, b[:1]...)
		}
		sinkMu.Unlock()
	}
}

func main() {
	runtime.MemProfileRate = 512
	cpu, err := os.Create("../go-cpu.pb.gz")
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	spans := []struct{ trace, span, handler string }{
		{"4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "checkout"},
		{"0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "search"},
	}
	for _, s := range spans {
		wg.Add(1)
		go func(trace, span, handler string) {
			defer wg.Done()
			labels := pprof.Labels("trace_id", trace, "span_id", span, "handler", handler)
			pprof.Do(context.Background(), labels, func(context.Context) {
				busyLeaf(300 * time.Millisecond)
				allocate(2000, 4096)
			})
		}(s.trace, s.span, s.handler)
	}
	wg.Add(1)
	go func() { // unlabelled work
		defer wg.Done()
		busy(300 * time.Millisecond)
		allocate(3000, 1024)
	}()
	wg.Wait()
	pprof.StopCPUProfile()
	if err := cpu.Close(); err != nil {
		log.Fatal(err)
	}

	runtime.GC()
	heap, err := os.Create("../go-heap.pb.gz")
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.WriteHeapProfile(heap); err != nil {
		log.Fatal(err)
	}
	if err := heap.Close(); err != nil {
		log.Fatal(err)
	}
}
