//! Level 2: a partition's CPUs to its members, one policy per partition.
//!
//! Every function takes the partition's CPU count `a` and its members as `(id, cap)` pairs in
//! member order (uncontrolled first, then applications by registration), and returns a count
//! per member, never above its cap, summing to at most `a`.

use super::{MemberId, MemberMap};
use crate::config::UsageDecayConfig;
use std::collections::BinaryHeap;

type Hist = MemberMap;

/// Max-min fair share: every member gets `min(cap, level)`; when the CPUs left do not divide
/// evenly among the members still wanting more, the extra CPUs go to those with the lowest
/// cumulative count (`cum`, advanced once per period), so uneven remainders rotate. An
/// application that has not yet been there for a whole period (fewer than two rotation
/// steps seen) gets one only after the others: a program that registers and exits at once,
/// hundreds of times a second, never takes a running program's CPU (issue 26's bad input,
/// `tests/churn.rs`), even when it happens to be alive at a rotation step (with one step,
/// such a registrant that had gone without for that step ranked first and took a running
/// program's only CPU whenever outside load made three members of two CPUs); one that stays
/// takes its turn from its third period on (two programs that arrived in the same period
/// rotate between themselves from the start). Outside load (the uncontrolled member) is exempt:
/// when it appears it gets a CPU at once.
///
/// ```
/// use partita_manager::alloc::{level2::equipartition, MemberId::App};
/// let mut h = Default::default();
/// let got = equipartition(2, &[(App(1), 4), (App(2), 4), (App(3), 4)], &mut h, false);
/// assert_eq!(got.iter().map(|x| x.1).sum::<u32>(), 2);
/// ```
pub fn equipartition(
    a: u32,
    members: &[(MemberId, u32)],
    hist: &mut Hist,
    advance: bool,
) -> Vec<(MemberId, u32)> {
    let young: Vec<bool> = members
        .iter()
        .map(|(m, _)| matches!(m, MemberId::App(_)) && hist.get(m).is_none_or(|h| h.boundaries < 2))
        .collect();
    if advance {
        for (m, _) in members {
            if let Some(h) = hist.get_mut(m) {
                h.cum += h.last_count as u64;
                h.boundaries = h.boundaries.saturating_add(1);
            }
        }
    }
    let mut out: Vec<(MemberId, u32)> = members.iter().map(|&(m, _)| (m, 0)).collect();
    // The max-min fair level: the largest L with Σ min(cap, L) ≤ a. Members with cap ≤ L get
    // their cap, the others L (water-filling, found by bisection instead of sorting by cap).
    let filled = |l: u32| -> u64 { members.iter().map(|&(_, c)| c.min(l) as u64).sum() };
    let max_cap = members.iter().map(|m| m.1).max().unwrap_or(0);
    let (mut lo, mut hi) = (0u32, max_cap);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if filled(mid) <= a as u64 {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let level = lo;
    let mut given = 0u64;
    for (o, &(_, cap)) in out.iter_mut().zip(members) {
        o.1 = cap.min(level);
        given += o.1 as u64;
    }
    let extra = (a as u64).saturating_sub(given) as usize;
    if extra > 0 {
        // Unmet members (cap > level): the `extra` with the lowest (cum, member) get one more
        // CPU each, so uneven remainders rotate. Keys are looked up once, not in a comparator,
        // and are distinct (member ids are), so selecting the `extra` smallest is enough.
        let mut order: Vec<(bool, u64, MemberId, usize)> = (0..members.len())
            .filter(|&i| members[i].1 > level)
            .map(|i| {
                let cum = hist.get(&members[i].0).map_or(0, |h| h.cum);
                (young[i], cum, members[i].0, i)
            })
            .collect();
        if extra < order.len() {
            order.select_nth_unstable(extra - 1);
        }
        for &(_, _, _, i) in order.iter().take(extra) {
            // cap > level, so level + 1 fits.
            out[i].1 += 1;
        }
    }
    // Keep `cum` bounded: only differences matter.
    if advance {
        let min = members
            .iter()
            .filter_map(|(m, _)| hist.get(m).map(|h| h.cum))
            .min()
            .unwrap_or(0);
        for (m, _) in members {
            if let Some(h) = hist.get_mut(m) {
                h.cum -= min;
            }
        }
    }
    out
}

/// Tucker's usage-decay allocator (§6.3.2): `inv_prio += n·t` (CPUs held × seconds since the
/// last allocation), `inv_prio *= c` every decay period (`decay_steps` periods have passed),
/// then CPUs are handed out one at a time to the member minimising `inv_prio + k·S` (k: CPUs
/// it already got this round), up to its cap; ties are broken by an RNG seeded with
/// `cfg.seed` and `round`. The priorities used for the choice are refreshed only when
/// `refresh` (a decay period passed, or the first allocation), so that reallocations
/// triggered by events inside a period do not flap between equal applications; new members
/// start at `inv_prio = 0`.
///
/// ```
/// use partita_manager::alloc::{level2::usage_decay, MemberId::App, MemberHistory};
/// let mut h = partita_manager::alloc::MemberMap::default();
/// h.insert(App(1), MemberHistory { inv_prio: 100.0, ..Default::default() });
/// h.insert(App(2), MemberHistory::default());
/// let got = usage_decay(1, &[(App(1), 2), (App(2), 2)], &mut h, &Default::default(), 0.0, 0, true, 1);
/// assert_eq!(got, vec![(App(1), 0), (App(2), 1)]);
/// ```
#[allow(clippy::too_many_arguments)] // The policy's inputs, each documented above.
pub fn usage_decay(
    a: u32,
    members: &[(MemberId, u32)],
    hist: &mut Hist,
    cfg: &UsageDecayConfig,
    elapsed_s: f64,
    decay_steps: u64,
    refresh: bool,
    round: u64,
) -> Vec<(MemberId, u32)> {
    let decay = cfg.c.powi(decay_steps.min(i32::MAX as u64) as i32);
    let mut inv = Vec::with_capacity(members.len());
    for (m, _) in members {
        let (h, fresh) = match hist.entry(*m) {
            std::collections::hash_map::Entry::Occupied(e) => (e.into_mut(), false),
            std::collections::hash_map::Entry::Vacant(e) => (e.insert(Default::default()), true),
        };
        h.inv_prio += h.last_count as f64 * elapsed_s;
        h.inv_prio *= decay;
        if refresh || fresh {
            h.inv_key = h.inv_prio;
        }
        inv.push(h.inv_key);
    }
    let mut out: Vec<(MemberId, u32)> = members.iter().map(|&(m, _)| (m, 0)).collect();
    // Min-heap on (inv + k·S, random tie-break, index).
    #[derive(PartialEq)]
    struct Key(f64, u64, usize);
    impl Eq for Key {}
    impl PartialOrd for Key {
        fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(o))
        }
    }
    impl Ord for Key {
        fn cmp(&self, o: &Self) -> std::cmp::Ordering {
            // Reversed: BinaryHeap is a max-heap.
            o.0.total_cmp(&self.0)
                .then(o.1.cmp(&self.1))
                .then(o.2.cmp(&self.2))
        }
    }
    let tie = |i: usize| splitmix(cfg.seed ^ round.wrapping_mul(0x9e37_79b9) ^ i as u64);
    let mut heap: BinaryHeap<Key> = (0..members.len())
        .filter(|&i| members[i].1 > 0)
        .map(|i| Key(inv[i], tie(i), i))
        .collect();
    let mut left = a;
    while left > 0 {
        let Some(Key(_, t, i)) = heap.pop() else {
            break;
        };
        out[i].1 += 1;
        left -= 1;
        if out[i].1 < members[i].1 {
            heap.push(Key(inv[i] + out[i].1 as f64 * cfg.s, t, i));
        }
    }
    out
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// NANOS Dynamic Space Sharing. With requests `p_i` (the caps) and `W = Σ p_i` on `P = a`
/// CPUs: `W ≤ P` ⇒ everyone gets its request; otherwise `x_i = ⌊P·p_i/W⌋` plus one for the
/// members whose accumulated remainder (integer carry in units of 1/W) is largest, so that
/// `Σ x = P`; at least 1 each while `n ≤ P`. When `n > P`, groups of `P` members are served in
/// turn, the group advancing each quantum (`advance`). `w_hist` / `offset` are the partition's
/// carry unit and group offset.
///
/// ```
/// use partita_manager::alloc::{level2::dss, MemberId::App};
/// let mut h = Default::default();
/// let (mut w, mut off) = (0, 0);
/// let got = dss(4, &[(App(1), 6), (App(2), 2)], &mut h, &mut w, &mut off, false);
/// assert_eq!(got, vec![(App(1), 3), (App(2), 1)]);
/// ```
pub fn dss(
    a: u32,
    members: &[(MemberId, u32)],
    hist: &mut Hist,
    w_hist: &mut i64,
    offset: &mut usize,
    advance: bool,
) -> Vec<(MemberId, u32)> {
    let mut out: Vec<(MemberId, u32)> = members.iter().map(|&(m, _)| (m, 0)).collect();
    let active: Vec<usize> = (0..members.len()).filter(|&i| members[i].1 > 0).collect();
    if active.is_empty() || a == 0 {
        return out;
    }
    let p = a as usize;
    let group = dss_group(active, p, offset, advance);
    let w: i64 = group.iter().map(|&i| members[i].1 as i64).sum();
    if w <= p as i64 {
        for &i in &group {
            out[i].1 = members[i].1;
        }
        return out;
    }
    if *w_hist != w {
        // Carries are in units of 1/W; a new W starts them afresh.
        for &i in &group {
            if let Some(h) = hist.get_mut(&members[i].0) {
                h.dss_carry = 0;
            }
        }
        *w_hist = w;
    }
    dss_proportional(p as i64, w, members, &group, hist, advance, &mut out);
    dss_at_least_one(p as i64, w, members, &group, &mut out);
    out
}

