// otlpcheck decodes OTLP profiles with the upstream-generated Go types
// (go.opentelemetry.io/proto/slim/otlp, the same module the Collector's pdata is generated with)
// and checks the rules the profiles proto's comments state. It is profcol's independent decoder
// and conformance check in the peer tests (OpenTelemetry's profcheck is not served as a Go module).
//
//	otlpcheck [-in proto|json|jsonl] FILE...
//
// Each FILE is one ExportProfilesServiceRequest (proto: binary, json: OTLP JSON), or with jsonl
// one ProfilesData per line (what the Collector's file exporter writes). For every message it
// prints one line on stdout: the message as protojson. Every rule broken is printed on stderr as
// "MUST <path>: <what>" (the proto says MUST or states it as a fact of the format) or
// "SHOULD <path>: <what>"; the exit status is 1 when there is a MUST, 2 on a decoding error.
package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"unicode/utf8"

	collpb "go.opentelemetry.io/proto/slim/otlp/collector/profiles/v1development"
	commonpb "go.opentelemetry.io/proto/slim/otlp/common/v1"
	pb "go.opentelemetry.io/proto/slim/otlp/profiles/v1development"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

type checker struct {
	d       *pb.ProfilesDictionary
	musts   int
	shoulds int
	file    string
}

func (c *checker) must(path, format string, args ...any) {
	c.musts++
	fmt.Fprintf(os.Stderr, "MUST %s: %s: %s\n", c.file, path, fmt.Sprintf(format, args...))
}

func (c *checker) should(path, format string, args ...any) {
	c.shoulds++
	fmt.Fprintf(os.Stderr, "SHOULD %s: %s: %s\n", c.file, path, fmt.Sprintf(format, args...))
}

// in: an index into a table of n entries
func (c *checker) in(path string, idx int32, n int) bool {
	if idx < 0 || int(idx) >= n {
		c.must(path, "index %d outside the table of %d", idx, n)
		return false
	}
	return true
}

func (c *checker) str(path string, idx int32) { c.in(path, idx, len(c.d.StringTable)) }

func (c *checker) attrs(path string, list []int32) {
	seen := map[string]bool{}
	for i, a := range list {
		p := fmt.Sprintf("%s[%d]", path, i)
		if !c.in(p, a, len(c.d.AttributeTable)) || a == 0 {
			if a == 0 {
				c.must(p, "index 0 is the null attribute")
			}
			continue
		}
		kv := c.d.AttributeTable[a]
		if kv.KeyStrindex < 0 || int(kv.KeyStrindex) >= len(c.d.StringTable) {
			continue // reported with the table
		}
		k := c.d.StringTable[kv.KeyStrindex]
		if seen[k] {
			c.must(p, "key %q twice in one attribute_indices list", k)
		}
		seen[k] = true
	}
}

func (c *checker) anyValue(path string, v *commonpb.AnyValue) {
	if v == nil {
		return
	}
	switch x := v.Value.(type) {
	case *commonpb.AnyValue_StringValueStrindex:
		c.str(path+".string_value_strindex", x.StringValueStrindex)
	case *commonpb.AnyValue_ArrayValue:
		for i, e := range x.ArrayValue.GetValues() {
			c.anyValue(fmt.Sprintf("%s.array[%d]", path, i), e)
		}
	case *commonpb.AnyValue_KvlistValue:
		for i, kv := range x.KvlistValue.GetValues() {
			c.keyValue(fmt.Sprintf("%s.kvlist[%d]", path, i), kv)
		}
	}
}

func (c *checker) keyValue(path string, kv *commonpb.KeyValue) {
	if kv.KeyStrindex != 0 {
		c.str(path+".key_strindex", kv.KeyStrindex)
		if kv.Key != "" {
			c.must(path, "both key and key_strindex set")
		}
	}
	c.anyValue(path+".value", kv.Value)
}

