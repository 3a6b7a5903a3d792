//! The PMI server against the exchanges MPICH's simple PMI client makes.

use super::*;

fn server(size: u32) -> Server {
    Server::new("kvs_1".into(), "(vector,(0,2,1))".into(), size)
}

fn replies(actions: &[Action]) -> Vec<(u32, &str)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Reply { rank, line } => Some((*rank, line.as_str())),
            Action::Abort { .. } => None,
        })
        .collect()
}

#[test]
fn an_init_handshake_as_mpich_makes_it() {
    let mut s = server(2);
    let a = s.bytes(
        0,
        b"cmd=init pmi_version=1 pmi_subversion=1\ncmd=get_maxes\n",
    );
    assert_eq!(
        replies(&a),
        [
            (
                0,
                "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"
            ),
            (
                0,
                "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n"
            ),
        ]
    );
    let a = s.bytes(
        0,
        b"cmd=get_appnum\ncmd=get_my_kvsname\ncmd=get kvsname=kvs_1 key=PMI_process_mapping\n",
    );
    assert_eq!(
        replies(&a),
        [
            (0, "cmd=appnum appnum=0\n"),
            (0, "cmd=my_kvsname kvsname=kvs_1\n"),
            (
                0,
                "cmd=get_result rc=0 msg=success value=(vector,(0,2,1))\n"
            ),
        ]
    );
}

#[test]
fn a_line_may_arrive_in_pieces() {
    let mut s = server(1);
    assert!(s.bytes(0, b"cmd=get_app").is_empty());
    assert_eq!(
        replies(&s.bytes(0, b"num\n")),
        [(0, "cmd=appnum appnum=0\n")]
    );
}

#[test]
fn puts_are_seen_by_every_rank_after_the_barrier() {
    let mut s = server(2);
    let a = s.bytes(1, b"cmd=put kvsname=kvs_1 key=card-1 value=ABCD\n");
    assert_eq!(replies(&a), [(1, "cmd=put_result rc=0 msg=success\n")]);
    assert!(
        s.bytes(1, b"cmd=barrier_in\n").is_empty(),
        "rank 0 has not come"
    );
    let a = s.bytes(0, b"cmd=barrier_in\n");
    assert_eq!(
        replies(&a),
        [(0, "cmd=barrier_out\n"), (1, "cmd=barrier_out\n")]
    );
    let a = s.bytes(0, b"cmd=get kvsname=kvs_1 key=card-1\n");
    assert_eq!(
        replies(&a),
        [(0, "cmd=get_result rc=0 msg=success value=ABCD\n")]
    );
    let a = s.bytes(0, b"cmd=get kvsname=kvs_1 key=nothing\n");
    assert_eq!(
        replies(&a),
        [(0, "cmd=get_result rc=-1 msg=key_nothing_not_found\n")]
    );
    // The barrier is reusable.
    assert!(s.bytes(0, b"cmd=barrier_in\n").is_empty());
    assert_eq!(s.bytes(1, b"cmd=barrier_in\n").len(), 2);
}

#[test]
fn a_value_over_the_announced_length_is_refused() {
    let mut s = server(1);
    let long = "x".repeat(VALLEN_MAX + 1);
    let a = s.bytes(
        0,
        format!("cmd=put kvsname=kvs_1 key=k value={long}\n").as_bytes(),
    );
    assert_eq!(
        replies(&a),
        [(0, "cmd=put_result rc=-1 msg=key_or_value_too_long\n")]
    );
}

#[test]
fn mpi_abort_aborts_the_job_with_its_code() {
    let mut s = server(2);
    s.bytes(0, b"cmd=init pmi_version=1 pmi_subversion=1\n");
    let a = s.bytes(0, b"cmd=abort exitcode=7\n");
    assert!(
        matches!(
            &a[..],
            [Action::Abort {
                rank: 0,
                code: Some(7),
                ..
            }]
        ),
        "{a:?}"
    );
    assert!(s.end(0).is_empty(), "the abort was already said");
}

#[test]
fn the_end_of_a_channel_before_finalize_fails_the_job() {
    let mut s = server(2);
    s.bytes(0, b"cmd=init pmi_version=1 pmi_subversion=1\n");
    s.bytes(1, b"cmd=init pmi_version=1 pmi_subversion=1\n");
    let a = s.bytes(1, b"cmd=finalize\n");
    assert_eq!(replies(&a), [(1, "cmd=finalize_ack\n")]);
    assert!(s.end(1).is_empty(), "rank 1 finalized");
    let a = s.end(0);
    assert!(
        matches!(
            &a[..],
            [Action::Abort {
                rank: 0,
                code: None,
                ..
            }]
        ),
        "{a:?}"
    );
}

/// Regression: a rank that initialised PMI and exited 0 without MPI_Finalize ended the
/// job 0 when its exit reached the client before the end of its channel.
#[test]
fn a_rank_that_exits_without_finalize_failed_whichever_end_comes_first() {
    let mut s = server(3);
    for rank in 0..3 {
        s.bytes(rank, b"cmd=init pmi_version=1 pmi_subversion=1\n");
    }
    // The exit first, then the channel's end (which says nothing more).
    let why = s.exited(0).expect("rank 0 did not finalize");
    assert!(why.contains("MPI_Finalize"), "{why}");
    assert!(s.end(0).is_empty());
    // The channel's end first (the abort), then the exit, which still says so.
    assert_eq!(s.end(1).len(), 1);
    let why = s.exited(1).expect("rank 1 did not finalize");
    assert!(why.contains("before MPI_Finalize"), "{why}");
    // A rank that finalized is fine either way.
    s.bytes(2, b"cmd=finalize\n");
    assert_eq!(s.exited(2), None);
    assert!(s.end(2).is_empty());
}

#[test]
fn a_rank_that_aborted_or_never_used_pmi_may_exit() {
    let mut s = server(2);
    assert_eq!(s.exited(0), None);
    s.bytes(1, b"cmd=init pmi_version=1 pmi_subversion=1\n");
    s.bytes(1, b"cmd=abort exitcode=7\n");
    assert_eq!(
        s.exited(1),
        None,
        "MPI_Abort speaks for itself, with its code"
    );
}

#[test]
fn a_rank_that_never_used_pmi_may_end() {
    let mut s = server(1);
    assert!(s.end(0).is_empty());
}

#[test]
fn spawn_and_unknown_commands_get_an_error_answer() {
    let mut s = server(1);
    let a = s.bytes(
        0,
        b"mcmd=spawn\nnprocs=2\nexecname=x\nendcmd\ncmd=publish_name service=s port=p\n",
    );
    assert_eq!(
        replies(&a),
        [
            (0, "cmd=spawn_result rc=-1 msg=not_supported_by_rexec\n"),
            (
                0,
                "cmd=publish_name_result rc=-1 msg=not_supported_by_rexec\n"
            ),
        ]
    );
}

#[test]
fn an_endless_line_ends_the_job_and_nothing_after_it_is_read() {
    let mut s = server(1);
    let a = s.bytes(0, &vec![b'x'; MAX_LINE + 1]);
    assert!(matches!(&a[..], [Action::Abort { rank: 0, .. }]), "{a:?}");
    assert!(s.bytes(0, b"\ncmd=get_appnum\n").is_empty());
    assert!(s.bytes(9, b"cmd=get_appnum\n").is_empty(), "no such rank");
}
