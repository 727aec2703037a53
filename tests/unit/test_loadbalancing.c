/* The loadbalancing exporter's parts: the consistent-hash ring (sdk/ring.h) against its
 * documented formula written again here, its stability when one of N backends comes or goes,
 * two rings agreeing; the routing of profile samples and spans (the exporter's route hook, by
 * trace id and by service) with every part checked against where its items must go, computed
 * from the input, and totals kept; and the exporter core's routes (a made-up routed exporter):
 * each backend gets its keys and counts them, what a backend that left still had is routed
 * again (from memory and from the persistent queue) and counted, nothing is lost. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "check.h"
#include "pdata/split.h"
#include "sdk/exporter.h"
#include "sdk/ring.h"
#include "sdk/telemetry.h"
#include "proc_driver.h"
#include "testloop.h"

extern const pc_component_type pc_exporter_loadbalancing;

static uv_loop_t *loop;

/* ---- the ring, by its documented formula ---- */

static uint64_t doc_hash(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a 64 */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 30; /* splitmix64's finalizer */
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    return h ^ h >> 31;
}

/* The owner of k by brute force over every point "<member>#<v>" (members given sorted). */
static const char *doc_owner(const char *const *members, size_t n, uint64_t k)
{
    const char *best = NULL, *lowest = NULL;
    uint64_t best_h = 0, low_h = 0;
    for (size_t m = 0; m < n; m++)
        for (unsigned v = 0; v < PC_RING_VNODES; v++) {
            char p[128];
            int len = snprintf(p, sizeof p, "%s#%u", members[m], v);
            uint64_t h = doc_hash(p, (size_t)len);
            if (!lowest || h < low_h) lowest = members[m], low_h = h;
            if (h >= k && (!best || h < best_h)) best = members[m], best_h = h;
        }
    return best ? best : lowest;
}

static uint64_t key_hash(int i)
{
    char k[32];
    int n = snprintf(k, sizeof k, "trace-%d", i);
    return doc_hash(k, (size_t)n);
}