func (c *checker) dictionary() {
	d := c.d
	if len(d.StringTable) == 0 || d.StringTable[0] != "" {
		c.must("dictionary.string_table[0]", "must be \"\"")
	}
	for i, s := range d.StringTable {
		if !utf8.ValidString(s) {
			c.must(fmt.Sprintf("dictionary.string_table[%d]", i), "not UTF-8")
		}
	}
	zero := func(name string, n int, first proto.Message, empty proto.Message) {
		if n == 0 {
			c.must("dictionary."+name, "empty: element 0 must be the zero value")
		} else if !proto.Equal(first, empty) {
			c.must("dictionary."+name+"[0]", "must be the zero value, is %v", first)
		}
	}
	first := func(n int, get func() proto.Message) proto.Message {
		if n == 0 {
			return nil
		}
		return get()
	}
	zero("mapping_table", len(d.MappingTable), first(len(d.MappingTable), func() proto.Message { return d.MappingTable[0] }), &pb.Mapping{})
	zero("location_table", len(d.LocationTable), first(len(d.LocationTable), func() proto.Message { return d.LocationTable[0] }), &pb.Location{})
	zero("function_table", len(d.FunctionTable), first(len(d.FunctionTable), func() proto.Message { return d.FunctionTable[0] }), &pb.Function{})
	if len(d.AttributeTable) > 0 && d.AttributeTable[0].Value != nil && d.AttributeTable[0].Value.Value == nil {
		// an AnyValue with nothing set is no value (the Collector's pdata writes one)
		c.should("dictionary.attribute_table[0].value", "an empty AnyValue message where none is the zero value")
		a0 := proto.Clone(d.AttributeTable[0]).(*pb.KeyValueAndUnit)
		a0.Value = nil
		zero("attribute_table", 1, a0, &pb.KeyValueAndUnit{})
	} else {
		zero("attribute_table", len(d.AttributeTable), first(len(d.AttributeTable), func() proto.Message { return d.AttributeTable[0] }), &pb.KeyValueAndUnit{})
	}
	zero("stack_table", len(d.StackTable), first(len(d.StackTable), func() proto.Message { return d.StackTable[0] }), &pb.Stack{})
	if len(d.LinkTable) == 0 {
		c.must("dictionary.link_table", "empty: element 0 must be the zero value")
	} else if l := d.LinkTable[0]; !allZero(l.TraceId) || !allZero(l.SpanId) {
		c.must("dictionary.link_table[0]", "must be the zero link")
	} else if len(l.TraceId) != 16 || len(l.SpanId) != 8 {
		c.should("dictionary.link_table[0]", "the zero link should have 16 + 8 zero bytes (has %d + %d)", len(l.TraceId), len(l.SpanId))
	}
	for i, m := range d.MappingTable {
		p := fmt.Sprintf("dictionary.mapping_table[%d]", i)
		c.str(p+".filename_strindex", m.FilenameStrindex)
		c.attrs(p+".attribute_indices", m.AttributeIndices)
		if (m.MemoryStart != 0 || m.MemoryLimit != 0) && m.MemoryStart >= m.MemoryLimit {
			c.should(p, "memory_start %#x not below memory_limit %#x", m.MemoryStart, m.MemoryLimit)
		}
	}
	for i, l := range d.LocationTable {
		p := fmt.Sprintf("dictionary.location_table[%d]", i)
		c.in(p+".mapping_index", l.MappingIndex, len(d.MappingTable))
		c.attrs(p+".attribute_indices", l.AttributeIndices)
		for j, ln := range l.Lines {
			q := fmt.Sprintf("%s.lines[%d]", p, j)
			c.in(q+".function_index", ln.FunctionIndex, len(d.FunctionTable))
			if ln.Line < 0 || ln.Column < 0 {
				c.must(q, "line %d / column %d: 1-based, 0 = unset", ln.Line, ln.Column)
			}
		}
	}
	for i, f := range d.FunctionTable {
		p := fmt.Sprintf("dictionary.function_table[%d]", i)
		c.str(p+".name_strindex", f.NameStrindex)
		c.str(p+".system_name_strindex", f.SystemNameStrindex)
		c.str(p+".filename_strindex", f.FilenameStrindex)
		if f.StartLine < 0 {
			c.must(p+".start_line", "%d: 1-based, 0 = unset", f.StartLine)
		}
		if i > 0 && f.NameStrindex == 0 && f.SystemNameStrindex == 0 && f.FilenameStrindex == 0 {
			c.must(p, "none of name, system_name, filename set")
		}
	}
	for i, l := range d.LinkTable[min(1, len(d.LinkTable)):] {
		p := fmt.Sprintf("dictionary.link_table[%d]", i+1)
		// profiles.proto: "The ID is a 16-byte array" / "an 8-byte array"; all zeros is the
		// invalid id of trace.proto's spans, which the profiles proto does not restate
		if len(l.TraceId) != 16 {
			c.must(p+".trace_id", "%d bytes %x: must be 16", len(l.TraceId), l.TraceId)
		} else if allZero(l.TraceId) {
			c.should(p+".trace_id", "all zero (a span-only link)")
		}
		if len(l.SpanId) != 8 {
			c.must(p+".span_id", "%d bytes %x: must be 8", len(l.SpanId), l.SpanId)
		} else if allZero(l.SpanId) {
			c.should(p+".span_id", "all zero")
		}
	}
	for i, a := range d.AttributeTable {
		p := fmt.Sprintf("dictionary.attribute_table[%d]", i)
		c.str(p+".key_strindex", a.KeyStrindex)
		c.str(p+".unit_strindex", a.UnitStrindex)
		c.anyValue(p+".value", a.Value)
		if i > 0 && a.KeyStrindex == 0 {
			c.must(p+".key_strindex", "an attribute without a key")
		}
	}
	for i, s := range d.StackTable {
		for j, l := range s.LocationIndices {
			c.in(fmt.Sprintf("dictionary.stack_table[%d].location_indices[%d]", i, j), l, len(d.LocationTable))
		}
	}
}

