//! `partita calibrate` stores what the bandwidth policy reads as its capacity, and names the
//! flag it rejects.

use std::process::Command;

#[test]
fn calibration_is_stored_and_read_back() {
    let dir = std::env::temp_dir().join(format!("partita-cal-{}", std::process::id()));
    let path = dir.join("bw.state");
    let out = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args([
            "calibrate",
            "--threads",
            "2",
            "--array-mib",
            "4",
            "--reps",
            "2",
        ])
        .arg("--state-file")
        .arg(&path)
        .output()
        .expect("run partita calibrate");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("GB/s"), "{stdout}");
    let back = partita_numa::triad::Calibration::load(&path).expect("stored calibration");
    assert!(back.gbps > 0.0);
    assert_eq!(back.threads, 2);
    std::fs::remove_dir_all(&dir).expect("remove the test's directory");
}

#[test]
fn bad_arguments_name_the_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["calibrate", "--reps", "0", "--dry-run"])
        .output()
        .expect("run partita calibrate");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--reps"), "{stderr}");
}
