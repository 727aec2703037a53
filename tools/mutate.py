#!/usr/bin/env python3
"""Mutation testing: does the suite catch the bugs it claims to?

A fixed list of plausible one-line bugs (MUTANTS below), each defined as (file, exact original
text, replacement, the meson tests that cover it). For each mutant: apply it to a scratch copy of
the tree, build (one build dir, incremental), run its tests one at a time (cheapest first) until
one fails. A failing test KILLS the mutant; a mutant every test passes SURVIVED (a hole in the
suite: write the test that kills it). A mutant whose original text is not found exactly once is
STALE (the code moved on: update the list); one that does not compile is BROKEN. Both are errors,
never skipped.

    tools/mutate.py                  every mutant (slow: tens of minutes on 2 cores)
    tools/mutate.py NAME...          only these
    tools/mutate.py --list           the list, with the tests of each
    tools/mutate.py --check          only check that every mutant applies (no build; CI runs it)
    tools/mutate.py --all            run every test of each mutant (the table then names every
                                     test that kills it), not only until the first does
    tools/mutate.py --markdown FILE  also write the result table (for tests/README.md)

Scratch copy: build-mutate/tree (a copy of the working tree without build*/ and .git, refreshed
by size and mtime so unchanged files are not rebuilt), built in build-mutate/tree/build. The
unmutated tree is built and every test used is run once first (a failing baseline would make
every mutant look killed). Exit status: 0 when every mutant was killed, 1 otherwise, 2 usage.
"""

import argparse
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


class Mutant:
    def __init__(self, name, file, original, replacement, tests, why):
        self.name, self.file, self.original, self.replacement = name, file, original, replacement
        self.tests, self.why = tests, why


