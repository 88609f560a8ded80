//! `cargo build -j16` of a small generated workspace through the jobserver beside a
//! partita-runtime program on a manager with 2 CPUs: it completes, and the rustc processes
//! running at once (stamped by a `RUSTC_WRAPPER`) respect the same bound as make's jobs.

mod support;

use partita_jobserver::stamps;
use std::path::Path;
use std::process::Command;
use support::*;

const CRATES: usize = 8;

fn generate_workspace(root: &Path, stamps: &Path) {
    let members: Vec<String> = (0..CRATES).map(|i| format!("\"c{i}\"")).collect();
    std::fs::write(
        root.join("Cargo.toml"),
        format!(
            "[workspace]\nmembers = [{}]\nresolver = \"2\"\n",
            members.join(", ")
        ),
    )
    .unwrap();
    for i in 0..CRATES {
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

#[test]
fn cargo_build_j16_completes_and_follows_the_allocation() {
    let dir = scratch("managed-cargo");
    let st = dir.join("stamps");
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    generate_workspace(&ws, &st);
    let h = manager(&dir);
    let pool = program_pool(h.socket());
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(BIN)
        .current_dir(&ws)
        .env_remove("MAKEFLAGS")
        .env_remove("CARGO_MAKEFLAGS")
        .env_remove("CARGO_BUILD_JOBS")
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env("RUSTC_WRAPPER", ws.join("wrap.sh"))
        .args(["run", "--report", "report.txt", "--socket"])
        .arg(h.socket())
        .args(["--", &cargo, "build", "-j16", "--offline", "-q"])
        .spawn()
        .unwrap();
    let sampler = Sampler::start(&h, build.id() as i32);
    burn(&pool, 2000, 150_000);
    let status = build.wait().unwrap();
    let samples = sampler.finish();
    assert!(status.success());
    let report = std::fs::read_to_string(ws.join("report.txt")).unwrap();
    assert!(report.contains("registered 1"), "{report}");
    let iv = stamps::read_intervals(&st).unwrap();
    assert_eq!(iv.len(), CRATES, "every crate is compiled once");
    let excess = stamps::longest_excess(&iv, &samples);
    eprintln!(
        "rustc max concurrency {}, longest excess {} ms",
        stamps::max_concurrency(&iv),
        excess / 1_000_000
    );
    assert!(
        samples.iter().any(|&(_, a)| a == 1),
        "the program never shared the CPUs with the build: {samples:?}"
    );
    assert!(
        excess <= PERIOD_MS * 1_000_000,
        "rustc processes exceeded the allocation for {} ms (samples {samples:?})",
        excess / 1_000_000
    );
    drop(pool);
    h.shutdown().unwrap();
}
