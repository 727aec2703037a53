/* pdata/delta.h: deltas of cumulative profiles, on pprof decoded by the one translator. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "formats/pprof.h"
#include "pdata/delta.h"
#include "pdata/pdata.h"
#include "pprof.pb-c.h"

typedef Perftools__Profiles__Profile pp_profile;

/* One sample: a stack of function letters, leaf first ("ba": b called by a), its two values
 * (alloc_objects, inuse_space) and an optional string label k=<label>. */
typedef struct smp {
    const char *stack;
    int64_t alloc, inuse;
    const char *label;
} smp;

enum { S_EMPTY, S_ALLOC, S_COUNT, S_INUSE, S_BYTES, S_K, S_FN0 }; /* then "a".."d", labels */

/* A heap-like pprof of the samples, decoded into a batch. addr_shift moves every address (a
 * rebuilt binary): the stacks are then other stacks. */
static pc_batch *heap(const smp *s, size_t n, uint64_t time_ns, uint64_t addr_shift)
{
    typedef Perftools__Profiles__ValueType VT;
    typedef Perftools__Profiles__Function FN;
    typedef Perftools__Profiles__Location LC;
    typedef Perftools__Profiles__Line LN;
    typedef Perftools__Profiles__Sample SM;
    typedef Perftools__Profiles__Label LB;
    char *strs[S_FN0 + 4 + 8] = {
        "", "alloc_objects", "count", "inuse_space", "bytes", "k", "a", "b", "c", "d"};
    size_t n_str = S_FN0 + 4;
    pp_profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
    VT st0 = PERFTOOLS__PROFILES__VALUE_TYPE__INIT, st1 = st0;
    st0.type = S_ALLOC, st0.unit = S_COUNT, st1.type = S_INUSE, st1.unit = S_BYTES;
    VT *sts[] = {&st0, &st1};
    p.n_sample_type = 2, p.sample_type = sts, p.time_nanos = (int64_t)time_ns;
    FN fn[4];
    LN ln[4];
    LC lc[4];
    FN *fns[4];
    LC *lcs[4];
    LN *lns[4][1];
    for (int i = 0; i < 4; i++) {
        fn[i] = (FN)PERFTOOLS__PROFILES__FUNCTION__INIT;
        fn[i].id = (uint64_t)i + 1, fn[i].name = S_FN0 + i;
        ln[i] = (LN)PERFTOOLS__PROFILES__LINE__INIT;
        ln[i].function_id = (uint64_t)i + 1, ln[i].line = 10 + i;
        lns[i][0] = &ln[i];
        lc[i] = (LC)PERFTOOLS__PROFILES__LOCATION__INIT;
        lc[i].id = (uint64_t)i + 1, lc[i].address = 0x1000 + 0x10 * (uint64_t)i + addr_shift;
        lc[i].n_line = 1, lc[i].line = lns[i];
        fns[i] = &fn[i], lcs[i] = &lc[i];
    }
    p.n_function = 4, p.function = fns, p.n_location = 4, p.location = lcs;
    SM sm[8];
    SM *sms[8];
    LB lb[8];
    LB *lbs[8][1];
    uint64_t ids[8][4];
    int64_t vals[8][2];
    for (size_t i = 0; i < n; i++) {
        sm[i] = (SM)PERFTOOLS__PROFILES__SAMPLE__INIT;
        size_t depth = strlen(s[i].stack);
        for (size_t k = 0; k < depth; k++)
            ids[i][k] = (uint64_t)(s[i].stack[k] - 'a') + 1;
        sm[i].n_location_id = depth, sm[i].location_id = ids[i];
        vals[i][0] = s[i].alloc, vals[i][1] = s[i].inuse;
        sm[i].n_value = 2, sm[i].value = vals[i];
        if (s[i].label) {
            lb[i] = (LB)PERFTOOLS__PROFILES__LABEL__INIT;
            strs[n_str] = (char *)s[i].label;
            lb[i].key = S_K, lb[i].str = (int64_t)n_str++;
            lbs[i][0] = &lb[i];
            sm[i].n_label = 1, sm[i].label = lbs[i];
        }
        sms[i] = &sm[i];
    }
    p.n_sample = n, p.sample = sms;
    p.n_string_table = n_str, p.string_table = strs;
    size_t len = perftools__profiles__profile__get_packed_size(&p);
    uint8_t *buf = malloc(len + 1);
    perftools__profiles__profile__pack(&p, buf);
    pc_batch *b = NULL;
    pc_error e = {0};
    int rc = pc_pprof_decode(buf, len, NULL, &b, &e);
    free(buf);
    CHECK_EQ_INT(rc, 0);
    return b;
}

