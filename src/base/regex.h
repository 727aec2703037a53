/* Regular expressions as Collector users write them (Go's RE2 syntax) on POSIX regcomp: the
 * processors' patterns (filter, redaction, resource). */
#ifndef PC_BASE_REGEX_H
#define PC_BASE_REGEX_H

#include <regex.h>
#include <stddef.h>

#include "base/err.h"

/* Compile a Collector-style (Go RE2 flavoured) pattern as a POSIX extended regex. POSIX has no
 * named groups, so "(?P<name>...)" and "(?<name>...)" are rewritten to plain "(...)" and the names
 * remembered by group number: (*names)[i] names group i + 1 (NULL when unnamed). A leading "(?i)"
 * adds REG_ICASE. Other "(?" forms are refused. names may be NULL when the caller needs none.
 * Returns 0, or PC_EINVAL with a message in e (nothing to free then). */
int pc_regex_compile(regex_t *re, const char *pat, int flags, char ***names, size_t *n_names,
                     pc_error *e);
void pc_regex_names_free(char **names, size_t n);

#endif
