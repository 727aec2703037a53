// The symbolizer's C++ test program: a namespace, a class template, an overloaded function and
// a lambda, so demangled names carry scopes, template arguments and parameter lists.
#include <cstdio>
#include <vector>

namespace shop {
template <typename T> struct Cart {
    std::vector<T> items;
    __attribute__((noinline)) T total() const
    {
        T t = 0;
        for (const T &x : items)
            t += weigh(x);
        return t;
    }
    static inline T weigh(const T &x) { return x * 3 + (x >> 2); }
};

__attribute__((noinline)) long price(const Cart<long> &c, int discount)
{
    auto apply = [discount](long v) { return v - v * discount / 100; };
    return apply(c.total());
}
__attribute__((noinline)) long price(const Cart<int> &c) { return c.total(); }
} // namespace shop

int main(int argc, char **)
{
    shop::Cart<long> a;
    shop::Cart<int> b;
    for (int i = 0; i < argc * 1000; i++) {
        a.items.push_back(i);
        b.items.push_back(i * 2);
    }
    std::printf("%ld %ld\n", shop::price(a, 10), shop::price(b));
    return 0;
}
