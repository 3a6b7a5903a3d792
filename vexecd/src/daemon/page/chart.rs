//! The nodes' prices over the last hour as small inline SVG step charts that share
//! one [`Axis`], so charts side by side compare: the same price is the same height
//! in every chart (a node at 2 credits a minute draws half as high as one at 4),
//! and the same clock time the same place. Time runs left (an hour ago, or the
//! oldest point of any node when the histories are younger, at least [`MIN_SPAN`])
//! to right (now), labelled with clock times (UTC); the price runs from the zero
//! line at the bottom to the axis top (the highest price of any node over the
//! span, rounded up to 1, 2 or 5 times a power of ten credits, at least one credit
//! a minute), labelled 0 and the top. Each price is held until the next point and
//! the newest until now. Only numbers go into the SVG, so nothing from the network
//! needs escaping here.

use std::fmt::Write;
use std::time::Duration;

use super::history::SPAN;

/// Chart width, pixels.
pub const WIDTH: f64 = 240.0;
/// Chart height, pixels.
pub const HEIGHT: f64 = 64.0;
/// Where the highest price is drawn, pixels from the top.
pub const TOP_Y: f64 = 12.0;
/// The zero line, pixels from the top (the time labels are below it).
pub const ZERO_Y: f64 = 50.0;
/// Shortest time a chart spans.
pub const MIN_SPAN: Duration = Duration::from_secs(60);

/// The scale every chart of a page shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Axis {
    /// The price at the top, micro-credits a minute.
    pub top: i64,
    /// How far back the charts go.
    pub span: Duration,
    /// Wall-clock time of the right edge (now), Unix seconds.
    pub now_unix: u64,
}

impl Axis {
    /// The axis for charts of `series` (each a node's (age, price) points, oldest
    /// first) and current `prices`, ending at `now_unix`.
    pub fn over<'a>(
        series: impl IntoIterator<Item = &'a [(Duration, i64)]>,
        prices: impl IntoIterator<Item = i64>,
        now_unix: u64,
    ) -> Axis {
        let mut highest = prices.into_iter().max().unwrap_or(0);
        let mut oldest = Duration::ZERO;
        for points in series {
            if let Some(&(age, _)) = points.first() {
                oldest = oldest.max(age);
            }
            highest = points.iter().map(|&(_, p)| p).fold(highest, i64::max);
        }
        Axis {
            top: nice_ceiling(highest),
            span: oldest.clamp(MIN_SPAN, SPAN),
            now_unix,
        }
    }

    fn x(&self, age: Duration) -> f64 {
        let span = self.span.as_secs_f64();
        WIDTH * (1.0 - age.as_secs_f64().min(span) / span)
    }

    /// The height at which `price` is drawn.
    pub fn y(&self, price: i64) -> f64 {
        let fraction = price.clamp(0, self.top) as f64 / self.top as f64;
        ZERO_Y - fraction * (ZERO_Y - TOP_Y)
    }
}

/// The smallest 1, 2 or 5 times a power of ten credits at or above `micros`, at
/// least one credit (in micro-credits).
///
/// ```
/// use vexecd::daemon::page::chart::nice_ceiling;
/// let c = |credits: i64| credits * 1_000_000;
/// assert_eq!(nice_ceiling(0), c(1));
/// assert_eq!(nice_ceiling(c(4)), c(5));
/// assert_eq!(nice_ceiling(c(5)), c(5));
/// assert_eq!(nice_ceiling(c(11)), c(20));
/// assert_eq!(nice_ceiling(c(30)), c(50));
/// assert_eq!(nice_ceiling(i64::MAX), i64::MAX);
/// ```
pub fn nice_ceiling(micros: i64) -> i64 {
    let mut step = money::MICROS_PER_CREDIT;
    loop {
        for m in [1, 2, 5] {
            match step.checked_mul(m) {
                Some(v) if v >= micros => return v,
                Some(_) => {}
                None => return i64::MAX,
            }
        }
        step = match step.checked_mul(10) {
            Some(s) => s,
            None => return i64::MAX,
        };
    }
}

/// `HH:MM` UTC of a Unix time.
fn hh_mm(unix_seconds: u64) -> String {
    let mut t = clock(unix_seconds);
    t.truncate("HH:MM".len());
    t
}

