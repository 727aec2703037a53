/* The symbolizer's C test program (tests/e2e/test_symbolizer.py): static inline functions that
 * -O2 inlines two deep, a call into a shared library, and a function kept out of line. */
#include <stdio.h>
#include <stdlib.h>

int shared_hash(const char *s, int n);

static inline int mix(int x)
{
    x ^= x >> 7;
    x *= 2654435761u & 0x7fffffff;
    return x ^ (x >> 13);
}

static inline int step(int acc, int i)
{
    int m = mix(acc + i);
    if (m & 1) m += mix(i * 3);
    return acc + m;
}

__attribute__((noinline)) int crunch(int n)
{
    int acc = 0;
    for (int i = 0; i < n; i++)
        acc = step(acc, i);
    return acc;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    printf("%d %d\n", crunch(n), shared_hash(argv[0], n));
    return 0;
}
