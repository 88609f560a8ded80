//! Topology backends: sysfs parsing (against a fabricated two-node tree and the real machine)
//! and agreement of the hwloc backend with sysfs.

use partita_numa::{CacheKind, Topology};
use std::fs;
use std::path::{Path, PathBuf};

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// A two-node, four-CPU machine: node 0 = CPUs 0-1 (sharing an L2), node 1 = CPUs 2-3.
fn fake_two_nodes(tag: &str) -> PathBuf {
    let root =
        std::env::temp_dir().join(format!("partita-numa-sysfs-{}-{tag}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    write(&root, "cpu/online", "0-3\n");
    write(&root, "node/online", "0-1\n");
    write(&root, "node/node0/cpulist", "0-1\n");
    write(&root, "node/node1/cpulist", "2-3\n");
    write(
        &root,
        "node/node0/meminfo",
        "Node 0 MemTotal:       1048576 kB\n",
    );
    write(
        &root,
        "node/node1/meminfo",
        "Node 1 MemTotal:       2097152 kB\n",
    );
    write(&root, "node/node0/distance", "10 21\n");
    write(&root, "node/node1/distance", "21 10\n");
    for cpu in 0..4 {
        let pair = if cpu < 2 { "0-1" } else { "2-3" };
        write(
            &root,
            &format!("cpu/cpu{cpu}/topology/physical_package_id"),
            &format!("{}\n", cpu / 2),
        );
        for (idx, level, kind, size, shared) in [
            (0, 1, "Data", "32K", cpu.to_string()),
            (1, 1, "Instruction", "32K", cpu.to_string()),
            (2, 2, "Unified", "1024K", pair.to_string()),
        ] {
            let d = format!("cpu/cpu{cpu}/cache/index{idx}");
            write(&root, &format!("{d}/level"), &format!("{level}\n"));
            write(&root, &format!("{d}/type"), &format!("{kind}\n"));
            write(&root, &format!("{d}/size"), &format!("{size}\n"));
            write(
                &root,
                &format!("{d}/shared_cpu_list"),
                &format!("{shared}\n"),
            );
        }
    }
    root
}

#[test]
fn sysfs_two_nodes() {
    let root = fake_two_nodes("two");
    let t = Topology::from_sysfs(&root).unwrap();
    assert_eq!(t.nodes().len(), 2);
    assert_eq!(t.nodes()[0].cpus, vec![0, 1]);
    assert_eq!(t.nodes()[1].cpus, vec![2, 3]);
    assert_eq!(t.nodes()[1].memory_bytes, 2 << 30);
    assert_eq!(t.distance(0, 1), Some(21));
    assert_eq!(t.distance(1, 1), Some(10));
    assert_eq!(t.node_of_cpu(3), Some(1));
    assert_eq!(t.cpu(2).unwrap().package, 1);
    let c = &t.cpu(1).unwrap().caches;
    assert_eq!(c.len(), 3);
    assert_eq!(
        (c[0].level, c[0].kind, c[0].size_bytes),
        (1, CacheKind::Data, 32 << 10)
    );
    assert_eq!(t.cpus_sharing_cache(1, 2), Some(&[0, 1][..]));
    assert_eq!(t.cache_domains(2), vec![vec![0, 1], vec![2, 3]]);
    assert_eq!(t.cache_domains(1), vec![vec![0], vec![1], vec![2], vec![3]]);
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn sysfs_malformed_is_a_named_error() {
    let root = fake_two_nodes("bad");
    write(&root, "node/node1/distance", "21\n"); // one distance for two nodes
    let e = Topology::from_sysfs(&root).unwrap_err();
    assert_eq!(e.call(), "sysfs topology");
    write(&root, "node/node1/distance", "21 10\n");
    write(&root, "node/node0/cpulist", "1-0\n");
    let e = Topology::from_sysfs(&root).unwrap_err();
    assert!(e.to_string().contains("malformed"), "{e}");
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn kernel_without_numa_sysfs_is_one_node() {
    let root = fake_two_nodes("nonuma");
    fs::remove_dir_all(root.join("node")).unwrap();
    let t = Topology::from_sysfs(&root).unwrap();
    assert_eq!(t.nodes().len(), 1);
    assert_eq!(t.nodes()[0].cpus, vec![0, 1, 2, 3]);
    assert!(t.cpus().iter().all(|c| c.node == 0));
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn this_machine_is_consistent() {
    let t = Topology::current().unwrap();
    let online = partita_numa::online_nodes();
    assert_eq!(t.nodes().len(), online.len());
    let cpus: usize = t.nodes().iter().map(|n| n.cpus.len()).sum();
    assert_eq!(cpus, t.cpus().len());
    for n in t.nodes() {
        assert_eq!(t.distance(n.id, n.id), Some(10));
    }
}

#[cfg(feature = "hwloc")]
#[test]
fn hwloc_agrees_with_sysfs() {
    let s = Topology::current().unwrap();
    let h = Topology::from_hwloc().unwrap();
    assert_eq!(h.nodes().len(), s.nodes().len());
    for (a, b) in h.nodes().iter().zip(s.nodes()) {
        assert_eq!(a.id, b.id);
        assert_eq!(a.cpus, b.cpus);
        assert_eq!(a.distances, b.distances);
        // hwloc reads the same MemTotal; allow 1% for rounding of huge-page accounting.
        let diff = a.memory_bytes.abs_diff(b.memory_bytes);
        assert!(
            diff <= b.memory_bytes / 100,
            "node {} memory {} vs {}",
            a.id,
            a.memory_bytes,
            b.memory_bytes
        );
    }
    assert_eq!(h.cpus().len(), s.cpus().len());
    for (a, b) in h.cpus().iter().zip(s.cpus()) {
        assert_eq!((a.id, a.node, a.package), (b.id, b.node, b.package));
        // hwloc drops instruction caches by default (its I-cache type filter); compare the
        // data and unified caches, which are the ones placement decisions use.
        let data = |c: &[partita_numa::Cache]| {
            c.iter()
                .filter(|c| c.holds_data())
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(data(&a.caches), data(&b.caches), "cpu {}", a.id);
    }
    for level in 1..=3 {
        assert_eq!(h.cache_domains(level), s.cache_domains(level));
    }
}
