// The symbolizer's Rust test program (tests/e2e/test_symbolizer.py): generic and inlined
// functions in a module, closures; rustc -C opt-level=2 -C debuginfo=2.
mod shop {
    pub struct Cart<T> {
        pub items: Vec<T>,
    }

    #[inline(always)]
    fn weigh(x: u64) -> u64 {
        x.wrapping_mul(3) ^ (x >> 2)
    }

    impl Cart<u64> {
        #[inline(never)]
        pub fn total(&self) -> u64 {
            self.items.iter().map(|&x| weigh(x)).fold(0u64, |a, b| a.wrapping_add(b))
        }
    }

    #[inline(never)]
    pub fn price<T: Copy + Into<u64>>(c: &[T], discount: u64) -> u64 {
        let apply = |v: u64| v - v * discount / 100;
        apply(c.iter().map(|&x| x.into()).sum())
    }
}

fn main() {
    let n = std::env::args().count() as u64 * 1000;
    let cart = shop::Cart { items: (0..n).collect() };
    let small: Vec<u32> = (0..n as u32).collect();
    println!("{} {}", cart.total(), shop::price(&small, 10));
}
