//! The book on made-up samples: model shares, charges under both policies, debits that
//! add up to exactly what was charged, running dry and re-bidding.

use std::time::{Duration, Instant};

use money::Bid;
use proto::node::JobId;
use stride::Policy;
use tokio::sync::mpsc;

use super::*;

const SEC: u64 = 1_000_000_000;

struct Sim {
    book: Book,
    t0: Instant,
    now: Duration,
    usage: Vec<u64>,
    keys: Vec<Key>,
    rx: Vec<mpsc::Receiver<Control>>,
}

impl Sim {
    fn new(cpus: u32, policy: Policy, bids: &[u32]) -> Sim {
        let t0 = Instant::now();
        let mut sim = Sim {
            book: Book::new(cpus, policy),
            t0,
            now: Duration::ZERO,
            usage: Vec::new(),
            keys: Vec::new(),
            rx: Vec::new(),
        };
        for (i, &b) in bids.iter().enumerate() {
            sim.add(i as u64 + 1, &format!("u{i}"), Bid::from_credits(b));
        }
        sim
    }

    fn add(&mut self, job: u64, owner: &str, bid: Bid) {
        let (tx, rx) = mpsc::channel(8);
        let key = (JobId(job), 0);
        self.book.join(key, owner, job, bid, tx, self.t0 + self.now);
        self.keys.push(key);
        self.usage.push(0);
        self.rx.push(rx);
    }

    /// Advances one second in which rank i used `cpus[i]` CPUs with `runnable[i]` threads.
    fn second(&mut self, cpus: &[f64], runnable: &[u32]) {
        self.advance(Duration::from_secs(1), cpus, runnable);
    }

    /// Advances `dt` in which rank i used `used[i]` CPU seconds with `runnable[i]`
    /// threads.
    fn advance(&mut self, dt: Duration, used: &[f64], runnable: &[u32]) {
        self.now += dt;
        let cpus = used;
        let at = self.t0 + self.now;
        let samples: Vec<(Key, RankSample)> = self
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                self.usage[i] += (cpus[i] * SEC as f64) as u64;
                (
                    *k,
                    RankSample {
                        usage_ns: self.usage[i],
                        runnable: runnable[i],
                        throttled_ns: None,
                        at,
                    },
                )
            })
            .collect();
        self.book.tick(&samples, false, None);
    }

    fn charged(&self) -> Vec<i64> {
        self.keys
            .iter()
            .map(|k| self.book.get(k).map_or(0, |r| r.meter.total()))
            .collect()
    }

    fn model(&self) -> Vec<u64> {
        self.keys
            .iter()
            .map(|k| self.book.get(k).map_or(0, |r| r.model_milli))
            .collect()
    }
}

#[test]
fn three_single_threaded_jobs_get_the_papers_shares_and_pay_their_bids() {
    let mut sim = Sim::new(2, Policy::Contention, &[40, 30, 20]);
    for _ in 0..60 {
        sim.second(&[0.889, 0.667, 0.444], &[1, 1, 1]);
    }
    assert_eq!(sim.model(), vec![889, 667, 444]);
    assert_eq!(sim.charged(), vec![40_000_000, 30_000_000, 20_000_000]);
    let node = sim.book.node();
    assert!(node.contended);
    assert_eq!(node.price, Bid::from_credits(90));
}

#[test]
fn two_single_threaded_jobs_on_two_cpus_pay_only_under_the_papers_rule() {
    for (policy, expect) in [
        (Policy::Contention, vec![0, 0]),
        (Policy::Paper, vec![3_000_000, 1_000_000]),
    ] {
        let mut sim = Sim::new(2, policy, &[3, 1]);
        for _ in 0..60 {
            sim.second(&[1.0, 1.0], &[1, 1]);
        }
        assert_eq!(sim.charged(), expect, "{policy}");
        // A third job makes all three pay under either rule.
        sim.add(9, "u9", Bid::from_credits(2));
        for _ in 0..60 {
            sim.second(&[0.75, 0.5, 0.75], &[1, 1, 1]);
        }
        let after: Vec<i64> = sim
            .charged()
            .iter()
            .zip(expect.iter().chain([&0]))
            .map(|(a, b)| a - b)
            .collect();
        assert_eq!(after, vec![3_000_000, 1_000_000, 2_000_000], "{policy}");
    }
}