/* pc_ring_hash and pc_ring_owner are the formula in ring.h. */
static void test_ring_is_the_documented_formula(void)
{
    CHECK(pc_ring_hash("abc", 3) == doc_hash("abc", 3));
    CHECK(pc_ring_hash("", 0) == doc_hash("", 0));
    const char *members[] = {"10.0.0.1:4317", "10.0.0.2:4317", "gw-c:4317"};
    pc_ring *r = pc_ring_new(members, 3);
    int bad = 0;
    for (int i = 0; i < 300; i++) {
        uint64_t k = key_hash(i);
        if (strcmp(pc_ring_member(r, pc_ring_owner(r, k)), doc_owner(members, 3, k)) != 0) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    /* the extremes wrap to the lowest point */
    CHECK_STR(pc_ring_member(r, pc_ring_owner(r, UINT64_MAX)), doc_owner(members, 3, UINT64_MAX));
    CHECK_STR(pc_ring_member(r, pc_ring_owner(r, 0)), doc_owner(members, 3, 0));
    pc_ring_unref(r);
    pc_ring *empty = pc_ring_new(NULL, 0);
    CHECK(pc_ring_owner(empty, 1) == PC_RING_NONE);
    pc_ring_unref(empty);
}

#define NKEYS 100000

static void owners(const pc_ring *r, const char **out)
{
    for (int i = 0; i < NKEYS; i++)
        out[i] = pc_ring_member(r, pc_ring_owner(r, key_hash(i)));
}

/* Adding a fifth backend to four moves about 1/5 of 100,000 keys, all of them to the new one;
 * removing one of five moves only that one's keys, about 1/5; every backend owns about 1/N. */
static void test_ring_stability(void)
{
    const char *five[] = {"gw-0:4317", "gw-1:4317", "gw-2:4317", "gw-3:4317", "gw-4:4317"};
    pc_ring *r4 = pc_ring_new(five, 4), *r5 = pc_ring_new(five, 5);
    const char **a = malloc(NKEYS * sizeof *a), **b = malloc(NKEYS * sizeof *b);
    owners(r4, a);
    owners(r5, b);
    int moved = 0, moved_elsewhere = 0, share[5] = {0};
    for (int i = 0; i < NKEYS; i++) {
        if (strcmp(a[i], b[i]) != 0) {
            moved++;
            if (strcmp(b[i], "gw-4:4317") != 0) moved_elsewhere++;
        }
        share[b[i][3] - '0']++;
    }
    double f = (double)moved / NKEYS;
    fprintf(stderr, "  add 1 to 4: %.4f of the keys moved (1/5 = 0.2)\n", f);
    CHECK(f > 0.2 - 0.03 && f < 0.2 + 0.03);
    CHECK_EQ_INT(moved_elsewhere, 0);
    for (int m = 0; m < 5; m++) {
        double s = (double)share[m] / NKEYS;
        fprintf(stderr, "  gw-%d owns %.4f\n", m, s);
        CHECK(s > 0.2 * 0.8 && s < 0.2 * 1.2);
    }
    /* remove gw-2 from five: only its keys move, spread over the others */
    const char *four[] = {"gw-0:4317", "gw-1:4317", "gw-3:4317", "gw-4:4317"};
    pc_ring *rm = pc_ring_new(four, 4);
    owners(rm, a);
    moved = 0;
    int wrong = 0, to[5] = {0};
    for (int i = 0; i < NKEYS; i++) {
        bool was = !strcmp(b[i], "gw-2:4317");
        if (strcmp(a[i], b[i]) != 0) {
            moved++;
            to[a[i][3] - '0']++;
        }
        if (was == !strcmp(a[i], b[i])) wrong++; /* moved iff it was on gw-2 */
    }
    f = (double)moved / NKEYS;
    fprintf(stderr, "  remove 1 of 5: %.4f of the keys moved (1/5 = 0.2)\n", f);
    CHECK(f > 0.2 - 0.03 && f < 0.2 + 0.03);
    CHECK_EQ_INT(wrong, 0);
    for (int m = 0; m < 5; m++) /* spread: each remaining one took a real share */
        if (m != 2) CHECK(to[m] > moved / 8);
    free(a);
    free(b);
    pc_ring_unref(r4);
    pc_ring_unref(r5);
    pc_ring_unref(rm);
}

/* Two sidecars with the same backends, listed in another order (and one twice), agree. */
static void test_two_rings_agree(void)
{
    const char *x[] = {"10.1.0.7:4317", "10.1.0.3:4317", "10.1.0.5:4317"};
    const char *y[] = {"10.1.0.5:4317", "10.1.0.7:4317", "10.1.0.3:4317", "10.1.0.5:4317"};
    pc_ring *a = pc_ring_new(x, 3), *b = pc_ring_new(y, 4);
    CHECK_EQ_INT(pc_ring_size(b), 3);
    int differ = 0;
    for (int i = 0; i < NKEYS; i++)
        if (strcmp(pc_ring_member(a, pc_ring_owner(a, key_hash(i))),
                   pc_ring_member(b, pc_ring_owner(b, key_hash(i)))) != 0)
            differ++;
    CHECK_EQ_INT(differ, 0);
    pc_ring_unref(a);
    pc_ring_unref(b);
}

/* ---- routing profiles and spans (the exporter's route hook) ---- */

#define NSERV 3
#define NSAMP 40
#define NLINK 8 /* 1..6 with trace ids, 7 a span id without a trace id */
static const char *const services[NSERV] = {"checkout", "cart", "search"};

static void trace_id(int l, uint8_t out[16])
{
    for (int i = 0; i < 16; i++)
        out[i] = (uint8_t)(l * 17 + i * 3 + 1);
}

/* The link index of sample k of resource r: none for every fifth, the trace-less link for
 * every seventh, else one of six traces. */
static int link_of(int r, int k)
{
    if (k % 5 == 4) return 0;
    if (k % 7 == 6) return 7;
    return 1 + (r * NSAMP + k) % 6;
}

/* NSERV resources, one profile each of NSAMP samples; sample k of resource r has the one value
 * r * 1000 + k + 1 (so a value names its sample), a thread attribute and link_of(r, k). */
static pc_batch *profiles_fixture(void)
{
    pc_buf j = {0};
    pc_buf_printf(&j, "{\"resourceProfiles\":[");
    for (int r = 0; r < NSERV; r++) {
        pc_buf_printf(&j,
                      "%s{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{"
                      "\"stringValue\":\"%s\"}}]},\"scopeProfiles\":[{\"profiles\":[{"
                      "\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},\"samples\":[",
                      r ? "," : "", services[r]);
        for (int k = 0; k < NSAMP; k++)
            pc_buf_printf(&j,
                          "%s{\"stackIndex\":%d,\"values\":[\"%d\"],\"attributeIndices\":[%d],"
                          "\"linkIndex\":%d}",
                          k ? "," : "", 1 + k % 2, r * 1000 + k + 1, 1 + k % 3, link_of(r, k));
        pc_buf_printf(&j, "]}]}]}");
    }
    pc_buf_printf(&j, "],\"dictionary\":{\"mappingTable\":[{}],\"locationTable\":[{},"
                      "{\"lines\":[{\"functionIndex\":1}]},{\"lines\":[{\"functionIndex\":2}]}],"
                      "\"functionTable\":[{},{\"nameStrindex\":3},{\"nameStrindex\":4}],"
                      "\"linkTable\":[{}");
    for (int l = 1; l < NLINK; l++) {
        uint8_t t[16];
        trace_id(l, t);
        pc_buf_printf(&j, ",{\"traceId\":\"");
        for (int i = 0; i < 16; i++)
            pc_buf_printf(&j, "%02x", l == 7 ? 0 : t[i]);
        pc_buf_printf(&j, "\",\"spanId\":\"00000000000000%02x\"}", l);
    }
    pc_buf_printf(&j, "],\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"main\",\"work\","
                      "\"thread\",\"w0\",\"w1\",\"w2\"],\"attributeTable\":[{}");
    for (int a = 0; a < 3; a++)
        pc_buf_printf(&j, ",{\"keyStrindex\":5,\"value\":{\"stringValueStrindex\":%d}}", 6 + a);
    pc_buf_printf(&j, "],\"stackTable\":[{},{\"locationIndices\":[1]},{\"locationIndices\":[2,1]}"
                      "]}}");
    pc_buf_append(&j, "", 1);
    pc_batch *b = batch_from_json((const char *)j.data);
    pc_buf_free(&j);
    return b;
}

static size_t owner_of_bytes(const pc_ring *ring, const void *p, size_t n)
{
    return pc_ring_owner(ring, doc_hash(p, n));
}

/* Where sample k of resource r must go: the owner of its link's trace id, else of its service
 * (by_trace), or always of its service. */
static size_t want_part(const pc_ring *ring, int r, int k, bool by_trace)
{
    int l = link_of(r, k);
    if (by_trace && l >= 1 && l <= 6) {
        uint8_t t[16];
        trace_id(l, t);
        return owner_of_bytes(ring, t, 16);
    }
    return owner_of_bytes(ring, services[r], strlen(services[r]));
}

static driver *lb_exporter(const char *routing_key)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "%s%s%sprotocol:\n  otlp:\n    tls:\n      insecure: true\n"
             "resolver:\n  static:\n    hostnames: [a:1, b:2, c:3, d:4]\n",
             routing_key ? "routing_key: " : "", routing_key ? routing_key : "",
             routing_key ? "\n" : "");
    return driver_make(&pc_exporter_loadbalancing, yaml);
}

