//! Sequential reference checksums of the mix's applications, computed once per build of the
//! executable and cached in the output directory.

use crate::{mode, BoxError};
use indicatif::ProgressBar;
use partita_workloads::{App, Params};
use std::collections::BTreeMap;
use std::path::Path;

/// A stamp of the executable, so cached references are recomputed after every rebuild.
fn exe_stamp(exe: &Path) -> String {
    std::fs::metadata(exe)
        .ok()
        .and_then(|m| {
            let t = m
                .modified()
                .ok()?
                .duration_since(std::time::UNIX_EPOCH)
                .ok()?;
            Some(format!("{}-{}", m.len(), t.as_nanos()))
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Sequential reference checksums of `apps` at `params`, cached in `out/reference-cache.json`.
pub(crate) fn references(
    apps: &[App],
    params: &Params,
    exe: &Path,
    out: &Path,
    pb: &ProgressBar,
) -> Result<BTreeMap<App, u64>, BoxError> {
    let cache_path = out.join("reference-cache.json");
    let mut cache: BTreeMap<String, u64> = std::fs::read_to_string(&cache_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let stamp = exe_stamp(exe);
    let key = |a: App| format!("{}|scale={}|{}", a.name(), params.scale, stamp);
    let mut want: Vec<App> = apps.to_vec();
    want.sort();
    want.dedup();
    let missing: Vec<App> = want
        .iter()
        .copied()
        .filter(|&a| a.is_controlled() || a == App::Pmake)
        .filter(|&a| !cache.contains_key(&key(a)))
        .collect();
    if !missing.is_empty() {
        pb.set_message(format!(
            "computing sequential reference checksums ({})",
            missing
                .iter()
                .map(|a| a.name())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results = std::sync::Mutex::new(Vec::new());
        let workers = mode::available_cpus().min(missing.len()).max(1);
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&app) = missing.get(i) else { break };
                    let r = partita_workloads::reference(app, params);
                    results
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((app, r));
                });
            }
        });
        for (app, r) in results
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            if let Some(sum) = r? {
                cache.insert(key(app), sum);
            }
        }
        cache.retain(|k, _| k.ends_with(&stamp));
        std::fs::write(&cache_path, serde_json::to_string_pretty(&cache)?)?;
    }
    Ok(want
        .into_iter()
        .filter_map(|a| cache.get(&key(a)).map(|&s| (a, s)))
        .collect())
}
