// The symbolizer's Go test program (tests/e2e/test_symbolizer.py): a few functions, some small
// enough for the compiler to inline, so that the Go build id, htlhash and .gopclntab paths have
// real code to name. `prog frames` is the test's oracle for inline chains: it reads addresses
// (hex, one a line) and prints the frames Go's runtime unwinds there from its own .gopclntab
// (runtime.CallersFrames), innermost first, as "function<TAB>file<TAB>line", then "--".
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
)

func mix(x uint64) uint64 { return x*2654435761 ^ x>>7 }

//go:noinline
func crunch(n uint64) uint64 {
	var acc uint64
	for i := uint64(0); i < n; i++ {
		acc += mix(i + acc)
	}
	return acc
}

type cart struct{ items []uint64 }

//go:noinline
func (c *cart) total() uint64 {
	var t uint64
	for _, x := range c.items {
		t += mix(x)
	}
	return t
}

func frames() {
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		pc, err := strconv.ParseUint(in.Text(), 0, 64)
		if err != nil {
			continue
		}
		// CallersFrames takes return addresses and looks one byte back: pc+1 names pc
		fr := runtime.CallersFrames([]uintptr{uintptr(pc) + 1})
		for {
			f, more := fr.Next()
			fmt.Fprintf(out, "%s\t%s\t%d\n", f.Function, f.File, f.Line)
			if !more {
				break
			}
		}
		fmt.Fprintln(out, "--")
	}
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "frames" {
		frames()
		return
	}
	n := uint64(len(os.Args)) * 1000
	c := &cart{items: make([]uint64, n)}
	fmt.Println(crunch(n), c.total())
}