/* Split b by the exporter's hook over ring; check each part against want (a value's part), the
 * sums and each part's dictionary (valid, holding only the links its samples use). */
static void check_profile_split(const char *routing_key, bool by_trace)
{
    driver *d = lb_exporter(routing_key);
    pc_exporter *e = pc_exporter_of(&d->c);
    const char *names[] = {"a:1", "b:2", "c:3", "d:4"};
    pc_ring *ring = pc_ring_new(names, 4);
    pc_batch *b = profiles_fixture();
    pc_batch *parts[4];
    pc_exporter_loadbalancing.exporter->route(e, ring, b, parts);
    int seen[NSERV][NSAMP] = {{0}};
    long long total = 0;
    int misrouted = 0, nparts = 0;
    for (size_t p = 0; p < 4; p++) {
        if (!parts[p]) continue;
        nparts++;
        CHECK(parts[p] != b);
        int64_t rejected = 0;
        pc_error err = {0};
        CHECK_EQ_INT(pc_batch_validate(parts[p], &rejected, &err), 0);
        const pc_request *q = parts[p]->req;
        bool link_used[NLINK] = {false};
        size_t links_used = 0;
        for (size_t r = 0; r < q->n_resource_profiles; r++) {
            const pc_profile *pr = q->resource_profiles[r]->scope_profiles[0]->profiles[0];
            for (size_t s = 0; s < pr->n_samples; s++) {
                int v = (int)pr->samples[s]->values[0], rr = (v - 1) / 1000, k = (v - 1) % 1000;
                total += v;
                seen[rr][k]++;
                if (want_part(ring, rr, k, by_trace) != p) misrouted++;
                int l = link_of(rr, k);
                if (l && !link_used[l]) link_used[l] = true, links_used++;
                /* the sample's service came along */
                const char *svc = pc_resource_attr_str(
                    q->dictionary, q->resource_profiles[r]->resource, "service.name");
                CHECK_STR(svc, services[rr]);
            }
        }
        CHECK_EQ_INT(q->dictionary->n_link_table, 1 + links_used); /* compact */
        pc_batch_unref(parts[p]);
    }
    long long want_total = 0;
    int once = 0;
    for (int r = 0; r < NSERV; r++)
        for (int k = 0; k < NSAMP; k++) {
            want_total += r * 1000 + k + 1;
            once += seen[r][k] == 1;
        }
    CHECK_EQ_INT(misrouted, 0);
    CHECK_EQ_INT(once, NSERV * NSAMP);
    CHECK_EQ_INT(total, want_total);
    CHECK(nparts >= 2); /* the fixture really was split */
    pc_batch_unref(b);
    pc_ring_unref(ring);
    driver_free(d);
}

static void test_split_profiles_by_trace_id(void)
{
    check_profile_split("traceID", true);
}

static void test_split_profiles_by_service(void)
{
    check_profile_split("service", false);
    check_profile_split(NULL, false); /* profiles' default */
}

/* routing_key resource and attributes: every resource (attributes: every value of the sample
 * attribute "thread", looked up after the resource and the scope) in exactly one part, the
 * groups spread over more than one part, every sample once. */
static void check_grouped_split(const char *yaml_key, bool by_thread)
{
    driver *d = lb_exporter(yaml_key);
    const char *names[] = {"a:1", "b:2", "c:3", "d:4"};
    pc_ring *ring = pc_ring_new(names, 4);
    pc_batch *b = profiles_fixture(), *parts[4];
    pc_exporter_loadbalancing.exporter->route(pc_exporter_of(&d->c), ring, b, parts);
    int group_part[NSERV] = {-1, -1, -1}, seen = 0, split_groups = 0;
    bool used[4] = {false};
    for (int p = 0; p < 4; p++) {
        if (!parts[p]) continue;
        const pc_request *q = parts[p]->req;
        for (size_t r = 0; r < q->n_resource_profiles; r++) {
            const pc_profile *pr = q->resource_profiles[r]->scope_profiles[0]->profiles[0];
            for (size_t k = 0; k < pr->n_samples; k++) {
                int v = (int)pr->samples[k]->values[0];
                int g = by_thread ? ((v - 1) % 1000) % 3 : (v - 1) / 1000; /* thread w<k%3> */
                if (group_part[g] < 0) group_part[g] = p;
                if (group_part[g] != p) split_groups++;
                used[p] = true;
                seen++;
            }
        }
        pc_batch_unref(parts[p]);
    }
    CHECK_EQ_INT(seen, NSERV * NSAMP);
    CHECK_EQ_INT(split_groups, 0);
    CHECK(used[0] + used[1] + used[2] + used[3] >= 2);
    pc_batch_unref(b);
    pc_ring_unref(ring);
    driver_free(d);
}

