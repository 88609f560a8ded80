//! `partita demo` end to end, at a small scale: every mode runs, every result is correct, the
//! report and the charts are written and well-formed, and under process control the
//! applications' active workers stay within the managed CPUs (beyond one reallocation).
//! Timings are the benchmark's business (docs/bench/demo.md), not this test's.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn partita() -> Command {
    Command::new(env!("CARGO_BIN_EXE_partita"))
}

/// A fresh output directory, removed when dropped.
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("partita-demo-test-{name}-"))
        .tempdir()
        .expect("create a temp dir") // a test cannot run without it
}

fn well_formed_svg(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc = roxmltree::Document::parse(&text)
        .unwrap_or_else(|e| panic!("{} is not well-formed XML: {e}", path.display()));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg", "{}", path.display());
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    let drawn = root
        .descendants()
        .filter(|n| matches!(n.tag_name().name(), "polyline" | "polygon" | "rect"))
        .count();
    assert!(drawn > 2, "{} draws nothing", path.display());
}

/// The longest stretch (seconds) during which the sum of active workers exceeded the CPUs.
fn longest_oversubscription(run: &Value) -> (f64, Vec<String>) {
    let cpus = run["cpus"].as_u64().unwrap() as f64;
    let mut longest: f64 = 0.0;
    let mut since: Option<f64> = None;
    // The samples of the longest stretch, for the failure message: (label target/active)...
    let (mut stretch, mut worst) = (Vec::new(), Vec::new());
    for s in run["timeline"].as_array().unwrap() {
        let t = s["t_s"].as_f64().unwrap();
        let apps = s["apps"].as_array().unwrap();
        // Workers on CPUs of their own never exceed the CPUs, and an application left without
        // any (more applications than CPUs) runs one worker on the shared ones (`min_target`).
        let shared = |a: &&Value| a["shared"].as_bool() == Some(true);
        let active: f64 = apps
            .iter()
            .filter(|a| !shared(a))
            .filter_map(|a| a["active"].as_u64())
            .sum::<u64>() as f64;
        let sharing_above_one = apps
            .iter()
            .filter(shared)
            .any(|a| a["active"].as_u64().unwrap_or(0) > 1);
        if active > cpus || sharing_above_one {
            let start = *since.get_or_insert(t);
            let shown: Vec<String> = apps
                .iter()
                .map(|a| {
                    let s = if shared(&a) { " shared" } else { "" };
                    format!("{} {}/{}{s}", a["label"], a["target"], a["active"])
                })
                .collect();
            stretch.push(format!("{t:.2}s: {}", shown.join(", ")));
            if t - start >= longest {
                longest = t - start;
                worst = stretch.clone();
            }
        } else {
            since = None;
            stretch.clear();
        }
    }
    (longest, worst)
}

/// The report says when (ISO 8601, UTC), where (CPU model, CPUs, memory, kernel) and how
/// (the exact command, quoted) it was made; results.json has the same as data.
fn readable_header(report: &str, out: &Path) {
    let line = |key: &str| -> &str {
        report
            .lines()
            .find_map(|l| l.strip_prefix(&format!("- {key}: ")))
            .unwrap_or_else(|| panic!("no {key} line in\n{report}"))
    };
    let date = line("date");
    let stamp = &date[..date.find(' ').unwrap_or(date.len())];
    let shape: String = stamp
        .chars()
        .map(|c| if c.is_ascii_digit() { 'd' } else { c })
        .collect();
    assert_eq!(shape, "dddd-dd-ddTdd:dd:ddZ", "{date}");
    assert!(date.contains("UTC"), "{date}");
    let machine = line("machine");
    for part in ["CPUs (", "GiB", "Linux "] {
        assert!(machine.contains(part), "{machine}");
    }
    let command = line("command");
    assert!(
        command.contains(" demo ") && command.contains(&*out.to_string_lossy()),
        "{command}"
    );

    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["date"].as_str(), Some(stamp));
    let m = &results["machine"];
    assert!(
        m["cpus_online"].as_u64() >= Some(1) && m["memory_bytes"].as_u64() > Some(0),
        "{m}"
    );
    assert!(m["cpu_model"].is_string() && m["kernel"].is_string(), "{m}");
}

