//! The market's engine task: one task per node that owns the kernel weights and caps
//! (every write in order, on a blocking thread), runs the metering ticks, journals the
//! debits that fall due and reads accountd's receipts (a balance learnt from one can
//! run an owner dry).

use super::*;

impl Market {
    /// Journals a debit for delivery to accountd.
    pub(super) async fn record(&self, d: book::DueDebit) {
        self.meters.charged(d.amount);
        let Some(debits) = &self.debits else {
            tracing::debug!(job = %d.job, rank = d.rank, user = %d.user, amount = d.amount,
                "charge not sent: no accountd configured");
            return;
        };
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let debit = Debit {
            key: DebitKey {
                node: self.node.clone(),
                job: d.job.to_string(),
                seq,
            },
            user: d.user.clone(),
            amount: d.amount,
            rank: d.rank,
            interval: MeterInterval {
                start_us: self.clock.micros(d.start),
                end_us: self.clock.micros(d.end),
            },
            cpu_us: d.cpu_ns / 1000,
        };
        let charge = match d.account {
            None => Charge::Debit(debit),
            Some(project) => Charge::ProjectDebit(proto::project::ProjectDebit { project, debit }),
        };
        match debits.charge(charge).await {
            Ok(()) => self.meters.journaled(),
            Err(e) => tracing::error!(job = %d.job, rank = d.rank, user = %d.user,
                amount = d.amount, error = %e, "cannot journal a charge; it is lost"),
        }
    }