static void test_split_by_resource_and_attributes(void)
{
    check_grouped_split("resource", false);
    check_grouped_split("attributes\nrouting_attributes: [thread]", true);
}

/* Everything to one backend: the batch itself goes, no copy. */
static void test_split_one_part_is_no_copy(void)
{
    driver *d = lb_exporter("service");
    const char *one[] = {"a:1"};
    pc_ring *ring = pc_ring_new(one, 1);
    pc_batch *b = profiles_fixture(), *parts[1];
    pc_exporter_loadbalancing.exporter->route(pc_exporter_of(&d->c), ring, b, parts);
    CHECK(parts[0] == b);
    pc_batch_unref(parts[0]);
    pc_batch_unref(b);
    pc_ring_unref(ring);
    driver_free(d);
}

#define NSPANS 30

static void span_trace(int i, uint8_t t[16])
{
    for (int k = 0; k < 16; k++)
        t[k] = (uint8_t)((i % 9) * 29 + k + 7);
}

/* Two services, NSPANS spans each over 9 traces; span i's name is "s<r>-<i>". */
static pc_batch *spans_fixture(void)
{
    pc_buf j = {0};
    pc_buf_printf(&j, "{\"resourceSpans\":[");
    for (int r = 0; r < 2; r++) {
        pc_buf_printf(&j,
                      "%s{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{"
                      "\"stringValue\":\"%s\"}}]},\"scopeSpans\":[{\"scope\":{\"name\":\"s\"},"
                      "\"spans\":[",
                      r ? "," : "", services[r]);
        for (int i = 0; i < NSPANS; i++) {
            uint8_t t[16];
            span_trace(r * NSPANS + i, t);
            pc_buf_printf(&j, "%s{\"traceId\":\"", i ? "," : "");
            for (int k = 0; k < 16; k++)
                pc_buf_printf(&j, "%02x", t[k]);
            pc_buf_printf(&j, "\",\"spanId\":\"00000000000000%02x\",\"name\":\"s%d-%d\"}", i + 1, r,
                          i);
        }
        pc_buf_printf(&j, "]}]}");
    }
    pc_buf_printf(&j, "]}");
    pc_batch *b = NULL;
    pc_error e = {0};
    CHECK_EQ_INT(pc_batch_decode(PC_SIGNAL_TRACES, j.data, j.len, true, NULL, &b, &e), 0);
    pc_buf_free(&j);
    return b;
}

static void check_span_split(const char *routing_key, bool by_trace)
{
    driver *d = lb_exporter(routing_key);
    const char *names[] = {"a:1", "b:2", "c:3", "d:4"};
    pc_ring *ring = pc_ring_new(names, 4);
    pc_batch *b = spans_fixture(), *parts[4];
    pc_exporter_loadbalancing.exporter->route(pc_exporter_of(&d->c), ring, b, parts);
    int seen[2][NSPANS] = {{0}}, misrouted = 0, nparts = 0;
    for (size_t p = 0; p < 4; p++) {
        if (!parts[p]) continue;
        nparts++;
        const pc_traces_request *q = (const pc_traces_request *)parts[p]->msg;
        for (size_t r = 0; r < q->n_resource_spans; r++)
            for (size_t s = 0; s < q->resource_spans[r]->scope_spans[0]->n_spans; s++) {
                const pc_span *sp = q->resource_spans[r]->scope_spans[0]->spans[s];
                int rr, i;
                CHECK_EQ_INT(sscanf(sp->name, "s%d-%d", &rr, &i), 2);
                seen[rr][i]++;
                uint8_t t[16];
                span_trace(rr * NSPANS + i, t);
                size_t want = by_trace ? owner_of_bytes(ring, t, 16)
                                       : owner_of_bytes(ring, services[rr], strlen(services[rr]));
                if (want != p) misrouted++;
                CHECK_STR(q->resource_spans[r]->resource->attributes[0]->value->string_value,
                          services[rr]);
            }
        pc_batch_unref(parts[p]);
    }
    int once = 0;
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < NSPANS; i++)
            once += seen[r][i] == 1;
    CHECK_EQ_INT(once, 2 * NSPANS);
    CHECK_EQ_INT(misrouted, 0);
    CHECK(nparts >= 2);
    pc_batch_unref(b);
    pc_ring_unref(ring);
    driver_free(d);
}

static void test_split_spans(void)
{
    check_span_split("traceID", true);
    check_span_split(NULL, true); /* traces' default */
    check_span_split("service", false);
}

/* ---- the core's routes, with a made-up routed exporter ---- */

typedef struct fr_cfg {
    pc_sender_cfg sender;
} fr_cfg;

static const pc_cfg_key fr_keys[] = {
    {"", PC_CFG_GROUP, "", offsetof(fr_cfg, sender), "the sending queue", pc_sender_keys},
    {0},
};

#define NB 4
static struct {
    const char *names[NB];
    bool down[NB];          /* answers every send with a retryable failure */
    long long received[NB]; /* sample values summed, per backend */
    int open[NB];           /* routes open */
} fr = {{"a:1", "b:2", "c:3", "d:4"}, {false}, {0}, {0}};

typedef struct fr_req {
    pc_export_req r;
    uv_timer_t t;
    int b;
} fr_req;

static int fr_index(const char *name)
{
    for (int i = 0; i < NB; i++)
        if (!strcmp(fr.names[i], name)) return i;
    return -1;
}

