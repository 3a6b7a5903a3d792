//! Shared by the test binaries: proptest strategies for every wire type
//! (the account-service messages in [`account`]) and a way to drive a
//! `FrameReader` over an in-memory slice without a runtime.
#![allow(dead_code)] // each test binary uses a different part

pub mod account;
pub mod project;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proto::announce::{Announcement, Kind, NodeStatus};
use proto::node::*;

/// Run a future that never waits (it reads from a slice) to completion.
pub fn ready<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a slice reader never waits"),
    }
}

pub fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-zA-Z0-9_./=-]{0,12}", any::<String>(),]
}

pub fn chunk() -> impl Strategy<Value = Chunk> {
    vec(any::<u8>(), 0..200).prop_map(Chunk)
}

/// Any bid (never negative: a negative rate does not decode as one).
pub fn bid() -> impl Strategy<Value = Bid> {
    (0..=i64::MAX).prop_map(|m| Bid::new(m).unwrap())
}

pub fn job_id() -> impl Strategy<Value = JobId> {
    any::<u64>().prop_map(JobId)
}

pub fn signal() -> impl Strategy<Value = Signal> {
    prop_oneof![
        (1u16..=31).prop_map(Signal::from_code),
        any::<u8>().prop_map(Signal::Realtime),
        any::<u16>().prop_map(Signal::from_code),
    ]
}

pub fn window() -> impl Strategy<Value = WindowSize> {
    (any::<u16>(), any::<u16>()).prop_map(|(rows, cols)| WindowSize { rows, cols })
}

pub fn hello() -> impl Strategy<Value = Hello> {
    (any::<u16>(), any::<u16>(), text()).prop_map(|(min_version, max_version, agent)| Hello {
        min_version,
        max_version,
        agent,
    })
}

pub fn launch() -> impl Strategy<Value = Launch> {
    (
        job_id(),
        any::<u32>(),
        any::<u32>(),
        bid(),
        vec(text(), 0..5),
        vec((text(), text()), 0..5),
        option::of(text()),
        option::of(window()),
    )
        .prop_map(
            |(job, rank, nranks, bid, argv, env, cwd, terminal)| Launch {
                job,
                rank,
                nranks,
                bid,
                argv,
                env,
                cwd,
                terminal,
                options: Default::default(),
            },
        )
}

pub fn to_node() -> impl Strategy<Value = ToNode> {
    prop_oneof![
        hello().prop_map(ToNode::Hello),
        launch().prop_map(ToNode::Launch),
        chunk().prop_map(ToNode::Stdin),
        Just(ToNode::StdinEnd),
        signal().prop_map(ToNode::Signal),
        window().prop_map(ToNode::Resize),
        any::<u64>().prop_map(|seq| ToNode::Heartbeat(Heartbeat { seq })),
        Just(ToNode::ListJobs),
        (job_id(), signal(), any::<u64>()).prop_map(|(job, signal, epoch)| ToNode::Kill(Kill {
            job,
            signal,
            epoch
        })),
        (job_id(), bid()).prop_map(|(job, bid)| ToNode::Rebid(Rebid { job, bid })),
        launch().prop_map(ToNode::LaunchPmi),
        chunk().prop_map(ToNode::Pmi),
        (
            launch(),
            any::<bool>(),
            proptest::option::of(any::<i64>()),
            proptest::option::of("[a-z]{0,8}"),
        )
            .prop_map(|(launch, pmi, max_cost, account)| {
                ToNode::LaunchCapped(Box::new(CappedLaunch {
                    launch,
                    pmi,
                    max_cost,
                    account,
                }))
            }),
    ]
}

pub fn exit_status() -> impl Strategy<Value = ExitStatus> {
    prop_oneof![
        any::<i32>().prop_map(ExitStatus::Code),
        (signal(), any::<bool>()).prop_map(|(signal, core_dumped)| ExitStatus::Signaled {
            signal,
            core_dumped
        }),
    ]
}

