//! Which descendants of journalled processes the sweep restores although the journal does not
//! list them (see [the journal's module docs](super)): a pure function over plain data.

use partita_protocol::CpuSet;
use std::collections::BTreeMap;

/// A journalled process that is still the same process ([`unseen_restores`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchor {
    /// Its journalled original mask.
    pub original: CpuSet,
    /// Its main thread's mask as the dead manager left it; `None` if unreadable (then its
    /// unlisted descendants are left alone).
    pub left: Option<CpuSet>,
}

/// A process found below the anchors, not itself an anchor ([`unseen_restores`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Its pid.
    pub pid: i32,
    /// The pid of the process it was found under (an anchor or another found process).
    pub parent: i32,
    /// Each of its threads (tid, the main thread's is `pid`) with its current mask.
    pub threads: Vec<(i32, CpuSet)>,
}

/// Threads of one found process to give its anchor's original mask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    /// The process.
    pub pid: i32,
    /// Its threads that still carry the confinement.
    pub tids: Vec<i32>,
    /// Its nearest anchor's original mask.
    pub mask: CpuSet,
}

/// Which unlisted descendants of `anchors` (pid → anchor) to restore, given `found`, the
/// processes below them, parents before children (as `proc_ref::walk` returns them): a
/// process whose nearest anchor (following `parent` up) left a readable mask and whose main
/// thread still has that mask gets, for each of its threads that still has it, the anchor's
/// original. A process (or thread) on another mask chose it itself and is left alone; a
/// process whose parent is neither an anchor nor found earlier is not anyone's descendant here.
///
/// ```
/// use partita_manager::journal::{unseen_restores, Anchor, Found, Restore};
/// let set = |s: &str| -> partita_protocol::CpuSet { s.parse().unwrap() };
/// let anchors = [(10, Anchor { original: set("0-3"), left: Some(set("0")) })].into();
/// let found = [
///     Found { pid: 11, parent: 10, threads: vec![(11, set("0")), (12, set("0"))] },
///     Found { pid: 13, parent: 10, threads: vec![(13, set("2"))] }, // pinned itself
/// ];
/// assert_eq!(
///     unseen_restores(&anchors, &found),
///     vec![Restore { pid: 11, tids: vec![11, 12], mask: set("0-3") }]
/// );
/// ```
pub fn unseen_restores(anchors: &BTreeMap<i32, Anchor>, found: &[Found]) -> Vec<Restore> {
    let mut anchor_of: BTreeMap<i32, i32> = BTreeMap::new();
    let mut out = Vec::new();
    for f in found {
        if anchors.contains_key(&f.pid) {
            continue;
        }
        let anchor = if anchors.contains_key(&f.parent) {
            f.parent
        } else if let Some(&a) = anchor_of.get(&f.parent) {
            a
        } else {
            continue;
        };
        // Recorded whatever this process's own mask: its children forked before it changed
        // its mask still carry the confinement.
        anchor_of.insert(f.pid, anchor);
        let Some((a, Some(left))) = anchors.get(&anchor).map(|a| (a, a.left)) else {
            continue;
        };
        let main = f.threads.iter().find(|(t, _)| *t == f.pid);
        if main.is_none_or(|(_, m)| *m != left) {
            continue;
        }
        let tids: Vec<i32> = f
            .threads
            .iter()
            .filter(|(_, m)| *m == left)
            .map(|(t, _)| *t)
            .collect();
        out.push(Restore {
            pid: f.pid,
            tids,
            mask: a.original,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(s: &str) -> CpuSet {
        s.parse().unwrap() // A test: the literals are cpu lists.
    }

    fn anchor(original: &str, left: Option<&str>) -> Anchor {
        Anchor {
            original: set(original),
            left: left.map(set),
        }
    }

    fn found(pid: i32, parent: i32, threads: &[(i32, &str)]) -> Found {
        Found {
            pid,
            parent,
            threads: threads.iter().map(|&(t, m)| (t, set(m))).collect(),
        }
    }

    #[test]
    fn unseen_children_get_their_nearest_anchors_original_and_own_choices_stay() {
        // 10 was confined to 0, 20 (a journalled child of 10) to 1.
        let anchors = [
            (10, anchor("0-3", Some("0"))),
            (20, anchor("0-1", Some("1"))),
        ]
        .into();
        let tree = [
            found(11, 10, &[(11, "0"), (15, "0"), (16, "2")]), // thread 16 pinned itself
            found(12, 10, &[(12, "3")]),                       // pinned itself
            found(13, 12, &[(13, "0")]),                       // forked before 12's pin
            found(14, 12, &[(14, "3")]),                       // inherited 12's pin
            found(20, 10, &[(20, "1")]),                       // an anchor: its own entry
            found(21, 20, &[(21, "1")]),
            found(22, 20, &[(22, "0")]), // 10's left mask, but 20 is its anchor
            found(31, 99, &[(31, "0")]), // under no anchor
            found(32, 10, &[(33, "0")]), // its main thread unreadable
        ];
        let r = unseen_restores(&anchors, &tree);
        let restore = |pid, tids: &[i32], mask| Restore {
            pid,
            tids: tids.to_vec(),
            mask: set(mask),
        };
        assert_eq!(
            r,
            vec![
                restore(11, &[11, 15], "0-3"),
                restore(13, &[13], "0-3"),
                restore(21, &[21], "0-1"),
            ]
        );
    }

    #[test]
    fn an_anchor_without_a_readable_mask_has_its_descendants_left_alone() {
        let anchors = [(10, anchor("0-3", None))].into();
        let tree = [found(11, 10, &[(11, "0")]), found(12, 11, &[(12, "0")])];
        assert_eq!(unseen_restores(&anchors, &tree), vec![]);
    }

    /// A random forest below anchors 1..=3 (masks drawn from a few, so that they collide):
    /// per found process its parent (an anchor, an earlier one, or 999: none) and thread masks.
    fn forest() -> impl Strategy<Value = (BTreeMap<i32, Anchor>, Vec<Found>)> {
        let mask = (1u8..8).prop_map(|b| (0..3).filter(|c| b & (1 << c) != 0).collect::<CpuSet>());
        let anchors = proptest::collection::vec(
            (mask.clone(), proptest::option::weighted(0.9, mask.clone())),
            3,
        );
        let procs = proptest::collection::vec(
            (
                any::<proptest::sample::Index>(),
                proptest::collection::vec(mask, 1..4),
            ),
            0..12,
        );
        (anchors, procs).prop_map(|(anchors, procs)| {
            let anchors: BTreeMap<i32, Anchor> = anchors
                .into_iter()
                .zip(1..)
                .map(|((original, left), pid)| (pid, Anchor { original, left }))
                .collect();
            let found = procs
                .into_iter()
                .enumerate()
                .map(|(i, (parent, masks))| {
                    let pid = 100 + i as i32;
                    let mut parents: Vec<i32> = anchors.keys().copied().collect();
                    parents.extend(100..pid);
                    parents.push(999);
                    let threads = masks
                        .into_iter()
                        .zip(pid * 10..)
                        .map(|(m, t)| (if t == pid * 10 { pid } else { t }, m))
                        .collect();
                    Found {
                        pid,
                        parent: *parent.get(&parents),
                        threads,
                    }
                })
                .collect();
            (anchors, found)
        })
    }

    proptest! {
        /// Restored: exactly the processes whose main thread has their nearest anchor's
        /// left mask (following parents up), each once, those threads of it with that mask,
        /// to that anchor's original.
        #[test]
        fn exactly_the_descendants_still_on_their_anchors_left_mask_are_restored((anchors, tree) in forest()) {
            let parent: BTreeMap<i32, i32> = tree.iter().map(|f| (f.pid, f.parent)).collect();
            let nearest = |mut pid: i32| loop {
                match parent.get(&pid) {
                    Some(p) if anchors.contains_key(p) => return Some(*p),
                    Some(p) => pid = *p,
                    None => return None,
                }
            };
            let r = unseen_restores(&anchors, &tree);
            for f in &tree {
                let a = nearest(f.pid).map(|p| anchors[&p]);
                let main = f.threads.iter().find(|(t, _)| *t == f.pid).map(|(_, m)| *m);
                let expect = a.filter(|a| a.left.is_some() && a.left == main).map(|a| Restore {
                    pid: f.pid,
                    tids: f.threads.iter().filter(|(_, m)| Some(*m) == a.left).map(|(t, _)| *t).collect(),
                    mask: a.original,
                });
                let got: Vec<&Restore> = r.iter().filter(|x| x.pid == f.pid).collect();
                prop_assert_eq!(got, expect.iter().collect::<Vec<_>>(), "{:?}", f);
            }
            prop_assert!(r.iter().all(|x| tree.iter().any(|f| f.pid == x.pid)));
        }
    }
}
