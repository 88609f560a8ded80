//! Shared by the managed tests: a manager limited to 2 CPUs on a private socket, a
//! partita-runtime program in this process, and a sampler of the build's allocation.

#![allow(dead_code)] // each test binary uses part of it

use partita_manager::{config::Uncontrolled, spawn_in_process, Config, ManagerHandle};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub const BIN: &str = env!("CARGO_BIN_EXE_partita-jobserver");
/// The manager's reallocation period in these tests.
pub const PERIOD_MS: u64 = 300;

/// A test's scratch directory (with a `stamps/` inside), removed when dropped.
pub struct Scratch(tempfile::TempDir);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

pub fn scratch(name: &str) -> Scratch {
    let d = tempfile::Builder::new()
        .prefix(&format!("pj-{name}-"))
        .tempdir()
        .expect("create a scratch dir"); // a test cannot run without it
    std::fs::create_dir_all(d.path().join("stamps")).expect("create stamps/");
    Scratch(d)
}

/// A manager managing 2 CPUs; only registered applications and `partita run` processes count
/// (the build's jobs are the build's, not uncontrolled load).
pub fn manager(dir: &Path) -> ManagerHandle {
    let cfg = Config {
        cpus: "0-1".into(),
        uncontrolled: Uncontrolled::Tracked,
        cgroups: false,
        realloc_period_ms: PERIOD_MS,
        ..Default::default()
    };
    let h = spawn_in_process(cfg, dir.join("m.sock")).unwrap();
    assert_eq!(
        h.status().cpus_managed,
        2,
        "these tests need a machine with 2 CPUs"
    );
    h
}

pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// The partita-runtime program: a 2-worker pool registered with the manager at `socket`.
pub fn program_pool(socket: &Path) -> partita_runtime::ThreadPool {
    // SAFETY: every reader of the environment in this test process is Rust code going through
    // std::env, which takes std's environment lock; no C library call here reads it
    // concurrently. (The runtime has no builder option for the socket; it reads the variable.)
    unsafe {
        std::env::set_var("PARTITA_SOCKET", socket);
        std::env::remove_var("PARTITA");
    }
    partita_runtime::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap()
}

fn spin(iters: u64) -> u64 {
    let mut x = iters;
    for _ in 0..iters {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
    }
    x
}

fn split(lo: u32, hi: u32, per_task: u64) -> u64 {
    if hi - lo == 1 {
        return spin(per_task);
    }
    let mid = lo + (hi - lo) / 2;
    let (a, b) = partita_runtime::join(|| split(lo, mid, per_task), || split(mid, hi, per_task));
    a ^ b
}

/// CPU-bound work in `tasks` small tasks (safe points between them).
pub fn burn(pool: &partita_runtime::ThreadPool, tasks: u32, per_task: u64) -> u64 {
    pool.install(|| split(0, tasks, per_task))
}

/// Samples the allocation (`target`) of the application with pid `pid` every 5 ms.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<(u64, u32)>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    pub fn start(h: &ManagerHandle, pid: i32) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        // Over the socket, as `partita status` does.
        let socket = h.socket().to_path_buf();
        let (s2, v2) = (stop.clone(), samples.clone());
        let thread = std::thread::spawn(move || {
            while !s2.load(Ordering::Relaxed) {
                if let Ok(st) = partita_manager::query_status(&socket) {
                    if let Some(app) = st.app_by_pid(pid) {
                        v2.lock().unwrap().push((now_ns(), app.target));
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Sampler {
            stop,
            samples,
            thread: Some(thread),
        }
    }

    pub fn finish(mut self) -> Vec<(u64, u32)> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        std::mem::take(&mut *self.samples.lock().unwrap())
    }
}

/// A workspace of `crates` small crates whose `wrap.sh` (a `RUSTC_WRAPPER`) stamps every
/// compilation of one of them into `stamps`.
pub fn generate_workspace(root: &Path, stamps: &Path, crates: usize) {
    let members: Vec<String> = (0..crates).map(|i| format!("\"c{i}\"")).collect();
    std::fs::write(
        root.join("Cargo.toml"),
        format!(
            "[workspace]\nmembers = [{}]\nresolver = \"2\"\n",
            members.join(", ")
        ),
    )
    .unwrap();
    for i in 0..crates {
        let c = root.join(format!("c{i}"));
        std::fs::create_dir_all(c.join("src")).unwrap();
        std::fs::write(
            c.join("Cargo.toml"),
            format!("[package]\nname = \"c{i}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"),
        )
        .unwrap();
        // Enough code for rustc to work a little: 150 small monomorphised functions.
        let mut src = String::from("pub fn mix<T: Into<u64>>(x: T, k: u64) -> u64 { let mut s = x.into(); for i in 0..k { s = s.rotate_left(7) ^ i.wrapping_mul(0x9E37_79B9); } s }\n");
        for f in 0..150 {
            src.push_str(&format!(
                "pub fn f{f}(x: u32) -> u64 {{ mix(x, {f}) + mix(x as u16, {f}) }}\n"
            ));
        }
        std::fs::write(c.join("src/lib.rs"), src).unwrap();
    }
    let wrapper = root.join("wrap.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nd={d}\ncase \"$*\" in *--crate-name\\ c*) t=1;; *) t=;; esac\n\
             [ -n \"$t\" ] && date +%s%N > $d/st.$$\n\"$@\"; rc=$?\n\
             [ -n \"$t\" ] && date +%s%N > $d/en.$$\nexit $rc\n",
            d = stamps.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
}