    /// The engine: metering ticks, weight writes and receipts, until stopped.
    pub(super) async fn run(
        self: Arc<Self>,
        mut requests: mpsc::UnboundedReceiver<Request>,
        mut settlements: Option<mpsc::UnboundedReceiver<Settlement>>,
    ) {
        let mut ticker = tokio::time::interval(self.cfg.meter_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut written = Written::default();
        let mut seen = self.book().generation();
        loop {
            tokio::select! {
                _ = ticker.tick() => {
                    self.tick().await;
                    self.apply_weights(&mut written).await;
                    seen = self.book().generation();
                }
                req = requests.recv() => {
                    let mut acks = Vec::new();
                    let mut stop = false;
                    let mut next = req;
                    loop {
                        match next {
                            None | Some(Request::Stop) => stop = true,
                            Some(Request::Rebalance(ack)) => acks.extend(ack),
                        }
                        match requests.try_recv() {
                            Ok(r) => next = Some(r),
                            Err(_) => break,
                        }
                    }
                    self.apply_weights(&mut written).await;
                    for ack in acks {
                        let _ = ack.send(());
                    }
                    if stop {
                        return;
                    }
                    // The market changed: meter up to now, so that the next tick, a
                    // whole interval later, measures the new market alone and the
                    // controller starts correcting one tick sooner.
                    if self.book().generation() != seen {
                        self.tick().await;
                        ticker.reset();
                        self.apply_weights(&mut written).await;
                        seen = self.book().generation();
                    }
                }
                Some(s) = recv(&mut settlements) => {
                    if self.settled(s) {
                        self.apply_weights(&mut written).await;
                    }
                }
            }
        }
    }

    /// Samples every rank, updates the book, and journals the debits that are due.
    async fn tick(&self) {
        let ids: Vec<(Key, u64)> = self.book().ranks().map(|(k, r)| (*k, r.cgroup)).collect();
        if ids.is_empty() {
            return;
        }
        let cgroups = self.cgroups.clone();
        let clock = self.idle_clock.clone();
        let sampled = tokio::task::spawn_blocking(move || {
            let ranks = ids
                .into_iter()
                .filter_map(|(key, id)| {
                    let s = cgroups.sample(id).ok()?;
                    Some((
                        key,
                        RankSample {
                            usage_ns: u64::try_from(s.usage.as_nanos()).unwrap_or(u64::MAX),
                            runnable: s.runnable,
                            throttled_ns: s
                                .throttled
                                .map(|t| u64::try_from(t.as_nanos()).unwrap_or(u64::MAX)),
                            at: s.at,
                        },
                    ))
                })
                .collect::<Vec<_>>();
            (ranks, clock.read())
        })
        .await;
        let (samples, idle_now) = match sampled {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "metering task failed");
                return;
            }
        };
        let closed = self.cfg.share_control.corrects_weights();
        let node_cpu = {
            let mut last = self.idle_last.lock().unwrap_or_else(|e| e.into_inner());
            let node = idle_now
                .zip(last.as_ref())
                .map(|(now, then)| now.since(then));
            *last = idle_now;
            node
        };
        let (due, moved, capped) = {
            let mut book = self.book();
            let before = book.status();
            book.tick(&samples, closed, node_cpu);
            let capped = book.reach_ceilings();
            let moved = book.status() != before;
            (
                book.due_debits(
                    Instant::now(),
                    self.cfg.debit_interval,
                    self.cfg.meter_interval,
                ),
                moved,
                capped,
            )
        };
        if moved || !capped.is_empty() {
            self.changed.notify_one();
        }
        for (key, charged, ceiling, control) in capped {
            tracing::info!(job = %key.0, rank = key.1, charged, ceiling,
                "spending ceiling reached: the rank now bids 0");
            let _ = control.try_send(book::ceiling_notice(&self.node, key, charged, ceiling));
        }
        for d in due {
            self.record(d).await;
        }
    }

    /// Writes every weight and bandwidth cap that differs from the last one written,
    /// on a blocking thread; only the engine calls this, so writes never overtake each
    /// other.
    async fn apply_weights(self: &Arc<Self>, written: &mut Written) {
        let (tickets, caps) = {
            let book = self.book();
            let mut placer = self.placer.lock().unwrap_or_else(|e| e.into_inner());
            let placed = placer
                .as_ref()
                .filter(|p| p.cpus().len() == self.cfg.cpus as usize)
                .and_then(|_| book.placement());
            match placed {
                Some(placed) => {
                    if let Some(p) = placer.as_mut() {
                        p.set(Some(super::placer::Placement { jobs: placed.jobs }));
                    }
                    (placed.tickets, placed.caps)
                }
                None => {
                    if let Some(p) = placer.as_mut() {
                        p.set(None);
                    }
                    (
                        book.weight_tickets(),
                        book.caps(self.cfg.share_control.caps()),
                    )
                }
            }
        };
        let range = self.cgroups.weight_range();
        let counts: Vec<u64> = tickets.iter().map(|&(_, t)| t).collect();
        let weights = weights_for_tickets(&counts, range);
        let live: HashMap<u64, u64> = tickets.iter().map(|&(id, _)| id).zip(weights).collect();
        written.weights.retain(|id, _| live.contains_key(id));
        written.caps.retain(|id, _| live.contains_key(id));
        let changes: Vec<(u64, u64)> = live
            .iter()
            .filter(|(id, w)| written.weights.get(id) != Some(w))
            .map(|(&id, &w)| (id, w))
            .collect();
        // A new cgroup has no cap.
        let cap_changes: Vec<(u64, Option<CpuQuota>)> = caps
            .into_iter()
            .filter(|(id, c)| written.caps.get(id).copied().unwrap_or(None) != *c)
            .collect();
        if changes.is_empty() && cap_changes.is_empty() {
            return;
        }
        let cgroups = self.cgroups.clone();
        let market = Arc::clone(self);
        let done = tokio::task::spawn_blocking(move || {
            // A cgroup being destroyed can take neither.
            let weights: Vec<(u64, u64)> = changes
                .into_iter()
                .filter(|&(id, w)| match timed(&market, || cgroups.set_weight(id, w)) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::debug!(cgroup = id, weight = w, error = %e, "cannot set cpu weight");
                        false
                    }
                })
                .collect();
            let caps: Vec<(u64, Option<CpuQuota>)> = cap_changes
                .into_iter()
                .filter(|&(id, c)| match cgroups.set_quota(id, c) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::debug!(cgroup = id, cap = ?c, error = %e, "cannot set cpu cap");
                        false
                    }
                })
                .collect();
            (weights, caps)
        })
        .await;
        if let Ok((weights, caps)) = done {
            written.weights.extend(weights);
            written.caps.extend(caps);
        }
    }

    /// Takes a debit's outcome; true when a user ran dry (weights must change).
    fn settled(&self, s: Settlement) -> bool {
        let (user, balance, member) = match s {
            Settlement::Applied { charge, receipt } => {
                self.meters.delivered();
                let payer = charge.project().unwrap_or(charge.user()).to_string();
                self.credit.saw(&payer, receipt.balance_now);
                (payer, receipt.balance_now, None)
            }
            Settlement::Refused {
                charge,
                code,
                message,
            } => {
                tracing::error!(key = %charge.key(), user = charge.user(), ?code,
                    "accountd refused a charge for good: {message}");
                match charge.project() {
                    // The project refused this member: its limit, or no member now.
                    Some(project) => (project.to_string(), 0, Some(charge.user().to_string())),
                    None if code == AccountCode::UnknownUser => {
                        self.credit.saw(charge.user(), 0);
                        (charge.user().to_string(), 0, None)
                    }
                    None => return false,
                }
            }
        };
        if balance > 0 {
            return false;
        }
        let newly = match &member {
            Some(owner) => self.book().run_dry_member(&user, owner),
            None => self.book().run_dry(&user),
        };
        if !newly.is_empty() {
            self.changed.notify_one();
        }
        for ((job, rank), control) in &newly {
            tracing::info!(%user, %job, rank, balance, "out of credit: the rank now bids 0");
            let _ = control.try_send(book::dry_notice(&self.node, &user, *job, balance));
        }
        !newly.is_empty()
    }
}

/// What the engine last wrote to each job cgroup.
#[derive(Debug, Default)]
struct Written {
    /// Kernel weights.
    weights: HashMap<u64, u64>,
    /// Bandwidth caps (absent: none written, the kernel's default of no cap).
    caps: HashMap<u64, Option<CpuQuota>>,
}

/// Runs one weight write and counts it.
fn timed<T>(market: &Market, write: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = write();
    market.meters.weight_written(started);
    out
}

async fn recv<T>(rx: &mut Option<mpsc::UnboundedReceiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}
