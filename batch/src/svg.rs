//! Line charts as plain SVG text: one x axis, one y axis (linear or log10), several named
//! series with markers and a legend. Enough for the sweeps in `docs/ECONOMICS.md`.

use std::fmt::Write;

/// One named series of `(x, y)` points.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// Points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// A chart.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Plot y on a log10 scale (non-positive values are dropped).
    pub log_y: bool,
    /// The series.
    pub series: Vec<Series>,
}

const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-2..1e5).contains(&a) {
        format!("{v:.2e}")
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

impl Chart {
    /// The SVG document.
    pub fn render(&self) -> String {
        let (w, h) = (640.0, 400.0);
        let (l, r, t, b) = (80.0, 170.0, 40.0, 50.0);
        let ty = |y: f64| if self.log_y { y.log10() } else { y };
        let pts: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .filter(|p| !self.log_y || p.1 > 0.0)
            .map(|(x, y)| (x, ty(y)))
            .collect();
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(x, y) in &pts {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
        if pts.is_empty() {
            (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
        }
        if !self.log_y {
            y0 = y0.min(0.0);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        if y1 <= y0 {
            y1 = y0 + 1.0;
        }
        let pw = w - l - r;
        let ph = h - t - b;
        let sx = |x: f64| l + (x - x0) / (x1 - x0) * pw;
        let sy = |y: f64| t + ph - (y - y0) / (y1 - y0) * ph;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
            l + pw / 2.0,
            esc(&self.title)
        );
        let _ = writeln!(
            s,
            r#"<rect x="{l}" y="{t}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
        );
        for k in 0..=4 {
            let fx = x0 + (x1 - x0) * k as f64 / 4.0;
            let fy = y0 + (y1 - y0) * k as f64 / 4.0;
            let ylab = if self.log_y { 10f64.powf(fy) } else { fy };
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
                sx(fx),
                t + ph + 16.0,
                fmt_num(fx)
            );
            let _ = writeln!(
                s,
                r##"<text x="{}" y="{}" text-anchor="end">{}</text><line x1="{l}" x2="{}" y1="{}" y2="{}" stroke="#ddd"/>"##,
                l - 4.0,
                sy(fy) + 4.0,
                fmt_num(ylab),
                l + pw,
                sy(fy),
                sy(fy)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            l + pw / 2.0,
            h - 12.0,
            esc(&self.x_label)
        );
        let _ = writeln!(
            s,
            r#"<text transform="translate(16,{}) rotate(-90)" text-anchor="middle">{}{}</text>"#,
            t + ph / 2.0,
            esc(&self.y_label),
            if self.log_y { " (log scale)" } else { "" }
        );
        for (k, ser) in self.series.iter().enumerate() {
            let c = COLORS[k % COLORS.len()];
            let p: Vec<String> = ser
                .points
                .iter()
                .filter(|p| !self.log_y || p.1 > 0.0)
                .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(ty(y))))
                .collect();
            let _ = writeln!(
                s,
                r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
                p.join(" ")
            );
            for q in &p {
                let (a, b) = q.split_once(',').unwrap_or(("0", "0"));
                let _ = writeln!(s, r#"<circle cx="{a}" cy="{b}" r="3" fill="{c}"/>"#);
            }
            let ly = t + 10.0 + 18.0 * k as f64;
            let _ = writeln!(
                s,
                r#"<line x1="{}" x2="{}" y1="{ly}" y2="{ly}" stroke="{c}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
                w - r + 10.0,
                w - r + 30.0,
                w - r + 35.0,
                ly + 4.0,
                esc(&ser.name)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
