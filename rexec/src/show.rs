//! How the client's tables and notes show numbers and states: thousandths
//! as short decimals, CPUs with three decimals, durations as people read
//! them, a bid beside the bid in force, and a node's state column. The same
//! figure is shown the same way in `rexec jobs`, `rexec stats`, `rexec nodes`
//! and `-v`.

use money::Bid;

/// Thousandths as a short decimal: `2`, `1.5`, `0.25`.
pub fn milli(m: u64) -> String {
    let whole = m / 1000;
    let frac = m % 1000;
    if frac == 0 {
        whole.to_string()
    } else {
        format!("{whole}.{}", format!("{frac:03}").trim_end_matches('0'))
    }
}

/// Milliseconds as people read them: `850ms`, `12.5s`, `3m20s`, `2h05m`.
///
/// ```
/// use rexec::show::show_ms;
/// assert_eq!(show_ms(850), "850ms");
/// assert_eq!(show_ms(12_500), "12.5s");
/// assert_eq!(show_ms(200_000), "3m20s");
/// assert_eq!(show_ms(7_500_000), "2h05m");
/// assert_eq!(show_ms(200_000_000), "2d07h");
/// ```
pub fn show_ms(ms: u64) -> String {
    let s = ms / 1000;
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 => {
            let tenths = (ms % 1000) / 100;
            if tenths == 0 {
                format!("{s}s")
            } else {
                format!("{s}.{tenths}s")
            }
        }
        60_000..3_600_000 => format!("{}m{:02}s", s / 60, s % 60),
        3_600_000..86_400_000 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// A node's state column, the same in `rexec jobs`, `rexec stats` and
/// `rexec nodes`: `contended` while its runnable demand exceeds its CPUs,
/// else `idle-cpu`. It is not part of the price: a node's price is the sum
/// of the bids competing there whatever its state (a lone job bidding 2
/// makes the price 2, and runs free).
///
/// ```
/// assert_eq!(rexec::show::state_column(true), "contended");
/// assert_eq!(rexec::show::state_column(false), "idle-cpu");
/// ```
pub fn state_column(contended: bool) -> &'static str {
    if contended { "contended" } else { "idle-cpu" }
}

/// The bid asked for, and the bid in force after an arrow when it differs.
///
/// ```
/// use money::Bid;
/// assert_eq!(rexec::show::bid_column(Bid::from_credits(2), Bid::from_credits(2)), "2");
/// assert_eq!(rexec::show::bid_column("2.5".parse().unwrap(), Bid::ZERO), "2.5->0");
/// ```
pub fn bid_column(bid: Bid, effective: Bid) -> String {
    if bid == effective {
        bid.to_string()
    } else {
        format!("{bid}->{effective}")
    }
}

/// Thousandths of a CPU as CPUs with three decimals: `0.889`.
///
/// ```
/// assert_eq!(rexec::show::milli_cpus(889), "0.889");
/// assert_eq!(rexec::show::milli_cpus(2000), "2.000");
/// ```
pub fn milli_cpus(milli: u32) -> String {
    format!("{}.{:03}", milli / 1000, milli % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousandths_print_short() {
        assert_eq!(milli(2000), "2");
        assert_eq!(milli(1500), "1.5");
        assert_eq!(milli(250), "0.25");
    }
}