static const char *const cumulative[] = {"alloc_objects", NULL};

/* The profile of sample type t. */
static const pc_profile *prof(const pc_batch *b, const char *t)
{
    pc_profile_iter it = {0};
    while (pc_profile_next(b->req, &it))
        if (!strcmp(pc_dict_str(b->req->dictionary, it.prof->sample_type->type_strindex), t))
            return it.prof;
    return NULL;
}

/* The value of the sample whose stack is `stack` (and label, or none), summed; -999 if absent. */
static int64_t value(const pc_batch *b, const char *t, const char *stack, const char *label)
{
    const pc_dictionary *d = b->req->dictionary;
    const pc_profile *p = prof(b, t);
    int64_t sum = -999;
    for (size_t i = 0; p && i < p->n_samples; i++) {
        const pc_sample *s = p->samples[i];
        const pc_stack *st = d->stack_table[s->stack_index];
        char names[8] = "";
        for (size_t k = 0; k < st->n_location_indices && k < 7; k++) {
            const pc_location *l = d->location_table[st->location_indices[k]];
            names[k] =
                pc_dict_str(d, d->function_table[l->lines[0]->function_index]->name_strindex)[0];
        }
        const char *lv = NULL;
        if (s->n_attribute_indices)
            lv = pc_anyvalue_str(d, pc_dict_attr_at(d, s->attribute_indices[0])->value);
        if (strcmp(names, stack) || (label ? !lv || strcmp(lv, label) : lv != NULL)) continue;
        sum = (sum == -999 ? 0 : sum) + s->values[0];
    }
    return sum;
}

static void test_first_then_deltas(void)
{
    pc_delta *d = pc_delta_new();
    smp s1[] = {{"ba", 10, 100, NULL}, {"ca", 5, 50, NULL}, {"ca", 7, 0, "x"}};
    pc_batch *b = heap(s1, 3, 1000, 0);
    CHECK_EQ_INT(pc_delta_apply(d, b, cumulative), PC_DELTA_FIRST);
    CHECK_EQ_INT(value(b, "alloc_objects", "ba", NULL), 10); /* left as it was */
    pc_batch_unref(b);

    /* ba grew by 4, ca unchanged (dropped), the labelled ca grew by 1, da is new (all of it);
     * ba appears twice: merged into the first */
    smp s2[] = {{"ba", 12, 90, NULL},
                {"ca", 5, 40, NULL},
                {"ca", 8, 0, "x"},
                {"da", 3, 30, NULL},
                {"ba", 2, 5, NULL}};
    b = heap(s2, 5, 6000, 0);
    CHECK_EQ_INT(pc_delta_apply(d, b, cumulative), PC_DELTA_OK);
    CHECK_EQ_INT(value(b, "alloc_objects", "ba", NULL), 4);
    CHECK_EQ_INT(value(b, "alloc_objects", "ca", NULL), -999);
    CHECK_EQ_INT(value(b, "alloc_objects", "ca", "x"), 1);
    CHECK_EQ_INT(value(b, "alloc_objects", "da", NULL), 3);
    CHECK_EQ_INT(prof(b, "alloc_objects")->n_samples, 3);
    CHECK_EQ_INT(prof(b, "alloc_objects")->duration_nano, 5000);
    /* a gauge passes as it came, duplicates and all */
    CHECK_EQ_INT(prof(b, "inuse_space")->n_samples, 5);
    CHECK_EQ_INT(value(b, "inuse_space", "ba", NULL), 95);
    CHECK_EQ_INT(value(b, "inuse_space", "ca", NULL), 40);
    pc_batch_unref(b);

    /* nothing changed: nothing left */
    b = heap(s2, 5, 7000, 0);
    CHECK_EQ_INT(pc_delta_apply(d, b, cumulative), PC_DELTA_OK);
    CHECK_EQ_INT(prof(b, "alloc_objects")->n_samples, 0);
    pc_batch_unref(b);
    pc_delta_free(d);
}

