//! `rexec --mpi`: the client as the process manager of an MPICH-family job.
//!
//! Each rank is launched with `LaunchPmi`: its node gives it a PMI channel (`PMI_FD`,
//! `PMI_RANK`, `PMI_SIZE`) and relays the bytes over the rank's session. The rank's
//! reader ([`crate::rank`]) hands them to one task per job, [`start`]ed before the
//! launch, which runs the PMI-1 [`server::Server`] (the job's key-value space, its
//! barriers, `PMI_process_mapping` from the real placement, see [`mapping`]) and sends
//! the answers back on each rank's control queue. MPI_Abort, and a channel that ends
//! before MPI_Finalize (after [`EXIT_FIRST`]), become [`RankEvent::Aborted`], which the
//! coordinator treats as a failed rank: every rank is killed. A rank's exit is passed on
//! only after the server has said whether the rank finalized ([`RankPmi::exited`]), so a
//! rank that exits 0 without MPI_Finalize fails the job whichever of its exit and the
//! end of its channel arrives first.
//!
//! - [`config`]: the client file's `[mpi]` table (MPI by default).
//! - [`agent`]: `rexec-agent`, the ssh stand-in through which `mpirun` and `mpiexec`
//!   start their per-node daemons as rexec jobs.
//! - [`wire`]: the line format.
//! - [`server`]: the protocol state, without I/O.
//! - [`mapping`]: the node layout in MPICH's vector form.
//! - [`linked`]: the MPI library a program links, read from its ELF file.
//! - [`unheard`]: the line said when no rank opened its PMI channel ([`Heard`]).

pub mod agent;
pub mod config;
pub mod linked;
pub mod mapping;
pub mod server;
pub mod unheard;
pub mod wire;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use proto::Chunk;
use proto::node::{JobId, ToNode};
use tokio::sync::{mpsc, oneshot};

use crate::rank_msg::{Control, RankEvent};
use server::{Action, Server};

/// How long a failed PMI channel waits before it aborts the job (see `serve`).
pub const EXIT_FIRST: std::time::Duration = std::time::Duration::from_millis(500);

/// What a rank's reader passes on.
#[derive(Debug)]
enum Inbound {
    Bytes(Vec<u8>),
    End,
    /// The rank's process exited; the answer is why its PMI failed, if it did.
    Exited(oneshot::Sender<Option<String>>),
}

#[derive(Debug)]
struct Message {
    rank: u32,
    what: Inbound,
    /// The rank's control queue, for the answers.
    reply: mpsc::UnboundedSender<Control>,
}

/// A job's PMI server, to be handed to each rank's reader.
#[derive(Debug, Clone)]
pub struct Pmi {
    tx: mpsc::UnboundedSender<Message>,
    heard: Heard,
}

/// Whether any rank of a job has written to its PMI channel. Set before the server
/// answers the rank's exit, so once every rank's exit has been passed on it is final.
#[derive(Debug, Clone, Default)]
pub struct Heard(Arc<AtomicBool>);

impl Heard {
    /// Whether any rank wrote to its channel.
    pub fn any(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// One rank's side of the PMI server.
#[derive(Debug)]
pub struct RankPmi {
    rank: u32,
    tx: mpsc::UnboundedSender<Message>,
    reply: mpsc::UnboundedSender<Control>,
}

impl Pmi {
    /// Whether any rank has written to its channel, to ask once the job has ended
    /// (without keeping the server alive).
    pub fn heard(&self) -> Heard {
        self.heard.clone()
    }

    /// The handle for `rank`, whose answers go to its `control` queue.
    pub fn for_rank(&self, rank: u32, control: mpsc::UnboundedSender<Control>) -> RankPmi {
        RankPmi {
            rank,
            tx: self.tx.clone(),
            reply: control,
        }
    }
}

impl RankPmi {
    /// Bytes the rank wrote to its channel.
    pub fn bytes(&self, bytes: Vec<u8>) {
        self.send(Inbound::Bytes(bytes));
    }

    /// The rank's channel ended.
    pub fn end(&self) {
        self.send(Inbound::End);
    }

    /// The rank's process exited: why its PMI failed, if it did (it used PMI and did not
    /// finalize). Asked before the exit is passed on, so that a rank whose exit arrives
    /// before the end of its channel still fails the job.
    pub async fn exited(&self) -> Option<String> {
        let (tx, rx) = oneshot::channel();
        self.send(Inbound::Exited(tx));
        rx.await.ok().flatten()
    }

    fn send(&self, what: Inbound) {
        let _ = self.tx.send(Message {
            rank: self.rank,
            what,
            reply: self.reply.clone(),
        });
    }
}

/// Starts the PMI server of job `job`, whose ranks run on `nodes` (node name by rank);
/// aborts go to the coordinator's `events`. The server ends when every handle is gone.
pub fn start(job: JobId, nodes: &[String], events: mpsc::UnboundedSender<RankEvent>) -> Pmi {
    let size = u32::try_from(nodes.len()).unwrap_or(u32::MAX);
    let server = Server::new(
        format!("rexec_{job}"),
        mapping::process_mapping(nodes),
        size,
    );
    let (tx, rx) = mpsc::unbounded_channel();
    let heard = Heard::default();
    tokio::spawn(serve(server, rx, events, nodes.len(), heard.clone()));
    Pmi { tx, heard }
}

async fn serve(
    mut server: Server,
    mut rx: mpsc::UnboundedReceiver<Message>,
    events: mpsc::UnboundedSender<RankEvent>,
    size: usize,
    heard: Heard,
) {
    // Answer queues by rank, as each rank is first heard from (a barrier answers every
    // rank, and each has spoken by then).
    let mut replies: Vec<Option<mpsc::UnboundedSender<Control>>> = vec![None; size];
    while let Some(msg) = rx.recv().await {
        if let Some(slot) = replies.get_mut(msg.rank as usize) {
            slot.get_or_insert(msg.reply);
        }
        let actions = match msg.what {
            Inbound::Bytes(b) => {
                heard.set();
                server.bytes(msg.rank, &b)
            }
            Inbound::End => server.end(msg.rank),
            Inbound::Exited(answer) => {
                let _ = answer.send(server.exited(msg.rank));
                continue;
            }
        };
        for action in actions {
            match action {
                Action::Reply { rank, line } => {
                    if let Some(Some(to)) = replies.get(rank as usize) {
                        let chunk = Chunk(line.into_bytes());
                        let _ = to.send(Control::Send(ToNode::Pmi(chunk)));
                    }
                }
                Action::Abort { rank, why, code } => {
                    let event = RankEvent::Aborted { rank, why, code };
                    if code.is_some() {
                        let _ = events.send(event);
                    } else {
                        // A channel that failed is most often a rank that died: its
                        // `Exit` (killed by a signal, say) tells the user more, so it
                        // gets a moment to arrive first.
                        let events = events.clone();
                        tokio::spawn(async move {
                            tokio::time::sleep(EXIT_FIRST).await;
                            let _ = events.send(event);
                        });
                    }
                }
            }
        }
    }
}
