/* The shared library of the C test program: an inline function inlined into an exported one. */
static inline unsigned rot(unsigned h, int r)
{
    return (h << r) | (h >> (32 - r));
}

static inline unsigned fold(unsigned h, char c)
{
    h = rot(h ^ (unsigned char)c, 5);
    return h * 0x9e3779b1u;
}

__attribute__((visibility("default"))) int shared_hash(const char *s, int n)
{
    unsigned h = 2166136261u;
    for (int k = 0; k < n; k++)
        for (const char *p = s; *p; p++)
            h = fold(h, *p);
    return (int)(h & 0x7fffffff);
}