/// The members DSS serves this quantum: all active ones while they fit, else a window of `p`
/// that moves by `p` each quantum.
fn dss_group(active: Vec<usize>, p: usize, offset: &mut usize, advance: bool) -> Vec<usize> {
    if active.len() <= p {
        return active;
    }
    if advance {
        *offset = (*offset + p) % active.len();
    }
    let start = *offset % active.len();
    (0..p).map(|j| active[(start + j) % active.len()]).collect()
}

/// `x_i = ⌊P·p_i/W⌋` plus one for the members with the largest accumulated remainder.
fn dss_proportional(
    pp: i64,
    w: i64,
    members: &[(MemberId, u32)],
    group: &[usize],
    hist: &mut Hist,
    advance: bool,
    out: &mut [(MemberId, u32)],
) {
    let mut rem = Vec::with_capacity(group.len());
    let mut given = 0i64;
    for &i in group {
        let exact = pp * members[i].1 as i64;
        out[i].1 = (exact / w) as u32;
        given += exact / w;
        rem.push((i, exact % w));
    }
    let need = (pp - given) as usize;
    // Advancing a quantum: the largest accumulated remainder wins and is charged at once.
    // Inside a quantum: keep the quantum's choice as far as it is still valid.
    let mut order: Vec<(bool, i64, MemberId, usize)> = rem
        .iter()
        .map(|&(i, r)| {
            let h = hist.get(&members[i].0);
            let had = !advance && h.is_some_and(|h| h.dss_extra);
            (had, h.map_or(0, |h| h.dss_carry) + r, members[i].0, i)
        })
        .collect();
    // Largest (had, carry) first; ties by member order.
    order.sort_unstable_by(|x, y| (y.0, y.1).cmp(&(x.0, x.1)).then(x.2.cmp(&y.2)));
    let chosen: Vec<usize> = order.iter().take(need).map(|x| x.3).collect();
    for &i in &chosen {
        out[i].1 += 1;
    }
    if advance {
        for (i, r) in rem {
            let h = hist.entry(members[i].0).or_default();
            let extra = chosen.contains(&i);
            h.dss_carry += r - if extra { w } else { 0 };
            h.dss_extra = extra;
        }
    }
}

