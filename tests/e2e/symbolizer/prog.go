// The symbolizer's Go test program (tests/e2e/test_symbolizer.py): a few functions, some small
// enough for the compiler to inline, so that the Go build id, htlhash and .gopclntab paths have
// real code to name.
package main

import (
	"fmt"
	"os"
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

func main() {
	n := uint64(len(os.Args)) * 1000
	c := &cart{items: make([]uint64, n)}
	fmt.Println(crunch(n), c.total())
}