#[test]
fn a_thread_caught_asleep_still_counts_when_the_cpu_says_it_ran() {
    let mut sim = Sim::new(2, Policy::Contention, &[1, 1]);
    sim.second(&[1.0, 1.0], &[0, 2]);
    assert_eq!(sim.book.get(&sim.keys[0]).unwrap().demand, 1);
    assert!(sim.book.node().contended);
}

#[test]
fn debits_and_the_final_charge_add_up_to_exactly_what_was_charged() {
    let mut sim = Sim::new(1, Policy::Contention, &[7, 3]);
    let mut billed = [0i64; 2];
    for s in 1..=95u64 {
        sim.second(&[0.7, 0.3], &[1, 1]);
        let now = sim.t0 + sim.now;
        for d in sim
            .book
            .due_debits(now, Duration::from_secs(10), Duration::from_secs(1))
        {
            assert!(d.amount > 0 && d.end > d.start);
            assert_eq!(
                d.end.duration_since(d.start),
                Duration::from_secs(10),
                "second {s}"
            );
            billed[(d.job.0 - 1) as usize] += d.amount;
        }
    }
    assert_eq!(billed, [10_500_000, 4_500_000]);
    let end = sim.t0 + sim.now + Duration::from_millis(500);
    let totals: Vec<i64> = sim
        .keys
        .clone()
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let d = sim.book.leave(k, None, end).unwrap();
            if let Some(debit) = d.debit {
                billed[i] += debit.amount;
            }
            d.charged
        })
        .collect();
    // 95.5 s at 7 and 3 credits a minute: the last half second at the last rate.
    assert_eq!(totals, vec![11_141_666, 4_775_000]);
    assert_eq!(billed.to_vec(), totals);
    assert!(sim.book.is_empty());
}

#[test]
fn a_rank_stops_competing_when_its_process_exits_not_when_its_teardown_ends() {
    let mut sim = Sim::new(2, Policy::Contention, &[40, 30, 20]);
    for _ in 0..10 {
        sim.second(&[0.889, 0.667, 0.444], &[1, 1, 1]);
    }
    // The bid-40 rank exits at 10.2 s; its teardown outlasts the next tick, whose
    // sample still finds a thread in its cgroup.
    let exited = sim.t0 + sim.now + Duration::from_millis(200);
    assert!(sim.book.stop(&sim.keys[0], exited));
    assert!(
        !sim.book.stop(&sim.keys[0], exited),
        "a second stop changes nothing"
    );
    assert!(!sim.book.node().contended);
    sim.second(&[0.2, 1.0, 1.0], &[1, 1, 1]);
    assert!(!sim.book.node().contended);
    // Each paid its bid for 10.2 s of contention, and nothing after.
    assert_eq!(sim.charged(), vec![6_800_000, 5_100_000, 3_400_000]);
    let end = sim.t0 + sim.now + Duration::from_millis(300);
    let gone = sim.book.leave(&sim.keys[0], None, end).unwrap();
    assert_eq!(gone.charged, 6_800_000);
}

#[test]
fn a_user_running_dry_drops_to_bid_zero_once_and_a_rebid_restores_it() {
    let mut sim = Sim::new(1, Policy::Contention, &[4, 4]);
    sim.second(&[0.5, 0.5], &[1, 1]);
    let newly = sim.book.run_dry("u0");
    assert_eq!(newly.len(), 1);
    assert!(
        sim.book.run_dry("u0").is_empty(),
        "only one notice per rank"
    );
    let r = sim.book.get(&sim.keys[0]).unwrap();
    assert_eq!(r.effective_bid(), Bid::ZERO);
    assert_eq!(r.bid, Bid::from_credits(4));
    // It still gets the CPU nobody else wants, but only the smallest share beside u1.
    assert!(sim.model()[0] <= 1, "{:?}", sim.model());
    let before = sim.charged();
    sim.second(&[0.0, 1.0], &[1, 1]);
    assert_eq!(sim.charged()[0], before[0], "a dry rank pays nothing");

    let (n, restored) = sim.book.rebid(JobId(1), Bid::from_credits(2), |_| true);
    assert_eq!((n, restored.len()), (1, 1));
    let r = sim.book.get(&sim.keys[0]).unwrap();
    assert_eq!(r.effective_bid(), Bid::from_credits(2));
    assert_eq!(sim.model(), vec![333, 667]);
}