pub fn job_info() -> impl Strategy<Value = JobInfo> {
    (
        (job_id(), any::<u32>(), any::<u32>(), text(), text()),
        (
            bid(),
            bid(),
            any::<u32>(),
            any::<u64>(),
            any::<i64>(),
            any::<u64>(),
        ),
        (any::<u32>(), any::<u32>()),
    )
        .prop_map(
            |(
                (job, rank, nranks, user, program),
                (bid, effective_bid, runnable, cpu_nanos, charged, age_millis),
                (model_milli_cpus, measured_milli_cpus),
            )| JobInfo {
                job,
                rank,
                nranks,
                user,
                program,
                bid,
                effective_bid,
                runnable,
                model_milli_cpus,
                measured_milli_cpus,
                cpu_nanos,
                charged,
                age_millis,
            },
        )
}

pub fn from_node() -> impl Strategy<Value = FromNode> {
    prop_oneof![
        (any::<u16>(), text(), text()).prop_map(|(version, node, agent)| FromNode::Welcome(
            Welcome {
                version,
                node,
                agent
            }
        )),
        (job_id(), any::<u32>(), any::<u32>())
            .prop_map(|(job, rank, pid)| FromNode::Started(Started { job, rank, pid })),
        chunk().prop_map(FromNode::Stdout),
        chunk().prop_map(FromNode::Stderr),
        (exit_status(), any::<u64>(), any::<i64>()).prop_map(|(status, cpu_nanos, charged)| {
            FromNode::Exit(Exit {
                status,
                cpu_nanos,
                charged,
            })
        }),
        any::<u64>().prop_map(|seq| FromNode::Heartbeat(Heartbeat { seq })),
        (any::<u16>(), text()).prop_map(|(k, text)| FromNode::Notice(Notice {
            kind: NoticeKind::from(k),
            text
        })),
        (any::<u16>(), text())
            .prop_map(|(c, m)| FromNode::Error(ErrorReply::new(ErrorCode::from(c), m))),
        (
            vec(job_info(), 0..4),
            any::<bool>(),
            any::<u32>(),
            any::<i64>(),
            any::<bool>()
        )
            .prop_map(|(jobs, truncated, cpus, price, contended)| FromNode::Jobs(
                JobList {
                    jobs,
                    truncated,
                    cpus,
                    price,
                    contended
                }
            )),
        (job_id(), any::<u32>()).prop_map(|(job, ranks)| FromNode::Killed(Killed { job, ranks })),
        (job_id(), any::<u32>(), bid())
            .prop_map(|(job, ranks, bid)| FromNode::Rebidded(Rebidded { job, ranks, bid })),
        any::<u64>().prop_map(|bytes| FromNode::StdinTaken(StdinTaken { bytes })),
        chunk().prop_map(FromNode::Pmi),
        Just(FromNode::PmiEnd),
        proptest::option::of(any::<u64>())
            .prop_map(|peak_memory| FromNode::Usage(RankUsage { peak_memory })),
    ]
}

/// Valid announcements only (names and numbers in range).
pub fn announcement() -> impl Strategy<Value = Announcement> {
    let node = (1u32.., 0i64.., any::<u32>(), any::<u32>(), any::<u32>()).prop_map(
        |(cpus, price, running_jobs, runnable, load_milli)| {
            Kind::Node(NodeStatus {
                cpus,
                price,
                charging: 0,
                contended: false,
                running_jobs,
                runnable,
                load_milli,
                idle_milli: 0,
                free_mem_mib: 0,
            })
        },
    );
    let kind = prop_oneof![
        node,
        Just(Kind::Selector),
        Just(Kind::Account),
        Just(Kind::Batch)
    ];
    (
        "[a-z0-9][a-z0-9.-]{0,40}",
        any::<std::net::SocketAddr>()
            .prop_filter("port 0 is refused", |a| a.port() != 0)
            .prop_map(|a| match a {
                // Flow info and scope id are not carried (see the announce docs).
                std::net::SocketAddr::V6(v6) => {
                    std::net::SocketAddrV6::new(*v6.ip(), v6.port(), 0, 0).into()
                }
                v4 => v4,
            }),
        any::<u64>(),
        any::<u64>(),
        1u32..,
        kind,
    )
        .prop_map(
            |(name, addr, incarnation, seq, period_ms, kind)| Announcement {
                cluster: proto::announce::DEFAULT_CLUSTER.into(),
                summary: None,
                name,
                addr,
                incarnation,
                seq,
                period_ms,
                kind,
            },
        )
}
