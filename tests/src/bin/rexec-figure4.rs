//! The paper's Figure 4, live: four single-threaded CPU-bound jobs bidding
//! 40, 30, 20 and 10 credits a minute arrive on one node an interval apart
//! and each runs for four intervals, so 1, 2, 3, 4, 3, 2, 1 jobs share the
//! node. During every interval this reads `rexec jobs` as a user would and
//! prints each job's bid, the model's share, the share it really got (CPU
//! seconds over the interval's wall time) and what it was charged so far.
//! At the end it compares, per job, what the ledger holds (`accountctl
//! history`) with what the model says it owes.
//!
//! The model needs the moments the node saw each job arrive and leave, and a
//! client only brackets them: a job joins the node after its `rexec` starts
//! and before its first line comes back; it leaves after its program's
//! lifetime, counted from that start, and before its `rexec` exits. The model
//! uses the middle of each bracket, and each charge may differ from it by one
//! metering tick plus the job's bid over half of every bracket at which its
//! charging starts or stops (the `timing` column; a few tens of milliseconds
//! on a quiet machine, more beside load).
//!
//! Usage: `rexec-figure4 --node NAME [--interval 10s] [--tick 1s]
//! [--rexec PATH] [--accountctl PATH]`; `REXEC_CONFIG` names the user's
//! client configuration. Exit status 0 when every measured share is within
//! 2 points of the model and every charge within one metering tick (and the
//! timing) of it,
//! 1 when not, 2 on a usage or run error.

use std::collections::BTreeMap;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use timespan::parse_duration;

const BIDS: [f64; 4] = [40.0, 30.0, 20.0, 10.0];
/// Largest gap, in points of the node, between a measured and a model share.
const SHARE_TOLERANCE: f64 = 2.0;

