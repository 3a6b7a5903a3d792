//! `rexec-testgen SEED LEN`: writes LEN bytes of the test pattern for SEED to
//! stdout (see `rexec_tests::pattern`). Run on the nodes by the end-to-end tests.

use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = match args.as_slice() {
        [seed, len] => seed.parse::<u64>().ok().zip(len.parse::<u64>().ok()),
        _ => None,
    };
    let Some((seed, len)) = parsed else {
        eprintln!("usage: rexec-testgen SEED LEN");
        std::process::exit(2);
    };
    // Write to the descriptor directly: std's stdout would look for newlines.
    let fd = std::os::fd::AsFd::as_fd(&std::io::stdout()).try_clone_to_owned();
    let Ok(mut out) = fd.map(std::fs::File::from) else {
        std::process::exit(1);
    };
    let result = rexec_tests::pattern::write_stream(seed, len, &mut out).and_then(|()| out.flush());
    if let Err(e) = result {
        eprintln!("rexec-testgen: {e}");
        std::process::exit(1);
    }
}
