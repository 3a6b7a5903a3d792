//! Each node's price over the last hour, for the market page's charts: one point
//! per sample (the daemon samples once per announcement period), decimated to at
//! most [`MAX_POINTS`] points a node by keeping one point per [`SPACING`] (the
//! newest price in it), and points older than [`SPAN`] dropped. Nodes the table
//! no longer holds are dropped at the next sample, and at most
//! [`MAX_NODES`] nodes are followed (beyond it, new nodes get no chart), so the
//! history is bounded however many nodes announce. Time is passed in.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// How far back a chart goes.
pub const SPAN: Duration = Duration::from_secs(3600);
/// Most points kept for one node.
pub const MAX_POINTS: usize = 360;
/// Shortest gap between two kept points of a node (`SPAN / MAX_POINTS`).
pub const SPACING: Duration = Duration::from_secs(SPAN.as_secs() / MAX_POINTS as u64);
/// Most nodes followed: at most 4096 × 360 points of 16 bytes, 24 MiB.
pub const MAX_NODES: usize = 4096;

/// One point: when (from the history's start) and the price then, micro-credits
/// a minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    /// Time since the history began.
    pub at: Duration,
    /// The announced price.
    pub price: i64,
}

/// The price histories of the nodes.
#[derive(Debug)]
pub struct PriceHistory {
    start: Instant,
    max_nodes: usize,
    nodes: HashMap<String, VecDeque<Point>>,
}

impl PriceHistory {
    /// An empty history begun at `start`, following at most `max_nodes` nodes
    /// (the table's cap, itself held to [`MAX_NODES`]).
    pub fn new(start: Instant, max_nodes: usize) -> PriceHistory {
        PriceHistory {
            start,
            max_nodes: max_nodes.min(MAX_NODES),
            nodes: HashMap::new(),
        }
    }

    /// Record the prices of the live nodes at `now`, forgetting nodes not among
    /// them and points older than [`SPAN`].
    pub fn sample<'a>(&mut self, now: Instant, live: impl IntoIterator<Item = (&'a str, i64)>) {
        let at = now.saturating_duration_since(self.start);
        let live: HashMap<&str, i64> = live.into_iter().collect();
        self.nodes
            .retain(|name, _| live.contains_key(name.as_str()));
        let mut names: Vec<(&str, i64)> = live.into_iter().collect();
        // Which nodes get the places left is the same on every selector.
        names.sort_unstable();
        for (name, price) in names {
            if !self.nodes.contains_key(name) {
                if self.nodes.len() >= self.max_nodes {
                    continue;
                }
                self.nodes.insert(name.to_string(), VecDeque::new());
            }
            let Some(points) = self.nodes.get_mut(name) else {
                continue;
            };
            match points.back_mut() {
                Some(last) if at.saturating_sub(last.at) < SPACING => last.price = price,
                _ => points.push_back(Point { at, price }),
            }
            while points
                .front()
                .is_some_and(|p| at.saturating_sub(p.at) > SPAN)
                || points.len() > MAX_POINTS
            {
                points.pop_front();
            }
        }
    }

    /// A node's points, oldest first, with their age at `now` (none when the node
    /// is not followed).
    pub fn of(&self, name: &str, now: Instant) -> Vec<(Duration, i64)> {
        let at = now.saturating_duration_since(self.start);
        self.nodes.get(name).map_or_else(Vec::new, |points| {
            points
                .iter()
                .map(|p| (at.saturating_sub(p.at), p.price))
                .collect()
        })
    }

    /// How many nodes are followed.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when no node is followed.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hour_of_one_second_samples_keeps_at_most_360_points_and_the_newest_price() {
        let t0 = Instant::now();
        let mut h = PriceHistory::new(t0, 10);
        for s in 0..7200u64 {
            h.sample(t0 + Duration::from_secs(s), [("n1", s as i64)]);
        }
        let now = t0 + Duration::from_secs(7199);
        let points = h.of("n1", now);
        assert!(points.len() <= MAX_POINTS, "{}", points.len());
        assert!(points.len() >= MAX_POINTS - 1, "{}", points.len());
        assert!(points.iter().all(|(age, _)| *age <= SPAN));
        assert_eq!(points.last(), Some(&(Duration::from_secs(9), 7199)));
        // Oldest first.
        assert!(points.windows(2).all(|w| w[0].0 > w[1].0));
    }

    #[test]
    fn forgotten_nodes_go_and_the_node_cap_holds() {
        let t0 = Instant::now();
        let mut h = PriceHistory::new(t0, 2);
        h.sample(t0, [("a", 1), ("b", 2), ("c", 3)]);
        assert_eq!(h.len(), 2);
        assert!(h.of("c", t0).is_empty());
        h.sample(t0 + SPACING, [("b", 5), ("c", 6)]);
        assert!(h.of("a", t0).is_empty());
        assert_eq!(
            h.of("b", t0 + SPACING),
            vec![(SPACING, 2), (Duration::ZERO, 5)]
        );
        assert_eq!(h.of("c", t0 + SPACING), vec![(Duration::ZERO, 6)]);
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn the_cap_is_held_to_max_nodes() {
        let h = PriceHistory::new(Instant::now(), usize::MAX);
        assert_eq!(h.max_nodes, MAX_NODES);
        assert!(h.is_empty());
    }
}
