//! The PMI-1 server proper, without I/O: bytes from each rank's channel in, answer lines
//! and job aborts out. One key-value space per job; a barrier releases every rank once
//! all of them have entered it.
//!
//! Commands answered: `init` (version 1 only), `get_maxes`, `get_appnum` (0),
//! `get_universe_size` (the job's size), `get_my_kvsname`, `put`, `get` (including the
//! reserved `PMI_process_mapping`), `barrier_in`, `finalize`, `abort`. Anything else
//! (spawn, name publishing, other key-value spaces) is answered `rc=-1` with
//! `msg=not_supported_by_rexec`, so the library reports an error rather than waiting.

use std::collections::HashMap;

use super::wire::{self, KEYLEN_MAX, Line, MAX_LINE, VALLEN_MAX};

/// What the server asks of the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send `line` to `rank`'s channel.
    Reply {
        /// The rank.
        rank: u32,
        /// One newline-terminated answer.
        line: String,
    },
    /// Abort the job because of `rank`.
    Abort {
        /// The rank that asked for it or failed.
        rank: u32,
        /// One line: why.
        why: String,
        /// The exit status the job should end with (MPI_Abort's); `None` leaves it
        /// to the ranks' own statuses.
        code: Option<i32>,
    },
}

#[derive(Debug, Default)]
struct RankState {
    /// Bytes of an unfinished line.
    partial: Vec<u8>,
    inited: bool,
    finalized: bool,
    in_barrier: bool,
    /// Inside a multi-line `mcmd=` command, until `endcmd`.
    multi: Option<String>,
    /// The rank's channel is over (end of stream or a failure); later bytes are ignored.
    over: bool,
    /// Why the rank's PMI failed, once it has (not for MPI_Abort, which has its code).
    failure: Option<String>,
}

/// One job's PMI state.
#[derive(Debug)]
pub struct Server {
    kvsname: String,
    mapping: String,
    size: u32,
    kvs: HashMap<String, String>,
    ranks: Vec<RankState>,
    waiting: u32,
}

impl Server {
    /// A server for `size` ranks sharing key-value space `kvsname`, answering
    /// `PMI_process_mapping` with `mapping`.
    pub fn new(kvsname: String, mapping: String, size: u32) -> Server {
        Server {
            kvsname,
            mapping,
            size,
            kvs: HashMap::new(),
            ranks: (0..size).map(|_| RankState::default()).collect(),
            waiting: 0,
        }
    }

