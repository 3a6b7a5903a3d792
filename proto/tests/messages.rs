//! Node protocol messages: round trips of every message (proptest), the
//! wire layout pinned byte for byte, skipping of unknown tags, version
//! negotiation, and the helpers on signals, job ids and launches.

mod common;

use common::*;
use proptest::prelude::*;
use proto::node::*;
use proto::{DEFAULT_MAX_FRAME, FrameError, FrameReader, encode_frame};

proptest! {
    #[test]
    fn every_to_node_message_round_trips(m in to_node()) {
        let body = postcard::to_stdvec(&m).unwrap();
        prop_assert_eq!(postcard::from_bytes::<ToNode>(&body).unwrap(), m.clone());
        let frame = encode_frame(&m, DEFAULT_MAX_FRAME).unwrap();
        let mut r = FrameReader::new(&frame[..], DEFAULT_MAX_FRAME);
        prop_assert_eq!(ready(r.recv::<ToNode>()).unwrap(), Some(m));
        prop_assert!(ready(r.recv::<ToNode>()).unwrap().is_none());
    }

    #[test]
    fn every_from_node_message_round_trips(m in from_node()) {
        let body = postcard::to_stdvec(&m).unwrap();
        prop_assert_eq!(postcard::from_bytes::<FromNode>(&body).unwrap(), m.clone());
        let frame = encode_frame(&m, DEFAULT_MAX_FRAME).unwrap();
        let mut r = FrameReader::new(&frame[..], DEFAULT_MAX_FRAME);
        prop_assert_eq!(ready(r.recv::<FromNode>()).unwrap(), Some(m));
    }

    #[test]
    fn a_tag_no_build_knows_decodes_as_unknown(tag in 13u16.., payload in proptest::collection::vec(any::<u8>(), 0..50)) {
        // What a newer peer would send: its tag, then a payload of its own.
        let body = postcard::to_stdvec(&(tag, payload)).unwrap();
        prop_assert_eq!(postcard::from_bytes::<ToNode>(&body).unwrap(), ToNode::Unknown { tag });
        prop_assert_eq!(postcard::from_bytes::<FromNode>(&body).unwrap(), FromNode::Unknown { tag });
    }

    #[test]
    fn signal_codes_round_trip(code in any::<u16>()) {
        let s = Signal::from_code(code);
        prop_assert_eq!(s.code(), code);
        prop_assert_eq!(postcard::from_bytes::<Signal>(&postcard::to_stdvec(&s).unwrap()).unwrap(), s);
    }
}