M = Mutant
# Tests are meson test names (`meson test -C build --list`), run in this order.
MUTANTS = [
    # ---- pdata --------------------------------------------------------------------------------
    M("merge-key-drops-last-attr", "src/pdata/merge.c",
      "    for (size_t i = 0; i < n; i++)\n        key_bytes(k, tmp.data + sp[i].off, sp[i].len);",
      "    for (size_t i = 0; i + 1 < n; i++)\n        key_bytes(k, tmp.data + sp[i].off, sp[i].len);",
      ["merge_keys", "proc_batch", "test_fidelity"],
      "the merge key leaves out the attribute that sorts last: resources one attribute apart merge"),
    M("validate-index-off-by-one", "src/pdata/validate.c",
      "return idx == 0 || (idx > 0 && (size_t)idx < n);",
      "return idx == 0 || (idx > 0 && (size_t)idx <= n);",
      ["pdata", "test_fidelity", "test_bad_input"],
      "an index equal to the table size passes validation"),
    M("validate-partial-keeps-count", "src/pdata/validate.c",
      "            sp->n_profiles = keep;\n",
      "",
      ["pdata", "test_fidelity", "test_grpc"],
      "rejected profiles are compacted away but the count is kept: duplicates are forwarded"),
    M("json-uint64-capped-at-int64", "src/pdata/json.c",
      "if (get_unsigned(c, v, wide ? UINT64_MAX : UINT32_MAX, &u) < 0) return PC_EINVAL;",
      "if (get_unsigned(c, v, wide ? INT64_MAX : UINT32_MAX, &u) < 0) return PC_EINVAL;",
      ["json", "test_fidelity"],
      "uint64 JSON strings above 2^63 (a kernel mapping's memoryStart) are refused"),
    M("json-uint64-encoded-signed", "src/pdata/json.c",
      "    case PROTOBUF_C_TYPE_FIXED64: put_u64(b, *(const uint64_t *)p, true); break;",
      "    case PROTOBUF_C_TYPE_FIXED64: put_i64(b, *(const int64_t *)p, true); break;",
      ["json", "test_fidelity"],
      "uint64 and fixed64 written as signed: memoryStart 18446744073699065856 becomes negative"),
    M("pprof-num-label-unit-lost", "src/formats/pprof.c",
      "    if (!is_str && (unit_idx = sidx(c, unit, \"sample\", si)) < 0) return PC_EBADMSG;",
      "    if (!is_str && sidx(c, unit, \"sample\", si) < 0) return PC_EBADMSG;",
      ["pprof", "test_fidelity"],
      "a numeric label's num_unit is checked but not kept as the attribute's unit"),
    M("pprof-num-label-without-unit-dropped", "src/formats/pprof.c",
      "        if (l->str == 0 && l->num == 0 && l->num_unit == 0) continue;",
      "        if (l->str == 0 && l->num_unit == 0) continue;",
      ["pprof", "test_fidelity"],
      "numeric labels without a unit (Go's heap `bytes`) are dropped as if empty"),
    M("wire-merge-zero-entry-kept", "src/pdata/wire_merge.c",
      "        r->map[ti][k] = zero_entry(ti, e) ? 0 : intern(t, e.p, e.n, as_is, a);",
      "        r->map[ti][k] = zero_entry(ti, e) && e.n > 1u << 30 ? 0 : intern(t, e.p, e.n, as_is, a);",
      ["wire_merge"],
      "an entry of the zero value written out (explicit zero fields) stays a second zero entry"),
    M("wire-merge-zero-index-written", "src/pdata/wire_merge.c",
      "            if (!to && l && f.kind == K_IDX && m != M_AV) {",
      "            if (!to && l && f.kind == K_IDX && m != M_AV && !p) {",
      ["wire_merge"],
      "an index remapped to 0 is written out, so two equal entries differ in bytes and both stay"),
    M("wire-merge-zero-index-last-dropped", "src/pdata/wire_merge.c",
      "        multi |= seen & 1u << num;",
      "        multi |= seen & 0u;",
      ["wire_merge"],
      "a singular index written twice loses its last occurrence (remapped to 0): the first wins"),
    M("wire-merge-oneof-zero-unset", "src/pdata/wire_merge.c",
      "            if (!to && l && f.kind == K_IDX && m != M_AV) {",
      "            if (!to && l && f.kind == K_IDX) {",
      ["wire_merge"],
      "AnyValue's string_value_strindex remapped to 0 is left out: the value becomes unset"),
    # ---- net ----------------------------------------------------------------------------------
    M("http-body-limit-off-by-one", "src/net/http_server.c",
      "    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > srv(c)->o.max_body_bytes) {",
      "    if ((p->flags & F_CONTENT_LENGTH) && p->content_length >= srv(c)->o.max_body_bytes) {",
      ["net", "test_bad_input", "test_boundaries"],
      "a body of exactly max_request_body_size is refused with 413"),
    M("gzip-cap-off-by-one", "src/base/gzip.c",
      "        if (out->len > max_out) {",
      "        if (out->len >= max_out) {",
      ["net", "test_bad_input", "test_boundaries"],
      "a gzip body inflating to exactly the limit is refused as too large"),
    M("grpc-frame-limit-off-by-one", "src/net/grpc.c",
      "    if (n > max_len) {",
      "    if (n >= max_len) {",
      ["grpc", "test_grpc", "test_boundaries"],
      "a gRPC message of exactly max_recv_msg_size is refused"),
    M("retry-after-last-digit-lost", "src/net/http_client.c",
      "        for (size_t i = 0; i < n && s <= INT_MAX; i++)",
      "        for (size_t i = 0; i + 1 < n && s <= INT_MAX; i++)",
      ["net", "test_reliability"],
      "Retry-After: 2 read as 0 (the last digit is dropped)"),
    # ---- pipeline -----------------------------------------------------------------------------
    M("sender-drop-not-counted", "src/sdk/sender.c",
      "    s->failed[it->sig] += it->samples;\n"
      "    PC_ERROR(s->c->id, \"dropping %zu %s: %s\", it->samples, pc_signal_infos[it->sig].items, why);",
      "    PC_ERROR(s->c->id, \"dropping %zu %s: %s\", it->samples, pc_signal_infos[it->sig].items, why);",
      ["test_exporter_outcomes", "test_reliability"],
      "a batch given up after retries (max_elapsed_time, shutdown deadline) is not counted"),
    M("sender-ms-as-seconds", "src/sdk/sender.c",
      "(s->cfg.max_elapsed_ms && now + delay - it->first_attempt_ms > s->cfg.max_elapsed_ms);",
      "(s->cfg.max_elapsed_ms && now + delay - it->first_attempt_ms > 1000 * s->cfg.max_elapsed_ms);",
      ["test_exporter_outcomes"],
      "max_elapsed_time taken as seconds where it is milliseconds: retries never give up"),
    M("sender-permanent-not-counted", "src/sdk/sender.c",
      "    if (!pc_err_retryable(st)) {\n        s->failed[it->sig] += it->samples;\n",
      "    if (!pc_err_retryable(st)) {\n",
      ["test_exporter_outcomes"],
      "a batch the backend refuses permanently is dropped without being counted"),
    M("sender-shutdown-queued-not-counted", "src/sdk/sender.c",
      "        if (!it->seq) s->failed[it->sig] += it->samples;\n",
      "",
      ["test_reliability"],
      "requests still queued at the shutdown deadline are dropped uncounted"),
    M("sender-queue-capacity-off-by-one", "src/sdk/sender.c",
      "    if (s->queued_units + it->units > s->capacity) {",
      "    if (s->queued_units + it->units >= s->capacity) {",
      ["test_reliability", "test_boundaries"],
      "the sending queue holds one request less than queue_size"),
    M("sender-full-shared", "src/sdk/sender.c",
      "    return s->cfg.queue_enabled && s->queued_units >= s->capacity;",
      "    static bool any;\n    any |= s->cfg.queue_enabled && s->queued_units >= s->capacity;\n"
      "    return any;",
      ["test_reliability"],
      "one sender's full queue refuses every pipeline's clients (and stays so)"),
    M("sender-behind-while-failing", "src/sdk/sender.c",
      "    return s->cfg.queue_enabled && !s->failing && s->queued >= (uint64_t)s->cfg.num_consumers;",
      "    return s->cfg.queue_enabled && s->queued >= (uint64_t)s->cfg.num_consumers;",
      ["exporter_core"],
      "a failing backend's backlog counts as behind (no CPU sends it sooner)"),
    M("admit-drops-behind", "src/service/instance.c",
      "    return next > a ? next : a;",
      "    return next;",
      ["exporter_core"],
      "an exporter behind in sending admits its pipeline as OK: its decodes run ahead of its sends"),
    M("gate-chains-behind", "src/sdk/pool.c",
      "    if (chain && behind && atomic_load_explicit(behind, memory_order_relaxed)) return false;",
      "    if (chain && behind && atomic_load_explicit(behind, memory_order_relaxed) && !chain) return false;",
      ["gate"],
      "a decode job goes on to a decode whose pipelines are behind in sending"),
    # ---- receivers ----------------------------------------------------------------------------
    M("otlp-http-retryable-as-500", "src/sdk/receiver_http.h",
      "    case PC_EAGAIN: return 503;",
      "    case PC_EAGAIN: return 500;",
      ["test_reliability", "test_bad_input"],
      "a retryable refusal answered 500, which OTLP clients do not retry"),
    M("otlp-http-503-without-retry-after", "src/receivers/otlp.c",
      "    if (http == 429 || http == 503)",
      "    if (http == 429)",
      ["test_reliability", "test_bad_input"],
      "a 503 without Retry-After"),
    M("otlp-partial-success-count", "src/receivers/otlp.c",
      "        ps.rejected_profiles = rejected;",
      "        ps.rejected_profiles = 1;",
      ["test_fidelity", "test_grpc"],
      "partial success always reports one rejected profile"),
    M("ingest-ms-timestamps", "src/receivers/pyroscope/ingest.c",
      "n == 13 ? 1000000LL :",
      "n == 13 ? 1000LL :",
      ["pyroscope_ingest"],
      "from/until in milliseconds scaled as microseconds"),
    M("ingest-folded-crlf", "src/formats/folded.c",
      "        if (ll && p[ll - 1] == '\\r') ll--;\n",
      "",
      ["pyroscope_ingest", "test_pyroscope_bad_input"],
      "collapsed stacks with CRLF line ends: the count ends in \\r and the line is refused"),
    M("legacy-leaf-keeps-its-name", "src/formats/legacy.c",
      "        w->key_len = saved.key_len, w->nframes = saved.nframes, w->frame_start = saved.frame_start;\n",
      "",
      ["legacy_formats", "test_legacy_formats"],
      "a trie/tree leaf's name stays on the path: its next sibling's stack gets it too"),
    M("legacy-speedscope-rate-kept", "src/formats/legacy.c",
      "bool by_default = s->o->sample_rate == 100;",
      "bool by_default = false;",
      ["legacy_formats", "test_legacy_formats"],
      "speedscope values scaled by the request's default 100 Hz instead of the unit's rate"),
    M("pyroscope-undecodable-as-400", "src/receivers/pyroscope/receiver.c",
      "    return code == PC_EBADMSG ? 422 : pc_receiver_http_status(code);",
      "    return code == PC_EBADMSG ? 400 : pc_receiver_http_status(code);",
      ["test_pyroscope_bad_input"],
      "an undecodable profile answered 400 where Pyroscope answers 422"),
    M("jfr-varint-ninth-byte-7-bits", "src/formats/jfr_reader.c",
      "    v |= (uint64_t)b[p++] << 56;",
      "    v |= (uint64_t)(b[p++] & 0x7f) << 56;",
      ["jfr"],
      "the 9th byte of a compressed integer read as 7 bits: 64-bit keys (stack traces) are lost"),
    M("jfr-checkpoint-delta-into-header", "src/formats/jfr_reader.c",
      "        if (delta > 0 || back > rec - first)",
      "        if (delta > 0 || back > rec - d->c->cstart)",
      ["jfr"],
      "a checkpoint delta may lead into the chunk header, which is then read as a checkpoint"),
    M("jfr-unresolved-state-is-cpu", "src/formats/jfr.c",
      "        cpu = state != ST_UNKNOWN && state != ST_SLEEPING;",
      "        cpu = state != ST_SLEEPING;",
      ["jfr"],
      "an ExecutionSample whose thread state is not in the pool counts as CPU (Pyroscope: not)"),
    M("jfr-lock-duration-raw-ticks", "src/formats/jfr.c",
      "add_sample(d, G_MUTEX, kind, stack, corr, 1, ticks_to_ns(d, s[S_DURATION]));",
      "add_sample(d, G_MUTEX, kind, stack, corr, 1, s[S_DURATION]);",
      ["jfr"],
      "monitor-enter delays in ticks, not nanoseconds (wrong with a TSC tick rate)"),
    M("kafka-receiver-skips-refused", "src/receivers/kafka.c",
      "    bool mark = pc_err_retryable(st) ? cfg->mark_on_error : cfg->mark_on_permanent_error;",
      "    bool mark = pc_err_retryable(st) || cfg->mark_on_permanent_error;",
      ["kafka", "test_kafka"],
      "a message the pipeline refused is marked and its offset committed: at most once, not at "
      "least once"),
    # ---- processors ---------------------------------------------------------------------------
    M("tracelink-overlong-id", "src/base/hex.h",
      "    if (len != 2 * n) return false;",
      "    if (len < 2 * n) return false;",
      ["proc_tracelink", "test_fidelity"],
      "an over-long trace id (or a trace id under a span key) is cut to its first bytes"),
    M("limits-fold-off-by-one", "src/processors/limits.c",
      "    for (size_t i = 0; i + 1 < max; i++)\n        keep[w[i].i] = true;",
      "    for (size_t i = 0; i < max; i++)\n        keep[w[i].i] = true;",
      ["proc_limits"],
      "max_samples_per_profile keeps max samples plus the folded one"),
    M("symbolizer-lru-evicts-newest", "src/processors/symbolizer/cache.c",
      "remove_slot(c, find(c, c->tail->key, c->tail->len, c->tail->hash));",
      "remove_slot(c, find(c, c->head->key, c->head->len, c->head->hash));",
      ["sym_cache"],
      "the symbolizer's caches evict the most recently used entry instead of the least"),
    M("redaction-allow-list-ignored", "src/processors/redaction.c",
      "    return *s && any_match(&st->blocked_symbols, s) && !any_match(&st->allowed_symbols, s);",
      "    return *s && any_match(&st->blocked_symbols, s);",
      ["proc_redaction"],
      "allowed_symbols does not protect a symbol from blocked_symbols"),
    M("resource-insert-overwrites", "src/processors/resource.c",
      "        if (r->act == A_INSERT && at >= 0) return;\n",
      "",
      ["proc_resource"],
      "action insert overwrites an existing attribute"),
    M("filter-unanchored", "src/processors/filter.c",
      "    snprintf(full, n, \"^(%s)$\", pat);",
      "    snprintf(full, n, \"(%s)\", pat);",
      ["proc_filter"],
      "filter patterns match anywhere in the value, not the whole value"),
    M("batch-size-trigger-off-by-one", "src/processors/batch.c",
      "s->samples >= (size_t)cfg->send_batch_size;",
      "s->samples > (size_t)cfg->send_batch_size;",
      ["proc_batch"],
      "send_batch_size reached exactly does not flush"),
    M("memory-limiter-soft-ignored", "src/processors/memory_limiter.c",
      "    int over = rss > l->soft, hard = rss > l->hard;",
      "    int over = rss > l->hard, hard = rss > l->hard;",
      ["test_reliability"],
      "memory_limiter refuses only above limit_mib, not above limit - spike"),
    # ---- connectors ---------------------------------------------------------------------------
    M("routing-matches-every-route", "src/connectors/routing.c",
      "        for (size_t r = 0; r < st->n_routes && dest[i] == st->n_routes; r++)",
      "        for (size_t r = 0; r < st->n_routes; r++)",
      ["connectors", "test_connectors"],
      "a resource goes to the last matching route, not the first (match once, in table order)"),
    M("connector-cycle-unchecked", "src/service/connect.c",
      "    if (!*msg) return 0;",
      "    if (!*msg || *msg) return 0;",
      ["connectors"],
      "pipelines joined by connectors in a circle are accepted"),
    M("profilemetrics-frameless-self-lost", "src/connectors/profilemetrics/agg.c",
      "                g->win_other = pc_sat_add(g->win_other, v);",
      "                (void)v;",
      ["profilemetrics"],
      "a sample without frames is in the value but no function's self: the self series no "
      "longer add up to it"),
    M("profilemetrics-ns-as-10ns", "src/connectors/profilemetrics/emit.c",
      '    } t[] = {{"nanoseconds", {"s", 1e-9}},',
      '    } t[] = {{"nanoseconds", {"s", 1e-8}},',
      ["test_profilemetrics"],
      "CPU nanoseconds converted to seconds ten times too large"),
    # ---- exporters ----------------------------------------------------------------------------
    # the HTTP exporters read answers in one place (sdk/exporter_http.c): the otlphttp and
    # pyroscope mutants of the 502 classification are one mutation, each with its exporter's tests
    M("otlphttp-502-permanent", "src/sdk/exporter_http.c",
      "    int retryable = r->status == 429 || r->status == 502 || r->status == 503 || r->status == 504;",
      "    int retryable = r->status == 429 || r->status == 503 || r->status == 504;",
      ["test_exporter_outcomes"],
      "a 502 from the backend is treated as permanent: the batch is dropped"),
    M("otlphttp-retry-after-ignored", "src/sdk/exporter_http.c",
      "        o->retry_after_s = r->retry_after_s;",
      "        o->retry_after_s = -1;",
      ["test_reliability"],
      "the backend's Retry-After is ignored"),
    M("otlp-grpc-unavailable-permanent", "src/sdk/otlp_client.c",
      "    case PC_GRPC_UNAVAILABLE:\n",
      "",
      ["test_grpc"],
      "gRPC UNAVAILABLE from the backend is not retried"),
    M("otlp-grpc-exhausted-always-retried", "src/sdk/otlp_client.c",
      "        if (delay_ms >= 0)",
      "        if (delay_ms >= -1)",
      ["test_grpc"],
      "RESOURCE_EXHAUSTED without RetryInfo is retried (OTLP: only with RetryInfo)"),
    M("pyroscope-exporter-502-permanent", "src/sdk/exporter_http.c",
      "    int retryable = r->status == 429 || r->status == 502 || r->status == 503 || r->status == 504;",
      "    int retryable = r->status == 429 || r->status == 503 || r->status == 504;",
      ["test_pyroscope_exporter"],
      "a 502 from Pyroscope is treated as permanent: the client is told not to retry"),
    M("kafka-delivery-failure-as-success", "src/exporters/kafka.c",
      "    if (m->err)\n        pc_export_outcome_set(",
      "    if (0 && m->err)\n        pc_export_outcome_set(",
      ["kafka", "test_kafka"],
      "a message the broker never acknowledged counts as sent: a broker down loses the data"),
    M("kafka-split-drops-a-part", "src/exporters/kafka.c",
      "    for (size_t i = 0; i < n; i++) {\n        emit_sized(q, cfg, parts[i], key, keylen);",
      "    for (size_t i = 0; i + 1 < n; i++) {\n        emit_sized(q, cfg, parts[i], key, keylen);",
      ["kafka"],
      "a request split over max_message_bytes loses its last part"),
    M("pyroscope-exporter-until", "src/exporters/pyroscope.c",
      "        until = (int64_t)((p0->time_unix_nano + p0->duration_nano) / 1000000000u);",
      "        until = (int64_t)(p0->time_unix_nano / 1000000000u);",
      ["exp_pyroscope", "test_pyroscope_exporter"],
      "the Pyroscope exporter's `until` ignores the profile's duration"),
    M("ring-hash-unmixed", "src/sdk/ring.c",
      "    return pc_ring_hash_finish(pc_ring_hash_add(PC_RING_HASH_INIT, data, n));",
      "    return pc_ring_hash_add(PC_RING_HASH_INIT, data, n);",
      ["loadbalancing", "test_loadbalancing"],
      "the key hash skips the documented finalizer: another implementation (or version) of the "
      "ring routes keys elsewhere"),
    M("ring-no-wrap", "src/sdk/ring.c",
      "    return r->points[lo == n ? 0 : lo].member;",
      "    return r->points[lo == n ? n - 1 : lo].member;",
      ["loadbalancing"],
      "a key above the last point goes to the last point's backend instead of wrapping around to "
      "the first"),
    M("lb-no-trace-to-first-backend", "src/exporters/loadbalancing.c",
      "        return by_resource(rc, r, res, KEY_SERVICE); /* no trace: by service */",
      "        return 0; /* no trace: by service */",
      ["loadbalancing", "test_loadbalancing"],
      "profile samples without a trace id all go to the first backend instead of their "
      "service's"),
    M("lb-rerouted-not-counted", "src/sdk/exporter.c",
      "        bk->rerouted[h->sig] += h->items;",
      "        (void)bk;",
      ["loadbalancing", "test_loadbalancing"],
      "what a backend that left held is routed again without being counted"),
    M("profilez-budget-off-by-one", "src/extensions/profilez/agg.c",
      "        while (se->n_stacks >= a->l.max_stacks && evict_oldest(a, se, sl->slot))",
      "        while (se->n_stacks > a->l.max_stacks && evict_oldest(a, se, sl->slot))",
      ["profilez"],
      "a series full at exactly max_stacks makes no room: new stacks go over budget"),
    M("profilez-evicts-newest", "src/extensions/profilez/agg.c",
      "        if (sl->used && sl->slot != now && (!old || sl->slot < old->slot)) old = sl;",
      "        if (sl->used && sl->slot != now && (!old || sl->slot > old->slot)) old = sl;",
      ["profilez"],
      "the budget drops the newest older slice instead of the oldest"),
    M("prometheus-delta-replaces", "src/exporters/prometheus/accum.c",
      "        s->value += v;",
      "        s->value = v;",
      ["test_prometheus"],
      "a contiguous delta sum replaces the counter instead of adding to it"),
    M("prometheus-unit-appended-twice", "src/formats/prom_names.c",
      "        if (!has(t, (char *)b.data) && t->n < MAX_TOKENS)",
      "        if (t->n < MAX_TOKENS)",
      ["prometheus", "test_prometheus"],
      "the unit is appended to a name that already has it (bytes_sent_bytes_total)"),
    M("remotewrite-no-stale-marker", "src/exporters/prometheusremotewrite.c",
      "    if (flags & NO_RECORD) {",
      "    if (flags & NO_RECORD && 0) {",
      ["test_prometheus"],
      "a NoRecordedValue point is sent as its value, not as the stale marker"),
]
del M

