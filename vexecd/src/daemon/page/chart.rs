//! One node's price over the last hour as a small inline SVG step chart: time
//! runs left (an hour ago, or the oldest point when the history is younger, at
//! least [`MIN_SPAN`]) to right (now), the price from 0 at the bottom to the
//! hour's highest (at least one credit a minute) at the top, each price held until
//! the next point and the newest held until now. Only numbers go into the SVG, so
//! nothing from the network needs escaping here.

use std::fmt::Write;
use std::time::Duration;

use super::history::SPAN;

/// Chart width, pixels.
pub const WIDTH: f64 = 240.0;
/// Chart height, pixels.
pub const HEIGHT: f64 = 48.0;
const MARGIN: f64 = 3.0;
/// Shortest time a chart spans.
pub const MIN_SPAN: Duration = Duration::from_secs(60);

/// The chart of `points` (age, price in micro-credits a minute), oldest first.
pub fn svg(points: &[(Duration, i64)]) -> String {
    let mut out = format!(
        "<svg class=\"chart\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
         role=\"img\" data-points=\"{}\">",
        points.len()
    );
    out.push_str(&format!(
        "<rect width=\"{WIDTH}\" height=\"{HEIGHT}\" class=\"frame\"/>"
    ));
    if points.is_empty() {
        out.push_str("<text x=\"6\" y=\"28\" class=\"axis\">no data yet</text></svg>");
        return out;
    }
    let top = points
        .iter()
        .map(|&(_, p)| p)
        .max()
        .unwrap_or(0)
        .max(money::MICROS_PER_CREDIT);
    let span = points[0].0.clamp(MIN_SPAN, SPAN);
    let x = |age: Duration| {
        let span = span.as_secs_f64();
        WIDTH * (1.0 - age.as_secs_f64().min(span) / span)
    };
    let y = |price: i64| {
        let fraction = price.clamp(0, top) as f64 / top as f64;
        HEIGHT - MARGIN - fraction * (HEIGHT - 2.0 * MARGIN)
    };
    let mut line = String::new();
    for (i, &(age, price)) in points.iter().enumerate() {
        let next = points.get(i + 1).map_or(WIDTH, |&(a, _)| x(a));
        let _ = write!(
            line,
            "{:.1},{:.1} {:.1},{:.1} ",
            x(age),
            y(price),
            next,
            y(price)
        );
    }
    let _ = write!(
        out,
        "<polyline class=\"price\" points=\"{}\"/>\
         <text x=\"4\" y=\"11\" class=\"axis\">{}</text>\
         <text x=\"4\" y=\"{:.0}\" class=\"axis\">{} min ago</text>",
        line.trim_end(),
        money::format_credits(top),
        HEIGHT - 5.0,
        span.as_secs().div_ceil(60)
    );
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_point_is_held_until_the_next_and_the_newest_until_now() {
        let s = svg(&[
            (Duration::from_secs(7200), 0),
            (Duration::from_secs(1800), 0),
            (Duration::from_secs(900), 2_000_000),
        ]);
        assert!(s.contains("data-points=\"3\""), "{s}");
        assert!(s.contains(">60 min ago</text>"), "{s}");
        // A young history spans what it has: half an hour.
        let s = svg(&[
            (Duration::from_secs(1800), 0),
            (Duration::from_secs(900), 2_000_000),
        ]);
        assert!(s.contains(">30 min ago</text>"), "{s}");
        assert!(s.contains("data-points=\"2\""), "{s}");
        // Half an hour ago at 0 (the bottom), then 2 credits (the top) until now.
        assert!(
            s.contains("points=\"0.0,45.0 120.0,45.0 120.0,3.0 240.0,3.0\""),
            "{s}"
        );
        assert!(s.contains(">2</text>"), "{s}");
    }

    #[test]
    fn no_points_say_so_and_a_zero_price_scales_to_one_credit() {
        assert!(svg(&[]).contains("no data yet"));
        let s = svg(&[(Duration::ZERO, 0)]);
        assert!(s.contains(">1</text>"), "{s}");
        assert!(s.contains("points=\"240.0,45.0 240.0,45.0\""), "{s}");
    }
}
