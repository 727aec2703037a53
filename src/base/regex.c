/* RE2-flavoured patterns on POSIX regcomp (base/regex.h). */
#include "base/regex.h"

#include <stdlib.h>
#include <string.h>

int pc_regex_compile(regex_t *re, const char *pat, int flags, char ***names, size_t *n_names,
                     pc_error *e)
{
    size_t len = strlen(pat), o = 0, group = 0, cap = 0;
    char *out = malloc(len + 1);
    char **nm = NULL;
    int in_bracket = 0;
    if (!out) abort();
    if (strncmp(pat, "(?i)", 4) == 0) {
        flags |= REG_ICASE;
        pat += 4;
    }
    for (const char *p = pat; *p; p++) {
        if (in_bracket) {
            /* "[:alpha:]" inside a bracket expression is copied whole */
            if (p[0] == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
                const char *end = strchr(p + 2, p[1]);
                if (end && end[1] == ']') {
                    size_t n = (size_t)(end + 2 - p);
                    memcpy(out + o, p, n);
                    o += n;
                    p = end + 1;
                    continue;
                }
            }
            if (*p == ']') in_bracket = 0;
            out[o++] = *p;
            continue;
        }
        if (*p == '\\' && p[1]) {
            out[o++] = *p++;
            out[o++] = *p;
            continue;
        }
        if (*p == '[') {
            in_bracket = 1;
            out[o++] = *p;
            if (p[1] == '^') out[o++] = *++p;
            if (p[1] == ']') out[o++] = *++p; /* a leading ']' is literal */
            continue;
        }
        if (*p != '(') {
            out[o++] = *p;
            continue;
        }
        group++;
        out[o++] = '(';
        if (p[1] != '?') continue;
        const char *name = NULL, *end = NULL;
        if (p[2] == 'P' && p[3] == '<')
            name = p + 4;
        else if (p[2] == '<')
            name = p + 3;
        if (name) end = strchr(name, '>');
        if (!name || !end || end == name) {
            pc_error_set(e, PC_EINVAL,
                         "unsupported group syntax \"%.8s\" (POSIX extended regex: use (...) or "
                         "(?P<name>...))",
                         p);
            goto fail;
        }
        if (group > cap) {
            size_t ncap = cap ? cap * 2 : 8;
            while (ncap < group)
                ncap *= 2;
            nm = realloc(nm, ncap * sizeof *nm);
            if (!nm) abort();
            memset(nm + cap, 0, (ncap - cap) * sizeof *nm);
            cap = ncap;
        }
        nm[group - 1] = strndup(name, (size_t)(end - name));
        p = end;
    }
    out[o] = 0;
    int rc = regcomp(re, out, flags | REG_EXTENDED);
    if (rc) {
        char msg[160];
        regerror(rc, re, msg, sizeof msg);
        pc_error_set(e, PC_EINVAL, "invalid regular expression \"%s\": %s", pat, msg);
        goto fail;
    }
    free(out);
    if (names) {
        /* one slot per group (regcomp counted them the same way) */
        size_t n = re->re_nsub;
        char **all = calloc(n ? n : 1, sizeof *all);
        if (!all) abort();
        for (size_t i = 0; i < n && i < cap; i++)
            all[i] = nm[i], nm[i] = NULL;
        *names = all;
        *n_names = n;
    }
    for (size_t i = 0; i < cap; i++)
        free(nm[i]);
    free(nm);
    return 0;
fail:
    free(out);
    for (size_t i = 0; i < cap; i++)
        free(nm[i]);
    free(nm);
    return PC_EINVAL;
}

void pc_regex_names_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}