/// The chart of `points` (age, price in micro-credits a minute), oldest first, on
/// `axis`.
pub fn svg(points: &[(Duration, i64)], axis: &Axis) -> String {
    let mut out = format!(
        "<svg class=\"chart\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
         role=\"img\" data-points=\"{}\" data-top=\"{}\">",
        points.len(),
        money::format_credits(axis.top)
    );
    let _ = write!(
        out,
        "<rect width=\"{WIDTH}\" height=\"{HEIGHT}\" class=\"frame\"/>\
         <line class=\"top\" x1=\"0\" y1=\"{TOP_Y}\" x2=\"{WIDTH}\" y2=\"{TOP_Y}\"/>\
         <line class=\"zero\" x1=\"0\" y1=\"{ZERO_Y}\" x2=\"{WIDTH}\" y2=\"{ZERO_Y}\"/>\
         <text x=\"3\" y=\"{:.0}\" class=\"axis top\">{}</text>\
         <text x=\"3\" y=\"{:.0}\" class=\"axis zero\">0</text>\
         <text x=\"3\" y=\"{:.0}\" class=\"axis time\">{}</text>\
         <text x=\"{:.0}\" y=\"{:.0}\" class=\"axis time\" text-anchor=\"end\">{} UTC</text>",
        TOP_Y - 2.0,
        money::format_credits(axis.top),
        ZERO_Y - 2.0,
        HEIGHT - 3.0,
        hh_mm(axis.now_unix.saturating_sub(axis.span.as_secs())),
        WIDTH - 3.0,
        HEIGHT - 3.0,
        hh_mm(axis.now_unix),
    );
    if points.is_empty() {
        out.push_str("<text x=\"90\" y=\"34\" class=\"axis\">no data yet</text></svg>");
        return out;
    }
    let mut line = String::new();
    for (i, &(age, price)) in points.iter().enumerate() {
        let next = points.get(i + 1).map_or(WIDTH, |&(a, _)| axis.x(a));
        let _ = write!(
            line,
            "{:.1},{:.1} {:.1},{:.1} ",
            axis.x(age),
            axis.y(price),
            next,
            axis.y(price)
        );
    }
    let _ = write!(
        out,
        "<polyline class=\"price\" points=\"{}\"/></svg>",
        line.trim_end()
    );
    out
}

/// `HH:MM:SS UTC` of a Unix time.
pub(super) fn clock(unix_seconds: u64) -> String {
    let s = unix_seconds % 86_400;
    format!("{:02}:{:02}:{:02} UTC", s / 3600, s % 3600 / 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: i64 = money::MICROS_PER_CREDIT;

    #[test]
    fn each_point_is_held_until_the_next_and_the_newest_until_now() {
        let points = [
            (Duration::from_secs(7200), 0),
            (Duration::from_secs(1800), 0),
            (Duration::from_secs(900), 2 * C),
        ];
        let axis = Axis::over([&points[..]], [2 * C], 3_600 * 10);
        assert_eq!(axis.span, SPAN);
        let s = svg(&points, &axis);
        assert!(s.contains("data-points=\"3\""), "{s}");
        // From 09:00 to 10:00 UTC.
        assert!(s.contains(">09:00</text>"), "{s}");
        assert!(s.contains(">10:00 UTC</text>"), "{s}");
        // A young history spans what it has: half an hour, 09:30 to 10:00.
        let young = &points[1..];
        let axis = Axis::over([young], [2 * C], 3_600 * 10);
        let s = svg(young, &axis);
        assert!(s.contains(">09:30</text>"), "{s}");
        assert!(s.contains("data-points=\"2\""), "{s}");
        // Half an hour ago at 0 (the zero line), then 2 credits (the top) until now.
        assert!(
            s.contains("points=\"0.0,50.0 120.0,50.0 120.0,12.0 240.0,12.0\""),
            "{s}"
        );
        assert!(s.contains("class=\"zero\" x1=\"0\" y1=\"50\""), "{s}");
        assert!(s.contains("class=\"axis top\">2</text>"), "{s}");
    }

    #[test]
    fn every_chart_of_a_page_shares_one_axis() {
        let four = [(Duration::from_secs(120), 4 * C)];
        let two = [(Duration::from_secs(60), 2 * C)];
        let axis = Axis::over([&four[..], &two[..]], [4 * C, 2 * C], 1_000);
        assert_eq!((axis.top, axis.span), (5 * C, Duration::from_secs(120)));
        let height = |p| ZERO_Y - axis.y(p);
        assert!((height(2 * C) * 2.0 - height(4 * C)).abs() < 1e-9);
        assert!(svg(&four, &axis).contains("data-top=\"5\""));
        assert!(svg(&two, &axis).contains("data-top=\"5\""));
    }

    #[test]
    fn no_points_say_so_and_a_zero_price_scales_to_one_credit() {
        let axis = Axis::over([], [], 0);
        assert!(svg(&[], &axis).contains("no data yet"));
        let points = [(Duration::ZERO, 0)];
        let axis = Axis::over([&points[..]], [0], 0);
        let s = svg(&points, &axis);
        assert!(s.contains("class=\"axis top\">1</text>"), "{s}");
        assert!(s.contains("points=\"240.0,50.0 240.0,50.0\""), "{s}");
    }
}
