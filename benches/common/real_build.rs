//! Unmodified rayon programs from crates.io, built twice into `target/real-programs/`: `stock`
//! (their own rayon-core) and `patched` (`[patch.crates-io] rayon-core` = this checkout's
//! `compat/rayon-core`, given on cargo's command line, as README says). Each program's
//! published `.crate` is unpacked from cargo's cache (one copy per variant, so each keeps its
//! own `Cargo.lock`) and built with its shipped lock file; the patched copy is checked with
//! `cargo tree -i rayon-core`, which must show the compat path, and the stock one must not.
//! Builds are cached: a second run only lets cargo confirm they are fresh.

use std::path::{Path, PathBuf};
use std::process::Command;

pub type BoxError = Box<dyn std::error::Error>;

/// A program from crates.io.
#[derive(Debug, Clone, Copy)]
pub struct Program {
    pub krate: &'static str,
    pub version: &'static str,
    pub bin: &'static str,
}

/// How it is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Stock,
    Patched,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Stock => "stock",
            Variant::Patched => "patched",
        }
    }
}

/// `<repo>/target/real-programs`.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/real-programs")
}

fn compat() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("compat/rayon-core")
}

fn patch_config() -> String {
    format!(
        "patch.crates-io.rayon-core.path={:?}",
        compat().display().to_string()
    )
}

fn cargo() -> Command {
    let mut c = Command::new("nice");
    c.args(["-n", "10"])
        .arg(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .env_remove("CARGO_TARGET_DIR");
    c
}

fn run(mut c: Command, what: &str) -> Result<String, BoxError> {
    let out = c.output()?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The programs' published `.crate` files in cargo's registry cache, downloaded by `cargo
/// fetch` on a throwaway manifest that depends on exactly these versions. (`cargo metadata`
/// leaves out a dependency without a library, such as `b3sum`, so the cache's folder is
/// found through another registry package of the same graph.)
fn registry_crates(programs: &[Program]) -> Result<Vec<PathBuf>, BoxError> {
    let dir = root().join("fetch");
    std::fs::create_dir_all(dir.join("src"))?;
    let deps: String = programs
        .iter()
        .map(|p| format!("{} = \"={}\"\n", p.krate, p.version))
        .collect();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             [dependencies]\n{deps}[workspace]\n"
        ),
    )?;
    std::fs::write(dir.join("src/lib.rs"), "")?;
    let manifest = dir.join("Cargo.toml");
    let mut c = cargo();
    c.arg("fetch").arg("--manifest-path").arg(&manifest);
    run(c, "cargo fetch")?;
    // <CARGO_HOME>/registry/cache/<index>/<name>-<version>.crate, in whichever index folder
    // cargo fetch put it. (`cargo metadata` leaves out a dependency without a library, such
    // as `b3sum`, and with it its whole graph: it cannot say where the cache is.)
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let indexes: Vec<PathBuf> = std::fs::read_dir(home.join("registry/cache"))?
        .filter_map(|e| Some(e.ok()?.path()))
        .collect();
    programs
        .iter()
        .map(|p| {
            let name = format!("{}-{}.crate", p.krate, p.version);
            indexes
                .iter()
                .map(|i| i.join(&name))
                .find(|f| f.exists())
                .ok_or_else(|| format!("{name} not downloaded by cargo fetch").into())
        })
        .collect()
}

/// Build every program in both variants; the executables, `[program][variant]`.
pub fn build_all(programs: &[Program]) -> Result<Vec<[PathBuf; 2]>, BoxError> {
    let sources = registry_crates(programs)?;
    programs
        .iter()
        .zip(&sources)
        .map(|(p, src)| {
            Ok([
                build(p, src, Variant::Stock)?,
                build(p, src, Variant::Patched)?,
            ])
        })
        .collect()
}

/// Unpack the `.crate` (a gzipped tar of `<name>-<version>/`) as `src/<name>-<version>-<v>`
/// once, then build it there.
fn build(p: &Program, dot_crate: &Path, v: Variant) -> Result<PathBuf, BoxError> {
    let src = root().join(format!("src/{}-{}-{}", p.krate, p.version, v.name()));
    if !src.join("Cargo.toml").exists() {
        let tmp = root().join(format!("src/unpack-{}", std::process::id()));
        std::fs::create_dir_all(&tmp)?;
        let mut c = Command::new("tar");
        c.arg("-xzf").arg(dot_crate).arg("-C").arg(&tmp);
        run(c, "unpacking the source")?;
        std::fs::rename(tmp.join(format!("{}-{}", p.krate, p.version)), &src)?;
        std::fs::remove_dir_all(&tmp)?;
    }
    let target = root().join("build").join(v.name());
    eprintln!("building {} {} ({}) ...", p.krate, p.version, v.name());
    let mut c = cargo();
    c.current_dir(&src)
        .args(["build", "--release", "--bin", p.bin, "--target-dir"])
        .arg(&target);
    if v == Variant::Patched {
        c.arg("--config").arg(patch_config());
        // A shipped lock file may pin an older rayon-core (tokei's: 1.12.1), which the patch
        // (1.13.0) does not replace until the lock moves, as cargo's "patch was not used"
        // warning tells a user; partita-runtime's `nix` needs a newer `libc` than such a lock
        // may hold, so that moves too. Only then, and only in the patched copy.
        if check_patch(p, &src, v).is_err() {
            let mut u = cargo();
            u.current_dir(&src)
                .args(["update", "-p", "rayon-core", "-p", "libc", "--config"])
                .arg(patch_config());
            run(
                u,
                &format!("cargo update -p rayon-core -p libc for {}", p.krate),
            )?;
        }
    }
    run(c, &format!("building {} ({})", p.krate, v.name()))?;
    check_patch(p, &src, v)?;
    let exe = target.join("release").join(p.bin);
    if !exe.exists() {
        return Err(format!("{} was built but {} is missing", p.krate, exe.display()).into());
    }
    Ok(exe)
}

/// `cargo tree -i rayon-core`: the patched build must use the compat path, the stock one not.
fn check_patch(p: &Program, src: &Path, v: Variant) -> Result<(), BoxError> {
    let mut c = cargo();
    c.current_dir(src)
        .args(["tree", "-i", "rayon-core", "--edges", "normal"]);
    if v == Variant::Patched {
        c.arg("--config").arg(patch_config());
    }
    let tree = run(c, &format!("cargo tree -i rayon-core for {}", p.krate))?;
    let first = tree.lines().next().unwrap_or_default();
    let path = compat().display().to_string();
    let patched = first.starts_with("rayon-core ") && first.contains(&path);
    match (v, patched) {
        (Variant::Patched, true) => Ok(()),
        (Variant::Stock, false) if first.starts_with("rayon-core ") => Ok(()),
        _ => Err(format!(
            "{} ({}): the patch is {} but should {}: `cargo tree -i rayon-core` says {first:?}",
            p.krate,
            v.name(),
            if patched { "applied" } else { "not applied" },
            if v == Variant::Patched {
                "be"
            } else {
                "not be"
            },
        )
        .into()),
    }
}
