//! Memory stays bounded whatever a peer sends: a frame header cannot make
//! the reader reserve its declared length, a declared sequence or string
//! length cannot make the decoder reserve more than the bytes present, and
//! the worst body of `max_frame` bytes decodes within a few MiB.
//!
//! Allocations are counted by a global allocator wrapping the system one
//! (in [`sys`], the only unsafe code of this crate, test-only). Counts are
//! per thread, so the test harness's own threads do not disturb them.

mod common;

use proto::account::{AccountRequest, AccountResponse};
use proto::node::{Bid, FromNode, JobId, JobInfo, JobList, Launch, ToNode};
use proto::{DEFAULT_MAX_FRAME, FrameError, FrameReader, encode_frame};

mod sys {
    //! A counting allocator: forwards to `System` and records, per thread,
    //! the bytes currently held and the peak since the last reset.
    #![allow(unsafe_code)]

    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static HELD: Cell<usize> = const { Cell::new(0) };
        static PEAK: Cell<usize> = const { Cell::new(0) };
    }

    fn add(n: usize) {
        let _ = HELD.try_with(|h| {
            let now = h.get() + n;
            h.set(now);
            let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
        });
    }

    fn sub(n: usize) {
        let _ = HELD.try_with(|h| h.set(h.get().saturating_sub(n)));
    }

    pub struct Counting;

    // SAFETY: every method forwards to `System` with the caller's arguments
    // unchanged, so `System`'s guarantees carry over; the bookkeeping only
    // touches const-initialised thread-locals, which never allocate.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            add(layout.size());
            // SAFETY: same contract as our caller's.
            unsafe { System.alloc(layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            add(layout.size());
            // SAFETY: same contract as our caller's.
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            sub(layout.size());
            // SAFETY: `ptr` came from `System` through this allocator.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            add(new_size);
            sub(layout.size());
            // SAFETY: `ptr` came from `System` through this allocator.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static ALLOC: Counting = Counting;

    /// Bytes held by this thread now.
    pub fn held() -> usize {
        HELD.with(|h| h.get())
    }

    /// Peak bytes held by this thread above the level at the start of `f`.
    pub fn peak_during<R>(f: impl FnOnce() -> R) -> (R, usize) {
        let base = held();
        PEAK.with(|p| p.set(base));
        let r = f();
        (r, PEAK.with(|p| p.get()) - base)
    }
}

use sys::peak_during;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

#[test]
fn a_large_declared_frame_costs_only_the_bytes_that_arrive() {
    let mut stream = (DEFAULT_MAX_FRAME as u32).to_be_bytes().to_vec();
    stream.extend_from_slice(&[1; 10]);
    let mut r = FrameReader::new(&stream[..], DEFAULT_MAX_FRAME);
    let (result, peak) = peak_during(|| common::ready(r.recv::<ToNode>()));
    assert!(
        matches!(result, Err(FrameError::Truncated { have: 14, .. })),
        "{result:?}"
    );
    assert!(peak <= 16 * KIB, "peak {peak} bytes for a 14-byte stream");

    // Half a frame: memory grows with what arrived, not with what was declared.
    let mut stream = (DEFAULT_MAX_FRAME as u32).to_be_bytes().to_vec();
    stream.resize(4 + 100 * KIB, 0);
    let mut r = FrameReader::new(&stream[..], DEFAULT_MAX_FRAME);
    let (_, peak) = peak_during(|| common::ready(r.recv::<ToNode>()));
    assert!(
        peak <= 3 * 100 * KIB,
        "peak {peak} bytes for 100 KiB received"
    );
}

/// Bodies that declare far more than they hold, one per length field.
fn lying_bodies() -> Vec<Vec<u8>> {
    let huge: &[u8] = &[0xff, 0xff, 0xff, 0xff, 0x0f];
    let big: &[u8] = &[0x80, 0x80, 0x04]; // 65536
    let mut out = Vec::new();
    for len in [huge, big] {
        // Stdin chunk.
        out.push([&[3u8][..], len].concat());
        // Launch: job, rank, nranks, bid, then argv's count, or argv[0]'s length, or env's count.
        out.push([&[2u8, 1, 0, 1, 0][..], len].concat());
        out.push([&[2u8, 1, 0, 1, 0, 1][..], len].concat());
        out.push([&[2u8, 1, 0, 1, 0, 0][..], len].concat());
        // Hello's agent string.
        out.push([&[1u8, 1, 1][..], len].concat());
        // Jobs list count (FromNode tag 9).
        out.push([&[9u8][..], len].concat());
    }
    out
}

#[test]
fn declared_lengths_reserve_nothing_beyond_the_body() {
    for body in lying_bodies() {
        // Some of these are valid as the other enum (for instance a FromNode
        // `Started`); what matters is that none reserves the declared length.
        let (_, peak) = peak_during(|| postcard::from_bytes::<ToNode>(&body).is_ok());
        assert!(peak <= 8 * KIB, "ToNode {body:?}: peak {peak}");
        let (_, peak) = peak_during(|| postcard::from_bytes::<FromNode>(&body).is_ok());
        assert!(peak <= 8 * KIB, "FromNode {body:?}: peak {peak}");
    }
}

/// Which account decoder a lying body is aimed at.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Aim {
    Request,
    Response,
}

