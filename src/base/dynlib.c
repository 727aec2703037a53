/* Loading an optional library on demand (dynlib.h). */
#include "base/dynlib.h"

#include <dlfcn.h>

int pc_dynlib_load(const char *soname, const char *package, const char *const *names, void **fns,
                   size_t n, pc_error *e)
{
    /* RTLD_LOCAL: its symbols serve only the pointers handed out here */
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return pc_error_set(e, PC_ENOTSUP, "cannot load %s (Debian package %s): %s", soname,
                            package, dlerror());
    for (size_t i = 0; i < n; i++) {
        fns[i] = dlsym(h, names[i]);
        if (!fns[i])
            return pc_error_set(e, PC_ENOTSUP, "%s has no %s (Debian package %s)", soname, names[i],
                                package);
    }
    return 0;
}
