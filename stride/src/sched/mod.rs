//! Stride scheduling on k CPUs, after Waldspurger and Weihl, with join, leave and re-bid.
//!
//! Each client holds tickets; its stride is [`STRIDE1`] / tickets, and its pass advances by
//! its stride each time it runs a quantum on a CPU. Every quantum, each CPU runs the
//! lowest-pass client (ties: lowest id) that does not already occupy as many CPUs as it has
//! runnable threads (its demand). The global pass is the virtual time of the node: it advances
//! each quantum by (CPUs left to the unsaturated clients) * STRIDE1 / (their tickets), which is
//! k times the global stride while nobody is saturated, as the paper prescribes for SMPs.
//!
//! Clients join, leave, sleep, wake and change tickets at any time with neither windfall nor
//! loss: a leaving (or sleeping) client keeps `remain = pass - global_pass`, a returning one
//! gets `pass = global_pass + remain`, and a ticket change keeps the fraction of a stride still
//! to wait (remain scales by new stride / old stride). A client whose water-filled share is
//! its whole demand falls behind the global pass without earning anything by it, so at every
//! change of membership a pass more than one stride behind the global pass is brought up to
//! one stride behind. Passes are `i128`, so nothing overflows in any realistic run.
//!
//! Dispatch is a 4-ary heap keyed by (pass, id): O(log n) per decision. A change of
//! membership, demand or tickets costs O(n log n) once, at the next quantum.

use std::collections::BTreeMap;

use crate::alloc::{Claim, water_level};

mod client;
mod heap;

use client::{Client, Entry, stride_of, view};
pub use client::{ClientId, ClientView, Departed, MAX_CLIENT_TICKETS, STRIDE1, SchedError};
use heap::Heap;

/// The most clients one scheduler holds (slots are 32-bit in the dispatch queue).
pub const MAX_CLIENTS: usize = u32::MAX as usize;

/// A stride scheduler for one node of `k` CPUs.
///
/// ```
/// use stride::{ClientId, Scheduler};
/// let mut s = Scheduler::new(1)?;
/// s.join(ClientId(1), 3, 1)?;
/// s.join(ClientId(2), 1, 1)?;
/// let mut out = Vec::new();
/// for _ in 0..400 {
///     s.run_quantum(&mut out);
/// }
/// assert_eq!(s.received(ClientId(1)), Some(300));
/// assert_eq!(s.received(ClientId(2)), Some(100));
/// # Ok::<(), stride::SchedError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Scheduler {
    cpus: u32,
    clients: Vec<Client>,
    slots: BTreeMap<ClientId, usize>,
    heap: Heap,
    touched: Vec<u32>,
    global_pass: i128,
    step: i128,
    step_frac: u128,
    step_den: u128,
    frac: u128,
    dirty: bool,
    rounds: u64,
}

impl Scheduler {
    /// An empty scheduler for `cpus` CPUs.
    pub fn new(cpus: u32) -> Result<Scheduler, SchedError> {
        if cpus == 0 {
            return Err(SchedError::NoCpus);
        }
        Ok(Scheduler {
            cpus,
            clients: Vec::new(),
            slots: BTreeMap::new(),
            heap: Heap::default(),
            touched: Vec::with_capacity(cpus as usize),
            global_pass: 0,
            step: 0,
            step_frac: 0,
            step_den: 1,
            frac: 0,
            dirty: false,
            rounds: 0,
        })
    }

    /// The number of CPUs.
    pub fn cpus(&self) -> u32 {
        self.cpus
    }

    /// The number of clients (runnable or asleep).
    pub fn len(&self) -> usize {
        self.clients.len()
    }

    /// Whether there are no clients.
    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    /// Quanta run so far.
    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    /// The global pass (virtual time of the node).
    pub fn global_pass(&self) -> i128 {
        self.global_pass
    }

    /// Quanta `id` has received since it joined.
    pub fn received(&self, id: ClientId) -> Option<u64> {
        self.slots.get(&id).map(|&s| self.clients[s].received)
    }

    /// One client's state.
    pub fn client(&self, id: ClientId) -> Option<ClientView> {
        self.slots.get(&id).map(|&s| view(&self.clients[s]))
    }