#[test]
fn gains_reset_when_the_market_changes_and_stay_bounded() {
    let mut book = Book::new(2, Policy::Contention);
    let t0 = Instant::now();
    let (tx, _rx) = mpsc::channel(8);
    for j in 1..=3u64 {
        book.join(
            (JobId(j), 0),
            "u",
            j,
            Bid::from_credits(50 - 10 * j as u32),
            tx.clone(),
            t0,
        );
    }
    let mut usage = [0u64; 3];
    for s in 1..=20u64 {
        let at = t0 + Duration::from_secs(s);
        // The kernel's open-loop split: the top bidder is short of its 0.889.
        let got = [0.80, 0.72, 0.47];
        let samples: Vec<(Key, RankSample)> = (0..3)
            .map(|i| {
                usage[i] += (got[i] * SEC as f64) as u64;
                (
                    (JobId(i as u64 + 1), 0),
                    RankSample {
                        usage_ns: usage[i],
                        runnable: 1,
                        throttled_ns: None,
                        at,
                    },
                )
            })
            .collect();
        book.tick(&samples, true, None);
    }
    let gains: Vec<f64> = book.ranks().map(|(_, r)| r.share.gain).collect();
    assert!(gains[0] > 1.0 && gains[1] < 1.0, "{gains:?}");
    assert!(
        gains
            .iter()
            .all(|g| *g <= control::MAX_GAIN && *g >= 1.0 / control::MAX_GAIN)
    );
    let tickets = book.weight_tickets();
    assert!(tickets[0].1 > 4 * tickets[2].1 / 2, "{tickets:?}");
    book.rebid(JobId(1), Bid::from_credits(1), |_| true);
    // The next step sees the change and resets every gain.
    let at = t0 + Duration::from_secs(21);
    let samples: Vec<(Key, RankSample)> = (0..3)
        .map(|i| {
            (
                (JobId(i as u64 + 1), 0),
                RankSample {
                    usage_ns: usage[i] + SEC / 2,
                    runnable: 1,
                    throttled_ns: None,
                    at,
                },
            )
        })
        .collect();
    book.tick(&samples, true, None);
    assert!(book.ranks().all(|(_, r)| r.share.gain == 1.0));
}

#[test]
fn a_debit_falls_due_on_its_tick_even_when_the_tick_comes_a_little_early() {
    // Ticks jitter around their second: some come a few milliseconds early. A debit
    // every second must still cover one second, not two.
    let mut sim = Sim::new(1, Policy::Contention, &[6, 6]);
    let jitter = [3i64, -4, 2, -1, -5, 4, 0, -3, 5, -2];
    let mut spans = Vec::new();
    for (s, j) in (1..=40u64).zip(jitter.iter().cycle()) {
        sim.second(&[0.5, 0.5], &[1, 1]);
        let now = jittered(sim.t0 + sim.now, *j);
        for d in sim
            .book
            .due_debits(now, Duration::from_secs(1), Duration::from_secs(1))
        {
            if d.job.0 == 1 {
                spans.push((s, d.end.duration_since(d.start)));
            }
        }
    }
    assert!(spans.len() >= 39, "{spans:?}");
    for (s, span) in spans.iter().skip(1) {
        assert!(
            *span <= Duration::from_millis(1500),
            "second {s}: a debit covered {span:?}"
        );
    }
}

/// `at` moved by `ms` milliseconds either way.
fn jittered(at: Instant, ms: i64) -> Instant {
    let d = Duration::from_millis(ms.unsigned_abs());
    if ms >= 0 { at + d } else { at - d }
}