static void test_reset_starts_a_new_series(void)
{
    pc_delta *d = pc_delta_new();
    smp s1[] = {{"ba", 10, 0, NULL}, {"ca", 5, 0, NULL}};
    pc_batch *b = heap(s1, 2, 1000, 0);
    CHECK_EQ_INT(pc_delta_apply(d, b, cumulative), PC_DELTA_FIRST);
    pc_batch_unref(b);
    /* the process restarted: ba went down, ca grew: no negative values, a new series */
    smp s2[] = {{"ba", 2, 0, NULL}, {"ca", 9, 0, NULL}};
    b = heap(s2, 2, 2000, 0);
    CHECK_EQ_INT(pc_delta_apply(d, b, cumulative), PC_DELTA_RESET);
    pc_batch_unref(b);
    smp s3[] = {{"ba", 6, 0, NULL}, {"ca", 9, 0, NULL}};
    b = heap(s3, 2, 3000, 0);
    CHECK_EQ_INT(pc_delta_apply(d, b, cumulative), PC_DELTA_OK);
    CHECK_EQ_INT(value(b, "alloc_objects", "ba", NULL), 4);
    CHECK_EQ_INT(prof(b, "alloc_objects")->n_samples, 1);
    pc_batch_unref(b);
    /* a stack that vanished is a counter gone to 0: a new series too */
    smp s4[] = {{"ba", 6, 0, NULL}};
    b = heap(s4, 1, 4000, 0);
    CHECK_EQ_INT(pc_delta_apply(d, b, cumulative), PC_DELTA_RESET);
    pc_batch_unref(b);
    pc_delta_free(d);
}

static void test_key_is_content(void)
{
    pc_delta *d = pc_delta_new();
    /* the same stacks in another order (other dictionary indices) are the same keys */
    smp s1[] = {{"ba", 10, 0, NULL}, {"cb", 5, 0, NULL}, {"dc", 1, 0, NULL}};
    smp s2[] = {{"dc", 2, 0, NULL}, {"cb", 5, 0, NULL}, {"ba", 11, 0, NULL}};
    pc_batch *b = heap(s1, 3, 1000, 0);
    pc_delta_apply(d, b, cumulative);
    pc_batch_unref(b);
    b = heap(s2, 3, 2000, 0);
    CHECK_EQ_INT(pc_delta_apply(d, b, cumulative), PC_DELTA_OK);
    CHECK_EQ_INT(value(b, "alloc_objects", "dc", NULL), 1);
    CHECK_EQ_INT(value(b, "alloc_objects", "ba", NULL), 1);
    CHECK_EQ_INT(value(b, "alloc_objects", "cb", NULL), -999);
    pc_batch_unref(b);
    /* other addresses are other stacks: the old ones vanished, a new series */
    b = heap(s2, 3, 3000, 0x100);
    CHECK_EQ_INT(pc_delta_apply(d, b, cumulative), PC_DELTA_RESET);
    pc_batch_unref(b);
    CHECK_EQ_INT(pc_delta_size(d), 6);
    pc_delta_free(d);
}

int main(void)
{
    RUN(test_first_then_deltas);
    RUN(test_reset_starts_a_new_series);
    RUN(test_key_is_content);
    return check_report();
}
