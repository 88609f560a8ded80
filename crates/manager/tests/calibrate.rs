//! `partita calibrate` stores what the bandwidth policy reads as its capacity.

#[test]
fn calibration_is_stored_and_read_back() {
    let path = std::env::temp_dir().join(format!("partita-cal-{}/bw.state", std::process::id()));
    let args = partita_manager::calibrate::CalibrateArgs {
        threads: Some(2),
        array_mib: Some(4),
        reps: 2,
        state_file: Some(path.clone()),
        dry_run: false,
    };
    let r = partita_manager::calibrate::run(&args).unwrap();
    assert_eq!(r.stored.as_deref(), Some(path.as_path()));
    let back = partita_numa::triad::Calibration::load(&path).unwrap();
    assert_eq!(back.gbps, r.result.best_gbps);
    assert_eq!(r.result.runs_gbps.len(), 2);
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn bad_arguments_name_the_flag() {
    let args = partita_manager::calibrate::CalibrateArgs {
        reps: 0,
        ..Default::default()
    };
    let e = partita_manager::calibrate::run(&args)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--reps"), "{e}");
}
