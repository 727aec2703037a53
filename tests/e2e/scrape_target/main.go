// A scrape target for the pyroscope_scrape receiver's tests: net/http/pprof on -addr, with work
// the profiles can be checked against: CPU burnt in named functions, allocations from named
// functions, a contended mutex and blocking channel operations. Standard library only.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"sync"
	"time"
)

var sink []byte
var sinkMu sync.Mutex

//go:noinline
func burnAlpha(n int) uint64 {
	var x uint64 = 1
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

//go:noinline
func burnBeta(n int) uint64 { // the same work as burnAlpha: their CPU is 1:3 by calls
	var x uint64 = 1
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

//go:noinline
func allocSmall() {
	b := make([]byte, 64+len(sink)%3)
	sinkMu.Lock()
	sink = b
	sinkMu.Unlock()
}

//go:noinline
func allocLarge() {
	b := make([]byte, 256<<10)
	sinkMu.Lock()
	sink = b
	sinkMu.Unlock()
}

// allocRestarted stands for allocSmall in a process started with -restarted: the stacks the
// previous process allocated from are then missing from this one's heap profile, so a scraper
// sees its counters go down whatever the two processes' ages and GC timing.
//
//go:noinline
func allocRestarted() {
	b := make([]byte, 96)
	sinkMu.Lock()
	sink = b
	sinkMu.Unlock()
}

var shared sync.Mutex
var counter int

//go:noinline
func contend() {
	shared.Lock()
	counter++
	time.Sleep(100 * time.Microsecond) // held a while: the others wait, without burning CPU
	shared.Unlock()
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	restarted := flag.Bool("restarted", false, "allocate from allocRestarted instead")
	flag.Parse()
	runtime.SetMutexProfileFraction(1)
	runtime.SetBlockProfileRate(1)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go func() { // 3 parts alpha to 1 part beta
		for {
			burnAlpha(3000000)
			burnAlpha(3000000)
			burnAlpha(3000000)
			burnBeta(3000000)
		}
	}()
	go func() {
		for i := 0; ; i++ {
			if *restarted {
				allocRestarted()
			} else {
				allocSmall()
				if i%50 == 0 {
					allocLarge()
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	for g := 0; g < 3; g++ {
		go func() {
			for {
				contend()
				time.Sleep(50 * time.Microsecond) // contended, without eating the CPU burnt above
			}
		}()
	}
	ch := make(chan int)
	go func() {
		for {
			ch <- 1
			time.Sleep(time.Millisecond)
		}
	}()
	go func() {
		for range ch {
		}
	}()
	fmt.Printf("listening %s\n", ln.Addr())
	srv := &http.Server{}
	fmt.Fprintln(os.Stderr, srv.Serve(ln))
}