#[test]
fn wire_layout_is_pinned() {
    // These bytes are the protocol: if this test fails, old peers break.
    let cases: Vec<(ToNode, Vec<u8>)> = vec![
        (
            ToNode::Hello(Hello {
                min_version: 1,
                max_version: 2,
                agent: "x".into(),
            }),
            vec![1, 1, 2, 1, b'x'],
        ),
        (ToNode::Stdin(Chunk(b"ab".to_vec())), vec![3, 2, b'a', b'b']),
        (ToNode::StdinEnd, vec![4]),
        (ToNode::Signal(Signal::Int), vec![5, 2]),
        (
            ToNode::Resize(WindowSize { rows: 24, cols: 80 }),
            vec![6, 24, 80],
        ),
        (
            ToNode::Heartbeat(Heartbeat { seq: 300 }),
            vec![7, 0xac, 0x02],
        ),
        (ToNode::ListJobs, vec![8]),
        (
            ToNode::Kill(Kill {
                job: JobId(1),
                signal: Signal::Term,
                epoch: 0,
            }),
            vec![9, 1, 15, 0],
        ),
        (
            ToNode::Rebid(Rebid {
                job: JobId(1),
                bid: Bid::new(3).unwrap(),
            }),
            vec![10, 1, 6],
        ),
        (ToNode::Pmi(Chunk(b"c".to_vec())), vec![13, 1, b'c']),
    ];
    for (m, bytes) in cases {
        assert_eq!(postcard::to_stdvec(&m).unwrap(), bytes, "{m:?}");
        assert!(ToNode::KNOWN_TAGS.contains(&m.tag()));
    }
    let cases: Vec<(FromNode, Vec<u8>)> = vec![
        (
            FromNode::Welcome(Welcome {
                version: 1,
                node: "n".into(),
                agent: "".into(),
            }),
            vec![1, 1, 1, b'n', 0],
        ),
        (
            FromNode::Started(Started {
                job: JobId(2),
                rank: 1,
                pid: 5,
            }),
            vec![2, 2, 1, 5],
        ),
        (FromNode::Stdout(Chunk(b"o".to_vec())), vec![3, 1, b'o']),
        (FromNode::Stderr(Chunk(b"e".to_vec())), vec![4, 1, b'e']),
        (
            FromNode::Exit(Exit {
                status: ExitStatus::Code(0),
                cpu_nanos: 1,
                charged: -1,
            }),
            vec![5, 0, 0, 1, 1],
        ),
        (FromNode::Heartbeat(Heartbeat { seq: 0 }), vec![6, 0]),
        (
            FromNode::Notice(Notice {
                kind: NoticeKind::OutOfCredit,
                text: "".into(),
            }),
            vec![7, 1, 0],
        ),
        (
            FromNode::Error(ErrorReply::new(ErrorCode::IncompatibleVersion, "v")),
            vec![8, 1, 1, b'v'],
        ),
        (FromNode::Jobs(JobList::default()), vec![9, 0, 0, 0, 0, 0]),
        (
            FromNode::Killed(Killed {
                job: JobId(3),
                ranks: 2,
            }),
            vec![10, 3, 2],
        ),
        (
            FromNode::StdinTaken(StdinTaken { bytes: 300 }),
            vec![11, 0xac, 0x02],
        ),
        (
            FromNode::Rebidded(Rebidded {
                job: JobId(3),
                ranks: 2,
                bid: Bid::new(1).unwrap(),
            }),
            vec![12, 3, 2, 2],
        ),
        (FromNode::Pmi(Chunk(b"p".to_vec())), vec![13, 1, b'p']),
        (FromNode::PmiEnd, vec![14]),
    ];
    for (m, bytes) in cases {
        assert_eq!(postcard::to_stdvec(&m).unwrap(), bytes, "{m:?}");
    }
}

#[test]
fn output_chunks_cost_a_few_bytes_of_overhead() {
    for len in [0usize, 1, 127, 128, 16_383, 16_384, CHUNK_SIZE] {
        let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let frame =
            encode_frame(&FromNode::Stdout(Chunk(data.clone())), DEFAULT_MAX_FRAME).unwrap();
        // 4 bytes of frame header, 1 of tag, 1 to 3 of length.
        let varint = if len < 128 {
            1
        } else if len < 16_384 {
            2
        } else {
            3
        };
        assert_eq!(frame.len(), len + 4 + 1 + varint, "len {len}");
        // The same bytes as a plain Vec<u8> would give.
        assert_eq!(
            postcard::to_stdvec(&Chunk(data.clone())).unwrap(),
            postcard::to_stdvec(&data).unwrap()
        );
    }
}

#[test]
fn an_unknown_message_is_skipped_and_the_next_one_read() {
    let mut stream = encode_frame(&(4000u16, "from the future", 7u64), DEFAULT_MAX_FRAME).unwrap();
    stream.extend(encode_frame(&ToNode::StdinEnd, DEFAULT_MAX_FRAME).unwrap());
    let mut r = FrameReader::new(&stream[..], DEFAULT_MAX_FRAME);
    let first = ready(r.recv::<ToNode>()).unwrap().unwrap();
    assert_eq!(first, ToNode::Unknown { tag: 4000 });
    assert_eq!(first.name(), "Unknown");
    assert_eq!(ready(r.recv::<ToNode>()).unwrap(), Some(ToNode::StdinEnd));
}

#[test]
fn an_unknown_message_cannot_be_sent() {
    let err = encode_frame(&ToNode::Unknown { tag: 99 }, DEFAULT_MAX_FRAME).unwrap_err();
    assert!(matches!(err, FrameError::Encode(_)), "{err:?}");
}