def die(msg):
    print("mutate: " + msg, file=sys.stderr)
    sys.exit(2)


def apply_check(root, m):
    """(text with the mutant applied, None) or (None, error)."""
    path = os.path.join(root, m.file)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        return None, "cannot read %s: %s" % (m.file, e)
    n = text.count(m.original)
    if n != 1:
        return None, "original text found %d times in %s (want exactly 1)" % (n, m.file)
    return text.replace(m.original, m.replacement), None


# ---- the scratch copy ---------------------------------------------------------------------------

def skip_dir(rel):
    top = rel.split(os.sep)[0]
    return top.startswith("build") or top == ".git" or os.path.basename(rel) in (
        "node_modules", "__pycache__")


def sync_tree(src, dst):
    """Make dst a copy of src (without build*/, .git, node_modules): files copied with their
    mtime when size or mtime differ, extra files removed. Returns files copied."""
    copied = 0
    want = set()
    for dirpath, dirnames, filenames in os.walk(src):
        rel_dir = os.path.relpath(dirpath, src)
        dirnames[:] = [d for d in dirnames
                       if not skip_dir(os.path.normpath(os.path.join(rel_dir, d)))]
        os.makedirs(os.path.join(dst, rel_dir), exist_ok=True)
        for fn in filenames:
            rel = os.path.normpath(os.path.join(rel_dir, fn))
            want.add(rel)
            s, d = os.path.join(src, rel), os.path.join(dst, rel)
            st = os.lstat(s)
            try:
                dt = os.lstat(d)
                if dt.st_size == st.st_size and int(dt.st_mtime) == int(st.st_mtime):
                    continue
            except FileNotFoundError:
                pass
            if os.path.islink(s):
                if os.path.lexists(d):
                    os.remove(d)
                os.symlink(os.readlink(s), d)
            else:
                shutil.copy2(s, d)
            copied += 1
    for dirpath, dirnames, filenames in os.walk(dst):
        rel_dir = os.path.relpath(dirpath, dst)
        dirnames[:] = [d for d in dirnames
                       if not skip_dir(os.path.normpath(os.path.join(rel_dir, d)))]
        for fn in filenames:
            rel = os.path.normpath(os.path.join(rel_dir, fn))
            if rel not in want:
                os.remove(os.path.join(dst, rel))
    return copied