func allZero(b []byte) bool { return len(bytes.Trim(b, "\x00")) == 0 }

func (c *checker) request(r *collpb.ExportProfilesServiceRequest) {
	if r.Dictionary == nil {
		if len(r.ResourceProfiles) > 0 {
			c.must("dictionary", "missing while there are profiles")
		}
		r.Dictionary = &pb.ProfilesDictionary{}
	}
	c.d = r.Dictionary
	if len(r.ResourceProfiles) > 0 {
		c.dictionary()
	}
	for i, rp := range r.ResourceProfiles {
		rpath := fmt.Sprintf("resource_profiles[%d]", i)
		for j, kv := range rp.GetResource().GetAttributes() {
			c.keyValue(fmt.Sprintf("%s.resource.attributes[%d]", rpath, j), kv)
		}
		for j, sp := range rp.ScopeProfiles {
			spath := fmt.Sprintf("%s.scope_profiles[%d]", rpath, j)
			for k, p := range sp.Profiles {
				c.profile(fmt.Sprintf("%s.profiles[%d]", spath, k), p)
			}
		}
	}
}

func (c *checker) profile(path string, p *pb.Profile) {
	if p.SampleType != nil {
		c.str(path+".sample_type.type_strindex", p.SampleType.TypeStrindex)
		c.str(path+".sample_type.unit_strindex", p.SampleType.UnitStrindex)
	}
	if p.PeriodType != nil {
		c.str(path+".period_type.type_strindex", p.PeriodType.TypeStrindex)
		c.str(path+".period_type.unit_strindex", p.PeriodType.UnitStrindex)
	}
	c.attrs(path+".attribute_indices", p.AttributeIndices)
	if len(p.ProfileId) != 0 && (len(p.ProfileId) != 16 || allZero(p.ProfileId)) {
		c.must(path+".profile_id", "%x: 16 bytes, not all zero", p.ProfileId)
	}
	if (p.OriginalPayloadFormat == "") != (len(p.OriginalPayload) == 0) {
		c.must(path, "original_payload_format and original_payload are set together or neither")
	}
	shapes := map[string]int{}
	for i, s := range p.Samples {
		q := fmt.Sprintf("%s.samples[%d]", path, i)
		c.in(q+".stack_index", s.StackIndex, len(c.d.StackTable))
		c.attrs(q+".attribute_indices", s.AttributeIndices)
		c.in(q+".link_index", s.LinkIndex, len(c.d.LinkTable))
		nv, nt := len(s.Values), len(s.TimestampsUnixNano)
		switch {
		case nv == 0 && nt == 0:
			c.must(q, "neither values nor timestamps")
		case nv > 0 && nt > 0 && nv != nt:
			c.must(q, "%d values and %d timestamps", nv, nt)
		}
		shapes[fmt.Sprintf("values=%t timestamps=%t", nv > 0, nt > 0)]++
		for j, t := range s.TimestampsUnixNano {
			if t < p.TimeUnixNano || (p.DurationNano > 0 && t >= p.TimeUnixNano+p.DurationNano) {
				c.should(fmt.Sprintf("%s.timestamps_unix_nano[%d]", q, j), "%d outside [time_unix_nano %d, + duration_nano %d)", t, p.TimeUnixNano, p.DurationNano)
			}
		}
	}
	if len(shapes) > 1 {
		c.should(path+".samples", "mixed shapes %v", shapes)
	}
}