    /// Bytes `rank` wrote to its channel; the actions they call for.
    pub fn bytes(&mut self, rank: u32, bytes: &[u8]) -> Vec<Action> {
        let mut out = Vec::new();
        let Some(state) = self.ranks.get_mut(rank as usize) else {
            return out;
        };
        if state.over {
            return out;
        }
        state.partial.extend_from_slice(bytes);
        let mut lines = Vec::new();
        while let Some(end) = state.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = state.partial.drain(..=end).collect();
            lines.push(line);
        }
        if state.partial.len() > MAX_LINE {
            let why = format!("sent a PMI line longer than {MAX_LINE} bytes");
            return vec![self.fail(rank, why)];
        }
        for line in lines {
            let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
            self.line(rank, text.trim_end_matches('\r'), &mut out);
            if self.ranks[rank as usize].over {
                break;
            }
        }
        out
    }

    /// `rank`'s channel reached its end: a failure unless the rank never used it or
    /// finalized first.
    pub fn end(&mut self, rank: u32) -> Vec<Action> {
        let why = "closed its PMI connection before MPI_Finalize";
        self.close(rank, why).into_iter().collect()
    }

    /// `rank`'s process exited (whatever the order in which that and the end of its
    /// channel arrived): why its PMI failed, if it did. A rank that used PMI and exited
    /// without MPI_Finalize failed, even with status 0.
    pub fn exited(&mut self, rank: u32) -> Option<String> {
        self.close(rank, "exited without calling MPI_Finalize");
        self.ranks.get(rank as usize)?.failure.clone()
    }

    /// Ends `rank`'s channel; the abort when it ends unfinished (`why`).
    fn close(&mut self, rank: u32, why: &str) -> Option<Action> {
        let state = self.ranks.get_mut(rank as usize)?;
        let failed = state.inited && !state.finalized && !state.over;
        state.over = true;
        failed.then(|| self.fail(rank, why.to_string()))
    }

    /// Records that `rank`'s PMI failed for `why` (its channel is over); the abort.
    fn fail(&mut self, rank: u32, why: String) -> Action {
        if let Some(state) = self.ranks.get_mut(rank as usize) {
            state.over = true;
            state.failure.get_or_insert(why.clone());
        }
        Action::Abort {
            rank,
            why,
            code: None,
        }
    }

    fn line(&mut self, rank: u32, text: &str, out: &mut Vec<Action>) {
        let r = rank as usize;
        if let Some(cmd) = self.ranks[r].multi.clone() {
            if text == "endcmd" {
                self.ranks[r].multi = None;
                out.push(reply(rank, &unsupported(&cmd)));
            }
            return;
        }
        let line = Line::parse(text);
        if text.starts_with("mcmd=") {
            self.ranks[r].multi = Some(line.command().unwrap_or("").to_string());
            return;
        }
        let Some(cmd) = line.command() else {
            let why = format!("sent a PMI line without a command: {text:.80}");
            return out.push(self.fail(rank, why));
        };
        let answer = match cmd {
            "init" => {
                let version = line.get("pmi_version");
                self.ranks[r].inited = true;
                let rc = if version == Some("1") { "0" } else { "-1" };
                wire::answer(
                    "response_to_init",
                    &[("pmi_version", "1"), ("pmi_subversion", "1"), ("rc", rc)],
                )
            }
            "get_maxes" => wire::answer(
                "maxes",
                &[
                    ("kvsname_max", &wire::KVSNAME_MAX.to_string()),
                    ("keylen_max", &KEYLEN_MAX.to_string()),
                    ("vallen_max", &VALLEN_MAX.to_string()),
                ],
            ),
            "get_appnum" => wire::answer("appnum", &[("appnum", "0")]),
            "get_universe_size" => {
                wire::answer("universe_size", &[("size", &self.size.to_string())])
            }
            "get_my_kvsname" => wire::answer("my_kvsname", &[("kvsname", &self.kvsname)]),
            "put" => self.put(&line),
            "get" => self.get(&line),
            "barrier_in" => return self.barrier(rank, out),
            "finalize" => {
                self.ranks[r].finalized = true;
                wire::answer("finalize_ack", &[])
            }
            "abort" => {
                self.ranks[r].over = true;
                let code = line.get("exitcode").and_then(|c| c.parse().ok());
                let code = code.unwrap_or(crate::exit::FAILED);
                let why = format!("called MPI_Abort (exit code {code})");
                let code = Some(code);
                return out.push(Action::Abort { rank, why, code });
            }
            other => unsupported(other),
        };
        out.push(reply(rank, &answer));
    }

    fn put(&mut self, line: &Line<'_>) -> String {
        let (Some(kvs), Some(key)) = (line.get("kvsname"), line.get("key")) else {
            return failure("put_result", "put_needs_kvsname_and_key");
        };
        let value = line.get("value").unwrap_or("");
        if kvs != self.kvsname {
            return failure("put_result", "unknown_kvsname");
        }
        if key.len() > KEYLEN_MAX || value.len() > VALLEN_MAX {
            return failure("put_result", "key_or_value_too_long");
        }
        self.kvs.insert(key.to_string(), value.to_string());
        wire::answer("put_result", &[("rc", "0"), ("msg", "success")])
    }

    fn get(&self, line: &Line<'_>) -> String {
        let key = line.get("key").unwrap_or("");
        let value = match key {
            "PMI_process_mapping" => Some(self.mapping.as_str()),
            _ if line.get("kvsname") != Some(self.kvsname.as_str()) => None,
            _ => self.kvs.get(key).map(String::as_str),
        };
        match value {
            Some(v) => wire::answer(
                "get_result",
                &[("rc", "0"), ("msg", "success"), ("value", v)],
            ),
            None => failure("get_result", &format!("key_{key}_not_found")),
        }
    }

    fn barrier(&mut self, rank: u32, out: &mut Vec<Action>) {
        let state = &mut self.ranks[rank as usize];
        if !state.in_barrier {
            state.in_barrier = true;
            self.waiting += 1;
        }
        if self.waiting < self.size {
            return;
        }
        self.waiting = 0;
        for (r, state) in self.ranks.iter_mut().enumerate() {
            state.in_barrier = false;
            out.push(reply(r as u32, &wire::answer("barrier_out", &[])));
        }
    }
}

fn reply(rank: u32, line: &str) -> Action {
    Action::Reply {
        rank,
        line: line.to_string(),
    }
}

fn failure(cmd: &str, msg: &str) -> String {
    wire::answer(cmd, &[("rc", "-1"), ("msg", msg)])
}

fn unsupported(cmd: &str) -> String {
    failure(&format!("{cmd}_result"), "not_supported_by_rexec")
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
