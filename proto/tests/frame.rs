//! Framing over real in-process streams: round trips, limits, truncation,
//! recovery after a bad body, and cancel-safety of `recv`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use proto::{DEFAULT_MAX_FRAME, FrameError, FrameReader, FrameWriter, Framed, encode_frame};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Msg {
    id: u32,
    text: String,
    data: Vec<u8>,
}

fn msg(id: u32, len: usize) -> Msg {
    Msg {
        id,
        text: format!("message {id}"),
        data: (0..len).map(|i| (i * 7 + id as usize) as u8).collect(),
    }
}

#[tokio::test]
async fn messages_round_trip_over_a_duplex_stream() {
    let (a, b) = tokio::io::duplex(64);
    let sent: Vec<Msg> = (0..50).map(|i| msg(i, (i as usize * 37) % 3000)).collect();
    let to_send = sent.clone();
    let writer = tokio::spawn(async move {
        let mut w = FrameWriter::new(a, DEFAULT_MAX_FRAME);
        for m in &to_send {
            w.send(m).await.unwrap();
        }
        w.shutdown().await.unwrap();
    });
    let mut r = FrameReader::new(b, DEFAULT_MAX_FRAME);
    let mut got = Vec::new();
    while let Some(m) = r.recv::<Msg>().await.unwrap() {
        got.push(m);
    }
    writer.await.unwrap();
    assert_eq!(got, sent);
}

#[tokio::test]
async fn empty_body_frames_are_valid() {
    let bytes = encode_frame(&(), 16).unwrap();
    assert_eq!(bytes, [0, 0, 0, 0]);
    let both = [bytes.clone(), bytes].concat();
    let mut r = FrameReader::new(&both[..], 16);
    assert_eq!(r.recv::<()>().await.unwrap(), Some(()));
    assert_eq!(r.recv::<()>().await.unwrap(), Some(()));
    assert_eq!(r.recv::<()>().await.unwrap(), None);
}

