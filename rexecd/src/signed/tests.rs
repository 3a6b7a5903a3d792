//! [`admit`] against a real throwaway CA, and the started-rank record on a
//! temporary directory.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use certs::jobsign::JobSigner;
use certs::testing::TestPki;
use proto::batch::{JobSpec, SignedLaunch, Worth};
use proto::node::JobId;

use super::*;

fn config(pki: &TestPki, extra: &str) -> Config {
    let node = pki.tls_paths(Role::Node, "n1");
    let text = format!(
        "name = \"n1\"\ncert = {:?}\nkey = {:?}\nca = {:?}\ncrl = {:?}\n{extra}",
        node.cert,
        node.key,
        node.ca,
        node.crl.unwrap()
    );
    let file = crate::config::Settings::parse(Path::new("t.toml"), &text).unwrap();
    Config::resolve(file, &Default::default()).unwrap()
}

fn signed(pki: &TestPki, attempts: u32, width: u32, rate: i64) -> SignedLaunch {
    sign(pki, spec(attempts, width, rate))
}

fn spec(attempts: u32, width: u32, rate: i64) -> JobSpec {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    JobSpec {
        id: JobId(0x51),
        user: "alice".into(),
        argv: vec!["/bin/true".into()],
        env: vec![],
        cwd: None,
        width,
        length_s: 10,
        worth: Worth::Rate(rate),
        priority: 0,
        max_attempts: attempts,
        signed_at: now,
        expires_at: now + 600,
        array: None,
        after: Vec::new(),
        options: Default::default(),
    }
}

fn sign(pki: &TestPki, spec: JobSpec) -> SignedLaunch {
    let signer = JobSigner::load(&pki.tls_paths(Role::User, "alice")).unwrap();
    let rate = match spec.worth {
        Worth::Rate(r) => money::Bid::new(r).unwrap(),
        Worth::Utility(_) => money::Bid::ZERO,
    };
    SignedLaunch {
        job: signer.sign(&spec).unwrap(),
        attempt: 0,
        rank: 0,
        bid: rate,
        nodes: (0..spec.width).map(|r| format!("n{r}")).collect(),
        started_ms: 0,
        array_index: None,
        kill_wait_ms: None,
        epoch: 0,
    }
}

/// `signed` for an array of the given range.
fn signed_array(pki: &TestPki, array: &str, index: Option<u32>) -> SignedLaunch {
    let spec = JobSpec {
        array: Some(array.parse().unwrap()),
        ..spec(1, 1, 0)
    };
    SignedLaunch {
        array_index: index,
        ..sign(pki, spec)
    }
}

#[test]
fn a_node_starts_exactly_the_signed_tasks_of_an_array() {
    let pki = TestPki::new();
    let cfg = config(&pki, "");
    let now = SystemTime::now();
    let queue = peer(Role::Service, "batchd");
    let ok = admit(&cfg, &queue, &signed_array(&pki, "10-20:5", Some(15)), now).unwrap();
    assert_eq!(ok.launch.job, JobId(0x51 + 16));
    assert_eq!(ok.claim().job, JobId(0x51 + 16));
    assert!(
        ok.launch
            .env
            .contains(&("REXEC_ARRAY_INDEX".into(), "15".into()))
    );
    assert!(
        ok.launch
            .env
            .contains(&("REXEC_ARRAY_JOB".into(), JobId(0x51).to_string()))
    );
    for (range, index, want) in [
        ("10-20:5", Some(21), "task 21 is not in array"),
        ("10-20:5", Some(12), "task 12 is not in array"),
        ("10-20:5", Some(9), "task 9 is not in array"),
        ("10-20:5", None, "is an array; the queue must name the task"),
    ] {
        let e = admit(&cfg, &queue, &signed_array(&pki, range, index), now).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadRequest, "{range} {index:?}");
        assert!(e.message.contains(want), "{range} {index:?}: {}", e.message);
    }
    let single = SignedLaunch {
        array_index: Some(0),
        ..signed(&pki, 1, 1, 0)
    };
    let e = admit(&cfg, &queue, &single, now).unwrap_err();
    assert!(e.message.contains("is not an array"), "{}", e.message);
}

fn peer(role: Role, name: &str) -> PeerIdentity {
    PeerIdentity::new(role, name).unwrap()
}