static uint32_t fr_part(void *arg, const pc_batch *b, size_t r, size_t s, size_t p, size_t i)
{
    (void)s, (void)p, (void)i;
    const char *svc = pc_resource_attr_str(b->req->dictionary,
                                           b->req->resource_profiles[r]->resource, "service.name");
    return (uint32_t)pc_ring_owner(arg, pc_ring_hash(svc, strlen(svc)));
}

static void fr_route(pc_exporter *e, const pc_ring *ring, const pc_batch *b, pc_batch **parts)
{
    (void)e;
    pc_batch_route(b, (uint32_t)pc_ring_size(ring), fr_part, (void *)ring, parts);
}

static void *fr_open(pc_exporter *e, const char *name, pc_error *err)
{
    (void)e, (void)err;
    int i = fr_index(name);
    fr.open[i]++;
    return &fr.names[i];
}

static void fr_close(pc_exporter *e, void *target, void (*done)(void *), void *arg)
{
    (void)e;
    fr.open[(const char **)target - fr.names]--;
    done(arg);
}

static long long values(const pc_batch *b)
{
    long long v = 0;
    for (size_t r = 0; r < b->req->n_resource_profiles; r++) {
        const pc_profile *p = b->req->resource_profiles[r]->scope_profiles[0]->profiles[0];
        for (size_t s = 0; s < p->n_samples; s++)
            v += p->samples[s]->values[0];
    }
    return v;
}

static void fr_answered(uv_handle_t *h)
{
    fr_req *q = h->data;
    pc_export_outcome o = PC_EXPORT_OK;
    if (fr.down[q->b])
        pc_export_outcome_set(&o, PC_EAGAIN, "backend %s is down", fr.names[q->b]);
    else
        fr.received[q->b] += values(q->r.batch);
    pc_export_done(&q->r, &o);
}

static void fr_answer(uv_timer_t *t)
{
    uv_close((uv_handle_t *)t, fr_answered);
}

static void fr_send(pc_export_req *r)
{
    fr_req *q = (fr_req *)r;
    q->b = (int)((const char **)r->target - fr.names);
    uv_timer_init(loop, &q->t);
    q->t.data = q;
    uv_timer_start(&q->t, fr_answer, 2, 0);
}

static const pc_exporter_def fr_def = {
    .req_size = sizeof(fr_req),
    .sender_cfg = offsetof(fr_cfg, sender),
    .send = fr_send,
    .route = fr_route,
    .route_open = fr_open,
    .route_close = fr_close,
};

static const pc_component_type fr_type = {
    .name = "routed",
    .kind = PC_KIND_EXPORTER,
    .cfg_size = sizeof(fr_cfg),
    .cfg = fr_keys,
    PC_EXPORTER_CORE(&fr_def),
    .signals = PC_SIGNALS_ALL,
};

/* One resource of service svc with samples of values v, v+1, ..., v+n-1. */
static pc_batch *service_batch(const char *svc, int v, int n)
{
    pc_buf j = {0};
    pc_buf_printf(&j,
                  "{\"resourceProfiles\":[{\"resource\":{\"attributes\":[{\"key\":"
                  "\"service.name\",\"value\":{\"stringValue\":\"%s\"}}]},\"scopeProfiles\":[{"
                  "\"profiles\":[{\"sampleType\":{\"typeStrindex\":1},\"samples\":[",
                  svc);
    for (int k = 0; k < n; k++)
        pc_buf_printf(&j, "%s{\"stackIndex\":1,\"values\":[\"%d\"]}", k ? "," : "", v + k);
    pc_buf_printf(&j, "]}]}]}],\"dictionary\":{\"mappingTable\":[{}],\"locationTable\":[{},{"
                      "\"lines\":[{\"functionIndex\":1}]}],\"functionTable\":[{},{"
                      "\"nameStrindex\":2}],\"linkTable\":[{}],\"stringTable\":[\"\",\"cpu\","
                      "\"main\"],\"attributeTable\":[{}],\"stackTable\":[{},{\"locationIndices\":"
                      "[1]}]}}");
    pc_buf_append(&j, "", 1);
    pc_batch *b = batch_from_json((const char *)j.data);
    pc_buf_free(&j);
    return b;
}

/* A metric's value from /metrics' text for exporter "routed" and backend (NULL: any, summed). */
static long long metric(const char *name, const char *backend)
{
    pc_buf out = {0};
    pc_metrics_render(&out);
    pc_buf_append(&out, "", 1);
    long long sum = 0;
    char want[200];
    snprintf(want, sizeof want, "%s{exporter=\"routed\"", name);
    for (char *line = (char *)out.data; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (!strncmp(line, want, strlen(want))) {
            char b[64] = "";
            const char *bp = strstr(line, "backend=\"");
            if (bp) sscanf(bp + 9, "%63[^\"]", b);
            if (!backend || !strcmp(b, backend)) sum += atoll(strrchr(line, ' ') + 1);
        }
        line = nl ? nl + 1 : NULL;
    }
    pc_buf_free(&out);
    return sum;
}

typedef struct sent_batch {
    int svc;
    long long v;
} sent_batch;

#define NSVC 24

static driver *routed_start(const char *yaml, size_t n_backends)
{
    memset(fr.down, 0, sizeof fr.down);
    memset(fr.received, 0, sizeof fr.received);
    driver *d = driver_make(&fr_type, yaml);
    pc_error e = {0};
    CHECK_EQ_INT(fr_type.start(&d->c, &e), 0);
    CHECK_EQ_INT(pc_exporter_set_routes(pc_exporter_of(&d->c), fr.names, n_backends, &e), 0);
    d->c.drain_deadline_ms = uv_now(loop) + 10000;
    return d;
}

