//! The global pool: `build_global` once, then it fails. (Own test binary: one global pool per
//! process.)

use partita_runtime::{current_num_threads, join, ThreadPoolBuilder};

#[test]
fn build_global_twice_fails() {
    ThreadPoolBuilder::new()
        .num_threads(3)
        .build_global()
        .unwrap();
    assert_eq!(current_num_threads(), 3);
    let err = ThreadPoolBuilder::new()
        .num_threads(2)
        .build_global()
        .unwrap_err();
    assert!(err.to_string().contains("already been initialized"));
    assert_eq!(join(|| 1, || 2), (1, 2));
    assert_eq!(current_num_threads(), 3);
}
