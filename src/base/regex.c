/* RE2-flavoured patterns on POSIX regcomp (base/regex.h). */
#include "base/regex.h"

#include <stdlib.h>
#include <string.h>

/* The rewrite in progress: the POSIX pattern and the group names seen so far. */
typedef struct rewrite {
    char *out;
    size_t o, group, cap;
    char **nm; /* nm[i] names group i + 1 */
} rewrite;

/* Copy a bracket expression from p (at its '['); "[:alpha:]" inside is copied whole. Returns
 * where the pattern goes on. */
static const char *copy_bracket(rewrite *w, const char *p)
{
    w->out[w->o++] = *p;
    if (p[1] == '^') w->out[w->o++] = *++p;
    if (p[1] == ']') w->out[w->o++] = *++p; /* a leading ']' is literal */
    for (p++; *p; p++) {
        if (p[0] == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
            const char *end = strchr(p + 2, p[1]);
            if (end && end[1] == ']') {
                size_t n = (size_t)(end + 2 - p);
                memcpy(w->out + w->o, p, n);
                w->o += n;
                p = end + 1;
                continue;
            }
        }
        w->out[w->o++] = *p;
        if (*p == ']') return p + 1;
    }
    return p;
}

/* "(?P<name>" or "(?<name>" at p (after its '('): the name kept for the current group. Returns
 * where the pattern goes on, or NULL for another "(?" form. */
static const char *named_group(rewrite *w, const char *p)
{
    const char *name = NULL, *end = NULL;
    if (p[1] == 'P' && p[2] == '<')
        name = p + 3;
    else if (p[1] == '<')
        name = p + 2;
    if (name) end = strchr(name, '>');
    if (!name || !end || end == name) return NULL;
    if (w->group > w->cap) {
        size_t ncap = w->cap ? w->cap * 2 : 8;
        while (ncap < w->group)
            ncap *= 2;
        w->nm = realloc(w->nm, ncap * sizeof *w->nm);
        if (!w->nm) abort();
        memset(w->nm + w->cap, 0, (ncap - w->cap) * sizeof *w->nm);
        w->cap = ncap;
    }
    w->nm[w->group - 1] = strndup(name, (size_t)(end - name));
    return end + 1;
}

static void rewrite_free(rewrite *w)
{
    free(w->out);
    for (size_t i = 0; i < w->cap; i++)
        free(w->nm[i]);
    free(w->nm);
}

/* The names, one slot per group (regcomp counted them the same way). */
static void take_names(rewrite *w, const regex_t *re, char ***names, size_t *n_names)
{
    size_t n = re->re_nsub;
    char **all = calloc(n ? n : 1, sizeof *all);
    if (!all) abort();
    for (size_t i = 0; i < n && i < w->cap; i++)
        all[i] = w->nm[i], w->nm[i] = NULL;
    *names = all;
    *n_names = n;
}

int pc_regex_compile(regex_t *re, const char *pat, int flags, char ***names, size_t *n_names,
                     pc_error *e)
{
    rewrite w = {.out = malloc(strlen(pat) + 1)};
    if (!w.out) abort();
    if (strncmp(pat, "(?i)", 4) == 0) {
        flags |= REG_ICASE;
        pat += 4;
    }
    const char *p = pat;
    while (*p) {
        if (*p == '\\' && p[1]) {
            w.out[w.o++] = *p++;
            w.out[w.o++] = *p++;
        } else if (*p == '[') {
            p = copy_bracket(&w, p);
        } else if (*p != '(') {
            w.out[w.o++] = *p++;
        } else {
            w.group++;
            w.out[w.o++] = *p++;
            if (*p != '?') continue;
            const char *next = named_group(&w, p);
            if (!next) {
                pc_error_set(
                    e, PC_EINVAL,
                    "unsupported group syntax \"%.8s\" (POSIX extended regex: use (...) or "
                    "(?P<name>...))",
                    p - 1);
                rewrite_free(&w);
                return PC_EINVAL;
            }
            p = next;
        }
    }
    w.out[w.o] = 0;
    int rc = regcomp(re, w.out, flags | REG_EXTENDED);
    if (rc) {
        char msg[160];
        regerror(rc, re, msg, sizeof msg);
        pc_error_set(e, PC_EINVAL, "invalid regular expression \"%s\": %s", pat, msg);
        rewrite_free(&w);
        return PC_EINVAL;
    }
    if (names) take_names(&w, re, names, n_names);
    rewrite_free(&w);
    return 0;
}

void pc_regex_names_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}