/// report.md names every mode and chart; the SVGs are well-formed and draw something.
fn report_and_charts_are_written(out: &Path) {
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.starts_with("# partita demo"));
    readable_header(&report, out);
    for needle in [
        "| process-control |",
        "| batch |",
        "makespan.svg",
        "timeline-process-control.svg",
    ] {
        assert!(report.contains(needle), "report.md lacks {needle}");
    }
    for svg in [
        "makespan.svg",
        "timeline-uncontrolled.svg",
        "timeline-partitioned.svg",
        "timeline-process-control.svg",
    ] {
        well_formed_svg(&out.join(svg));
    }
}

#[test]
fn demo_runs_every_mode_with_correct_results_and_writes_its_report() {
    let scratch_dir = scratch("all-modes");
    let out = scratch_dir.path();
    let result = partita()
        .args([
            "demo",
            "--apps",
            "ocean,mp3d,cholesky,locus,pmake",
            "--scale",
            "0.05",
            "--threads",
            "2",
            "--out",
        ])
        .arg(out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&result.stdout);
    assert!(
        result.status.success(),
        "partita demo failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
    for mode in ["uncontrolled", "partitioned", "process-control", "batch"] {
        assert!(stdout.contains(mode), "no {mode} table in:\n{stdout}");
    }

    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let runs = results["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    for run in runs {
        let apps = run["apps"].as_array().unwrap();
        assert_eq!(apps.len(), 5, "{}", run["mode"]);
        for a in apps {
            assert_eq!(
                a["ok"],
                Value::Bool(true),
                "{} in {}: {}",
                a["label"],
                run["mode"],
                a
            );
            if a["app"] != "pmake" || run["mode"] != "batch" {
                assert!(a["cpu_s"].as_f64().unwrap() > 0.0, "{a}");
            }
            if a["expected"].is_u64() {
                assert_eq!(a["checksum"], a["expected"], "{a}");
            }
        }
        assert!(run["makespan_s"].as_f64().unwrap() > 0.0);
    }

    let pc = runs
        .iter()
        .find(|r| r["mode"] == "process-control")
        .unwrap();
    let samples = pc["timeline"].as_array().unwrap();
    assert!(
        samples.iter().any(|s| s["apps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["target"].is_u64())),
        "the manager never reported an allocation"
    );
    let realloc = pc["realloc_ms"].as_f64().unwrap() / 1000.0;
    let (longest, stretch) = longest_oversubscription(pc);
    // One reallocation period, plus one sampling period of observation slack.
    assert!(
        longest <= realloc + 0.05,
        "active workers exceeded the CPUs for {longest:.3} s (reallocation period {realloc} s); \
         label target/active per sample:\n{}",
        stretch.join("\n")
    );

    report_and_charts_are_written(out);
}

#[test]
fn workload_subcommand_checks_its_result_and_rejects_bad_input() {
    let ok = partita()
        .args([
            "workload",
            "locus",
            "--scale",
            "0.01",
            "--threads",
            "2",
            "--json",
        ])
        .env("PARTITA", "off")
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let line: Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(line["ok"], Value::Bool(true));
    assert_eq!(line["checksum"], line["expected"]);

    let wrong = partita()
        .args(["workload", "water", "--scale", "0.01", "--expect", "12345"])
        .env("PARTITA", "off")
        .output()
        .unwrap();
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("differs"));

    let unknown = partita().args(["workload", "nope"]).output().unwrap();
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("unknown application"));

    let bad = partita()
        .args(["workload", "ocean", "--scale=-1"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("scale"));

    let bad_mix = partita()
        .args(["demo", "--mix", "nope", "--out"])
        .arg(scratch("bad-mix").path())
        .output()
        .unwrap();
    assert!(!bad_mix.status.success());
    assert!(String::from_utf8_lossy(&bad_mix.stderr).contains("--mix"));
}
