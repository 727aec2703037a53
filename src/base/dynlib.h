/* Libraries that only some components use, loaded (dlopen) when one of them is created, so that
 * profcol's idle memory does not pay for what a config does not use: libdebuginfod pulls libcurl,
 * GnuTLS and Kerberos (about 4 MiB of resident memory at start), snappy the C++ runtime
 * (docs/sizing.md). The headers still come from the -dev packages at build time. */
#ifndef PC_BASE_DYNLIB_H
#define PC_BASE_DYNLIB_H

#include <stddef.h>

#include "base/err.h"

/* Load soname (e.g. "libsnappy.so.1") and set fns[i] to the address of names[i], for i < n. The
 * library stays loaded for the life of the process (a second call finds it loaded). 0, or
 * PC_ENOTSUP with e naming the library or the missing symbol and the Debian package to install. */
int pc_dynlib_load(const char *soname, const char *package, const char *const *names, void **fns,
                   size_t n, pc_error *e);

#endif
