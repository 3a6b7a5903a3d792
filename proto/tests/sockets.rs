//! The wire layer over real loopback sockets: a framed TCP session split
//! across tasks, and an announcement through a UDP socket.

use proto::announce::{Announcement, Kind, MAX_DATAGRAM, NodeStatus};
use proto::node::{Chunk, Exit, ExitStatus, FromNode, Hello, ToNode};
use proto::{DEFAULT_MAX_FRAME, Framed};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

#[tokio::test]
async fn a_session_over_tcp_streams_output_both_ways_at_once() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let output: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let expected = output.clone();

    let node = tokio::spawn(async move {
        let (sock, _) = listener.accept().await.unwrap();
        let (mut rx, mut tx) = Framed::new(sock, DEFAULT_MAX_FRAME).into_split();
        // Stream output while reading stdin: neither side may block the other.
        let writer = tokio::spawn(async move {
            for piece in output.chunks(proto::node::CHUNK_SIZE) {
                tx.send(&FromNode::Stdout(Chunk(piece.to_vec())))
                    .await
                    .unwrap();
            }
            tx
        });
        let mut stdin = Vec::new();
        loop {
            match rx.recv::<ToNode>().await.unwrap() {
                Some(ToNode::Hello(_)) => {}
                Some(ToNode::Stdin(c)) => stdin.extend_from_slice(&c),
                Some(ToNode::StdinEnd) => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        let mut tx = writer.await.unwrap();
        let exit = Exit {
            status: ExitStatus::Code(0),
            cpu_nanos: 1,
            charged: 0,
        };
        tx.send(&FromNode::Exit(exit)).await.unwrap();
        tx.shutdown().await.unwrap();
        stdin
    });

    let sock = TcpStream::connect(addr).await.unwrap();
    let (mut rx, mut tx) = Framed::new(sock, DEFAULT_MAX_FRAME).into_split();
    let input: Vec<u8> = (0..1_000_000u32).map(|i| (i % 13) as u8).collect();
    let sent = input.clone();
    let client_writer = tokio::spawn(async move {
        tx.send(&ToNode::Hello(Hello::new("test"))).await.unwrap();
        for piece in sent.chunks(10_000) {
            tx.send(&ToNode::Stdin(Chunk(piece.to_vec())))
                .await
                .unwrap();
        }
        tx.send(&ToNode::StdinEnd).await.unwrap();
        tx
    });
    let mut out = Vec::new();
    let exit = loop {
        match rx.recv::<FromNode>().await.unwrap() {
            Some(FromNode::Stdout(c)) => out.extend_from_slice(&c),
            Some(FromNode::Exit(e)) => break e,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(
        rx.recv::<FromNode>().await.unwrap(),
        None,
        "clean end after Exit"
    );
    assert!(exit.status.success());
    assert_eq!(out, expected);
    assert_eq!(node.await.unwrap(), input);
    drop(client_writer.await.unwrap());
}

#[tokio::test]
async fn an_announcement_crosses_a_udp_socket() {
    let rx = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let a = Announcement {
        cluster: proto::announce::DEFAULT_CLUSTER.into(),
        summary: None,
        name: "node-1".into(),
        addr: "127.0.0.1:7400".parse().unwrap(),
        incarnation: 1,
        seq: 1,
        period_ms: 1000,
        kind: Kind::Node(NodeStatus {
            cpus: 2,
            price: 5,
            charging: 0,
            contended: false,
            running_jobs: 1,
            runnable: 3,
            load_milli: 1500,
            idle_milli: 0,
            free_mem_mib: 0,
        }),
    };
    tx.send_to(&a.encode().unwrap(), rx.local_addr().unwrap())
        .await
        .unwrap();
    let mut buf = [0u8; MAX_DATAGRAM + 1];
    let (n, from) = rx.recv_from(&mut buf).await.unwrap();
    assert_eq!(from, tx.local_addr().unwrap());
    assert_eq!(Announcement::decode(&buf[..n]), Ok(a));
}
