//! The `stride-demo` binary, run as a user would.

use std::process::Command;

fn demo(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_stride-demo"))
        .args(args)
        .output()
        .expect("stride-demo runs")
}

#[test]
fn demo_prints_every_interval_and_the_totals() {
    let out = demo(&[]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for heading in [
        "A1-B1", "B1-C1", "C1-D1", "D1-A2", "A2-B2", "B2-C2", "C2-D2",
    ] {
        assert!(
            text.contains(&format!("\n{heading}  ")),
            "missing {heading}:\n{text}"
        );
    }
    assert!(text.contains("A, B, C, D compete for 2 CPUs: contended"));
    // Totals: contention charges 4 contended minutes' worth less than the paper's rule.
    let totals: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("totals"))
        .collect();
    let row = |job: &str| {
        totals
            .iter()
            .find(|l| l.split_whitespace().next() == Some(job))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap()
    };
    assert_eq!(row("A"), vec!["A", "80", "120"]);
    assert_eq!(row("D"), vec!["D", "20", "30"]);
}

#[test]
fn demo_refuses_arguments_in_one_line() {
    let out = demo(&["--fast"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--help"));
    assert!(demo(&["--help"]).status.success());
}
