//! The node side of `rexec --mpi`: a rank's PMI channel, relayed over its session.
//!
//! For a `LaunchPmi`, [`Channel::open`] makes a Unix socket pair before the spawn. The
//! rank's end is passed to the program under its own descriptor number (close-on-exec
//! cleared in the child only, see [`crate::sys::child`]), named by `PMI_FD`, with
//! `PMI_RANK` and `PMI_SIZE` from the request: what an MPICH-family library's PMI-1
//! "simple" client looks for. No other process on the node can reach the socket, so
//! nothing here needs to check who is speaking.
//!
//! [`Relay`] then passes bytes both ways without parsing them: what the rank writes goes
//! to the client as `FromNode::Pmi` frames through the session's output queue (so a
//! rank that floods its channel waits on the client, as its stdout does), and the
//! client's `ToNode::Pmi` bytes are written to the rank. When every process of the rank
//! has closed the channel the relay sends `FromNode::PmiEnd` once and ends. The key-value
//! space, the barriers and the process mapping are the client's (`rexec/src/mpi`).

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

use proto::node::{CHUNK_SIZE, Chunk, FromNode, Launch};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::pump::Out;

/// Chunks of client bytes a relay holds for a rank that is slow to read them. PMI is
/// request and answer, so a well-behaved client never has more than one or two queued.
pub const QUEUE: usize = 64;

/// A PMI channel between rexecd and one rank, before the spawn.
#[derive(Debug)]
pub struct Channel {
    ours: UnixStream,
    theirs: UnixStream,
}

impl Channel {
    /// A new socket pair (both ends close-on-exec).
    pub fn open() -> io::Result<Channel> {
        let (ours, theirs) = UnixStream::pair()?;
        Ok(Channel { ours, theirs })
    }

    /// The descriptor the rank inherits; it must stay open until the spawn returned.
    pub fn child_fd(&self) -> RawFd {
        self.theirs.as_raw_fd()
    }

    /// The variables that tell the PMI client where its channel is.
    pub fn env(&self, request: &Launch) -> [(String, String); 3] {
        [
            ("PMI_FD".to_string(), self.child_fd().to_string()),
            ("PMI_RANK".to_string(), request.rank.to_string()),
            ("PMI_SIZE".to_string(), request.nranks.to_string()),
        ]
    }

    /// After the spawn: closes rexecd's copy of the rank's end (so the end of the
    /// rank's processes is seen as end of stream) and keeps rexecd's end.
    pub fn spawned(self) -> UnixStream {
        drop(self.theirs);
        self.ours
    }
}

/// A running relay; dropping it stops the relay.
#[derive(Debug)]
pub struct Relay {
    to_rank: mpsc::Sender<Chunk>,
    task: JoinHandle<()>,
}

/// The client sent more PMI bytes than the rank takes.
#[derive(Debug, thiserror::Error)]
#[error("the client sent more than {QUEUE} PMI messages the rank has not read")]
pub struct Flooded;

impl Relay {
    /// Starts relaying between `socket` (rexecd's end) and the session's output queue.
    pub fn start(socket: UnixStream, out: mpsc::Sender<Out>) -> io::Result<Relay> {
        socket.set_nonblocking(true)?;
        let socket = tokio::net::UnixStream::from_std(socket)?;
        let (to_rank, from_client) = mpsc::channel(QUEUE);
        let task = tokio::spawn(relay(socket, out, from_client));
        Ok(Relay { to_rank, task })
    }

    /// Queues the client's bytes for the rank.
    pub fn send(&self, chunk: Chunk) -> Result<(), Flooded> {
        match self.to_rank.try_send(chunk) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => Err(Flooded),
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(
    socket: tokio::net::UnixStream,
    out: mpsc::Sender<Out>,
    mut from_client: mpsc::Receiver<Chunk>,
) {
    let (mut read, mut write) = socket.into_split();
    let mut buf = vec![0u8; CHUNK_SIZE];
    let mut writable = true;
    loop {
        tokio::select! {
            got = read.read(&mut buf) => match got {
                Ok(0) | Err(_) => {
                    let _ = out.send(Out::Frame(FromNode::PmiEnd)).await;
                    return;
                }
                Ok(n) => {
                    let frame = FromNode::Pmi(Chunk(buf[..n].to_vec()));
                    if out.send(Out::Frame(frame)).await.is_err() {
                        return;
                    }
                }
            },
            Some(chunk) = from_client.recv(), if writable => {
                if let Err(e) = write.write_all(chunk.as_bytes()).await {
                    // The rank closed its end for writing; its reads decide the rest.
                    tracing::debug!(error = %e, "cannot write to the rank's PMI channel");
                    writable = false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bytes_go_both_ways_and_the_end_is_reported_once() {
        let channel = Channel::open().unwrap();
        let rank = channel.theirs.try_clone().unwrap();
        rank.set_nonblocking(true).unwrap();
        let mut rank = tokio::net::UnixStream::from_std(rank).unwrap();
        let ours = channel.spawned();
        let (out_tx, mut out_rx) = mpsc::channel(8);
        let relay = Relay::start(ours, out_tx).unwrap();
        rank.write_all(b"cmd=init pmi_version=1 pmi_subversion=1\n")
            .await
            .unwrap();
        match out_rx.recv().await {
            Some(Out::Frame(FromNode::Pmi(c))) => {
                assert_eq!(c.as_bytes(), b"cmd=init pmi_version=1 pmi_subversion=1\n")
            }
            other => panic!("{other:?}"),
        }
        relay
            .send(Chunk(b"cmd=response_to_init rc=0\n".to_vec()))
            .unwrap();
        let mut got = [0u8; 26];
        rank.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"cmd=response_to_init rc=0\n");
        drop(rank);
        assert!(matches!(
            out_rx.recv().await,
            Some(Out::Frame(FromNode::PmiEnd))
        ));
        assert!(out_rx.recv().await.is_none(), "the relay ended");
    }

    #[test]
    fn the_environment_names_the_inherited_descriptor() {
        let channel = Channel::open().unwrap();
        let launch = Launch {
            job: proto::node::JobId(1),
            rank: 2,
            nranks: 4,
            bid: money::Bid::ZERO,
            argv: vec!["x".into()],
            env: vec![],
            cwd: None,
            terminal: None,
            options: Default::default(),
        };
        let env = channel.env(&launch);
        assert_eq!(env[0].1, channel.child_fd().to_string());
        assert_eq!(env[1], ("PMI_RANK".into(), "2".into()));
        assert_eq!(env[2], ("PMI_SIZE".into(), "4".into()));
    }
}