def run(cmd, cwd, log, timeout=None):
    t0 = time.monotonic()
    with open(log, "ab") as f:
        f.write(("\n$ %s\n" % " ".join(cmd)).encode())
        f.flush()
        try:
            rc = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = -1
    return rc, time.monotonic() - t0


def build(tree, log):
    bdir = os.path.join(tree, "build")
    if not os.path.exists(os.path.join(bdir, "build.ninja")):
        rc, _ = run(["meson", "setup", bdir], tree, log)
        if rc:
            return rc
    rc, _ = run(["meson", "compile", "-C", bdir], tree, log)
    return rc


def run_test(tree, name, log):
    """(passed, seconds) for one meson test, without rebuilding."""
    rc, dt = run(["meson", "test", "-C", os.path.join(tree, "build"), "--no-rebuild",
                  "--print-errorlogs", name], tree, log)
    return rc == 0, dt


def list_tests(tree, log):
    out = subprocess.run(["meson", "test", "-C", os.path.join(tree, "build"), "--no-rebuild",
                          "--list"], cwd=tree, capture_output=True, text=True)
    if out.returncode:
        return None
    names = {}
    for line in out.stdout.splitlines():
        # "profcol:unit / merge_keys"
        if " / " in line:
            suite, name = line.rsplit(" / ", 1)
            names[name.strip()] = suite.split(":")[-1].strip()
    return names


