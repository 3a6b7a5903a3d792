//! `marketsim` as a user runs it: trace jobs valued (not all worth zero), the per-job
//! schedule written and passed by the independent checker, waits and delays by bid class
//! printed and in the CSV, the offered load `bench` reports,
//! and input errors as one line naming the file and line, with no stack trace even under
//! `RUST_BACKTRACE=1`.

use std::path::Path;
use std::process::{Command, Output};

use batch::check::{check_head_not_delayed, check_schedule};
use batch::job::Job;
use batch::workload::swf::{self, Record, Swf};
use batch::workload::synth::{SynthConfig, generate};

fn marketsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_marketsim"))
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("marketsim runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// An SWF trace of `jobs` on a machine of `procs` (as its MaxProcs header says).
fn write_trace(path: &Path, jobs: &[Job], procs: u32) {
    let records = jobs
        .iter()
        .map(|j| {
            let mut f = [-1.0; 18];
            f[0] = j.id as f64;
            f[1] = j.submit as f64;
            f[3] = j.runtime as f64;
            f[4] = j.width as f64;
            f[10] = 1.0;
            f[14] = 0.0;
            Record { f }
        })
        .collect();
    let trace = Swf {
        header: vec!["; Version: 2.2".into(), format!("; MaxProcs: {procs}")],
        records,
        lines: Vec::new(),
    };
    std::fs::write(path, swf::write(&trace)).unwrap();
}

fn congested(procs: u32) -> Vec<Job> {
    generate(&SynthConfig {
        jobs: 120,
        procs,
        max_width: 4,
        burst: 16,
        load: 1.0,
        seed: 4,
        ..SynthConfig::default()
    })
}

/// The aggregate utility column of `policy`'s row in `run`'s table.
fn utility_of(table: &str, policy: &str) -> f64 {
    let row = table
        .lines()
        .find(|l| l.starts_with(&format!("| {policy} |")))
        .unwrap_or_else(|| panic!("no row for {policy} in\n{table}"));
    row.split('|').nth(2).unwrap().trim().parse().unwrap()
}

#[test]
fn run_swf_values_trace_jobs_so_market_policies_differ_from_easy() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.swf");
    write_trace(&trace, &congested(8), 8);
    let out = marketsim(&[
        "run",
        "--swf",
        trace.to_str().unwrap(),
        "--policy",
        "easy,firstprice,priofifo",
        "--seed",
        "3",
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("seed 3"),
        "the utilities' seed is said: {stderr}"
    );
    let easy = utility_of(&stdout, "easy");
    assert!(easy > 0.0, "trace jobs are worth something: {stdout}");
    assert_ne!(easy, utility_of(&stdout, "firstprice"), "{stdout}");
    assert_ne!(easy, utility_of(&stdout, "priofifo"), "{stdout}");
    // Same seed, same valuation; another seed, another.
    let again = marketsim(&[
        "run",
        "--swf",
        trace.to_str().unwrap(),
        "--policy",
        "easy",
        "--seed",
        "3",
    ]);
    assert_eq!(utility_of(&text(&again.stdout), "easy"), easy);
}

/// What `run` prints after its metrics table: the table by bid class.
fn class_table(stdout: &str) -> &str {
    stdout
        .split("by bid class")
        .nth(1)
        .unwrap_or_else(|| panic!("no class table in\n{stdout}"))
}

#[test]
fn run_prints_delays_by_bid_class() {
    let out = marketsim(&["run", "--policy", "fifo,vickrey", "--jobs", "200"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = class_table(&stdout);
    for row in [
        "| fifo | 0 |",
        "| fifo | 1 |",
        "| vickrey | 0 |",
        "| vickrey | 1 |",
    ] {
        assert!(table.contains(row), "{row} missing from\n{table}");
    }
}

/// Five jobs on 2 processors, in two bid classes (the SWF queue field: 0 high, 1 low).
/// Plain FIFO starts jobs 1 and 2 at 0, jobs 3 and 4 at 100 (when 1 and 2 end) and the
/// 2-wide job 5 at 150 (when 3 ends), so the waits are: class 0 (jobs 1, 4, 5) 0, 90,
/// 130 (mean 73.3, median 90); class 1 (jobs 2, 3) 0, 100 (mean 50.0, median 0).
const TWO_CLASSES: &str = "; MaxProcs: 2
1 0 -1 100 1 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1
2 0 -1 100 1 -1 -1 -1 -1 -1 1 -1 -1 -1 1 -1 -1 -1
3 0 -1 50 1 -1 -1 -1 -1 -1 1 -1 -1 -1 1 -1 -1 -1
4 10 -1 30 1 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1
5 20 -1 100 2 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1
";

#[test]
fn run_prints_each_bid_class_waits_in_the_table_and_the_csv() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("classes.swf");
    std::fs::write(&trace, TWO_CLASSES).unwrap();
    let csv = dir.path().join("m.csv");
    let out = marketsim(&[
        "run",
        "--swf",
        trace.to_str().unwrap(),
        "--policy",
        "fifo,vickrey",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = class_table(&stdout);
    assert!(
        table.contains(
            "| policy | bid class | jobs | mean wait (s) | median wait (s) | mean delay (s) |"
        ),
        "{table}"
    );
    // Never suspended under FIFO, so each job's delay is its wait.
    for row in [
        "| fifo | 0 | 3 | 73.3 | 90 | 73.3 |",
        "| fifo | 1 | 2 | 50.0 | 0 | 50.0 |",
    ] {
        assert!(table.contains(row), "{row} missing from\n{table}");
    }
    for row in ["| vickrey | 0 | 3 |", "| vickrey | 1 | 2 |"] {
        assert!(table.contains(row), "{row} missing from\n{table}");
    }
    let csv = std::fs::read_to_string(&csv).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let fifo: Vec<&str> = lines
        .find(|l| l.starts_with("run,fifo,"))
        .unwrap_or_else(|| panic!("no fifo row in\n{csv}"))
        .split(',')
        .collect();
    assert_eq!(header.len(), fifo.len(), "{csv}");
    let cell = |name: &str| {
        let k = header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no column {name} in\n{csv}"));
        fifo[k]
    };
    for (name, want) in [
        ("class0_jobs", "3"),
        ("class0_wait_mean_s", "73.3"),
        ("class0_wait_p50_s", "90"),
        ("class0_delay_mean_s", "73.3"),
        ("class1_jobs", "2"),
        ("class1_wait_mean_s", "50.0"),
        ("class1_wait_p50_s", "0"),
        ("class1_delay_mean_s", "50.0"),
    ] {
        assert_eq!(cell(name), want, "{name} in\n{csv}");
    }
}

#[test]
fn the_schedule_file_passes_the_independent_checker_and_a_forged_one_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("schedule.csv");
    let out = marketsim(&[
        "run",
        "--policy",
        "easy,vickrey",
        "--jobs",
        "150",
        "--procs",
        "8",
        "--max-width",
        "4",
        "--seed",
        "6",
        "--schedule",
        file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let jobs = generate(&SynthConfig {
        jobs: 150,
        procs: 8,
        max_width: 4,
        seed: 6,
        ..SynthConfig::default()
    });
    let csv = std::fs::read_to_string(&file).unwrap();
    let runs = batch::schedule::read(&csv, &jobs, 8).unwrap();
    assert_eq!(runs.len(), 2);
    for run in &runs {
        check_schedule(&jobs, run).unwrap_or_else(|e| panic!("{}: {e}", run.policy));
    }
    check_head_not_delayed(&jobs, &runs[0]).unwrap();
    assert!(
        runs[1].outcomes.iter().any(|o| o.preempted > 0),
        "vickrey suspends"
    );
    let revenue: i64 = runs[1].outcomes.iter().map(|o| o.charge).sum();
    assert!(revenue > 0);
    // Move one segment of the EASY run a second earlier than its job's arrival.
    let late = jobs.iter().find(|j| j.submit > 0).unwrap();
    let forged: String = csv
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            if f[0] == "easy" && f[1] == late.id.to_string() {
                let (s, e) = (late.submit - 1, late.submit - 1 + late.runtime);
                format!("{},{},{},{s},{e},{},{}\n", f[0], f[1], f[2], f[5], f[6])
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let runs = batch::schedule::read(&forged, &jobs, 8).unwrap();
    let err = check_schedule(&jobs, &runs[0]).unwrap_err();
    assert!(err.contains("before arriving"), "{err}");
}

/// Exit status, and stderr which must be one line.
fn fails_with_one_line(args: &[&str]) -> String {
    let out = marketsim(args);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{args:?} should fail");
    assert_eq!(
        stderr.lines().count(),
        1,
        "one line, no stack trace:\n{stderr}"
    );
    stderr
}

#[test]
fn a_job_wider_than_the_machine_is_an_error_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("wide.swf");
    let mut jobs = congested(8);
    jobs[5].width = 9;
    write_trace(&trace, &jobs, 8);
    let path = trace.to_str().unwrap();
    let err = fails_with_one_line(&["run", "--swf", path, "--policy", "easy"]);
    // Two header lines, then job 6 on line 8.
    assert!(err.contains(path) && err.contains("line 8"), "{err}");
    assert!(
        err.contains("needs 9 processors, the machine has 8"),
        "{err}"
    );
}

#[test]
fn an_empty_or_malformed_trace_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.swf");
    std::fs::write(&empty, "; Version: 2.2\n; MaxProcs: 8\n").unwrap();
    let path = empty.to_str().unwrap();
    let err = fails_with_one_line(&["run", "--swf", path]);
    assert!(
        err.contains(path) && err.contains("no job to simulate"),
        "{err}"
    );

    let bad = dir.path().join("bad.swf");
    std::fs::write(&bad, "; MaxProcs: 8\n1 0 -1 10 1\n2 0 -1 x 1\n").unwrap();
    let path = bad.to_str().unwrap();
    let err = fails_with_one_line(&["bench", "--swf", path]);
    assert!(
        err.contains(&format!("{path}: line 2: expected 18 fields")),
        "{err}"
    );
    assert!(err.contains("1 more malformed lines: 3"), "{err}");
}

/// The workload line of `bench --policies fifo` on a trace of `jobs` (submit, runtime)
/// of one processor on a 4-processor machine, asked for an offered load of 0.85.
fn bench_workload(jobs: &[(i64, i64)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.swf");
    let jobs: Vec<Job> = jobs
        .iter()
        .enumerate()
        .map(|(k, &(submit, runtime))| Job {
            id: k as u64 + 1,
            submit,
            width: 1,
            runtime,
            estimate: runtime,
            utility: batch::utility::Utility::constant(0),
            queue: 0,
            class: 0,
        })
        .collect();
    write_trace(&trace, &jobs, 4);
    let out = marketsim(&[
        "bench",
        "--swf",
        trace.to_str().unwrap(),
        "--policies",
        "fifo",
        "--load",
        "0.85",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    stdout
        .lines()
        .find(|l| l.starts_with("Workload:"))
        .unwrap_or_else(|| panic!("no workload line in\n{stdout}"))
        .to_string()
}

#[test]
fn bench_says_the_load_a_trace_offering_more_than_asked_offers() {
    // 20 jobs of 100 s, one every 10 s: 2000 / (4 * 190) = 2.63, stretched to 0.85.
    let line = bench_workload(&(0..20).map(|k| (10 * k, 100)).collect::<Vec<_>>());
    assert!(
        line.contains("arrivals stretched 3.1 times: offered load 0.85 (the trace's own 2.63);"),
        "{line}"
    );
    // All 20 at once: no stretching spreads them, so the load stays what the trace offers
    // (over the span's floor of one second), and the asked one is named beside it.
    let line = bench_workload(&[(0, 100); 20]);
    assert!(
        line.contains(
            "every job arrives in the same second: offered load 500.00 (the trace's own 500.00; \
             asked 0.85, which no stretching reaches);"
        ),
        "{line}"
    );
    assert!(!line.contains("stretched"), "{line}");
}

#[test]
fn bench_refuses_a_load_no_trace_can_be_fitted_to() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.swf");
    write_trace(&trace, &congested(8), 8);
    for load in ["0", "-1", "NaN"] {
        let err = fails_with_one_line(&[
            "bench",
            "--swf",
            trace.to_str().unwrap(),
            "--policies",
            "fifo",
            &format!("--load={load}"),
        ]);
        assert!(
            err.contains(&format!("--load must be a positive number, not {load}")),
            "{err}"
        );
    }
}