// otlpJSON turns OTLP JSON (hex traceId, spanId, profileId, as the OTLP spec and the Collector's
// pdata write them) into proto3 JSON (base64 bytes), which protojson reads.
func otlpJSON(data []byte) ([]byte, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if s, ok := e.(string); ok && (k == "traceId" || k == "spanId" || k == "profileId") {
					b, err := hex.DecodeString(s)
					if err != nil {
						x[k] = "!not hex: " + s // protojson refuses it: an OTLP JSON error
						continue
					}
					x[k] = base64.StdEncoding.EncodeToString(b)
				} else {
					x[k] = walk(e)
				}
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	return json.Marshal(walk(v))
}

func main() {
	in := flag.String("in", "proto", "proto, json or jsonl")
	flag.Parse()
	c := &checker{}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	emit := func(r *collpb.ExportProfilesServiceRequest) {
		c.request(r)
		b, err := protojson.MarshalOptions{}.Marshal(r)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: protojson: %v\n", c.file, err)
			os.Exit(2)
		}
		out.Write(b)
		out.WriteByte('\n')
	}
	for _, name := range flag.Args() {
		c.file = name
		data, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		switch *in {
		case "proto", "json":
			r := &collpb.ExportProfilesServiceRequest{}
			if *in == "proto" {
				err = proto.Unmarshal(data, r)
			} else {
				var j []byte
				if j, err = otlpJSON(data); err == nil {
					err = protojson.Unmarshal(j, r)
				}
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: does not decode: %v\n", name, err)
				os.Exit(2)
			}
			emit(r)
		case "jsonl":
			for n, line := range bytes.Split(data, []byte("\n")) {
				if len(bytes.TrimSpace(line)) == 0 {
					continue
				}
				pd := &pb.ProfilesData{}
				j, err := otlpJSON(line)
				if err == nil {
					err = protojson.Unmarshal(j, pd)
				}
				if err != nil {
					fmt.Fprintf(os.Stderr, "%s:%d: does not decode: %v\n", name, n+1, err)
					os.Exit(2)
				}
				emit(&collpb.ExportProfilesServiceRequest{ResourceProfiles: pd.ResourceProfiles, Dictionary: pd.Dictionary})
			}
		default:
			fmt.Fprintln(os.Stderr, "-in: proto, json or jsonl")
			os.Exit(2)
		}
	}
	out.Flush()
	fmt.Fprintf(os.Stderr, "otlpcheck: %d MUST, %d SHOULD\n", c.musts, c.shoulds)
	if c.musts > 0 {
		os.Exit(1)
	}
}
