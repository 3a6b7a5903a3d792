//! placeholder
use anyhow::Result;
use batch::experiments::Point;
use batch::svg::{Chart, Series};
use std::path::Path;

pub fn chart(pts: &[Point], title: &str, x: &str, log_y: bool) -> String {
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

pub fn generate(_out: &Path, _swf: &Path, _quick: bool) -> Result<()> {
    Ok(())
}
pub fn bench(_swf: &Path, _load: f64, _out: Option<&Path>) -> Result<()> {
    Ok(())
}