/* NSVC services, one batch each (3 samples); the total value per backend expected on ring. */
static long long send_services(driver *d, const pc_ring *ring, long long *want, int base)
{
    long long total = 0;
    for (int s = 0; s < NSVC; s++) {
        char svc[16];
        snprintf(svc, sizeof svc, "svc-%d", s);
        int v = base + s * 10;
        long long sum = 3LL * v + 3;
        size_t o = owner_of_bytes(ring, svc, strlen(svc));
        want[fr_index(pc_ring_member(ring, o))] += sum;
        total += sum;
        d->c.type->consume(&d->c, service_batch(svc, v, 3), tc_up_done, &d->up);
    }
    return total;
}

static int delivered(void *arg)
{
    long long want = *(long long *)arg, got = 0;
    for (int i = 0; i < NB; i++)
        got += fr.received[i];
    return got >= want;
}

/* Every backend gets the services the ring gives it, and counts them under its label. */
static void test_routes_deliver_by_key(void)
{
    driver *d = routed_start(NULL, 3);
    pc_ring *ring = pc_ring_new(fr.names, 3);
    long long want[NB] = {0};
    long long total = send_services(d, ring, want, 1);
    wait_until(loop, delivered, &total, 10000);
    CHECK_EQ_INT(d->up.calls, NSVC);
    CHECK_EQ_INT(d->up.st, PC_OK);
    for (int i = 0; i < NB; i++)
        CHECK_EQ_INT(fr.received[i], want[i]);
    CHECK_EQ_INT(metric("otelcol_exporter_sent_profile_samples", NULL), 3 * NSVC);
    long long per = 0;
    for (int i = 0; i < 3; i++)
        per += metric("otelcol_exporter_sent_profile_samples", fr.names[i]);
    CHECK_EQ_INT(per, 3 * NSVC);
    CHECK(metric("otelcol_exporter_sent_profile_samples", "a:1") > 0);
    pc_ring_unref(ring);
    driver_free(d);
    CHECK_EQ_INT(fr.open[0] + fr.open[1] + fr.open[2] + fr.open[3], 0);
}

static int all_up_answered(void *arg)
{
    driver *d = arg;
    return d->up.calls == NSVC;
}

/* Backend b is down: what the ring gives it waits in its queue, retrying. b leaves the ring:
 * those batches go to the others (the ring without b), which deliver them; counted as routed
 * again from b, never as sent or failed by b; everything sent arrives once. */
static void check_reroute(const char *yaml, const char *dir)
{
    driver *d = routed_start(yaml, 3);
    fr.down[1] = true; /* b:2 */
    pc_ring *ring3 = pc_ring_new(fr.names, 3);
    long long want[NB] = {0};
    long long total = send_services(d, ring3, want, 100);
    wait_until(loop, all_up_answered, d, 10000); /* queued: acknowledged */
    CHECK_EQ_INT(d->up.st, PC_OK);
    CHECK(want[1] > 0);
    uv_sleep(30); /* b's sends fail and wait to retry */
    uv_run(loop, UV_RUN_NOWAIT);
    CHECK_EQ_INT(fr.received[1], 0);
    if (dir) { /* b's records are on disk */
        char path[512];
        snprintf(path, sizeof path, "%s/routed/b_2", dir);
        DIR *dd = opendir(path);
        int files = 0;
        for (struct dirent *de; dd && (de = readdir(dd));)
            files += strstr(de->d_name, ".pcq") != NULL;
        if (dd) closedir(dd);
        CHECK(files > 0);
    }
    const char *ac[] = {"a:1", "c:3"};
    pc_error e = {0};
    CHECK_EQ_INT(pc_exporter_set_routes(pc_exporter_of(&d->c), ac, 2, &e), 0);
    wait_until(loop, delivered, &total, 10000);
    long long got = 0;
    for (int i = 0; i < NB; i++)
        got += fr.received[i];
    CHECK_EQ_INT(got, total);
    CHECK_EQ_INT(fr.received[1], 0);
    CHECK_EQ_INT(fr.open[1], 0); /* b's route closed */
    /* b's share went to a and c, which kept their own */
    pc_ring *ring2 = pc_ring_new(ac, 2);
    long long want2[NB] = {0};
    for (int s = 0; s < NSVC; s++) {
        char svc[16];
        snprintf(svc, sizeof svc, "svc-%d", s);
        size_t o3 = owner_of_bytes(ring3, svc, strlen(svc));
        size_t o =
            strcmp(pc_ring_member(ring3, o3), "b:2") == 0
                ? (size_t)fr_index(pc_ring_member(ring2, owner_of_bytes(ring2, svc, strlen(svc))))
                : (size_t)fr_index(pc_ring_member(ring3, o3));
        want2[o] += 3LL * (100 + s * 10) + 3;
    }
    CHECK_EQ_INT(fr.received[0], want2[0]);
    CHECK_EQ_INT(fr.received[2], want2[2]);
    long long b_samples = 0;
    for (int s = 0; s < NSVC; s++) {
        char svc[16];
        snprintf(svc, sizeof svc, "svc-%d", s);
        if (!strcmp(pc_ring_member(ring3, owner_of_bytes(ring3, svc, strlen(svc))), "b:2"))
            b_samples += 3;
    }
    CHECK_EQ_INT(metric("profcol_exporter_rerouted_profile_samples", "b:2"), b_samples);
    CHECK_EQ_INT(metric("otelcol_exporter_sent_profile_samples", "b:2"), 0);
    CHECK_EQ_INT(metric("otelcol_exporter_send_failed_profile_samples", NULL), 0);
    CHECK_EQ_INT(metric("otelcol_exporter_sent_profile_samples", NULL), 3 * NSVC);
    if (dir) { /* and gone from b's directory */
        char path[512];
        snprintf(path, sizeof path, "%s/routed/b_2", dir);
        DIR *dd = opendir(path);
        int files = 0;
        for (struct dirent *de; dd && (de = readdir(dd));)
            files += strstr(de->d_name, ".pcq") != NULL;
        if (dd) closedir(dd);
        CHECK_EQ_INT(files, 0);
    }
    pc_ring_unref(ring3);
    pc_ring_unref(ring2);
    driver_free(d);
}

