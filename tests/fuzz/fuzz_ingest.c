/* Pyroscope ingest parsing: the first byte picks the parser, the rest is its input.
 *   0: name=app{k=v} grammar          1: from/until times      2: multipart/form-data body
 *   3: collapsed stacks (folded)      4: collapsed stacks (lines)  5: sample_type_config JSON
 *   6: Connect PushRequest (protobuf), each raw_profile through the pprof translator
 * Whatever parses must give a batch that validates. */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "pdata/pdata.h"
#include "formats/pprof.h"
#include "pyroscope_push.pb-c.h"
#include "formats/folded.h"
#include "receivers/pyroscope/ingest.h"

FUZZ_INIT_QUIET_LOGS()

static void check_valid(pc_batch *b)
{
    int64_t rejected = 0;
    pc_error err = {0};
    FUZZ_ASSERT(pc_batch_validate(b, &rejected, &err) == 0 && rejected == 0,
                "parsed input does not validate: %s", err.msg);
}

static void fuzz_folded(const uint8_t *p, size_t n, int lines)
{
    /* first line: the app name; the rest: stacks */
    const uint8_t *nl = memchr(p, '\n', n);
    size_t al = nl ? (size_t)(nl - p) : n;
    char *app = fuzz_cstr(p, al);
    pc_format_opts o = {.app = app, .sample_rate = 100, .time_ns = 1, .duration_ns = 10};
    pc_batch *b = NULL;
    const char *text = nl ? (const char *)nl + 1 : "";
    size_t tl = nl ? n - al - 1 : 0;
    pc_format_decode_fn decode = lines ? pc_lines_decode : pc_folded_decode;
    if (decode((const uint8_t *)text, tl, &o, &b, NULL) == 0) {
        check_valid(b);
        pc_batch_unref(b);
    }
    free(app);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    pc_error e = {0};
    switch (data[0] % 7) {
    case 0: {
        char *s = fuzz_cstr(p, n);
        pc_ingest_name name;
        if (pc_ingest_parse_name(s, &name, &e) == 0) {
            FUZZ_ASSERT(name.app && *name.app, "empty app name accepted");
            pc_ingest_name_free(&name);
        }
        free(s);
        break;
    }
    case 1: {
        char *s = fuzz_cstr(p, n);
        (void)pc_ingest_parse_time(s, 1700000000000000000LL);
        free(s);
        break;
    }
    case 2: {
        pc_form_part parts[16];
        int np = pc_multipart_parse(p, n, "XyZ", parts, 16, &e);
        for (int i = 0; i < np; i++)
            FUZZ_ASSERT(parts[i].data >= p && parts[i].data + parts[i].len <= p + n,
                        "part %d outside the body", i);
        break;
    }
    case 3: fuzz_folded(p, n, 0); break;
    case 4: fuzz_folded(p, n, 1); break;
    case 5: {
        pc_format_opts o = {.app = "app.mutex_count"};
        pc_batch *b = NULL;
        if (pc_folded_decode((const uint8_t *)"a;b 3\n", 6, &o, &b, &e) == 0) {
            if (pc_ingest_apply_sample_type_config(b, 0, (const char *)p, n, &e) == 0)
                check_valid(b);
            pc_batch_unref(b);
        }
        break;
    }
    case 6: {
        Push__V1__PushRequest *pr = push__v1__push_request__unpack(NULL, n, p);
        if (!pr) break;
        pc_batch *b = NULL;
        for (size_t s = 0; s < pr->n_series; s++)
            for (size_t k = 0; k < pr->series[s]->n_samples; k++) {
                const ProtobufCBinaryData *raw = &pr->series[s]->samples[k]->raw_profile;
                pc_format_opts o = {.max_bytes = 1 << 20};
                (void)pc_pprof_decode(raw->data, raw->len, &o, &b, NULL);
            }
        if (b) {
            check_valid(b);
            pc_batch_unref(b);
        }
        push__v1__push_request__free_unpacked(pr, NULL);
        break;
    }
    }
    return 0;
}