#[test]
fn a_known_tag_with_a_bad_payload_is_a_recoverable_error() {
    // Tag 5 (Signal) needs a payload; tag 2 (Launch) with a truncated one.
    for body in [vec![5u8], vec![2, 1, 0, 1]] {
        let mut stream = (body.len() as u32).to_be_bytes().to_vec();
        stream.extend(&body);
        stream.extend(encode_frame(&ToNode::ListJobs, 64).unwrap());
        let mut r = FrameReader::new(&stream[..], 64);
        let err = ready(r.recv::<ToNode>()).unwrap_err();
        assert!(err.is_recoverable(), "{err}");
        assert_eq!(ready(r.recv::<ToNode>()).unwrap(), Some(ToNode::ListJobs));
    }
}

#[test]
fn version_negotiation_picks_the_newest_common_version_or_says_what_to_upgrade() {
    let mine = Hello::new("test");
    assert_eq!(negotiate(&mine), Ok(PROTOCOL_VERSION));
    let wide = Hello {
        min_version: 0,
        max_version: u16::MAX,
        agent: String::new(),
    };
    assert_eq!(negotiate(&wide), Ok(PROTOCOL_VERSION));

    let future = Hello {
        min_version: PROTOCOL_VERSION + 1,
        max_version: PROTOCOL_VERSION + 3,
        agent: String::new(),
    };
    let err = negotiate(&future).unwrap_err();
    assert_eq!(err.older, "this side");
    let text = err.to_string();
    assert!(text.contains("upgrade this side"), "{text}");
    let reply = ErrorReply::from(err);
    assert_eq!(reply.code, ErrorCode::IncompatibleVersion);

    let past = Hello {
        min_version: 0,
        max_version: MIN_PROTOCOL_VERSION - 1,
        agent: String::new(),
    };
    assert_eq!(negotiate(&past).unwrap_err().older, "the other side");
    let inverted = Hello {
        min_version: 2,
        max_version: 1,
        agent: String::new(),
    };
    assert!(negotiate(&inverted).is_err());

    let welcome = Welcome {
        version: PROTOCOL_VERSION,
        node: "n".into(),
        agent: String::new(),
    };
    assert_eq!(welcome.check_version(), Ok(PROTOCOL_VERSION));
    let bad = Welcome {
        version: PROTOCOL_VERSION + 1,
        ..welcome
    };
    assert!(bad.check_version().is_err());
}

#[test]
fn signal_names_parse_and_print() {
    for s in Signal::classic() {
        assert_eq!(s.name().parse::<Signal>(), Ok(s));
        assert_eq!(s.name()[3..].to_lowercase().parse::<Signal>(), Ok(s));
        assert_eq!(Signal::from_code(s.code()), s);
        assert_eq!(s.to_string(), s.name());
    }
    assert_eq!(Signal::classic().count(), 31);
    assert_eq!("RTMIN+5".parse::<Signal>(), Ok(Signal::Realtime(5)));
    assert_eq!("SIGRTMIN".parse::<Signal>(), Ok(Signal::Realtime(0)));
    assert_eq!(Signal::Realtime(5).to_string(), "SIGRTMIN+5");
    for bad in ["", "SIG", "FOO", "RTMIN+", "RTMIN+300", "9"] {
        let err = bad.parse::<Signal>().unwrap_err();
        assert!(err.to_string().contains("not a signal name"), "{err}");
    }
    assert_eq!(Signal::Unknown(999).name(), "SIG?");
    assert_eq!(Signal::from_code(0), Signal::Unknown(0));
    assert_eq!(Signal::Kill.code(), 9);
    assert_eq!(Signal::Tstp.code(), 20);
}

#[test]
fn exit_status_maps_to_the_shell_convention() {
    assert_eq!(ExitStatus::Code(0).shell_code(), 0);
    assert!(ExitStatus::Code(0).success());
    assert_eq!(ExitStatus::Code(256 + 7).shell_code(), 7);
    assert_eq!(ExitStatus::Code(-1).shell_code(), 255);
    let killed = ExitStatus::Signaled {
        signal: Signal::Kill,
        core_dumped: false,
    };
    assert_eq!(killed.shell_code(), 137);
    assert!(!killed.success());
}

