//! The announcement datagram: round trips, the size limit, and a typed
//! error for every way a datagram can be wrong.

mod common;

use std::net::SocketAddr;

use common::announcement;
use proptest::prelude::*;
use proto::announce::*;

fn node(name: &str) -> Announcement {
    Announcement {
        cluster: proto::announce::DEFAULT_CLUSTER.into(),
        summary: None,
        name: name.into(),
        addr: "127.0.0.1:7400".parse().unwrap(),
        incarnation: 5,
        seq: 9,
        period_ms: 500,
        kind: Kind::Node(NodeStatus {
            cpus: 4,
            price: 0,
            charging: 0,
            contended: false,
            running_jobs: 0,
            runnable: 0,
            load_milli: 0,
            idle_milli: 0,
            free_mem_mib: 0,
        }),
    }
}

proptest! {
    #[test]
    fn valid_announcements_round_trip(a in announcement()) {
        let d = a.encode().unwrap();
        prop_assert!(d.len() <= MAX_DATAGRAM);
        prop_assert_eq!(&d[..5], b"RXMA\x03");
        prop_assert_eq!(Announcement::decode(&d).unwrap(), a);
    }

    #[test]
    fn every_truncation_is_reported_as_such(a in announcement()) {
        let d = a.encode().unwrap();
        // A prefix of the magic is not "wrong magic": it is too short to tell.
        for cut in 0..d.len() {
            prop_assert_eq!(Announcement::decode(&d[..cut]), Err(AnnounceError::Truncated), "cut at {}", cut);
        }
    }
}

#[test]
fn the_largest_announcement_fits_the_limit() {
    let mut a = node(&"n".repeat(MAX_NAME));
    a.addr = "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"
        .parse()
        .unwrap();
    a.incarnation = u64::MAX;
    a.seq = u64::MAX;
    a.period_ms = u32::MAX;
    a.cluster = "c".repeat(MAX_CLUSTER);
    a.summary = Some(vec![0xff; MAX_SUMMARY]);
    a.kind = Kind::Node(NodeStatus {
        cpus: u32::MAX,
        price: i64::MAX,
        charging: 0,
        contended: false,
        running_jobs: u32::MAX,
        runnable: u32::MAX,
        load_milli: u32::MAX,
        idle_milli: u32::MAX,
        free_mem_mib: u64::MAX,
    });
    let d = a.encode().unwrap();
    assert!(d.len() <= MAX_DATAGRAM, "{} bytes", d.len());
    assert_eq!(Announcement::decode(&d), Ok(a));
}

#[test]
fn oversized_datagrams_are_refused_unread() {
    let mut d = node("a").encode().unwrap();
    d.resize(MAX_DATAGRAM + 1, 0);
    assert_eq!(
        Announcement::decode(&d),
        Err(AnnounceError::Oversized {
            len: MAX_DATAGRAM + 1,
            max: MAX_DATAGRAM
        })
    );
}

#[test]
fn wrong_magic_and_wrong_version_are_named() {
    let d = node("a").encode().unwrap();
    let mut wrong = d.clone();
    wrong[0] = b'X';
    assert_eq!(Announcement::decode(&wrong), Err(AnnounceError::WrongMagic));
    assert_eq!(Announcement::decode(b"X"), Err(AnnounceError::WrongMagic));
    let mut newer = d.clone();
    newer[4] = 4;
    assert_eq!(
        Announcement::decode(&newer),
        Err(AnnounceError::WrongVersion { got: 4 })
    );
    for version in [1, 2] {
        let mut older = d.clone();
        older[4] = version;
        assert_eq!(
            Announcement::decode(&older),
            Err(AnnounceError::WrongVersion { got: version })
        );
    }
    assert!(
        AnnounceError::WrongVersion { got: 2 }
            .to_string()
            .contains("upgrade")
    );
}

/// Node "a" announcing `cpus` CPUs, `price`, `charging` and `idle_milli`, nothing else.
fn with_status(cpus: u32, price: i64, charging: i64, idle_milli: u32) -> Announcement {
    Announcement {
        kind: Kind::Node(NodeStatus {
            cpus,
            price,
            charging,
            contended: false,
            running_jobs: 0,
            runnable: 0,
            load_milli: 0,
            idle_milli,
            free_mem_mib: 0,
        }),
        ..node("a")
    }
}

