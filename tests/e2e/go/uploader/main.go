// Command uploader profiles itself with runtime/pprof (CPU for a few hundred ms of work in named
// functions, part of it under pprof.Do labels span_id/trace_id, plus a heap profile) and uploads
// the profiles to a Pyroscope-compatible server three ways, as real clients do:
//
//	raw:       POST /ingest?name=...&format=pprof&from=<ns>&until=<ns>  (gzip pprof body)
//	multipart: POST /ingest?name=...  multipart/form-data with file parts "profile" and
//	           "sample_type_config", as pyroscope-go sends them
//	push:      POST /push.v1.PusherService/Push, Connect, application/proto, hand-encoded
//	           PushRequest{series{labels, samples{raw_profile, ID}}}
//
// Stdlib only. It writes cpu.pb.gz and heap.pb.gz into -out and prints one JSON object per
// upload on stdout. Used by profcol's e2e tests.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"
)

var sink uint64

//go:noinline
func busyLoop(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		sink += hashLoop(2000)
	}
}

//go:noinline
func hashLoop(n int) uint64 {
	var b [32]byte
	for i := 0; i < n; i++ {
		b = sha256.Sum256(b[:])
	}
	return uint64(b[0])
}

//go:noinline
func tracedWork(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		sink += spinLoop(200000)
	}
}

//go:noinline
func spinLoop(n int) uint64 {
	x := uint64(1)
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

var retained [][]byte

//go:noinline
func allocLoop(n, size int) {
	for i := 0; i < n; i++ {
		retained = append(retained, make([]byte, size))
	}
}

type upload struct {
	Kind   string   `json:"kind"`
	Path   string   `json:"path"`
	Status int      `json:"status"`
	Body   string   `json:"body"`
	Files  []string `json:"files"`
	Error  string   `json:"error,omitempty"`
}

func uuid4() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// --- protobuf by hand (proto3 wire format) ---

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendBytes(b []byte, field int, data []byte) []byte {
	b = appendVarint(b, uint64(field)<<3|2)
	b = appendVarint(b, uint64(len(data)))
	return append(b, data...)
}

type label struct{ name, value string }

func series(labels []label, profiles ...[]byte) []byte {
	var s []byte
	for _, l := range labels {
		var lp []byte
		lp = appendBytes(lp, 1, []byte(l.name))
		lp = appendBytes(lp, 2, []byte(l.value))
		s = appendBytes(s, 1, lp)
	}
	for _, p := range profiles {
		var rs []byte
		rs = appendBytes(rs, 1, p)
		rs = appendBytes(rs, 2, []byte(uuid4()))
		s = appendBytes(s, 2, rs)
	}
	return s
}

// --- uploads ---

func send(kind string, req *http.Request, files ...string) upload {
	u := upload{Kind: kind, Path: req.URL.RequestURI(), Files: files}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		u.Error = err.Error()
		return u
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	u.Status = resp.StatusCode
	u.Body = string(body)
	return u
}

func ingestURL(addr, name string, from, until time.Time, extra url.Values) string {
	q := url.Values{}
	q.Set("name", name)
	q.Set("from", strconv.FormatInt(from.UnixNano(), 10))
	q.Set("until", strconv.FormatInt(until.UnixNano(), 10))
	q.Set("spyName", "gospy")
	for k, v := range extra {
		q[k] = v
	}
	return addr + "/ingest?" + q.Encode()
}

func main() {
	runtime.MemProfileRate = 4096
	addr := flag.String("addr", "http://127.0.0.1:4040", "server base URL")
	out := flag.String("out", ".", "directory for cpu.pb.gz and heap.pb.gz")
	app := flag.String("app", "goapp", "application name")
	env := flag.String("env", "test", "value of the env label")
	traceID := flag.String("trace-id", "", "trace_id label for the traced work")
	spanID := flag.String("span-id", "", "span_id label for the traced work")
	cpuMs := flag.Int("cpu-ms", 300, "milliseconds of plain CPU work (the traced part is as long)")
	flag.Parse()

	// profiles
	var cpu bytes.Buffer
	from := time.Now()
	if err := pprof.StartCPUProfile(&cpu); err != nil {
		panic(err)
	}
	busyLoop(time.Duration(*cpuMs) * time.Millisecond)
	pprof.Do(context.Background(), pprof.Labels("span_id", *spanID, "trace_id", *traceID),
		func(context.Context) { tracedWork(time.Duration(*cpuMs) * time.Millisecond) })
	pprof.StopCPUProfile()
	allocLoop(2000, 1024)
	runtime.GC()
	var heap bytes.Buffer
	if err := pprof.WriteHeapProfile(&heap); err != nil {
		panic(err)
	}
	until := time.Now()
	for name, b := range map[string][]byte{"cpu.pb.gz": cpu.Bytes(), "heap.pb.gz": heap.Bytes()} {
		if err := os.WriteFile(filepath.Join(*out, name), b, 0o644); err != nil {
			panic(err)
		}
	}

	enc := json.NewEncoder(os.Stdout)

	// 1. raw pprof, as old pyroscope-rs / the Node client send it
	name := fmt.Sprintf("%s{env=%s,upload=raw}", *app, *env)
	req, _ := http.NewRequest("POST", ingestURL(*addr, name, from, until,
		url.Values{"format": {"pprof"}, "sampleRate": {"100"}}), bytes.NewReader(cpu.Bytes()))
	req.Header.Set("Content-Type", "application/octet-stream")
	enc.Encode(send("raw", req, "cpu.pb.gz"))

	// 2. multipart, as pyroscope-go sends a heap profile (no format, sample_type_config part)
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("profile", "profile.pprof")
	fw.Write(heap.Bytes())
	fw, _ = mw.CreateFormFile("sample_type_config", "sample_type_config.json")
	fw.Write([]byte(`{"alloc_objects":{"units":"objects"},"alloc_space":{"units":"bytes"},` +
		`"inuse_objects":{"units":"objects","aggregation":"average"},` +
		`"inuse_space":{"units":"bytes","aggregation":"average"}}`))
	mw.Close()
	name = fmt.Sprintf("%s{env=%s,upload=multipart}", *app, *env)
	req, _ = http.NewRequest("POST", ingestURL(*addr, name, from, until, nil), &form)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	enc.Encode(send("multipart", req, "heap.pb.gz"))

	// 3. Connect push: one series per profile type
	var push []byte
	push = appendBytes(push, 1, series([]label{{"__name__", "process_cpu"}, {"service_name", *app},
		{"env", *env}, {"upload", "push"}}, cpu.Bytes()))
	push = appendBytes(push, 1, series([]label{{"__name__", "memory"}, {"service_name", *app},
		{"env", *env}, {"upload", "push"}}, heap.Bytes()))
	req, _ = http.NewRequest("POST", *addr+"/push.v1.PusherService/Push", bytes.NewReader(push))
	req.Header.Set("Content-Type", "application/proto")
	req.Header.Set("Connect-Protocol-Version", "1")
	enc.Encode(send("push", req, "cpu.pb.gz", "heap.pb.gz"))
}