static void test_reroute_from_memory(void)
{
    check_reroute("retry_on_failure:\n  initial_interval: 5ms\n  max_interval: 10ms\n", NULL);
}

static void test_reroute_from_disk(void)
{
    char dir[] = "/tmp/profcol-lb-XXXXXX", yaml[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(yaml, sizeof yaml,
             "sending_queue:\n  storage: %s\n  num_consumers: 1\n"
             "retry_on_failure:\n  initial_interval: 5ms\n  max_interval: 10ms\n",
             dir);
    check_reroute(yaml, dir);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_EQ_INT(system(cmd), 0);
}

static int has_records(const char *path)
{
    DIR *dd = opendir(path);
    int files = 0;
    for (struct dirent *de; dd && (de = readdir(dd));)
        files += strstr(de->d_name, ".pcq") != NULL;
    if (dd) closedir(dd);
    return files;
}

/* A queue left on disk by a backend that is not listed at the next start (b was down when the
 * exporter stopped; it restarts with a and c only): replayed and routed over the ring, so what
 * was acknowledged arrives, and b's directory ends empty. */
static void test_queue_of_a_former_backend_is_adopted(void)
{
    char dir[] = "/tmp/profcol-lb-XXXXXX", yaml[256], bdir[300];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(yaml, sizeof yaml,
             "sending_queue:\n  storage: %s\n"
             "retry_on_failure:\n  initial_interval: 5ms\n  max_interval: 10ms\n",
             dir);
    snprintf(bdir, sizeof bdir, "%s/routed/b_2", dir);
    driver *d = routed_start(yaml, 3);
    fr.down[1] = true;
    pc_ring *ring3 = pc_ring_new(fr.names, 3);
    long long want[NB] = {0};
    long long total = send_services(d, ring3, want, 500);
    wait_until(loop, all_up_answered, d, 10000);
    d->c.drain_deadline_ms = uv_now(loop) + 50; /* b's records stay for the next start */
    driver_free(d);
    CHECK(has_records(bdir) > 0);
    long long before = fr.received[0] + fr.received[2];
    CHECK_EQ_INT(before, total - want[1]);

    memset(fr.received, 0, sizeof fr.received);
    fr.down[1] = false;
    driver *d2 = driver_make(&fr_type, yaml);
    pc_error e = {0};
    CHECK_EQ_INT(fr_type.start(&d2->c, &e), 0);
    const char *ac[] = {"a:1", "c:3"};
    d2->c.drain_deadline_ms = uv_now(loop) + 10000;
    CHECK_EQ_INT(pc_exporter_set_routes(pc_exporter_of(&d2->c), ac, 2, &e), 0);
    long long rest = want[1];
    wait_until(loop, delivered, &rest, 10000);
    CHECK_EQ_INT(fr.received[0] + fr.received[2], want[1]);
    CHECK_EQ_INT(fr.received[1], 0);
    CHECK_EQ_INT(has_records(bdir), 0);
    CHECK_EQ_INT(metric("profcol_exporter_rerouted_profile_samples", "b_2"),
                 metric("otelcol_exporter_sent_profile_samples", NULL));
    CHECK(metric("otelcol_exporter_sent_profile_samples", NULL) > 0);
    driver_free(d2);
    pc_ring_unref(ring3);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_EQ_INT(system(cmd), 0);
}

typedef struct answers_wanted {
    const driver *d;
    int n;
} answers_wanted;

static int up_calls_reach(void *arg)
{
    const answers_wanted *w = arg;
    return w->d->up.calls >= w->n;
}

/* Send n one-sample services that the ring gives to backend number owner; waits for every
 * answer. */
static void send_owned(driver *d, const pc_ring *ring, int owner, int n, int *sent)
{
    for (int s = 0, k = 0; k < n; s++) {
        char svc[24];
        snprintf(svc, sizeof svc, "full-%d", s);
        if (fr_index(pc_ring_member(ring, owner_of_bytes(ring, svc, strlen(svc)))) != owner)
            continue;
        d->c.type->consume(&d->c, service_batch(svc, s, 1), tc_up_done, &d->up);
        k++;
        (*sent)++;
    }
    answers_wanted w = {d, *sent};
    wait_until(loop, up_calls_reach, &w, 10000);
}

/* What a receiver and batch ask of the exporters behind them, with routes: full only once every
 * backend's queue is full (a request may go to any of them), durable exactly with a persistent
 * queue (sending_queue::storage, the same for every backend). */
static void test_routes_full_and_durable(void)
{
    driver *d = routed_start("sending_queue:\n  queue_size: 2\n  num_consumers: 1\n"
                             "retry_on_failure:\n  initial_interval: 10s\n  max_interval: 10s\n",
                             3);
    pc_ring *ring = pc_ring_new(fr.names, 3);
    CHECK(!pc_exporter_full(&d->c));
    CHECK(!pc_exporter_durable(&d->c, 100));
    fr.down[0] = fr.down[1] = fr.down[2] = true; /* what is sent stays, retrying */
    int sent = 0;
    send_owned(d, ring, 0, 6, &sent);
    send_owned(d, ring, 1, 6, &sent);
    CHECK(!pc_exporter_full(&d->c)); /* c still has room */
    send_owned(d, ring, 2, 6, &sent);
    CHECK(pc_exporter_full(&d->c));
    CHECK_EQ_INT(d->up.st, PC_EAGAIN); /* and the exporter did refuse, on every backend */
    d->c.drain_deadline_ms = uv_now(loop) + 50;
    driver_free(d);
    pc_ring_unref(ring);

    char dir[] = "/tmp/profcol-lb-XXXXXX", yaml[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(yaml, sizeof yaml, "sending_queue:\n  storage: %s\n", dir);
    fr.down[0] = fr.down[1] = fr.down[2] = false;
    d = routed_start(yaml, 3);
    CHECK(pc_exporter_durable(&d->c, 100));
    CHECK(!pc_exporter_full(&d->c));
    driver_free(d);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_EQ_INT(system(cmd), 0);
}

/* No backend at all: refused (retryable), counted on the exporter. */
static void test_no_backend_refuses(void)
{
    driver *d = routed_start(NULL, 0);
    d->c.type->consume(&d->c, service_batch("x", 1, 2), tc_up_done, &d->up);
    CHECK_EQ_INT(d->up.calls, 1);
    CHECK_EQ_INT(d->up.st, PC_EAGAIN);
    CHECK_EQ_INT(metric("otelcol_exporter_enqueue_failed_profile_samples", NULL), 2);
    driver_free(d);
}

/* ---- config ---- */

static void check_refused(const char *yaml, const char *want)
{
    const char *err = tc_config_error(&pc_exporter_loadbalancing, "exporters", yaml);
    CHECK(err != NULL);
    if (err) CHECK_CONTAINS(err, want);
}

#define STATIC "resolver:\n  static:\n    hostnames: [a:1]\n"

/* What the config refuses, naming the key; what it accepts. */
static void test_config(void)
{
    CHECK(tc_config_error(&pc_exporter_loadbalancing, "exporters", STATIC) == NULL);
    CHECK(tc_config_error(&pc_exporter_loadbalancing, "exporters",
                          "protocol:\n  otlphttp:\n    tls:\n      insecure: true\n" STATIC) ==
          NULL);
    CHECK(tc_config_error(&pc_exporter_loadbalancing, "exporters",
                          "resolver:\n  dns:\n    hostname: gw.example\n") == NULL);
    check_refused("resolver: {}\n", "resolver: required: static (hostnames) or dns (hostname)");
    check_refused("resolver:\n  static:\n    hostnames: [a:1]\n  dns:\n    hostname: x\n",
                  "set one of static and dns");
    check_refused("resolver:\n  static:\n    hostnames: [nohostport]\n",
                  "resolver::static::hostnames: nohostport");
    check_refused("protocol:\n  otlp:\n    endpoint: a:1\n" STATIC,
                  "protocol::otlp::endpoint: is set by the resolver");
    check_refused("protocol:\n  otlphttp:\n    traces_endpoint: http://a:1/v1/traces\n" STATIC,
                  "protocol::otlphttp::traces_endpoint: is set by the resolver");
    check_refused("protocol:\n  otlp: {}\n  otlphttp: {}\n" STATIC, "not both");
    check_refused("protocol:\n  otlp:\n    sending_queue:\n      num_consumers: 0\n" STATIC,
                  "protocol::otlp::sending_queue::num_consumers: must be >= 1");
    check_refused("routing_key: metric\n" STATIC, "routes metrics");
    check_refused("routing_key: traceid\n" STATIC, "want traceID, service, resource or attributes");
    check_refused("routing_key: attributes\n" STATIC, "routing_attributes");
    check_refused("resolver:\n  dns:\n    hostname: x\n    port: 0\n", "must be 1..65535");
    check_refused("resolver:\n  k8s:\n    service: x\n", "k8s");
}

int main(void)
{
    loop = uv_default_loop();
    (void)driver_run;
    RUN(test_config);
    RUN(test_ring_is_the_documented_formula);
    RUN(test_ring_stability);
    RUN(test_two_rings_agree);
    RUN(test_split_profiles_by_trace_id);
    RUN(test_split_profiles_by_service);
    RUN(test_split_by_resource_and_attributes);
    RUN(test_split_one_part_is_no_copy);
    RUN(test_split_spans);
    RUN(test_routes_deliver_by_key);
    RUN(test_reroute_from_memory);
    RUN(test_reroute_from_disk);
    RUN(test_queue_of_a_former_backend_is_adopted);
    RUN(test_routes_full_and_durable);
    RUN(test_no_backend_refuses);
    uv_loop_close(loop);
    fprintf(stderr, "%d checks, %d failures\n", check_count, check_failures);
    return check_failures ? 1 : 0;
}
