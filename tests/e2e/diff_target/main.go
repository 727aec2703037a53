// Command difftarget records a CPU profile of itself (runtime/pprof) while it splits its work
// between two functions, -alpha percent in alpha and the rest in beta: two runs with different
// splits are two "versions" of one app for test_profilez_diff.py, whose diff the test checks
// against `go tool pprof -diff_base`.
package main

import (
	"flag"
	"log"
	"os"
	"runtime/pprof"
)

var sink uint64

// alpha and beta do their work themselves (no callee), so each is the leaf of its own samples
// and its flat value is its share.
//
//go:noinline
func alpha() {
	x := sink
	for i := 0; i < 20000; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	sink = x
}

//go:noinline
func beta() {
	x := sink
	for i := 0; i < 20000; i++ {
		x = x*2862933555777941757 + 3037000493
	}
	sink = x
}

func main() {
	share := flag.Int("alpha", 50, "percent of the work done in alpha")
	// a number of calls, not a duration: the same work however busy the machine is
	calls := flag.Int("calls", 60000, "calls of alpha or beta")
	out := flag.String("o", "cpu.pb.gz", "where the profile goes")
	flag.Parse()
	f, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		log.Fatal(err)
	}
	for i := 0; i < *calls; i++ {
		if i%100 < *share {
			alpha()
		} else {
			beta()
		}
	}
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}