#[test]
fn codes_unknown_to_this_build_survive_a_round_trip() {
    // 12 is the newest code: a refused bid.
    assert_eq!(ErrorCode::from(12), ErrorCode::BadBid);
    for code in [0u16, 99, 500, u16::MAX] {
        let e = ErrorCode::from(code);
        assert_eq!(e, ErrorCode::Unknown(code));
        assert_eq!(
            postcard::from_bytes::<ErrorCode>(&postcard::to_stdvec(&e).unwrap()).unwrap(),
            e
        );
        assert_eq!(NoticeKind::from(code), NoticeKind::Unknown(code));
    }
    for e in ErrorCode::ALL {
        assert_eq!(ErrorCode::from(e.code()), *e);
    }
    for k in NoticeKind::ALL {
        assert_eq!(NoticeKind::from(k.code()), *k);
    }
}

#[test]
fn job_ids_parse_and_print_as_hex() {
    assert_eq!("ffffffffffffffff".parse::<JobId>(), Ok(JobId(u64::MAX)));
    assert_eq!("A".parse::<JobId>(), Ok(JobId(10)));
    assert_eq!(JobId(10).to_string(), "000000000000000a");
    for bad in ["", "g", "+1", "-1", "1ffffffffffffffff", " 1"] {
        assert!(bad.parse::<JobId>().is_err(), "{bad:?}");
    }
}

fn good_launch() -> Launch {
    Launch {
        job: JobId(7),
        rank: 1,
        nranks: 2,
        bid: Bid::ZERO,
        argv: vec!["prog".into(), "arg".into()],
        env: vec![("A".into(), "b=c".into())],
        cwd: None,
        terminal: Some(WindowSize { rows: 24, cols: 80 }),
        options: Default::default(),
    }
}

#[test]
fn launch_validation_refuses_each_inconsistency() {
    assert_eq!(good_launch().validate(), Ok(()));
    type Edit = fn(&mut Launch);
    let cases: Vec<(Edit, LaunchError)> = vec![
        (|l| l.argv.clear(), LaunchError::NoProgram),
        (|l| l.argv[0].clear(), LaunchError::NoProgram),
        (|l| l.rank = 2, LaunchError::BadRank { rank: 2, nranks: 2 }),
        (
            |l| l.nranks = 0,
            LaunchError::BadRank { rank: 1, nranks: 0 },
        ),
        (|l| l.argv[1].push('\0'), LaunchError::Nul("an argument")),
        (
            |l| l.env[0].0 = "A=B".into(),
            LaunchError::BadEnvName("A=B".into()),
        ),
        (
            |l| l.env[0].0.clear(),
            LaunchError::BadEnvName(String::new()),
        ),
        (
            |l| l.env[0].1.push('\0'),
            LaunchError::Nul("an environment value"),
        ),
        (
            |l| l.cwd = Some("tmp".into()),
            LaunchError::RelativeCwd("tmp".into()),
        ),
        (
            |l| l.cwd = Some("/t\0".into()),
            LaunchError::Nul("the working directory"),
        ),
        (
            |l| l.argv = vec!["x".into(); proto::limits::MAX_ARGS + 1],
            LaunchError::TooMany {
                what: "arguments",
                count: proto::limits::MAX_ARGS + 1,
                max: proto::limits::MAX_ARGS,
            },
        ),
    ];
    for (edit, want) in cases {
        let mut l = good_launch();
        edit(&mut l);
        assert_eq!(l.validate(), Err(want));
    }
}

