/* The table of input formats (format.h). */
#include "formats/format.h"

#include <string.h>

#include "formats/folded.h"
#include "formats/jfr.h"
#include "formats/legacy.h"
#include "formats/pprof.h"

static const char *const trie_params[] = {"trie", NULL};
static const char *const tree_params[] = {"tree", NULL};
static const char *const speedscope_params[] = {"speedscope", NULL};
static const char *const jfr_params[] = {"jfr", NULL};
static const char *const pprof_params[] = {"pprof", NULL};
static const char *const lines_params[] = {"lines", NULL};
static const char *const folded_params[] = {"folded", "groups", "collapsed", NULL};

/* Pyroscope's order (spec/pyroscope.md §1.4): the legacy formats before every other, format=jfr
 * before the Content-Type, a multipart form before format=pprof; anything else is collapsed
 * stacks, which therefore comes last. */
const pc_format pc_formats[] = {
    {"trie", trie_params, "binary/octet-stream+trie", NULL, NULL, 0, pc_trie_decode},
    {"tree", tree_params, "binary/octet-stream+tree", NULL, NULL, 0, pc_tree_decode},
    {"speedscope", speedscope_params, NULL, NULL, NULL, 0, pc_speedscope_decode},
    {"jfr", jfr_params, NULL, "jfr", "labels", PC_EBADMSG, pc_jfr_decode},
    {"pprof", pprof_params, "multipart/form-data", "profile", NULL, PC_EINVAL, pc_pprof_decode},
    {"lines", lines_params, NULL, NULL, NULL, 0, pc_lines_decode},
    {"folded", folded_params, NULL, NULL, NULL, 0, pc_folded_decode},
    {NULL, NULL, NULL, NULL, NULL, 0, NULL},
};

static bool ct_matches(const char *want, const char *ct)
{
    if (!want || !ct) return false;
    /* a form's Content-Type carries its boundary; the others are compared whole, as Pyroscope */
    if (!strncmp(want, "multipart/", 10)) return strstr(ct, want) != NULL;
    return !strcmp(ct, want);
}

const pc_format *pc_format_select(const char *format, const char *content_type)
{
    const pc_format *f = pc_formats;
    for (; f[1].name; f++) {
        for (const char *const *p = f->params; format && p && *p; p++)
            if (!strcmp(format, *p)) return f;
        if (ct_matches(f->content_type, content_type)) return f;
    }
    return f;
}

const pc_format *pc_format_find(const char *name)
{
    for (const pc_format *f = pc_formats; f->name; f++)
        if (!strcmp(f->name, name)) return f;
    return NULL;
}
