//! The node announcing itself (present only with a `[discovery]` table): who it is
//! (its name, as in its certificate), where clients dial it, its market state from
//! the [`crate::market`] book (CPUs, price, ranks, runnable demand), what the
//! machine measures (idle CPUs over the last period, load, free memory), and the
//! summary of its weekly availability history.
//!
//! - [`procfs`]: `/proc/stat`, `/proc/loadavg`, `/proc/meminfo`.
//! - [`history`]: the availability history file (load at start, atomic saves).
//! - [`accountd`]: finding accountd from its announcements.
//!
//! [`Announcer::start`] spawns three tasks: the sampler (every period: CPU idle
//! time of the node's CPUs, recorded in the history as the busy fraction; the
//! history is saved and the summary recomputed when a ten-minute slot closes), the
//! announcing loop ([`discovery::net::announce_loop`], every period and at once
//! when the market changes) and, when accountd is to be learnt, its listener.
//! [`Announcer::shutdown`] stops them and saves the history.

pub mod accountd;
pub mod history;
pub mod procfs;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use discovery::net::{NetError, Receiver, Sender, announce_loop};
use discovery::profile::summary::Summary;
use discovery::profile::{History, SLOT_SECS};
use proto::announce::{Announcement, Kind, NodeStatus};
use tokio::task::JoinHandle;

use crate::config::discovery::AnnounceConfig;
use crate::market::Market;
use procfs::CpuTimes;

/// How long the first CPU measurement lasts (the first announcement waits for it).
const FIRST_MEASURE: Duration = Duration::from_millis(100);

/// What the machine measured over the last period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// Fraction of the node's CPUs' time spent idle.
    pub idle_fraction: f64,
    /// One-minute load average times 1000.
    pub load_milli: u32,
    /// Memory available, MiB.
    pub free_mem_mib: u64,
}

impl Measured {
    /// Idle CPUs times 1000 on a node selling `cpus`: the idle fraction of the CPUs
    /// looked at, scaled to the node's CPUs.
    pub fn idle_milli(&self, cpus: u32) -> u32 {
        let max = u64::from(cpus) * 1000;
        let v = (self.idle_fraction.clamp(0.0, 1.0) * max as f64).round() as u64;
        u32::try_from(v.min(max)).unwrap_or(u32::MAX)
    }
}

/// The node's announcement, from its market state and the last measurement.
pub fn node_announcement(
    cluster: &str,
    name: &str,
    addr: SocketAddr,
    status: crate::market::book::MarketStatus,
    measured: &Measured,
    summary: Option<Vec<u8>>,
) -> Announcement {
    Announcement {
        cluster: cluster.to_string(),
        name: name.to_string(),
        addr,
        incarnation: 0,
        seq: 0,
        period_ms: 0,
        kind: Kind::Node(NodeStatus {
            cpus: status.cpus,
            price: status.price.micros_per_minute(),
            charging: status.charging.micros_per_minute(),
            contended: status.contended,
            running_jobs: status.ranks,
            runnable: status.runnable,
            load_milli: measured.load_milli,
            idle_milli: measured.idle_milli(status.cpus),
            free_mem_mib: measured.free_mem_mib,
        }),
        summary,
    }
}

/// Why announcing could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnnounceError {
    /// A socket could not be set up.
    #[error("cannot announce this node: {0}")]
    Net(#[from] NetError),
}

struct State {
    measured: Measured,
    summary: Vec<u8>,
}

/// The running announcer; see the module docs.
pub struct Announcer {
    tasks: Vec<JoinHandle<()>>,
    history: Arc<Mutex<History>>,
    path: PathBuf,
}