/// At least one each (`n ≤ P` here): take from the most over-served member that has ≥ 2.
fn dss_at_least_one(
    pp: i64,
    w: i64,
    members: &[(MemberId, u32)],
    group: &[usize],
    out: &mut [(MemberId, u32)],
) {
    for &i in group {
        if out[i].1 == 0 {
            let donor = group
                .iter()
                .copied()
                .filter(|&j| out[j].1 >= 2)
                .max_by(|&x, &y| {
                    let ox = out[x].1 as i64 * w - pp * members[x].1 as i64;
                    let oy = out[y].1 as i64 * w - pp * members[y].1 as i64;
                    ox.cmp(&oy).then(y.cmp(&x))
                });
            if let Some(j) = donor {
                out[j].1 -= 1;
                out[i].1 = 1;
            }
        }
    }
}

/// First come, first served with exact requests: members in order get their full cap while it
/// fits; the first that does not fit, and everyone after it, waits.
///
/// ```
/// use partita_manager::alloc::{level2::batch, MemberId::App};
/// assert_eq!(batch(3, &[(App(1), 2), (App(2), 2), (App(3), 1)]),
///            vec![(App(1), 2), (App(2), 0), (App(3), 0)]);
/// ```
pub fn batch(a: u32, members: &[(MemberId, u32)]) -> Vec<(MemberId, u32)> {
    let mut left = a;
    let mut blocked = false;
    members
        .iter()
        .map(|&(m, cap)| {
            if blocked || cap == 0 {
                return (m, 0);
            }
            if cap <= left {
                left -= cap;
                (m, cap)
            } else {
                blocked = true;
                (m, 0)
            }
        })
        .collect()
}