#[test]
fn a_signed_batch_rank_is_weighted_like_any_but_charged_nothing_and_never_runs_dry() {
    let mut sim = Sim::new(2, Policy::Contention, &[40, 30, 20]);
    let batch = sim.keys[0];
    sim.book.set_batch(&batch);
    for _ in 0..60 {
        sim.second(&[0.889, 0.667, 0.444], &[1, 1, 1]);
    }
    // Its bid still counts: the same shares and price as without the flag.
    assert_eq!(sim.model(), vec![889, 667, 444]);
    assert_eq!(sim.book.node().price, Bid::from_credits(90));
    assert_eq!(sim.charged(), vec![0, 30_000_000, 20_000_000]);
    let due = sim
        .book
        .due_debits(sim.t0 + sim.now, Duration::from_secs(1), Duration::ZERO);
    assert!(due.iter().all(|d| d.job != batch.0), "{due:?}");
    assert!(sim.book.run_dry("u0").is_empty());
    assert!(!sim.book.get(&batch).unwrap().dry);
    let gone = sim.book.leave(&batch, None, sim.t0 + sim.now).unwrap();
    assert_eq!((gone.charged, gone.debit), (0, None));
}

#[test]
fn contended_single_threaded_jobs_are_placed_split_or_packed() {
    let mut sim = Sim::new(2, Policy::Contention, &[40, 30, 20]);
    for _ in 0..3 {
        sim.second(&[0.889, 0.667, 0.444], &[1, 1, 1]);
    }
    let placed = sim
        .book
        .placement()
        .expect("Figure 4's three jobs are placed");
    let cgroups: Vec<u64> = sim
        .keys
        .iter()
        .map(|k| sim.book.get(k).unwrap().cgroup)
        .collect();
    let slot = |c: u64| {
        placed
            .jobs
            .iter()
            .find(|j| j.cgroup == c)
            .map(|j| j.slot.clone())
    };
    assert!(slot(cgroups[0]).unwrap().is_pinned());
    assert!(slot(cgroups[1]).unwrap().is_pinned());
    assert!(!slot(cgroups[2]).unwrap().is_pinned());
    // A split layout caps the split job only, at its allocation: the pinned ones, alone
    // on their CPU part of each period, would leave it idle under a cap.
    let cap = |c: u64| placed.caps.iter().find(|(id, _)| *id == c).unwrap().1;
    assert_eq!(cap(cgroups[0]), None);
    assert_eq!(cap(cgroups[1]), None);
    let split_cap = cap(cgroups[2]).expect("the split job is capped");
    let cpus = split_cap.quota_us as f64 / split_cap.period_us as f64;
    assert!((cpus - 0.444).abs() < 0.01, "{split_cap:?}");
    // Each with the model's allocation, which the placer balances them by.
    let allocations: Vec<f64> = placed.jobs.iter().map(|j| j.allocation).collect();
    assert_eq!(allocations.len(), 3);
    assert!(
        (allocations.iter().sum::<f64>() - 2.0).abs() < 0.01,
        "{allocations:?}"
    );
    // Weights 1 : 1 : 0.8 (see `control::placement`), not the bids' 4 : 3 : 2.
    let tickets: Vec<u64> = cgroups
        .iter()
        .map(|c| placed.tickets.iter().find(|(id, _)| id == c).unwrap().1)
        .collect();
    assert_eq!(tickets[0], tickets[1]);
    let ratio = tickets[2] as f64 / tickets[0] as f64;
    assert!((ratio - 0.444 / 0.556).abs() < 0.01, "{tickets:?}");
    // A job with two runnable threads: the kernel places it, the caps hold it.
    sim.second(&[0.889, 0.667, 0.444], &[1, 2, 1]);
    assert_eq!(sim.book.placement(), None);
    // Two jobs on two CPUs: nothing to divide.
    let mut two = Sim::new(2, Policy::Contention, &[40, 30]);
    two.second(&[1.0, 1.0], &[1, 1]);
    assert_eq!(two.book.placement(), None);
    // Three that fit whole (1.0, 0.667 and 0.333): placed whole, and capped.
    let mut packed = Sim::new(2, Policy::Contention, &[30, 20, 10]);
    for _ in 0..3 {
        packed.second(&[1.0, 0.667, 0.333], &[1, 1, 1]);
    }
    let placed = packed.book.placement().expect("a packed layout is placed");
    assert_eq!(placed.jobs.len(), 3);
    assert!(placed.jobs.iter().all(|j| j.slot.is_pinned()));
    let caps = &placed.caps;
    assert!(caps.iter().all(|(_, c)| c.is_some()), "{caps:?}");
}

