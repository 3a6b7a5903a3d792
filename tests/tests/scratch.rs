use rexec_tests::cluster::{Cluster, bin};
use std::process::Command;
#[test]
fn show() {
    let cluster = Cluster::start(1);
    let rexec = bin("rexec").display().to_string();
    let tg = bin("rexec-testgen").display().to_string();
    let cmd = format!(
        "REXEC_HEARTBEAT_TIMEOUT=2s {rexec} {tg} 1 100000000 | (sleep 6; wc -c); echo status ${{PIPESTATUS}}"
    );
    let t = std::time::Instant::now();
    let out = Command::new("bash")
        .arg("-c")
        .arg(&cmd)
        .env("REXEC_CONFIG", &cluster.config)
        .output()
        .unwrap();
    eprintln!(
        "{:?} {} {}",
        t.elapsed(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
