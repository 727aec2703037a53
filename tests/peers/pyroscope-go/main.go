// A small app on pyroscope-go (and its godeltaprof, which pyroscope-go's heap, mutex and block
// profiles use) for profcol's peer tests: it burns CPU in named functions, allocates, contends a
// mutex, tags part of its work with pyroscope.TagWrapper (span_id), and uploads every profile type
// to -addr until -run has passed, then stops (the last upload is flushed by Stop). With -serve it
// uploads nothing and is a scrape target instead: net/http/pprof's /debug/pprof/* and godeltaprof's
// /debug/pprof/delta_{heap,mutex,block} (its http/pprof package) on that address.
package main

import (
	"context"
	"crypto/sha256"
	"flag"
	"log"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/grafana/pyroscope-go"
	"github.com/grafana/pyroscope-go/godeltaprof"
	_ "github.com/grafana/pyroscope-go/godeltaprof/http/pprof"
)

var sink []byte

//go:noinline
func burnSHA(d time.Duration) {
	end := time.Now().Add(d)
	h := sha256.Sum256([]byte("profcol"))
	for time.Now().Before(end) {
		for i := 0; i < 1000; i++ {
			h = sha256.Sum256(h[:])
		}
	}
	sink = h[:1]
}

//go:noinline
func spinLoop(d time.Duration) {
	end := time.Now().Add(d)
	x := 1
	for time.Now().Before(end) {
		for i := 0; i < 100000; i++ {
			x = x*31 + i
		}
	}
	if x == 42 {
		sink = nil
	}
}

//go:noinline
func allocLoop(n int) {
	keep := make([][]byte, 0, 64)
	for i := 0; i < n; i++ {
		keep = append(keep, make([]byte, 4096+i%1024))
		if len(keep) == cap(keep) {
			keep = keep[:0]
		}
	}
	sink = keep[0][:1]
}

//go:noinline
func contend(mu *sync.Mutex, d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		mu.Lock()
		time.Sleep(200 * time.Microsecond)
		mu.Unlock()
	}
}

//go:noinline
func tracedWork(d time.Duration) { burnSHA(d) }

func main() {
	addr := flag.String("addr", "http://127.0.0.1:4040", "the Pyroscope server (profcol)")
	app := flag.String("app", "peer.goapp", "application name")
	tenant := flag.String("tenant", "", "X-Scope-OrgID")
	span := flag.String("span-id", "0123456789abcdef", "span_id label of tracedWork")
	run := flag.Duration("run", 5*time.Second, "how long to work")
	serve := flag.String("serve", "", "serve pprof and godeltaprof on this address, upload nothing")
	flag.Parse()
	runtime.SetMutexProfileFraction(1)
	runtime.SetBlockProfileRate(1)
	// godeltaprof directly too: a delta heap profile written where -heap says (not uploaded)
	heap := godeltaprof.NewHeapProfiler()
	var p *pyroscope.Profiler
	if *serve != "" {
		ln, err := net.Listen("tcp", *serve)
		if err != nil {
			log.Fatal(err)
		}
		go func() { log.Println(http.Serve(ln, nil)) }()
	} else {
		var err error
		p, err = pyroscope.Start(pyroscope.Config{
			ApplicationName: *app,
			ServerAddress:   *addr,
			TenantID:        *tenant,
			Logger:          pyroscope.StandardLogger,
			UploadRate:      2 * time.Second,
			Tags:            map[string]string{"env": "peer", "sdk": "go"},
			ProfileTypes: []pyroscope.ProfileType{
				pyroscope.ProfileCPU, pyroscope.ProfileAllocObjects, pyroscope.ProfileAllocSpace,
				pyroscope.ProfileInuseObjects, pyroscope.ProfileInuseSpace, pyroscope.ProfileGoroutines,
				pyroscope.ProfileMutexCount, pyroscope.ProfileMutexDuration,
				pyroscope.ProfileBlockCount, pyroscope.ProfileBlockDuration,
			},
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	end := time.Now().Add(*run)
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				contend(&mu, 20*time.Millisecond)
			}
		}()
	}
	for time.Now().Before(end) {
		burnSHA(30 * time.Millisecond)
		spinLoop(20 * time.Millisecond)
		allocLoop(2000)
		pyroscope.TagWrapper(context.Background(), pyroscope.Labels("span_id", *span),
			func(context.Context) { tracedWork(30 * time.Millisecond) })
	}
	wg.Wait()
	if f, err := os.CreateTemp("", "godeltaprof-heap-*.pb.gz"); err == nil {
		_ = heap.Profile(f)
		f.Close()
		os.Remove(f.Name())
	}
	if p != nil {
		if err := p.Stop(); err != nil {
			log.Fatal(err)
		}
	}
}