impl std::fmt::Debug for Announcer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Announcer")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every update replaces whole values: a poisoned lock still holds a valid one.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Announcer {
    /// Loads the history and starts announcing `name` at `addr` (the advertised
    /// address, else `bound`). `cpus`: the CPUs the node owns (its cpuset), `None`
    /// for every online CPU. `accountd_name`: the certificate name accountd must
    /// carry, when accountd is to be learnt from announcements.
    pub async fn start(
        cfg: &AnnounceConfig,
        name: &str,
        bound: SocketAddr,
        market: Arc<Market>,
        cpus: Option<Vec<u32>>,
        accountd_name: Option<String>,
    ) -> Result<Announcer, AnnounceError> {
        let addr = cfg.advertise.unwrap_or(bound);
        let sender = Sender::new(&cfg.net)?;
        let accountd = match (market.learnt_accountd().cloned(), accountd_name) {
            (Some(learnt), Some(wanted)) => Some((Receiver::bind(&cfg.net, None)?, learnt, wanted)),
            _ => None,
        };
        let path = cfg.history_file.clone();
        let weeks = cfg.history_weeks;
        let loaded = {
            let path = path.clone();
            tokio::task::spawn_blocking(move || history::load(&path, weeks))
                .await
                .unwrap_or_else(|_| History::new(weeks))
        };
        let summary = Summary::from_busy(&loaded.busy_fractions(), cfg.speed).encode();
        let history = Arc::new(Mutex::new(loaded));

        // The first measurement, so the first announcement carries one.
        let first = procfs::read_stat(cpus.as_deref());
        tokio::time::sleep(FIRST_MEASURE).await;
        let now = procfs::read_stat(cpus.as_deref());
        let idle_fraction = match (first, now) {
            (Some(a), Some(b)) => b.idle_fraction_since(&a).unwrap_or(1.0),
            _ => 1.0,
        };
        let state = Arc::new(Mutex::new(State {
            measured: Measured {
                idle_fraction,
                load_milli: procfs::read_loadavg().unwrap_or(0),
                free_mem_mib: procfs::read_mem_available().unwrap_or(0),
            },
            summary,
        }));

        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(sample(Sampler {
            period: cfg.net.period,
            cpus,
            last: now,
            slot: unix_secs() / SLOT_SECS,
            speed: cfg.speed,
            history: Arc::clone(&history),
            path: path.clone(),
            state: Arc::clone(&state),
            save_failing: false,
        })));
        let cluster = cfg.net.cluster.clone();
        let node = name.to_string();
        let changes = market.changes();
        tasks.push(tokio::spawn(announce_loop(
            sender,
            cfg.net.period,
            changes,
            move || {
                let status = market.status();
                let s = lock(&state);
                node_announcement(
                    &cluster,
                    &node,
                    addr,
                    status,
                    &s.measured,
                    Some(s.summary.clone()),
                )
            },
        )));
        if let Some((receiver, learnt, wanted)) = accountd {
            tracing::info!(cluster = %cfg.net.cluster, name = %wanted,
                "no accountd configured: listening for its announcements");
            let wanted = accountd::Wanted {
                cluster: cfg.net.cluster.clone(),
                name: wanted,
            };
            tasks.push(tokio::spawn(accountd::listen(receiver, wanted, learnt)));
        }
        tracing::info!(%addr, cluster = %cfg.net.cluster, group = %cfg.net.group,
            port = cfg.net.port, period = ?cfg.net.period, history = %path.display(),
            "announcing this node");
        Ok(Announcer {
            tasks,
            history,
            path,
        })
    }

    /// Stops announcing and saves the history.
    pub async fn shutdown(self) {
        for t in &self.tasks {
            t.abort();
        }
        for t in self.tasks {
            let _ = t.await;
        }
        let h = lock(&self.history).clone();
        let path = self.path;
        let saved = tokio::task::spawn_blocking(move || history::save(&h, &path)).await;
        match saved {
            Ok(Ok(())) => tracing::info!("availability history saved"),
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot save the availability history"),
            Err(e) => tracing::warn!(error = %e, "availability history save failed"),
        }
    }
}

struct Sampler {
    period: Duration,
    cpus: Option<Vec<u32>>,
    last: Option<CpuTimes>,
    slot: u64,
    speed: f64,
    history: Arc<Mutex<History>>,
    path: PathBuf,
    state: Arc<Mutex<State>>,
    save_failing: bool,
}

/// Every period: measure, record, and when a slot closed, save and summarise.
async fn sample(mut s: Sampler) {
    let mut ticker = tokio::time::interval(s.period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let now_times = procfs::read_stat(s.cpus.as_deref());
        let idle = match (&s.last, &now_times) {
            (Some(a), Some(b)) => b.idle_fraction_since(a),
            _ => None,
        };
        if now_times.is_some() {
            s.last = now_times;
        }
        let load = procfs::read_loadavg();
        let mem = procfs::read_mem_available();
        {
            let mut st = lock(&s.state);
            if let Some(idle) = idle {
                st.measured.idle_fraction = idle;
            }
            if let Some(l) = load {
                st.measured.load_milli = l;
            }
            if let Some(m) = mem {
                st.measured.free_mem_mib = m;
            }
        }
        let Some(idle) = idle else {
            continue;
        };
        let now = unix_secs();
        let slot = now / SLOT_SECS;
        lock(&s.history).record(now, 1.0 - idle);
        if slot != s.slot {
            // The previous slot closed: save, and summarise the profile anew.
            s.slot = slot;
            let h = lock(&s.history).clone();
            let summary = Summary::from_busy(&h.busy_fractions(), s.speed).encode();
            lock(&s.state).summary = summary;
            let path = s.path.clone();
            match tokio::task::spawn_blocking(move || history::save(&h, &path)).await {
                Ok(Ok(())) => s.save_failing = false,
                Ok(Err(e)) if !s.save_failing => {
                    tracing::warn!(error = %e, "cannot save the availability history");
                    s.save_failing = true;
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_scales_to_the_cpus_sold_and_is_clamped() {
        let m = Measured {
            idle_fraction: 0.5,
            load_milli: 0,
            free_mem_mib: 0,
        };
        assert_eq!(m.idle_milli(2), 1000);
        assert_eq!(m.idle_milli(3), 1500);
        let all = Measured {
            idle_fraction: 1.5,
            ..m
        };
        assert_eq!(all.idle_milli(4), 4000);
    }
}
