//! Print the placement comparison over a synthetic week:
//! `cargo run -p vexecd --example placement --release [-- SEED [RUNS]]`.

use vexecd::sim::{SimConfig, simulate, table};

fn main() {
    let mut args = std::env::args().skip(1);
    let mut config = SimConfig::default();
    if let Some(seed) = args.next() {
        match seed.parse() {
            Ok(s) => config.seed = s,
            Err(_) => {
                eprintln!("placement: seed `{seed}` is not a number");
                std::process::exit(2);
            }
        }
    }
    if let Some(runs) = args.next() {
        match runs.parse() {
            Ok(r) if r > 0 => config.runs = r,
            _ => {
                eprintln!("placement: runs `{runs}` is not a positive number");
                std::process::exit(2);
            }
        }
    }
    print!("{}", table(&config, &simulate(&config)));
}
