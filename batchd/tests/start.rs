//! batchd's start-up order, through the real binary: everything it must read
//! (here its private key) is read before it listens, so a key it may not
//! read stops it with an error naming the file, and it never says it is
//! listening or writes its ready file. Run as root: batchd runs as `nobody`
//! and the key belongs to root, mode 0600, as when an admin forgets to hand
//! it over.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use certs::Role;
use certs::testing::TestPki;

const BATCHD: &str = env!("CARGO_BIN_EXE_batchd");

fn copy(from: &Path, to: &Path, mode: u32) {
    std::fs::copy(from, to).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_key_batchd_cannot_read_stops_it_before_it_listens() {
    // As root: batchd must run as another user than its key's owner.
    if !testhost::can_run(
        "a_key_batchd_cannot_read_stops_it_before_it_listens",
        || Ok(()),
    ) {
        return;
    }
    let pki = TestPki::new();
    let tls = pki.tls_paths(Role::Service, "batchd");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let d = dir.path();
    copy(&tls.ca, &d.join("ca.pem"), 0o644);
    copy(&tls.cert, &d.join("batchd.pem"), 0o644);
    copy(&tls.key, &d.join("batchd.key"), 0o600);
    // `nobody` runs a copy: the build tree may sit in a directory only root may
    // enter (a clone under `mktemp -d` is 0700).
    let batchd = d.join("batchd");
    copy(Path::new(BATCHD), &batchd, 0o755);
    let ready = d.join("ready");
    std::fs::write(
        d.join("batchd.toml"),
        format!(
            "listen = \"127.0.0.1:0\"\nready_file = {:?}\nca = {:?}\ncert = {:?}\nkey = {:?}\naccountd = \"127.0.0.1:9\"\n\n[store]\npath = {:?}\n\n[selectors]\nvexecd = \"127.0.0.1:9\"\n",
            ready,
            d.join("ca.pem"),
            d.join("batchd.pem"),
            d.join("batchd.key"),
            d.join("queue.db"),
        ),
    )
    .unwrap();
    let err = d.join("stderr");
    let mut child = Command::new("runuser")
        .args(["-u", "nobody", "--"])
        .arg(&batchd)
        .arg("--config")
        .arg(d.join("batchd.toml"))
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let status = testhost::wait::until(Duration::from_secs(60), || child.try_wait().unwrap());
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "batchd still runs on a key it cannot read:\n{}",
            std::fs::read_to_string(&err).unwrap_or_default()
        );
    };
    let text = std::fs::read_to_string(&err).unwrap();
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(text.contains("Permission denied"), "{text}");
    assert!(
        text.contains("batchd.key"),
        "the error names the key:\n{text}"
    );
    assert!(
        !text.contains("listening"),
        "batchd said it was listening before it had read its key:\n{text}"
    );
    assert!(!ready.exists(), "batchd wrote its ready file");
}