/// Account-service bodies that declare far more than they hold, one per
/// length field (strings and sequences), with the decoder each is aimed at.
/// Layouts: a request is (version, id, op tag, payload), a response is
/// (id, 0 for `Ok` and a reply tag or 1 for `Err` and a code, payload).
fn lying_account_bodies() -> Vec<(Vec<u8>, Aim)> {
    let huge: &[u8] = &[0xff, 0xff, 0xff, 0xff, 0x0f];
    let big: &[u8] = &[0x80, 0x80, 0x04]; // 65536
    let mut out = Vec::new();
    for len in [huge, big] {
        // Requests (version, id, op tag): Debit's key.node, Refund's reason
        // (after an empty key, user and a zero amount), Balance's user.
        out.push(([&[1u8, 1, 1][..], len].concat(), Aim::Request));
        out.push((
            [&[1u8, 1, 2, 0, 0, 0, 0, 0][..], len].concat(),
            Aim::Request,
        ));
        out.push(([&[1u8, 1, 3, 1][..], len].concat(), Aim::Request));
        // Responses (id, Ok or Err): an error's message, a balance's user,
        // history entries, report rows, audit problems.
        out.push(([&[1u8, 1, 3][..], len].concat(), Aim::Response));
        out.push(([&[1u8, 0, 2][..], len].concat(), Aim::Response));
        out.push(([&[1u8, 0, 3][..], len].concat(), Aim::Response));
        out.push(([&[1u8, 0, 6][..], len].concat(), Aim::Response));
        out.push(([&[1u8, 0, 7, 0, 0][..], len].concat(), Aim::Response));
        // Audit problems, then the first problem's entry ids (after an empty
        // `what` and no user): two sequences declared at once.
        out.push((
            [&[1u8, 0, 7, 0, 0][..], len, &[0, 0], len].concat(),
            Aim::Response,
        ));
    }
    out
}

#[test]
fn account_declared_lengths_reserve_nothing_beyond_the_body() {
    // The account messages use plain `Vec`s (see `proto::limits`), so this
    // relies on serde and postcard: postcard gives no size hint when the
    // declared count exceeds the bytes left, and serde then reserves nothing.
    for (body, aim) in lying_account_bodies() {
        // Some bodies are valid as the other type (a request's first bytes
        // can read as an error response); the one aimed at must fail.
        let (ok, peak) = peak_during(|| postcard::from_bytes::<AccountRequest>(&body).is_ok());
        assert!(!(ok && aim == Aim::Request), "{body:?} decodes");
        assert!(peak <= 8 * KIB, "AccountRequest {body:?}: peak {peak}");
        let (ok, peak) = peak_during(|| postcard::from_bytes::<AccountResponse>(&body).is_ok());
        assert!(!(ok && aim == Aim::Response), "{body:?} decodes");
        assert!(peak <= 8 * KIB, "AccountResponse {body:?}: peak {peak}");
    }
}

#[test]
fn the_worst_body_of_max_frame_bytes_decodes_within_a_few_mib() {
    // The most elements the limits allow, each as small as possible: the
    // largest expansion from wire bytes to memory.
    let launch = Launch {
        job: JobId(1),
        rank: 0,
        nranks: 1,
        bid: Bid::ZERO,
        argv: vec![String::new(); proto::limits::MAX_ARGS],
        env: vec![(String::new(), String::new()); proto::limits::MAX_ENV],
        cwd: None,
        terminal: None,
        options: Default::default(),
    };
    let info = JobInfo {
        job: JobId(0),
        rank: 0,
        nranks: 0,
        user: String::new(),
        program: String::new(),
        bid: Bid::ZERO,
        effective_bid: Bid::ZERO,
        runnable: u32::MAX,
        model_milli_cpus: u32::MAX,
        measured_milli_cpus: u32::MAX,
        cpu_nanos: 0,
        charged: 0,
        age_millis: 0,
    };
    let jobs = FromNode::Jobs(JobList {
        jobs: vec![info; proto::limits::MAX_JOBS],
        truncated: false,
        cpus: u32::MAX,
        price: i64::MIN,
        contended: true,
    });
    let frames = [
        encode_frame(&ToNode::Launch(launch), DEFAULT_MAX_FRAME).unwrap(),
        encode_frame(&jobs, DEFAULT_MAX_FRAME).unwrap(),
    ];
    for frame in &frames {
        let mut r = FrameReader::new(&frame[..], DEFAULT_MAX_FRAME);
        let (m, peak) = peak_during(|| {
            // Decoding both ways covers both enums; only one matches.
            let to = common::ready(r.recv::<ToNode>());
            let mut r2 = FrameReader::new(&frame[..], DEFAULT_MAX_FRAME);
            let from = common::ready(r2.recv::<FromNode>());
            (to.is_ok(), from.is_ok())
        });
        assert!(m.0 || m.1);
        eprintln!(
            "frame of {} bytes: peak {} KiB while decoding",
            frame.len(),
            peak / KIB
        );
        assert!(
            peak <= frame.len() + 4 * MIB,
            "peak {peak} for a frame of {}",
            frame.len()
        );
    }
}

#[test]
fn more_elements_than_the_limits_are_refused_before_they_are_held() {
    // A 1 MiB body of a million empty arguments would take 24 MiB as
    // `String`s; the count is refused as soon as it is read.
    let mut body = vec![2u8, 1, 0, 1, 0]; // Launch: job, rank, nranks, bid
    body.extend([0xc0, 0x84, 0x3d]); // argv count: 1_000_000
    body.resize(DEFAULT_MAX_FRAME - 1, 0);
    let (r, peak) = peak_during(|| postcard::from_bytes::<ToNode>(&body));
    assert!(r.is_err());
    assert!(peak <= 8 * KIB, "peak {peak}");
}
