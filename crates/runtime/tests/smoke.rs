use partita_runtime::*;

fn fib(n: u32) -> u64 {
    if n < 2 {
        return n as u64;
    }
    let (a, b) = join(|| fib(n - 1), || fib(n - 2));
    a + b
}

#[test]
fn smoke() {
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    assert_eq!(pool.install(|| fib(20)), 6765);
    assert_eq!(fib(15), 610);
    pool.set_target_workers(1);
    while pool.active_workers() != 1 {
        std::thread::yield_now();
    }
    assert_eq!(pool.install(|| fib(20)), 6765);
    pool.set_target_workers(2);
    while pool.active_workers() != 2 {
        std::thread::yield_now();
    }
    assert_eq!(pool.broadcast(|c| c.index()), vec![0, 1]);
    println!("{:?}", pool.stats());
}