    /// Every client, in id order.
    pub fn clients(&self) -> impl Iterator<Item = ClientView> + '_ {
        self.slots.values().map(|&s| view(&self.clients[s]))
    }

    /// Adds a new client; it starts one stride after the global pass (as if it had just run).
    pub fn join(&mut self, id: ClientId, tickets: u64, demand: u32) -> Result<(), SchedError> {
        let stride = stride_of(id, tickets)?;
        self.insert(id, tickets, stride, stride, demand)
    }

    /// Brings a departed client back with the remain it left with (never more than one
    /// stride of lag is honoured).
    pub fn rejoin(&mut self, departed: Departed, demand: u32) -> Result<(), SchedError> {
        let stride = stride_of(departed.id, departed.tickets)?;
        self.insert(
            departed.id,
            departed.tickets,
            stride,
            departed.remain.max(-stride),
            demand,
        )
    }

    /// Removes a client, returning what it needs to rejoin fairly.
    pub fn leave(&mut self, id: ClientId) -> Result<Departed, SchedError> {
        let slot = self.slots.remove(&id).ok_or(SchedError::Unknown(id))?;
        let remain = self.remain_of(slot);
        let gone = self.clients.swap_remove(slot);
        if let Some(moved) = self.clients.get(slot) {
            self.slots.insert(moved.id, slot);
        }
        self.dirty = true;
        Ok(Departed {
            id,
            tickets: gone.tickets,
            remain,
        })
    }

    /// Changes a client's tickets, keeping the fraction of a stride it still has to wait.
    pub fn set_tickets(&mut self, id: ClientId, tickets: u64) -> Result<(), SchedError> {
        let slot = self.slot(id)?;
        let stride = stride_of(id, tickets)?;
        let old = self.clients[slot].tickets;
        // remain * new_stride / old_stride, computed from tickets to stay exact and small.
        let remain = self.remain_of(slot) * i128::from(old) / i128::from(tickets);
        let g = self.global_pass;
        let c = &mut self.clients[slot];
        c.tickets = tickets;
        c.stride = stride;
        c.remain = remain;
        c.pass = g + remain;
        self.dirty = true;
        Ok(())
    }

    /// Changes a client's demand (runnable threads); zero puts it to sleep, keeping its remain.
    pub fn set_demand(&mut self, id: ClientId, demand: u32) -> Result<(), SchedError> {
        let slot = self.slot(id)?;
        let remain = self.remain_of(slot);
        let g = self.global_pass;
        let c = &mut self.clients[slot];
        if c.demand != demand {
            c.remain = remain;
            c.pass = g + remain;
            c.demand = demand;
            self.dirty = true;
        }
        Ok(())
    }

    /// Runs one quantum on every CPU; `out` receives the client run on each busy CPU (a
    /// client with several threads may appear several times). Idle CPUs are left out.
    pub fn run_quantum(&mut self, out: &mut Vec<ClientId>) {
        out.clear();
        if self.dirty {
            self.rebase();
        }
        self.rounds += 1;
        if self.heap.is_empty() {
            return;
        }
        for _ in 0..self.cpus {
            let Some(&top) = self.heap.peek() else {
                break;
            };
            let c = &mut self.clients[top.slot as usize];
            if c.used == 0 {
                self.touched.push(top.slot);
            }
            c.used += 1;
            c.received += 1;
            c.pass += c.stride;
            out.push(c.id);
            if c.used < c.demand {
                let pass = c.pass;
                self.heap.replace_top(Entry { pass, ..top });
            } else {
                self.heap.pop();
            }
        }
        for slot in self.touched.drain(..) {
            let c = &mut self.clients[slot as usize];
            if c.used >= c.demand {
                self.heap.push(Entry {
                    pass: c.pass,
                    id: c.id.0,
                    slot,
                });
            }
            c.used = 0;
        }
        self.global_pass += self.step;
        self.frac += self.step_frac;
        if self.frac >= self.step_den {
            self.frac -= self.step_den;
            self.global_pass += 1;
        }
    }

    fn slot(&self, id: ClientId) -> Result<usize, SchedError> {
        self.slots.get(&id).copied().ok_or(SchedError::Unknown(id))
    }

    /// pass - global pass, with lag beyond one stride forgiven.
    fn remain_of(&self, slot: usize) -> i128 {
        let c = &self.clients[slot];
        if c.demand > 0 {
            c.pass.max(self.global_pass - c.stride) - self.global_pass
        } else {
            c.remain
        }
    }

    fn insert(
        &mut self,
        id: ClientId,
        tickets: u64,
        stride: i128,
        remain: i128,
        demand: u32,
    ) -> Result<(), SchedError> {
        if self.slots.contains_key(&id) {
            return Err(SchedError::Duplicate(id));
        }
        if self.clients.len() >= MAX_CLIENTS {
            return Err(SchedError::Full(id));
        }
        self.slots.insert(id, self.clients.len());
        self.clients.push(Client {
            id,
            tickets,
            stride,
            pass: self.global_pass + remain,
            remain,
            demand,
            used: 0,
            received: 0,
        });
        self.dirty = true;
        Ok(())
    }

    /// After any change: recompute the global pass rate from the water-filled allocation,
    /// forgive lag beyond one stride, and rebuild the heap.
    fn rebase(&mut self) {
        let runnable: Vec<usize> = (0..self.clients.len())
            .filter(|&s| self.clients[s].demand > 0)
            .collect();
        let claims: Vec<Claim> = runnable
            .iter()
            .map(|&s| Claim {
                tickets: self.clients[s].tickets,
                demand: self.clients[s].demand,
            })
            .collect();
        match water_level(self.cpus, &claims) {
            Some(level) => {
                let num = level.num * STRIDE1 as u128;
                self.step = (num / level.den) as i128;
                self.step_frac = num % level.den;
                self.step_den = level.den;
            }
            None => {
                // Idle CPUs: virtual time keeps pace with the fastest client.
                self.step = runnable
                    .iter()
                    .map(|&s| i128::from(self.clients[s].demand) * self.clients[s].stride)
                    .max()
                    .unwrap_or(0);
                self.step_frac = 0;
                self.step_den = 1;
            }
        }
        self.frac = 0;
        let g = self.global_pass;
        let mut entries = Vec::with_capacity(runnable.len());
        for &s in &runnable {
            let c = &mut self.clients[s];
            c.pass = c.pass.max(g - c.stride);
            entries.push(Entry {
                pass: c.pass,
                id: c.id.0,
                slot: s as u32,
            });
        }
        self.heap = Heap::from_vec(entries);
        self.dirty = false;
    }
}