#[test]
fn sequences_longer_than_the_limits_are_refused_while_decoding() {
    let mut l = good_launch();
    l.argv = vec![String::new(); proto::limits::MAX_ARGS + 1];
    let body = postcard::to_stdvec(&ToNode::Launch(l.clone())).unwrap();
    assert!(postcard::from_bytes::<ToNode>(&body).is_err());
    l.argv.pop();
    let body = postcard::to_stdvec(&ToNode::Launch(l.clone())).unwrap();
    assert_eq!(
        postcard::from_bytes::<ToNode>(&body).unwrap(),
        ToNode::Launch(l)
    );

    let jobs = JobList {
        jobs: vec![],
        truncated: false,
        cpus: 2,
        price: 0,
        contended: false,
    };
    let mut body = postcard::to_stdvec(&FromNode::Jobs(jobs)).unwrap();
    // Declare 4097 entries (varint 0x81 0x20) with nothing after them.
    body.splice(1..2, [0x81, 0x20]);
    assert!(postcard::from_bytes::<FromNode>(&body).is_err());
}

/// A kill and a signed launch from a sender older than the lease epoch (fencing)
/// read as epoch 0, and a newer sender's epoch is kept.
#[test]
fn a_kill_without_the_lease_epoch_reads_as_epoch_0() {
    let old: ToNode = postcard::from_bytes(&[9, 1, 15]).unwrap();
    let kill = |epoch| {
        ToNode::Kill(Kill {
            job: JobId(1),
            signal: Signal::Term,
            epoch,
        })
    };
    assert_eq!(old, kill(0));
    let new = postcard::to_stdvec(&kill(7)).unwrap();
    assert_eq!(postcard::from_bytes::<ToNode>(&new).unwrap(), kill(7));
}

/// `Launch` as it was before its bid became a `money::Bid`: the bid a plain `i64`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct I64Launch {
    job: JobId,
    rank: u32,
    nranks: u32,
    bid: i64,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    cwd: Option<String>,
    terminal: Option<WindowSize>,
    options: RankOptions,
}

impl I64Launch {
    fn of(l: &Launch) -> I64Launch {
        I64Launch {
            job: l.job,
            rank: l.rank,
            nranks: l.nranks,
            bid: l.bid.micros_per_minute(),
            argv: l.argv.clone(),
            env: l.env.clone(),
            cwd: l.cwd.clone(),
            terminal: l.terminal,
            options: l.options.clone(),
        }
    }
}

proptest! {
    /// A bid has the bytes it had as an `i64`: a peer from before reads ours, and we
    /// read theirs, for every valid bid.
    #[test]
    fn a_bid_on_the_wire_is_the_i64_it_was(l in launch()) {
        let old = I64Launch::of(&l);
        let bytes = postcard::to_stdvec(&l).unwrap();
        prop_assert_eq!(&bytes, &postcard::to_stdvec(&old).unwrap());
        prop_assert_eq!(postcard::from_bytes::<I64Launch>(&bytes).unwrap(), old);
        prop_assert_eq!(postcard::from_bytes::<Launch>(&bytes).unwrap(), l);
    }
}

#[test]
fn a_negative_bid_is_refused_as_a_bid_and_the_stream_goes_on() {
    let mut bad = I64Launch::of(&good_launch());
    bad.bid = -1_000_000;
    // `ToNode::Launch` is tag 2.
    let mut bytes = encode_frame(&(2u16, bad), DEFAULT_MAX_FRAME).unwrap();
    bytes.extend(encode_frame(&ToNode::Launch(good_launch()), DEFAULT_MAX_FRAME).unwrap());
    let mut r = FrameReader::new(&bytes[..], DEFAULT_MAX_FRAME);
    let e = ready(r.recv::<ToNode>()).unwrap_err();
    assert!(
        matches!(e, FrameError::BadBid(money::BidError::Negative(-1_000_000))),
        "{e:?}"
    );
    assert!(e.is_recoverable());
    assert_eq!(
        e.to_string(),
        money::BidError::Negative(-1_000_000).to_string()
    );
    assert_eq!(
        ready(r.recv::<ToNode>()).unwrap(),
        Some(ToNode::Launch(good_launch()))
    );
    // A frame malformed otherwise is still just malformed.
    let junk = encode_frame(&(2u16, 7u8), DEFAULT_MAX_FRAME).unwrap();
    let e = ready(FrameReader::new(&junk[..], DEFAULT_MAX_FRAME).recv::<ToNode>()).unwrap_err();
    assert!(matches!(e, FrameError::Decode(_)), "{e:?}");
}