struct Options {
    node: String,
    interval: Duration,
    tick: Duration,
    rexec: String,
    accountctl: String,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        node: String::new(),
        interval: Duration::from_secs(10),
        tick: Duration::from_secs(1),
        rexec: "rexec".into(),
        accountctl: "accountctl".into(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--node" => o.node = value()?,
            "--interval" => o.interval = parse_duration(&value()?).map_err(|e| e.to_string())?,
            "--tick" => o.tick = parse_duration(&value()?).map_err(|e| e.to_string())?,
            "--rexec" => o.rexec = value()?,
            "--accountctl" => o.accountctl = value()?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if o.node.is_empty() {
        return Err("give the node with --node NAME".into());
    }
    if o.interval < Duration::from_secs(2) {
        return Err("--interval must be at least 2s".into());
    }
    Ok(o)
}

/// One rank as `rexec jobs` prints it.
#[derive(Debug, Clone)]
struct Row {
    model_cpu: f64,
    cpu_s: f64,
    charged: f64,
}

/// The node's CPUs and its rows by job id, from `rexec jobs`.
fn jobs(o: &Options) -> Result<(u32, BTreeMap<String, Row>), String> {
    let out = Command::new(&o.rexec)
        .arg("jobs")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", o.rexec))?;
    if !out.status.success() {
        return Err(format!(
            "rexec jobs failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut rows = BTreeMap::new();
    let mut cpus = 0;
    let mut section = 0;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.first() {
            None => section += 1,
            Some(&"NODE") => {}
            Some(node) if *node == o.node && section == 0 && f.len() >= 11 => {
                let num = |s: &str| s.parse::<f64>().unwrap_or(0.0);
                rows.insert(
                    f[1].to_string(),
                    Row {
                        model_cpu: num(f[5]),
                        cpu_s: num(f[7]),
                        charged: num(f[8]),
                    },
                );
            }
            Some(node) if *node == o.node && section >= 1 => {
                cpus = f.get(1).and_then(|c| c.parse().ok()).unwrap_or(0);
            }
            _ => {}
        }
    }
    Ok((cpus, rows))
}

/// Start the job bidding `bid` for `life`; its first line is its job id.
fn start_job(o: &Options, bid: f64, life: Duration) -> Result<Child, String> {
    let script = format!(
        "echo $REXEC_JOB; timeout {} sh -c 'while :; do :; done'; exit 0",
        life.as_secs_f64()
    );
    Command::new(&o.rexec)
        .args([
            "-v",
            "-r",
            &bid.to_string(),
            "--nodes",
            &o.node,
            "--stdin",
            "none",
        ])
        .args(["sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", o.rexec))
}

/// The job id a client printed first.
fn job_id(child: &mut Child) -> Result<String, String> {
    use std::io::BufRead;
    let out = child.stdout.as_mut().ok_or("no stdout")?;
    let mut line = String::new();
    std::io::BufReader::new(out)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let id = line.trim().to_string();
    if id.is_empty() {
        return Err("a job printed no id (did its launch fail?)".into());
    }
    Ok(id)
}

fn sleep_until(t: Instant) {
    std::thread::sleep(t.saturating_duration_since(Instant::now()));
}

/// Micro-credits the ledger holds against `job` (debits negative, so negated).
fn ledger(o: &Options, job: &str) -> Result<i64, String> {
    let out = Command::new(&o.accountctl)
        .args(["history", "--csv"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", o.accountctl))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n);
    let (Some(amount), Some(jobcol)) = (col("amount"), col("job")) else {
        return Err("accountctl history --csv has no amount or job column".into());
    };
    Ok(-lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f.get(jobcol) == Some(&job))
        .filter_map(|f| {
            let credits: f64 = f.get(amount)?.parse().ok()?;
            Some((credits * 1e6).round() as i64)
        })
        .sum::<i64>())
}

/// When the node saw something happen, as the client brackets it.
#[derive(Clone, Copy)]
struct Event {
    earliest: Instant,
    latest: Instant,
}

impl Event {
    fn new(earliest: Instant, latest: Instant) -> Event {
        Event {
            earliest,
            latest: latest.max(earliest),
        }
    }

    /// The model's estimate: the middle of the bracket.
    fn at(&self) -> Instant {
        self.earliest + (self.latest - self.earliest) / 2
    }

    fn half_width(&self) -> f64 {
        (self.latest - self.earliest).as_secs_f64() / 2.0
    }
}

/// A started job: its id, when its `rexec` started, when its id came back, and a
/// thread waiting for its `rexec` to exit (so each exit is timed when it happens).
struct Started {
    id: String,
    arrival: Event,
    exit: std::thread::JoinHandle<std::io::Result<(std::process::ExitStatus, Instant)>>,
}

fn launch(o: &Options, bid: f64, life: Duration) -> Result<Started, String> {
    let launched = Instant::now();
    let mut child = start_job(o, bid, life)?;
    let id = job_id(&mut child)?;
    let arrival = Event::new(launched, Instant::now());
    let exit = std::thread::spawn(move || {
        let status = child.wait()?;
        Ok((status, Instant::now()))
    });
    Ok(Started { id, arrival, exit })
}

/// Micro-credits the model says each job owes: its bid while three or more jobs
/// compete for the node's two CPUs, with the events at the middle of their brackets;
/// and, per job, how far the brackets let that figure move (micro-credits).
fn owed(arrivals: &[Event], departures: &[Event]) -> Vec<(f64, f64)> {
    let n = arrivals.len();
    let mut events: Vec<Event> = arrivals.iter().chain(departures).copied().collect();
    events.sort_by_key(Event::at);
    let present =
        |k: usize, from: Instant, to: Instant| arrivals[k].at() <= from && departures[k].at() >= to;
    (0..n)
        .map(|j| {
            let charged = |from: Instant, to: Instant| {
                from < to
                    && present(j, from, to)
                    && (0..n).filter(|&k| present(k, from, to)).count() >= 3
            };
            let rate = BIDS[j] * 1e6 / 60.0;
            let mut owed = 0.0;
            let mut slack = 0.0;
            let mut before = false;
            for (e, next) in events
                .iter()
                .zip(events.iter().skip(1).map(Some).chain([None]))
            {
                let after = next.is_some_and(|next| charged(e.at(), next.at()));
                if after {
                    owed += rate * (next.map_or(e.at(), Event::at) - e.at()).as_secs_f64();
                }
                if after != before {
                    slack += rate * e.half_width();
                }
                before = after;
            }
            (owed, slack)
        })
        .collect()
}

fn run(o: &Options) -> Result<bool, String> {
    let interval = o.interval;
    let life = interval * 4;
    let start = Instant::now();
    let mut started: Vec<Started> = Vec::new();
    let mut ok = true;
    println!(
        "   interval {}s; jobs arrive one interval apart and each spins for four",
        interval.as_secs_f64()
    );
    println!(
        "   {:>8} {:>5} {:>6} {:>11} {:>14} {:>12}",
        "interval", "bid", "job", "model-share", "measured-share", "charged"
    );
    for k in 0..7u32 {
        let begin = start + interval * k;
        sleep_until(begin);
        if let Some(&bid) = BIDS.get(k as usize) {
            started.push(launch(o, bid, life)?);
        }
        // Measure inside the interval, clear of arrivals and departures.
        let from = begin + Duration::from_millis(1500).min(interval / 4);
        let to = begin + interval - Duration::from_millis(500);
        sleep_until(from);
        let (_, a) = jobs(o)?;
        let t0 = Instant::now();
        sleep_until(to);
        let (cpus, b) = jobs(o)?;
        let dt = t0.elapsed().as_secs_f64();
        let cpus = cpus.max(1) as f64;
        for (j, job) in started.iter().enumerate() {
            let (Some(ra), Some(rb)) = (a.get(&job.id), b.get(&job.id)) else {
                continue;
            };
            let model = 100.0 * rb.model_cpu / cpus;
            let measured = 100.0 * (rb.cpu_s - ra.cpu_s) / dt / cpus;
            let flag = if (measured - model).abs() <= SHARE_TOLERANCE {
                ""
            } else {
                ok = false;
                "  <- off by more than 2 points"
            };
            println!(
                "   {:>8} {:>5} {:>6} {:>10.1}% {:>13.1}% {:>12.3}{flag}",
                k + 1,
                BIDS[j],
                format!("#{}", j + 1),
                model,
                measured,
                rb.charged
            );
        }
    }
    let mut ids = Vec::new();
    let mut arrivals = Vec::new();
    let mut departures = Vec::new();
    for job in started {
        let (status, exited) = job
            .exit
            .join()
            .map_err(|_| "a waiting thread panicked".to_string())?
            .map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("a job ended with {status}"));
        }
        // Its program spun for `life` from a moment after its `rexec` started; the node
        // saw it go before its `rexec` heard so.
        departures.push(Event::new(job.arrival.earliest + life, exited));
        arrivals.push(job.arrival);
        ids.push(job.id);
    }
    println!();
    println!(
        "   {:>5} {:>14} {:>14} {:>14} {:>14}",
        "bid", "ledger", "model", "one tick", "timing"
    );
    std::thread::sleep(Duration::from_secs(1));
    for (j, (owed, slack)) in owed(&arrivals, &departures).into_iter().enumerate() {
        let held = ledger(o, &ids[j])?;
        let tick = BIDS[j] * 1e6 * o.tick.as_secs_f64() / 60.0;
        let flag = if (held as f64 - owed).abs() <= tick + slack {
            ""
        } else {
            ok = false;
            "  <- off by more than a tick and the timing"
        };
        println!(
            "   {:>5} {:>14.6} {:>14.6} {:>14.6} {:>14.6}{flag}",
            BIDS[j],
            held as f64 / 1e6,
            owed / 1e6,
            tick / 1e6,
            slack / 1e6
        );
    }
    Ok(ok)
}

fn main() -> ExitCode {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("rexec-figure4: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&o) {
        Ok(true) => {
            println!(
                "   every share within 2 points of the model, every charge within a tick and the timing"
            );
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!("   some numbers were off the model (a busy machine?)");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("rexec-figure4: {e}");
            ExitCode::from(2)
        }
    }
}
