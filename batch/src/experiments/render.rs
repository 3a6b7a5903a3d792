//! Markdown and CSV rendering of the studies' results: sweep tables, metrics tables (one
//! row per policy), waits and delays by bid class, and their CSV twins.

use std::fmt::Write;

use super::Point;
use crate::metrics::Metrics;

/// CSV of a sweep: `x,policy,utility_credits,wait_mean_s,utilisation`.
pub fn sweep_csv(points: &[Point]) -> String {
    let mut s = String::from("x,policy,utility_credits,wait_mean_s,utilisation\n");
    for p in points {
        for (name, u, w, util) in &p.per_policy {
            let _ = writeln!(s, "{},{name},{u:.3},{w:.1},{util:.4}", p.x);
        }
    }
    s
}

/// Markdown table of a sweep: utility per policy and `num/den` ratios.
pub fn sweep_table(points: &[Point], label: &str, ratios: &[(&str, &str)]) -> String {
    let mut s = String::new();
    let names: Vec<&str> = points
        .first()
        .map(|p| p.per_policy.iter().map(|x| x.0.as_str()).collect())
        .unwrap_or_default();
    let _ = write!(s, "| {label} |");
    for n in &names {
        let _ = write!(s, " {n} |");
    }
    for (a, b) in ratios {
        let _ = write!(s, " {a}/{b} |");
    }
    s.push('\n');
    s.push_str(&"|---".repeat(1 + names.len() + ratios.len()));
    s.push_str("|\n");
    for p in points {
        let _ = write!(s, "| {} |", p.x);
        for n in &names {
            let _ = write!(s, " {:.0} |", p.utility(n));
        }
        for (a, b) in ratios {
            let _ = write!(s, " {:.2} |", p.utility(a) / p.utility(b));
        }
        s.push('\n');
    }
    s
}

/// Markdown table of metrics, one row per policy.
pub fn metrics_table(ms: &[Metrics]) -> String {
    let mut s = String::from(
        "| policy | aggregate utility (credits) | % of max | mean wait (s) | p50 | p90 | p99 | max wait | bounded slowdown | utilisation | revenue (credits) | mean price (credits/proc-h) | preemptions |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for m in ms {
        let _ = writeln!(
            s,
            "| {} | {:.4e} | {:.1}% | {:.0} | {} | {} | {} | {} | {:.2} | {:.3} | {:.0} | {} | {} |",
            m.policy,
            m.utility as f64 / 1e6,
            100.0 * m.utility as f64 / (m.utility_max as f64).max(1.0),
            m.wait_mean,
            m.wait_p50,
            m.wait_p90,
            m.wait_p99,
            m.wait_max,
            m.bounded_slowdown,
            m.utilisation,
            m.revenue as f64 / 1e6,
            m.price_mean
                .map(|p| format!("{:.3}", p / 1e6))
                .unwrap_or_else(|| "-".into()),
            m.preemptions
        );
    }
    s
}

/// CSV of metrics, one row per policy, with a leading label column.
pub fn metrics_csv(label: &str, ms: &[Metrics], header: bool) -> String {
    csv(label, ms, header, &[])
}

/// [`metrics_csv`] with a header and, for each bid class `C` of the runs, the columns
/// `classC_jobs,classC_wait_mean_s,classC_wait_p50_s,classC_delay_mean_s` (empty where a
/// run has no job of that class).
pub fn metrics_csv_by_class(label: &str, ms: &[Metrics]) -> String {
    let mut classes: Vec<u8> = ms
        .iter()
        .flat_map(|m| m.by_class.iter().map(|c| c.class))
        .collect();
    classes.sort_unstable();
    classes.dedup();
    csv(label, ms, true, &classes)
}

fn csv(label: &str, ms: &[Metrics], header: bool, classes: &[u8]) -> String {
    let mut s = String::new();
    if header {
        s.push_str("label,policy,utility_credits,utility_max_credits,wait_mean_s,wait_p50_s,wait_p90_s,wait_p99_s,wait_max_s,bounded_slowdown,utilisation,revenue_credits,price_mean_credits,preemptions");
        for c in classes {
            let _ = write!(
                s,
                ",class{c}_jobs,class{c}_wait_mean_s,class{c}_wait_p50_s,class{c}_delay_mean_s"
            );
        }
        s.push('\n');
    }
    for m in ms {
        let _ = write!(
            s,
            "{label},{},{:.3},{:.3},{:.1},{},{},{},{},{:.3},{:.4},{:.3},{},{}",
            m.policy,
            m.utility as f64 / 1e6,
            m.utility_max as f64 / 1e6,
            m.wait_mean,
            m.wait_p50,
            m.wait_p90,
            m.wait_p99,
            m.wait_max,
            m.bounded_slowdown,
            m.utilisation,
            m.revenue as f64 / 1e6,
            m.price_mean
                .map(|p| format!("{:.4}", p / 1e6))
                .unwrap_or_default(),
            m.preemptions
        );
        for c in classes {
            match m.by_class.iter().find(|x| x.class == *c) {
                Some(x) => {
                    let _ = write!(
                        s,
                        ",{},{:.1},{},{:.1}",
                        x.jobs, x.wait_mean, x.wait_p50, x.delay_mean
                    );
                }
                None => s.push_str(",,,,"),
            }
        }
        s.push('\n');
    }
    s
}

/// Markdown table of each bid class's waits (first start - submission: mean and median)
/// and mean delay (completion - submission - runtime, the wait plus any time suspended)
/// under each policy.
pub fn class_table(ms: &[Metrics]) -> String {
    let mut s = String::from(
        "| policy | bid class | jobs | mean wait (s) | median wait (s) | mean delay (s) |\n|---|---|---|---|---|---|\n",
    );
    for m in ms {
        for c in &m.by_class {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.1} | {} | {:.1} |",
                m.policy, c.class, c.jobs, c.wait_mean, c.wait_p50, c.delay_mean
            );
        }
    }
    s
}
