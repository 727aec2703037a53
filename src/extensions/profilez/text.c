/* The text helpers of the profilez answers, apart so that query.c and diff.c both stand on them
 * (a leaf: no circle between the two). */
#include <ctype.h>
#include <string.h>

#include "extensions/profilez/agg_impl.h"

/* A JSON string; control characters, '<' and DEL escaped as \u00XX. */
void pz_json_str(pc_buf *out, const char *s)
{
    pc_buf_append(out, "\"", 1);
    const char *run = s;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != 0x7f) continue;
        pc_buf_append(out, run, (size_t)(s - run));
        if (c == '"' || c == '\\')
            pc_buf_printf(out, "\\%c", c);
        else
            pc_buf_printf(out, "\\u%04x", c);
        run = s + 1;
    }
    pc_buf_append(out, run, (size_t)(s - run));
    pc_buf_append(out, "\"", 1);
}

/* Whether name contains the search term, ASCII letters in either case (as the page's search,
 * for ASCII). */
bool pz_search_hit(const char *name, const char *term)
{
    if (!term || !*term) return true;
    size_t tl = strlen(term);
    for (; *name; name++) {
        size_t i = 0;
        while (i < tl && name[i] &&
               tolower((unsigned char)name[i]) == tolower((unsigned char)term[i]))
            i++;
        if (i == tl) return true;
    }
    return false;
}
