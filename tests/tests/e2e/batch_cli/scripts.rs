//! Batch scripts against a live queue: `rexec submit job.sh` takes the job's
//! options from the script's `#REXEC` lines (the command line winning), signs
//! the script's bytes with the job, and each node runs a private copy of them
//! (mode 0700, removed when the rank ends), so the file edited after submission
//! changes nothing; a bad directive is a usage error naming its line.

use std::path::Path;
use std::time::Duration;

use rexec_tests::batch::{BatchMarket, BatchOptions};
use rexec_tests::cluster::TEST_USER;

use super::live::{batch, job_id, start};

/// Writes `text` as an executable script at `path`.
fn script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("cannot write the script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

const JOB: &str = "#!/bin/sh\n\
# a parameter sweep step\n\
#REXEC -n 2 --length 30s\n\
\n\
#REXEC -r 1 --no-requeue\n\
echo \"rank $REXEC_RANK of $REXEC_NRANKS args $* greeting $GREETING\"\n\
echo \"copy $0 $(stat -c %a \"$0\") $(stat -c %a \"$(dirname \"$0\")\")\" >&2\n";

#[test]
fn a_script_runs_with_its_directives_and_the_command_line_wins() {
    let test = "a_script_runs_with_its_directives_and_the_command_line_wins";
    let Some((m, config)) = start(test, BatchOptions::default()) else {
        return;
    };
    let path = m.market.dir.path().join("sweep.sh");
    script(&path, JOB);
    let submit = |args: &[&str]| {
        m.market
            .rexec()
            .config(&config)
            .env("GREETING", "hello")
            .args(args)
            .run()
    };
    // Width, length, rate and no-requeue from the directives.
    let out = submit(&["submit", path.to_str().unwrap(), "a", "b"]);
    let job = job_id(&out);
    let out = batch(&m, &config, &["wait", &job]);
    assert_eq!(out.code, Some(0), "{out:?}\n{}", m.batchd.log());
    let out = batch(&m, &config, &["output", &job]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let mut lines: Vec<String> = out.out().lines().map(str::to_string).collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "rank 0 of 2 args a b greeting hello",
            "rank 1 of 2 args a b greeting hello"
        ],
        "{out:?}"
    );
    // Each rank ran a private copy (0700 in a 0700 directory), gone once it ended.
    for line in out.stderr.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(words.len(), 4, "{line}");
        let copy = Path::new(words[1]);
        assert_ne!(copy, path, "the node ran the submitted path: {line}");
        assert_eq!((words[2], words[3]), ("700", "700"), "{line}");
        let dir = copy.parent().unwrap();
        assert!(
            dir.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("rexec-script-"),
            "{line}"
        );
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
    assert_eq!(out.stderr.lines().count(), 2, "{out:?}");

    // The command line wins over a directive.
    let out = submit(&["submit", "-n", "1", path.to_str().unwrap()]);
    let job = job_id(&out);
    assert_eq!(
        output_of(&m, &config, &job),
        "rank 0 of 1 args  greeting hello\n"
    );
}

/// Submits a parent job that ends only once `flag` exists; its id.
fn held_until(m: &BatchMarket, config: &Path, flag: &Path) -> String {
    let hold = format!("while [ ! -e {} ]; do sleep 0.1; done", flag.display());
    job_id(&batch(
        m,
        config,
        &["submit", "--length", "30s", "sh", "-c", &hold],
    ))
}

/// Waits for `job` and returns its standard output.
fn output_of(m: &BatchMarket, config: &Path, job: &str) -> String {
    let out = batch(m, config, &["wait", job]);
    assert_eq!(out.code, Some(0), "{out:?}\n{}", m.batchd.log());
    batch(m, config, &["output", job]).out()
}

