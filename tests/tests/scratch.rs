use rexec_tests::cluster::{Cluster, bin};
use std::process::Command;
use std::time::Instant;
#[test]
fn show() {
    let cluster = Cluster::start(2);
    let rexec = bin("rexec").display().to_string();
    for cmd in [
        format!("{rexec} sh -c '(sleep 1000 &); sleep 1000 & echo hi'"),
        format!("head -c 10000000 /dev/zero | {rexec} --nodes n1,n2 true"),
        format!("{rexec} yes | head -2; echo ${{PIPESTATUS:-}}"),
        format!("bash -c 'set -o pipefail; {rexec} yes | head -1; echo status $?'"),
        format!("echo hi | {rexec} -t cat"),
        format!("echo hi | {rexec} -t sh -c 'read x; echo got $x'"),
        format!("{rexec} -l --nodes n1,n2 sh -c 'printf partial'"),
    ] {
        let t = Instant::now();
        let out = Command::new("timeout")
            .arg("20")
            .arg("sh")
            .arg("-c")
            .arg(&cmd)
            .env("REXEC_CONFIG", &cluster.config)
            .output()
            .unwrap();
        eprintln!(
            "$ {cmd}\n  -> {} in {:.2}s\n  out {:?}\n  err {:?}",
            out.status,
            t.elapsed().as_secs_f64(),
            String::from_utf8_lossy(&out.stdout)
                .chars()
                .take(200)
                .collect::<String>(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    eprintln!(
        "left: {:?} {:?}",
        cluster.marked(&[]),
        cluster.job_cgroups()
    );
}
