//! Markdown and CSV rendering of the studies' results: sweep tables, metrics tables (one
//! row per policy), delays by bid class, and their CSV twins.

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
    let mut s = String::new();
    if header {
        s.push_str("label,policy,utility_credits,utility_max_credits,wait_mean_s,wait_p50_s,wait_p90_s,wait_p99_s,wait_max_s,bounded_slowdown,utilisation,revenue_credits,price_mean_credits,preemptions\n");
    }
    for m in ms {
        let _ = writeln!(
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
    }
    s
}

/// Markdown table of the mean delay (completion - submission - runtime) of each bid class
/// under each policy; for a job never suspended the delay is its wait.
pub fn class_table(ms: &[Metrics]) -> String {
    let mut s = String::from("| policy | bid class | jobs | mean delay (s) |\n|---|---|---|---|\n");
    for m in ms {
        for (class, jobs, delay) in &m.delay_by_class {
            let _ = writeln!(s, "| {} | {class} | {jobs} | {delay:.0} |", m.policy);
        }
    }
    s
}