#[test]
fn fields_out_of_range_are_refused_on_both_sides() {
    let cases: Vec<(Announcement, &str)> = vec![
        (node(""), "name"),
        (node(&"n".repeat(MAX_NAME + 1)), "name"),
        (node("a b"), "name"),
        (node("a\u{7}"), "name"),
        (
            Announcement {
                addr: "10.0.0.1:0".parse().unwrap(),
                ..node("a")
            },
            "addr",
        ),
        (
            Announcement {
                period_ms: 0,
                ..node("a")
            },
            "period_ms",
        ),
        (with_status(0, 0, 0, 0), "cpus"),
        (with_status(1, -1, 0, 0), "price"),
        (with_status(1, 0, -1, 0), "charging"),
        (with_status(2, 0, 0, 2001), "idle_milli"),
        (
            Announcement {
                cluster: String::new(),
                ..node("a")
            },
            "cluster",
        ),
        (
            Announcement {
                cluster: "c".repeat(MAX_CLUSTER + 1),
                ..node("a")
            },
            "cluster",
        ),
        (
            Announcement {
                cluster: "lab one".into(),
                ..node("a")
            },
            "cluster",
        ),
        (
            Announcement {
                summary: Some(vec![0; MAX_SUMMARY + 1]),
                ..node("a")
            },
            "summary",
        ),
        (
            Announcement {
                kind: Kind::Selector,
                summary: Some(vec![0; 8]),
                ..node("a")
            },
            "summary",
        ),
    ];
    for (a, field) in cases {
        match a.encode() {
            Err(AnnounceError::BadField { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{a:?}: expected BadField({field}), got {other:?}"),
        }
        // A hand-made datagram carrying the same fields is refused on receipt.
        let mut d = MAGIC.to_vec();
        d.push(ANNOUNCE_VERSION);
        d.extend(postcard::to_stdvec(&a).unwrap());
        match Announcement::decode(&d) {
            Err(AnnounceError::BadField { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{a:?}: expected BadField({field}), got {other:?}"),
        }
    }
}

#[test]
fn trailing_bytes_and_unknown_kinds_are_bad_fields() {
    let mut d = node("a").encode().unwrap();
    d.push(0);
    assert!(matches!(
        Announcement::decode(&d),
        Err(AnnounceError::BadField { field: "body", .. })
    ));
    let mut d = Announcement {
        kind: Kind::Account,
        ..node("a")
    }
    .encode()
    .unwrap();
    // The body ends with the kind (Account is 2) and an absent summary (0).
    let kind_at = d.len() - 2;
    assert_eq!(d[kind_at..], [2, 0], "Account is kind 2, no summary");
    // 3 is the batch queue's kind (appended); 4 is unknown to this build.
    d[kind_at] = 3;
    assert_eq!(Announcement::decode(&d).map(|a| a.kind), Ok(Kind::Batch));
    d[kind_at] = 4;
    assert!(matches!(
        Announcement::decode(&d),
        Err(AnnounceError::BadField { field: "body", .. })
    ));
}

#[test]
fn later_announcements_supersede_earlier_ones() {
    let a = node("a");
    let next = Announcement {
        seq: a.seq + 1,
        ..a.clone()
    };
    let restarted = Announcement {
        incarnation: a.incarnation + 1,
        seq: 0,
        ..a.clone()
    };
    assert!(next.supersedes(&a));
    assert!(restarted.supersedes(&next));
    assert!(!a.supersedes(&a));
    assert!(!a.supersedes(&restarted));
}

#[test]
fn ipv6_addresses_travel() {
    let addr: SocketAddr = "[fd00::7]:7400".parse().unwrap();
    let a = Announcement {
        addr,
        kind: Kind::Selector,
        ..node("sel-1")
    };
    assert_eq!(
        Announcement::decode(&a.encode().unwrap()).unwrap().addr,
        addr
    );
}

#[test]
fn selector_requests_are_checked_before_use() {
    use proto::select::*;
    let ok = SelectorRequest::new(1, SelectorOp::Select(SelectQuery::new(4, "history")));
    assert!(ok.check().is_ok());
    let mut q = SelectQuery::new(MAX_SELECT + 1, "lowest-price");
    let code = |q: &SelectQuery| {
        SelectorRequest::new(2, SelectorOp::Select(q.clone()))
            .check()
            .unwrap_err()
            .code
    };
    assert_eq!(code(&q), SelectorErrorCode::BadRequest);
    q.count = 1;
    q.max_price = Some(-1);
    assert_eq!(code(&q), SelectorErrorCode::BadRequest);
    q.max_price = None;
    q.policy = "p".repeat(MAX_POLICY + 1);
    assert_eq!(code(&q), SelectorErrorCode::BadRequest);
    q.policy = "random".into();
    q.exclude = vec!["n".repeat(MAX_NAME + 1)];
    assert_eq!(code(&q), SelectorErrorCode::BadRequest);
    let mut old = ok.clone();
    old.version = 99;
    assert_eq!(
        old.check().unwrap_err().code,
        SelectorErrorCode::IncompatibleVersion
    );
    // A round trip through the wire encoding keeps every field.
    let bytes = postcard::to_stdvec(&ok).unwrap();
    assert_eq!(postcard::from_bytes::<SelectorRequest>(&bytes).unwrap(), ok);
}