#[test]
fn only_a_configured_queue_may_send_and_the_rank_must_fit_the_signed_job() {
    let pki = TestPki::new();
    let cfg = config(&pki, "");
    let now = SystemTime::now();
    let req = signed(&pki, 1, 2, 1_000_000);
    let ok = admit(&cfg, &peer(Role::Service, "batchd"), &req, now).unwrap();
    assert_eq!(ok.launch.nranks, 2);
    assert_eq!(ok.launch.terminal, None);
    assert_eq!(ok.claim().digest, certs::jobsign::digest(&req.job.spec));
    for who in [
        peer(Role::User, "alice"),
        peer(Role::Service, "vexecd"),
        peer(Role::Node, "n2"),
    ] {
        let e = admit(&cfg, &who, &req, now).unwrap_err();
        assert_eq!(e.code, ErrorCode::NotAuthorized, "{who}");
        assert!(e.message.contains("not a queue"), "{}", e.message);
    }
    let other = config(&pki, "[batch]\nqueues = [\"q2\"]\n");
    assert!(admit(&other, &peer(Role::Service, "batchd"), &req, now).is_err());
    assert!(admit(&other, &peer(Role::Service, "q2"), &req, now).is_ok());
    let q = peer(Role::Service, "batchd");
    let mut late = req.clone();
    late.attempt = 1;
    let e = admit(&cfg, &q, &late, now).unwrap_err();
    assert!(e.message.contains("max_attempts 1"), "{}", e.message);
    let mut wide = req.clone();
    wide.rank = 2;
    let e = admit(&cfg, &q, &wide, now).unwrap_err();
    assert!(e.message.contains("out of range"), "{}", e.message);
    let mut misplaced = req.clone();
    misplaced.nodes.pop();
    let e = admit(&cfg, &q, &misplaced, now).unwrap_err();
    assert!(e.message.contains("one per rank"), "{}", e.message);
    let mut greedy = req.clone();
    greedy.bid = money::Bid::new(greedy.bid.micros_per_minute() + 1).unwrap();
    assert_eq!(
        admit(&cfg, &q, &greedy, now).unwrap_err().code,
        ErrorCode::BadBid
    );
    let mut altered = req.clone();
    altered.job.spec[3] ^= 1;
    let e = admit(&cfg, &q, &altered, now).unwrap_err();
    assert_eq!(e.code, ErrorCode::NotAuthorized);
    assert!(e.message.contains("bad signature"), "{}", e.message);
    let later = now + Duration::from_secs(3600);
    let e = admit(&cfg, &q, &req, later).unwrap_err();
    assert!(e.message.contains("expired"), "{}", e.message);
}

#[test]
fn a_rank_is_recorded_once_and_old_markers_are_pruned() {
    let pki = TestPki::new();
    let cfg = config(&pki, "");
    let req = signed(&pki, 2, 1, 0);
    let a = admit(
        &cfg,
        &peer(Role::Service, "batchd"),
        &req,
        SystemTime::now(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let now = SystemTime::now();
    let (started, pruned) = StartedRanks::open(&dir.path().join("s"), now).unwrap();
    assert_eq!(pruned, 0);
    assert!(!started.contains(&a));
    assert!(started.record(&a).unwrap());
    assert!(started.contains(&a));
    assert!(!started.record(&a).unwrap(), "a second record is a replay");
    let mut next = a.clone();
    next.attempt = 1;
    assert!(
        started.record(&next).unwrap(),
        "another attempt is its own rank"
    );
    // Reopened within the expiry both stay; long after it they go.
    let (again, pruned) = StartedRanks::open(&dir.path().join("s"), now).unwrap();
    assert_eq!(pruned, 0);
    assert!(again.contains(&a));
    let much_later = now + Duration::from_secs(600 + KEEP_PAST_EXPIRY_S + 10);
    let (_, pruned) = StartedRanks::open(&dir.path().join("s"), much_later).unwrap();
    assert_eq!(pruned, 2);
}

#[test]
fn a_rank_sees_its_own_variables_whatever_the_signed_environment_held() {
    let signed = vec![
        ("PATH".to_string(), "/bin".to_string()),
        ("REXEC_RANK".to_string(), "7".to_string()),
        ("REXEC_JOB_START_MS".to_string(), "1".to_string()),
    ];
    let nodes = ["n1".to_string(), "n2".to_string()];
    let env = super::rank_env(
        &signed,
        proto::node::JobId(0xab),
        1,
        2,
        &nodes,
        1_764_118_195_558,
    );
    let get = |k: &str| {
        env.iter()
            .filter(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(get("PATH"), ["/bin"]);
    assert_eq!(get("REXEC_RANK"), ["1"]);
    assert_eq!(get("REXEC_NRANKS"), ["2"]);
    assert_eq!(get("REXEC_NODES"), ["n1,n2"]);
    assert_eq!(get("REXEC_JOB"), ["00000000000000ab"]);
    assert_eq!(get("REXEC_JOB_START_MS"), ["1764118195558"]);
    let unstamped = super::rank_env(&signed, proto::node::JobId(0xab), 1, 2, &nodes, 0);
    assert!(
        !unstamped.iter().any(|(k, _)| k == "REXEC_JOB_START_MS"),
        "no start time given, none claimed"
    );
}
