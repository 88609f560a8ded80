//! Full reallocation for 10^4 applications on 1024 CPUs in 64 partitions (target ≤ 1 ms).
//!
//! `cargo bench -p partita-manager --bench allocator`
//!
//! Cases: a warm reallocation after one application's demand changed (what the daemon does on
//! a doorbell), a cold one (empty history: every CPU placed from scratch), and, as the
//! baseline measured in the same run, sorting the 10^4 demands once (the least any
//! allocator that orders applications must do).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use partita_manager::alloc::{allocate, AllocInput, AppDemand, History};
use partita_manager::config::{PartitionConfig, PolicyKind, Sharing};
use std::hint::black_box;

fn input(apps: usize, cpus: usize, partitions: usize) -> AllocInput {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |m: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % m
    };
    let ps: Vec<PartitionConfig> = (0..partitions)
        .map(|i| {
            let mut p = PartitionConfig::named(&if i == 0 {
                "default".to_string()
            } else {
                format!("p{i}")
            });
            p.share = 1 + next(4) as u32;
            p.sharing = [Sharing::LendIdle, Sharing::LendIdle, Sharing::Never][i % 3];
            p.policy = [
                PolicyKind::Equipartition,
                PolicyKind::UsageDecay,
                PolicyKind::Dss,
                PolicyKind::Equipartition,
            ][i % 4];
            p
        })
        .collect();
    let mut i = AllocInput::new((0..cpus).collect(), ps);
    i.domains = (0..cpus).map(|c| (c / 16) as u32).collect();
    i.uncontrolled = vec![0; partitions];
    i.uncontrolled[0] = 3;
    i.apps = (0..apps)
        .map(|k| AppDemand {
            id: k as u32 + 1,
            partition: next(partitions as u64) as usize,
            demand: next(9) as u32,
            pool_size: 1 + next(16) as u32,
        })
        .collect();
    i
}

fn bench(c: &mut Criterion) {
    let base = input(10_000, 1024, 64);
    let mut g = c.benchmark_group("realloc_10k_apps_1024_cpus_64_partitions");
    g.bench_function("warm_after_one_demand_change", |b| {
        let mut inp = base.clone();
        let mut h = History::default();
        allocate(&inp, &mut h);
        let mut k = 0usize;
        b.iter(|| {
            k = (k + 7919) % inp.apps.len();
            inp.apps[k].demand = (inp.apps[k].demand + 1) % 9;
            inp.now_ms += 1;
            black_box(allocate(&inp, &mut h).moves)
        })
    });
    g.bench_function("cold_empty_history", |b| {
        b.iter_batched(
            History::default,
            |mut h| black_box(allocate(&base, &mut h).moves),
            BatchSize::SmallInput,
        )
    });
    g.bench_function("baseline_sort_demands", |b| {
        b.iter_batched(
            || {
                base.apps
                    .iter()
                    .map(|a| (a.demand, a.id))
                    .collect::<Vec<_>>()
            },
            |mut v| {
                v.sort_unstable();
                black_box(v)
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