def markdown(results):
    """The result table: a mutant's tests, those that failed in bold."""
    out = ["| mutant | file | the bug | tests (failing ones in bold) | result |",
           "|---|---|---|---|---|"]
    for m, st, killer, _ in results:
        killers = killer.split(", ") if st == "killed" else []
        tests = ", ".join("**%s**" % t if t in killers else t for t in m.tests)
        res = "killed" if st == "killed" else "**%s** %s" % (st, killer)
        out.append("| `%s` | `%s` | %s | %s | %s |" % (m.name, m.file, m.why, tests, res))
    return "\n".join(out) + "\n"


# ---- main ---------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="mutants to run (default: all)")
    ap.add_argument("--list", action="store_true", help="print the mutants and their tests")
    ap.add_argument("--check", action="store_true",
                    help="only check that every mutant applies to the working tree")
    ap.add_argument("--scratch", default=os.path.join(ROOT, "build-mutate"),
                    help="scratch directory (default: build-mutate/)")
    ap.add_argument("--markdown", help="write the result table to this file")
    ap.add_argument("--all", action="store_true",
                    help="run every test of a mutant, not only until the first kills it")
    a = ap.parse_args()

    names = [m.name for m in MUTANTS]
    if len(set(names)) != len(names):
        die("duplicate mutant names")
    chosen = MUTANTS
    if a.names:
        unknown = [n for n in a.names if n not in names]
        if unknown:
            die("unknown mutant(s): %s (see --list)" % ", ".join(unknown))
        chosen = [m for m in MUTANTS if m.name in a.names]

    if a.list:
        for m in chosen:
            print("%-38s %-34s %s\n%38s %s" % (m.name, m.file, " ".join(m.tests), "", m.why))
        return 0

    if a.check:
        errors = 0
        for m in chosen:
            _, err = apply_check(ROOT, m)
            if err:
                print("STALE    %s: %s" % (m.name, err))
                errors += 1
        print("%d mutant(s), %d stale" % (len(chosen), errors))
        return 1 if errors else 0

    tree = os.path.join(a.scratch, "tree")
    log = os.path.join(a.scratch, "mutate.log")
    os.makedirs(tree, exist_ok=True)
    open(log, "w").close()
    print("scratch copy: %s (log: %s)" % (tree, log))
    n = sync_tree(ROOT, tree)
    print("synced %d file(s); building the unmutated tree" % n)
    if build(tree, log):
        die("the unmutated tree does not build (see %s)" % log)
    suites = list_tests(tree, log)
    if suites is None:
        die("meson test --list failed")
    used = []
    for m in chosen:
        for t in m.tests:
            if t not in suites:
                die("mutant %s: no meson test named %r" % (m.name, t))
            if t not in used:
                used.append(t)
    # baseline: every test used passes without a mutant, and how long each takes
    cost = {}
    for t in used:
        ok, dt = run_test(tree, t, log)
        cost[t] = dt
        print("baseline %-28s %s %6.1fs" % (t, "ok  " if ok else "FAIL", dt))
        if not ok:
            die("test %s fails on the unmutated tree; fix that first (see %s)" % (t, log))

    results = []  # (mutant, status, killer, seconds)
    for i, m in enumerate(chosen, 1):
        path = os.path.join(tree, m.file)
        mutated, err = apply_check(tree, m)
        t0 = time.monotonic()
        if err:
            results.append((m, "STALE", err, 0.0))
            print("[%2d/%d] STALE    %s: %s" % (i, len(chosen), m.name, err), flush=True)
            continue
        with open(path, encoding="utf-8") as f:
            original = f.read()
        status, killer = "SURVIVED", ""
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(mutated)
            with open(log, "ab") as f:
                f.write(("\n==== mutant %s\n" % m.name).encode())
            if build(tree, log):
                status, killer = "BROKEN", "does not build"
            else:
                killers = []
                for t in sorted(m.tests, key=lambda x: (suites[x] != "unit", cost[x])):
                    ok, _ = run_test(tree, t, log)
                    if not ok:
                        killers.append(t)
                        if not a.all:
                            break
                if killers:
                    status, killer = "killed", ", ".join(killers)
        finally:
            with open(path, "w", encoding="utf-8") as f:
                f.write(original)
        dt = time.monotonic() - t0
        results.append((m, status, killer, dt))
        print("[%2d/%d] %-8s %-38s %s (%.0fs)" % (i, len(chosen), status, m.name,
                                                  killer and "by " + killer, dt), flush=True)
    build(tree, log)  # leave the scratch build unmutated

    counts = {}
    for _, st, _, _ in results:
        counts[st] = counts.get(st, 0) + 1
    print("\n%d mutant(s): %s" % (len(results), ", ".join(
        "%d %s" % (v, k) for k, v in sorted(counts.items()))))
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(markdown(results))
    return 0 if all(st == "killed" for _, st, _, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
