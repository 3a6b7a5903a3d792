//! Replays the REXEC paper's Figure 4 on the model and prints, for every interval, each job's
//! CPU share (water-filling model and stride scheduler measurement) and its charge under the
//! `contention` and `paper` policies.

use std::process::ExitCode;

use money::format_credits;
use stride::MILLI;
use stride::scenario::{IntervalReport, Scenario, figure4};

fn main() -> ExitCode {
    if let Some(arg) = std::env::args().nth(1) {
        if arg == "-h" || arg == "--help" {
            println!(
                "usage: stride-demo\n\n\
                 Replays Figure 4 of Chun & Culler (1999) on the stride model: each job's CPU share\n\
                 (water-filling model and stride scheduler measurement) and its charge under the\n\
                 contention and paper policies, interval by interval."
            );
            return ExitCode::SUCCESS;
        }
        eprintln!(
            "stride-demo: unexpected argument {arg:?}; it takes none (see stride-demo --help)"
        );
        return ExitCode::from(2);
    }
    let scenario = figure4();
    match scenario.replay() {
        Ok(reports) => {
            print!("{}", render(&scenario, &reports));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("stride-demo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn render(s: &Scenario, reports: &[IntervalReport]) -> String {
    let mut o = String::new();
    let names: Vec<&str> = s.jobs.iter().map(|j| j.name.as_str()).collect();
    let bids: Vec<String> = s.jobs.iter().map(|j| j.bid.to_string()).collect();
    o += "Figure 4 of Chun & Culler (1999), replayed on the stride model\n";
    o += &format!(
        "node: {} CPUs; single-threaded jobs {} bid {} credits/min; quantum {} ms\n",
        s.cpus,
        names.join(", "),
        bids.join(", "),
        s.quantum_nanos / 1_000_000
    );
    o += "charges: contention = pay only while runnable demand exceeds the CPUs (default);\n";
    o += "         paper      = pay whenever more than one job is present\n";

    let mut totals = vec![(0i64, 0i64); s.jobs.len()];
    for r in reports {
        let present: Vec<&str> = r.jobs.iter().map(|j| names[j.job]).collect();
        let state = match (present.len(), r.contended) {
            (1, _) => format!("{} alone", present[0]),
            (_, true) => format!(
                "{} compete for {} CPUs: contended",
                present.join(", "),
                s.cpus
            ),
            (_, false) => format!(
                "{} fit on {} CPUs: not contended",
                present.join(", "),
                s.cpus
            ),
        };
        o += &format!(
            "\n{}-{}  {}-{}  {}\n",
            r.from,
            r.to,
            clock(r.start_nanos),
            clock(r.start_nanos + r.nanos),
            state
        );
        o += "  job  bid/min  CPUs model  CPUs stride  paid (contention)  paid (paper)\n";
        for j in &r.jobs {
            totals[j.job].0 += j.contention_charge;
            totals[j.job].1 += j.paper_charge;
            o += &format!(
                "  {:<3}  {:>7}  {:>10}  {:>11}  {:>17}  {:>12}\n",
                names[j.job],
                s.jobs[j.job].bid.to_string(),
                cpus(j.model_milli_cpus),
                cpus(j.measured_milli_cpus),
                format_credits(j.contention_charge),
                format_credits(j.paper_charge),
            );
        }
    }
    o += "\ntotals (credits)\n  job  contention  paper\n";
    for (k, (c, p)) in totals.iter().enumerate() {
        o += &format!(
            "  {:<3}  {:>10}  {:>5}\n",
            names[k],
            format_credits(*c),
            format_credits(*p)
        );
    }
    o
}

/// Milli-CPUs as CPUs with three decimals.
fn cpus(milli: u64) -> String {
    format!("{}.{:03}", milli / MILLI, milli % MILLI)
}

/// Nanoseconds since the start as m:ss.
fn clock(nanos: u64) -> String {
    let secs = nanos / 1_000_000_000;
    format!("{}:{:02}", secs / 60, secs % 60)
}