#[test]
fn a_rank_alone_makes_the_price_from_its_start_and_pays_nothing() {
    let mut sim = Sim::new(2, Policy::Contention, &[2]);
    // Joined, not yet measured: assumed runnable, so its bid is the price at once.
    assert_eq!(sim.book.node().price, Bid::from_credits(2));
    // Spinning alone on two CPUs: the node's price is its bid, the node charges nothing.
    sim.second(&[1.0], &[1]);
    let node = sim.book.node();
    assert_eq!(
        (node.price, node.charging, node.contended),
        (Bid::from_credits(2), Bid::ZERO, false)
    );
    // Asleep: it competes no more.
    sim.second(&[0.0], &[0]);
    assert_eq!(sim.book.node().price, Bid::ZERO);
    assert_eq!(sim.charged(), vec![0]);
}

#[test]
fn a_rank_at_its_spending_ceiling_drops_to_bid_zero_for_good_and_pays_nothing_more() {
    // Two ranks bidding 4 a minute on one CPU, both busy: each pays 4/60 credits a
    // second. Rank 0 may be charged 0.1 credits.
    let mut sim = Sim::new(1, Policy::Contention, &[4, 4]);
    sim.book.set_ceiling(&sim.keys[0], 100_000);
    sim.second(&[0.5, 0.5], &[1, 1]);
    assert!(sim.book.reach_ceilings().is_empty(), "{:?}", sim.charged());
    sim.second(&[0.5, 0.5], &[1, 1]);
    let newly = sim.book.reach_ceilings();
    assert_eq!(newly.len(), 1);
    assert_eq!(newly[0].0, sim.keys[0]);
    assert!(sim.book.reach_ceilings().is_empty(), "one notice per rank");
    let r = sim.book.get(&sim.keys[0]).unwrap();
    assert_eq!(r.effective_bid(), Bid::ZERO);
    let before = sim.charged();
    sim.second(&[0.0, 1.0], &[1, 1]);
    assert_eq!(sim.charged()[0], before[0], "a capped rank pays nothing");
    // A re-bid does not lift the ceiling.
    sim.book.rebid(JobId(1), Bid::from_credits(8), |_| true);
    assert_eq!(
        sim.book.get(&sim.keys[0]).unwrap().effective_bid(),
        Bid::ZERO
    );
}

/// Figure 4's three ranks (bids 40, 30, 20) on two CPUs, ticked once a second
/// `ticks` times: each receives `got` CPU and stands throttled for `throttled` CPU
/// of each tick, while the node's CPUs are `node`. Returns the caps' total, CPUs.
fn caps_beside(got: [f64; 3], throttled: [f64; 3], node: Option<NodeCpu>, ticks: u64) -> f64 {
    let mut book = Book::new(2, Policy::Contention);
    let t0 = Instant::now();
    let (tx, _rx) = mpsc::channel(8);
    for (j, bid) in [40, 30, 20].into_iter().enumerate() {
        let id = j as u64 + 1;
        book.join(
            (JobId(id), 0),
            "u",
            id,
            Bid::from_credits(bid),
            tx.clone(),
            t0,
        );
    }
    let mut usage = [0u64; 3];
    let mut held = [0u64; 3];
    for s in 1..=ticks {
        let at = t0 + Duration::from_secs(s);
        let samples: Vec<(Key, RankSample)> = (0..3)
            .map(|i| {
                usage[i] += (got[i] * SEC as f64) as u64;
                held[i] += (throttled[i] * SEC as f64) as u64;
                (
                    (JobId(i as u64 + 1), 0),
                    RankSample {
                        usage_ns: usage[i],
                        runnable: 1,
                        throttled_ns: Some(held[i]),
                        at,
                    },
                )
            })
            .collect();
        book.tick(&samples, true, node);
    }
    book.caps(true)
        .iter()
        .filter_map(|(_, c)| c.map(|c| c.cpus()))
        .sum()
}

