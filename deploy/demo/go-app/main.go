// Command go-app is profcol's demo Go service. It profiles itself with the standard library's
// runtime/pprof (no SDK) and uploads each CPU profile as raw pprof to a Pyroscope-compatible
// /ingest endpoint, here profcol's pyroscope receiver:
//
//	POST $PROFCOL_URL/ingest?name=$APP_NAME{$LABELS}&format=pprof&from=..&until=..&spyName=gospy
//
// Its work runs under pprof labels (handler, trace_id, span_id), so the samples carry the trace
// context that profcol's tracelink processor turns into links.
//
// Settings (environment):
//
//	PROFCOL_URL  base URL of the receiver      (default http://profcol:4040)
//	APP_NAME     service name                  (default demo-go-app)
//	LABELS       extra labels, k=v,k=v         (default env=demo)
//	INTERVAL     profile length and upload period (default 10s)
//	COUNT        uploads before exiting, 0 = run forever (default 0)
//	DUTY         fraction of each 20 ms tick spent working, 0..1 (default 0.5)
//
// Standard library only; builds with Go 1.19 and GO111MODULE=off (no network needed).
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

var sink uint64
var sinkMu sync.Mutex

func keep(x uint64) {
	sinkMu.Lock()
	sink += x
	sinkMu.Unlock()
}

// isPrime tests one number by trial division.
//
//go:noinline
func isPrime(n int) bool {
	for d := 2; d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}

// computePrimes counts primes below n (the "checkout" handler's hot spot). The work sits in
// calls rather than one long loop, so the Go scheduler preempts at calls and the profile shows
// the handlers' own functions instead of runtime.asyncPreempt.
//
//go:noinline
func computePrimes(n int) uint64 {
	var count uint64
	for i := 2; i < n; i++ {
		if isPrime(i) {
			count++
		}
	}
	return count
}

// hashDocument is an FNV-1a hash over a fake 64-byte document.
//
//go:noinline
func hashDocument(h uint64, doc int) uint64 {
	for j := 0; j < 64; j++ {
		h ^= uint64(doc*31 + j)
		h *= 1099511628211
	}
	return h
}

// scoreDocuments hashes n fake documents (the "search" handler's hot spot).
//
//go:noinline
func scoreDocuments(n int) uint64 {
	var h uint64 = 14695981039346656037
	for i := 0; i < n; i++ {
		h = hashDocument(h, i)
	}
	return h
}

// renderReport formats rows into a buffer (the "report" handler's hot spot).
//
//go:noinline
func renderReport(rows int) uint64 {
	var b bytes.Buffer
	for i := 0; i < rows; i++ {
		b.WriteString("row ")
		b.WriteString(strconv.Itoa(i))
		b.WriteString(": ")
		b.WriteString(strconv.FormatFloat(float64(i)*1.5, 'f', 2, 64))
		b.WriteByte('\n')
	}
	return uint64(b.Len())
}

//go:noinline
func checkoutHandler() { keep(computePrimes(20000)) }

//go:noinline
func searchHandler() { keep(scoreDocuments(4000)) }

//go:noinline
func reportHandler() { keep(renderReport(3000)) }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		log.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// serve runs one handler in a loop until stop closes, working `duty` of each 20 ms tick, each
// request under its own trace and span id.
func serve(name string, handler func(), duty float64, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	tick := 20 * time.Millisecond
	for {
		select {
		case <-stop:
			return
		default:
		}
		start := time.Now()
		labels := pprof.Labels("handler", name, "trace_id", randomHex(16), "span_id", randomHex(8))
		pprof.Do(context.Background(), labels, func(context.Context) {
			for time.Since(start) < time.Duration(float64(tick)*duty) {
				handler()
			}
		})
		if rest := tick - time.Since(start); rest > 0 {
			time.Sleep(rest)
		}
	}
}

// profileOnce runs the handlers for d under the CPU profiler and returns the gzipped pprof.
func profileOnce(d time.Duration, duty float64) ([]byte, error) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	handlers := []struct {
		name string
		fn   func()
	}{{"checkout", checkoutHandler}, {"search", searchHandler}, {"report", reportHandler}}
	for _, h := range handlers {
		wg.Add(1)
		go serve(h.name, h.fn, duty, stop, &wg)
	}
	time.Sleep(d)
	close(stop)
	wg.Wait()
	pprof.StopCPUProfile()
	return buf.Bytes(), nil
}

func upload(base, name string, from, until time.Time, body []byte) error {
	q := url.Values{}
	q.Set("name", name)
	q.Set("format", "pprof")
	q.Set("from", strconv.FormatInt(from.Unix(), 10))
	q.Set("until", strconv.FormatInt(until.Unix(), 10))
	q.Set("spyName", "gospy")
	q.Set("sampleRate", "100")
	req, err := http.NewRequest("POST", base+"/ingest?"+q.Encode(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmsgprefix)
	log.SetPrefix("go-app: ")
	base := env("PROFCOL_URL", "http://profcol:4040")
	app := env("APP_NAME", "demo-go-app")
	labels := env("LABELS", "env=demo")
	interval, err := time.ParseDuration(env("INTERVAL", "10s"))
	if err != nil || interval <= 0 {
		log.Fatalf("INTERVAL: %v", env("INTERVAL", ""))
	}
	count, err := strconv.Atoi(env("COUNT", "0"))
	if err != nil {
		log.Fatalf("COUNT: %v", err)
	}
	duty, err := strconv.ParseFloat(env("DUTY", "0.5"), 64)
	if err != nil || duty <= 0 || duty > 1 {
		log.Fatalf("DUTY must be in (0, 1]")
	}
	name := app
	if labels != "" {
		name = app + "{" + labels + "}"
	}
	failures := 0
	for i := 0; count == 0 || i < count; i++ {
		from := time.Now()
		body, err := profileOnce(interval, duty)
		if err != nil {
			log.Fatal(err)
		}
		until := time.Now()
		if err := upload(base, name, from, until, body); err != nil {
			failures++
			log.Printf("upload %d failed: %v", i+1, err)
			continue
		}
		log.Printf("uploaded profile %d (%d bytes of pprof) to %s/ingest as %s", i+1, len(body), base, name)
	}
	if failures > 0 && count > 0 {
		os.Exit(1)
	}
}