#[tokio::test]
async fn eof_inside_header_or_body_is_truncated() {
    let frame = encode_frame(&msg(1, 10), 1024).unwrap();
    for cut in 1..frame.len() {
        let mut r = FrameReader::new(&frame[..cut], 1024);
        match r.recv::<Msg>().await {
            Err(FrameError::Truncated { have, need }) => {
                assert_eq!(have, cut);
                assert_eq!(need, if cut < 4 { 4 } else { frame.len() });
            }
            other => panic!("cut at {cut}: expected Truncated, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn oversized_header_is_refused_before_the_body_arrives() {
    let (mut a, b) = tokio::io::duplex(64);
    // Only the header is written and the stream stays open: the refusal must
    // come from the header alone, without waiting for (or buffering) a body.
    a.write_all(&(1_000_001u32).to_be_bytes()).await.unwrap();
    let mut r = FrameReader::new(b, 1_000_000);
    match r.recv::<Msg>().await {
        Err(FrameError::TooLarge { len, max }) => assert_eq!((len, max), (1_000_001, 1_000_000)),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(
        matches!(r.recv::<Msg>().await, Err(FrameError::TooLarge { .. })),
        "a refused stream stays refused"
    );
    drop(a);
}

#[tokio::test]
async fn oversized_message_is_not_sent() {
    let (a, b) = tokio::io::duplex(1 << 16);
    let mut w = FrameWriter::new(a, 100);
    match w.send(&msg(1, 200)).await {
        Err(FrameError::TooLarge { len, max: 100 }) => assert!(len > 200),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    w.send(&msg(2, 10)).await.unwrap();
    drop(w);
    let mut r = FrameReader::new(b, 100);
    assert_eq!(
        r.recv::<Msg>().await.unwrap(),
        Some(msg(2, 10)),
        "the refused message left no bytes behind"
    );
    assert_eq!(r.recv::<Msg>().await.unwrap(), None);
    assert!(matches!(
        encode_frame(&msg(1, 200), 100),
        Err(FrameError::TooLarge { .. })
    ));
}

#[tokio::test]
async fn a_malformed_body_is_skipped_and_the_stream_stays_in_step() {
    let mut stream = Vec::new();
    // A body that is not a valid `Msg`: id, then a string length far past the end.
    stream.extend_from_slice(&[0, 0, 0, 3, 1, 0xff, 0x7f]);
    stream.extend(encode_frame(&msg(9, 5), 1024).unwrap());
    let mut r = FrameReader::new(&stream[..], 1024);
    let err = r.recv::<Msg>().await.unwrap_err();
    assert!(matches!(err, FrameError::Decode(_)), "{err:?}");
    assert!(err.is_recoverable());
    assert_eq!(r.recv::<Msg>().await.unwrap(), Some(msg(9, 5)));
    assert_eq!(r.recv::<Msg>().await.unwrap(), None);
}

#[tokio::test]
async fn framed_into_split_keeps_bytes_already_buffered() {
    let (a, b) = tokio::io::duplex(1 << 16);
    let mut a = Framed::new(a, DEFAULT_MAX_FRAME);
    for i in 0..3 {
        a.send(&msg(i, 4)).await.unwrap();
    }
    let mut b = Framed::new(b, DEFAULT_MAX_FRAME);
    // The first recv reads all three frames into the buffer in one go.
    assert_eq!(b.recv::<Msg>().await.unwrap(), Some(msg(0, 4)));
    let (mut br, mut bw) = b.into_split();
    assert!(br.buffered() > 0);
    assert_eq!(br.recv::<Msg>().await.unwrap(), Some(msg(1, 4)));
    assert_eq!(br.recv::<Msg>().await.unwrap(), Some(msg(2, 4)));
    bw.send(&msg(7, 1)).await.unwrap();
    assert_eq!(a.recv::<Msg>().await.unwrap(), Some(msg(7, 1)));
}

/// A reader that hands out `step` bytes at a time and returns `Pending`
/// before every chunk, so a `recv` future polled once usually ends mid-frame.
struct Trickle {
    data: Vec<u8>,
    pos: usize,
    step: usize,
    ready: bool,
}

impl AsyncRead for Trickle {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.ready {
            self.ready = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.ready = false;
        let n = self
            .step
            .min(self.data.len() - self.pos)
            .min(buf.remaining());
        let start = self.pos;
        buf.put_slice(&self.data[start..start + n]);
        self.pos += n;
        Poll::Ready(Ok(()))
    }
}

#[test]
fn recv_futures_dropped_mid_frame_lose_nothing() {
    let sent: Vec<Msg> = (0..40)
        .map(|i| msg(i, (i as usize * 131) % 20_000))
        .collect();
    let data: Vec<u8> = sent
        .iter()
        .flat_map(|m| encode_frame(m, DEFAULT_MAX_FRAME).unwrap())
        .collect();
    for step in [1, 3, 4, 5, 1000, 9000] {
        let mut r = FrameReader::new(
            Trickle {
                data: data.clone(),
                pos: 0,
                step,
                ready: false,
            },
            DEFAULT_MAX_FRAME,
        );
        let mut cx = Context::from_waker(Waker::noop());
        let mut got = Vec::new();
        let mut mid_frame_drops = 0;
        loop {
            // Poll a fresh recv future exactly once, then drop it.
            let mut fut = Box::pin(r.recv::<Msg>());
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(Ok(Some(m))) => got.push(m),
                Poll::Ready(Ok(None)) => break,
                Poll::Ready(Err(e)) => panic!("step {step}: {e}"),
                Poll::Pending => {
                    drop(fut);
                    if r.buffered() > 0 {
                        mid_frame_drops += 1;
                    }
                }
            }
        }
        assert_eq!(got, sent, "step {step}");
        assert!(
            mid_frame_drops > 0,
            "step {step}: the test must really drop futures mid-frame"
        );
    }
}

#[tokio::test]
async fn recv_in_select_loses_nothing_when_another_branch_wins() {
    let (mut a, b) = tokio::io::duplex(16);
    let sent: Vec<Msg> = (0..30).map(|i| msg(i, (i as usize * 97) % 700)).collect();
    let data: Vec<u8> = sent
        .iter()
        .flat_map(|m| encode_frame(m, DEFAULT_MAX_FRAME).unwrap())
        .collect();
    let writer = tokio::spawn(async move {
        for chunk in data.chunks(5) {
            a.write_all(chunk).await.unwrap();
            tokio::task::yield_now().await;
        }
    });
    let mut r = FrameReader::new(b, DEFAULT_MAX_FRAME);
    let mut got = Vec::new();
    let mut other_won = 0;
    loop {
        tokio::select! {
            biased;
            m = r.recv::<Msg>() => match m.unwrap() {
                Some(m) => got.push(m),
                None => break,
            },
            // Ready on its second poll: wins whenever recv had to wait.
            _ = tokio::task::yield_now() => other_won += 1,
        }
    }
    writer.await.unwrap();
    assert_eq!(got, sent);
    assert!(
        other_won > 0,
        "the other branch must have cancelled some recv futures"
    );
}

/// A stream that records each write it is given and never has anything to read.
#[derive(Default)]
struct Recorder {
    writes: Vec<Vec<u8>>,
}

impl AsyncRead for Recorder {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl tokio::io::AsyncWrite for Recorder {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.writes.push(buf.to_vec());
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn send_all_writes_its_frames_in_one_write_or_none_at_all() {
    let (a, b) = (msg(1, 10), msg(2, 300));
    let mut f = Framed::new(Recorder::default(), 1000);
    f.send_all(&[a.clone(), b.clone()]).await.unwrap();
    let writes = std::mem::take(&mut f.get_mut().writes);
    assert_eq!(writes.len(), 1);
    let mut r = FrameReader::new(&writes[0][..], 1000);
    assert_eq!(r.recv::<Msg>().await.unwrap(), Some(a.clone()));
    assert_eq!(r.recv::<Msg>().await.unwrap(), Some(b));
    assert_eq!(r.recv::<Msg>().await.unwrap(), None);
    // One frame over the limit: refused, and the one before it is not sent either.
    match f.send_all(&[a, msg(3, 2000)]).await {
        Err(FrameError::TooLarge { max: 1000, .. }) => {}
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(f.get_ref().writes.is_empty());
}