#[test]
fn the_caps_count_what_other_work_took_from_throttled_ranks() {
    // Issue 41: the ranks receive 1.43 of 2 CPUs, a background loop the rest; none
    // stands idle, and the ranks stood throttled for much of the time.
    let got = [0.641, 0.483, 0.309];
    let busy = Some(NodeCpu {
        idle: 0.0,
        busy: 2.0,
    });
    let total = caps_beside(got, [0.3, 0.45, 0.6], busy, 5);
    assert!((total - 2.0).abs() < 0.01, "caps total {total}");
    // Never throttled (the ranks wanted no more): the caps stay where the ranks were.
    let sleepy = caps_beside(got, [0.0; 3], busy, 5);
    assert!(sleepy < 1.01 * 1.433 + 0.01, "caps total {sleepy}");
    // Without the node's busy time nothing says other work took it.
    let unknown = caps_beside(got, [0.3, 0.45, 0.6], None, 5);
    assert!((unknown - sleepy).abs() < 1e-9, "{unknown} {sleepy}");
}

#[test]
fn a_rank_charged_to_a_project_bills_the_project_and_runs_dry_with_it_not_its_owner() {
    // Two ranks of u0 (one paid by project chem) and one of u1.
    let mut sim = Sim::new(1, Policy::Contention, &[4, 4]);
    sim.add(3, "u0", Bid::from_credits(4));
    let paid = sim.keys[2];
    sim.book.set_account(&paid, "chem".into());
    sim.second(&[0.33, 0.33, 0.34], &[1, 1, 1]);
    let due = sim
        .book
        .due_debits(sim.t0 + sim.now, Duration::from_secs(1), Duration::ZERO);
    let payers: Vec<(JobId, &str, Option<&str>)> = due
        .iter()
        .map(|d| (d.job, d.user.as_str(), d.account.as_deref()))
        .collect();
    assert!(payers.contains(&(paid.0, "u0", Some("chem"))), "{due:?}");
    assert!(payers.contains(&(JobId(1), "u0", None)), "{due:?}");

    // u0's own account running dry leaves the project's rank bidding.
    assert_eq!(sim.book.run_dry("u0").len(), 1);
    assert!(!sim.book.get(&paid).unwrap().dry);
    // chem refusing another member changes nothing; refusing u0, or running dry, does.
    assert!(sim.book.run_dry_member("chem", "u1").is_empty());
    assert_eq!(sim.book.run_dry_member("chem", "u0").len(), 1);
    assert!(sim.book.get(&paid).unwrap().dry);
    assert!(
        sim.book.run_dry("chem").is_empty(),
        "only one notice per rank"
    );
    assert!(
        !sim.book.get(&sim.keys[1]).unwrap().dry,
        "u1 pays for itself"
    );
}

#[test]
fn a_tick_too_short_for_a_rate_keeps_the_demand_and_no_rate_exceeds_the_node() {
    let mut sim = Sim::new(2, Policy::Contention, &[40, 30, 20]);
    for _ in 0..5 {
        sim.second(&[0.889, 0.667, 0.444], &[1, 1, 1]);
    }
    let demands = |sim: &Sim| -> Vec<u32> {
        sim.keys
            .iter()
            .map(|k| sim.book.get(k).map_or(0, |r| r.demand))
            .collect()
    };
    assert_eq!(demands(&sim), vec![1, 1, 1]);
    assert!(
        sim.book.placement().is_some(),
        "three single threads are placed"
    );
    // Two ticks back to back, the first's usage dated late: a twentieth of a CPU
    // second shows within a millisecond (a rate of 50 CPUs). It once read as a
    // demand of many threads and ended the placement.
    sim.advance(Duration::from_millis(1), &[0.05, 0.0, 0.0], &[1, 1, 1]);
    assert_eq!(demands(&sim), vec![1, 1, 1]);
    assert!(sim.book.placement().is_some(), "still placed");
    // A rate over a real tick above the node's CPUs is still no more than the node.
    sim.advance(Duration::from_millis(500), &[1.5, 0.3, 0.2], &[1, 1, 1]);
    assert_eq!(demands(&sim), vec![2, 1, 1]);
}
