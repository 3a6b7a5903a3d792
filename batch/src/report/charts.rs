//! The SVG plots of `docs/ECONOMICS.md`: utility per policy over a sweep, the trace
//! study's bars, Geweke's delays by bid class and price against load.

use super::study::GewekeRun;
use crate::experiments::{Point, TraceRow};
use crate::svg::{Chart, Series};

/// An SVG line chart of aggregate utility per policy over a sweep.
pub fn sweep_chart(pts: &[Point], title: &str, x: &str, log_y: bool) -> String {
    let names: Vec<String> = pts
        .first()
        .map(|p| p.per_policy.iter().map(|q| q.0.clone()).collect())
        .unwrap_or_default();
    Chart {
        title: title.into(),
        x_label: x.into(),
        y_label: "aggregate utility (credits)".into(),
        log_y,
        series: names
            .iter()
            .map(|n| Series {
                name: n.clone(),
                points: pts.iter().map(|p| (p.x, p.utility(n))).collect(),
            })
            .collect(),
    }
    .render()
}

/// Aggregate utility of each policy of the trace study, one series per estimate padding.
pub fn lee_chart(rows: &[TraceRow]) -> String {
    let bars: Vec<Series> = rows
        .iter()
        .map(|r| Series {
            name: r.estimates.clone(),
            points: r
                .metrics
                .iter()
                .enumerate()
                .map(|(i, m)| (i as f64, m.utility as f64 / 1e6))
                .collect(),
        })
        .collect();
    Chart {
        title: "Aggregate utility: 0 = GA, 1 = PRIOFIFO, 2 = EASY, 3 = conservative".into(),
        x_label: "policy".into(),
        y_label: "aggregate utility (credits)".into(),
        log_y: false,
        series: bars,
    }
    .render()
}

fn series(name: &str, run: &GewekeRun, y: impl Fn(&super::study::GewekeRow) -> f64) -> Series {
    Series {
        name: name.into(),
        points: run.rows.iter().map(|r| (r.load, y(r))).collect(),
    }
}

/// Geweke's mean delay by bid class under FIFO and Vickrey against load.
pub fn geweke_delay_chart(run: &GewekeRun) -> String {
    Chart {
        title: "Mean delay by bid class".into(),
        x_label: "offered load".into(),
        y_label: "mean delay (s)".into(),
        log_y: false,
        series: vec![
            series("FIFO high", run, |r| r.fifo_high),
            series("FIFO low", run, |r| r.fifo_low),
            series("Vickrey high", run, |r| r.vickrey_high),
            series("Vickrey low", run, |r| r.vickrey_low),
        ],
    }
    .render()
}

/// The Vickrey price against load.
pub fn geweke_price_chart(run: &GewekeRun) -> String {
    Chart {
        title: "Vickrey price vs load".into(),
        x_label: "offered load".into(),
        y_label: "mean price (credits/proc-h)".into(),
        log_y: false,
        series: vec![series("Vickrey price", run, |r| r.price)],
    }
    .render()
}