#[test]
fn the_submitted_bytes_run_whatever_becomes_of_the_file() {
    let test = "the_submitted_bytes_run_whatever_becomes_of_the_file";
    let Some((m, config)) = start(test, BatchOptions::default()) else {
        return;
    };
    let dir = m.market.dir.path();
    // Each child waits (--after) for a parent that ends only once the script
    // has been edited or removed, so it starts after that.
    let parent = held_until(&m, &config, &dir.join("edited"));
    let path = dir.join("step.sh");
    script(
        &path,
        &format!("#!/bin/sh\n#REXEC --length 30s --after {parent}\necho submitted\n"),
    );
    let child = job_id(&batch(&m, &config, &["submit", path.to_str().unwrap()]));
    script(&path, "#!/bin/sh\necho edited\n");
    std::fs::write(dir.join("edited"), "").unwrap();
    assert_eq!(output_of(&m, &config, &child), "submitted\n");

    let parent = held_until(&m, &config, &dir.join("removed"));
    let path = dir.join("gone.sh");
    script(&path, "#!/bin/sh\n#REXEC --length 30s\necho still here\n");
    let args = ["submit", "--after", &parent, path.to_str().unwrap()];
    let child = job_id(&batch(&m, &config, &args));
    std::fs::remove_file(&path).unwrap();
    std::fs::write(dir.join("removed"), "").unwrap();
    assert_eq!(output_of(&m, &config, &child), "still here\n");
}

#[test]
fn the_copy_goes_when_the_rank_is_cancelled_or_cannot_start() {
    let test = "the_copy_goes_when_the_rank_is_cancelled_or_cannot_start";
    let Some((m, config)) = start(test, BatchOptions::default()) else {
        return;
    };
    let dir = m.market.dir.path();
    let path = dir.join("long.sh");
    script(
        &path,
        "#!/bin/sh\n#REXEC --length 30s\necho \"$0\"\nexec sleep 60\n",
    );
    let job = job_id(&batch(&m, &config, &["submit", path.to_str().unwrap()]));
    let mut copy = String::new();
    let seen = rexec_tests::wait_until(Duration::from_secs(30), || {
        copy = batch(&m, &config, &["output", &job]).out();
        !copy.is_empty()
    });
    assert!(seen.is_some(), "the job never ran\n{}", m.batchd.log());
    let copy = Path::new(copy.trim_end()).to_path_buf();
    assert!(copy.exists(), "{} while it runs", copy.display());
    let out = batch(&m, &config, &["cancel", &job]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let gone = rexec_tests::wait_until(Duration::from_secs(30), || !copy.exists());
    assert!(gone.is_some(), "{} left after cancel", copy.display());

    // An interpreter that does not exist: the node cannot start it, and removes it.
    let base = copy.parent().unwrap().parent().unwrap().to_path_buf();
    let path = dir.join("broken.sh");
    script(
        &path,
        "#!/no/such/interpreter\n#REXEC --length 30s --no-requeue\n",
    );
    let job = job_id(&batch(&m, &config, &["submit", path.to_str().unwrap()]));
    let out = batch(&m, &config, &["wait", &job]);
    assert_ne!(out.code, Some(0), "{out:?}");
    let prefix = format!("rexec-script-{TEST_USER}-{job}-");
    let left: Vec<_> = std::fs::read_dir(&base)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left after a failed start: {left:?}");
}

#[test]
fn a_bad_directive_exits_2_naming_its_line_and_queues_nothing() {
    let test = "a_bad_directive_exits_2_naming_its_line_and_queues_nothing";
    let Some((m, config)) = start(test, BatchOptions::default()) else {
        return;
    };
    let path = m.market.dir.path().join("bad.sh");
    script(
        &path,
        "#!/bin/sh\n#REXEC -n 1\n#REXEC --bogus 3\necho ran\n",
    );
    let out = batch(
        &m,
        &config,
        &["submit", "--length", "30s", path.to_str().unwrap()],
    );
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    super::one_line_in(&out.stderr, "bad.sh line 3: unknown option --bogus");
    let out = batch(&m, &config, &["queue", "--ended"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.out().lines().count(), 1, "nothing queued: {out:?}");
}
