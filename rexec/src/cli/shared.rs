//! The flags several forms share, written once: [`Spending`] (`--max-cost`, `-A`: the run
//! form and `rexec submit`) and [`Choice`] (`--policy`, `--max-price`: the run form and
//! `rexec estimate`); each form gives them its own help text (`mut_arg`).

use clap::Args;

use crate::exit::Error;

/// `--max-cost` and `-A`, as the run form and `rexec submit` take them: the
/// flags and their parsing are written here once; each form says in its own
/// help text (`mut_arg`) who enforces the ceiling.
#[derive(Debug, Args)]
pub struct Spending {
    /// A spending ceiling, credits (decimal).
    #[arg(
        long = "max-cost",
        value_name = "CREDITS",
        allow_negative_numbers = true
    )]
    pub max_cost: Option<String>,
    /// Charge project ACCOUNT rather than the default.
    #[arg(short = 'A', long = "account", value_name = "ACCOUNT")]
    pub account: Option<String>,
}

impl Spending {
    /// `--max-cost` in micro-credits, when given: malformed is a usage error,
    /// negative is refused.
    ///
    /// ```
    /// use clap::Parser;
    /// use rexec::exit::Class;
    /// let cost = |v: &str| rexec::cli::RunArgs::parse_from(["rexec", "--max-cost", v, "ls"])
    ///     .spending
    ///     .max_cost();
    /// assert_eq!(cost("2.5").unwrap(), Some(2_500_000));
    /// assert_eq!(cost("-1").unwrap_err().class(), Class::Refused);
    /// assert_eq!(cost("lots").unwrap_err().class(), Class::Usage);
    /// ```
    pub fn max_cost(&self) -> Result<Option<i64>, Error> {
        credits(
            "--max-cost",
            self.max_cost.as_deref(),
            Error::Refused,
            "a spending ceiling cannot be negative (0 runs the job at bid 0 from its start)",
        )
    }
}

/// `text` given as `flag`, in micro-credits, when there is one: malformed is a
/// usage error, negative is `negative` saying `why`.
fn credits(
    flag: &str,
    text: Option<&str>,
    negative: fn(String) -> Error,
    why: &str,
) -> Result<Option<i64>, Error> {
    let Some(text) = text else { return Ok(None) };
    let micros =
        money::parse_credits(text).map_err(|e| Error::Usage(format!("{flag} {text}: {e}")))?;
    if micros < 0 {
        return Err(negative(format!("{flag} {text}: {why}")));
    }
    Ok(Some(micros))
}

/// `--policy` and `--max-price`, as the run form and `rexec estimate` take them:
/// how a selector chooses the nodes, and the highest price taken.
#[derive(Debug, Args)]
pub struct Choice {
    /// How a selector chooses the nodes.
    #[arg(long, value_name = "POLICY", default_value = crate::select::DEFAULT_POLICY)]
    pub policy: String,
    /// Only nodes whose price is at most this many credits per minute.
    #[arg(
        long = "max-price",
        value_name = "CREDITS",
        allow_negative_numbers = true
    )]
    pub max_price: Option<String>,
}

impl Choice {
    /// `--max-price` in micro-credits per minute, when given; malformed or
    /// negative is a usage error.
    pub fn max_price(&self) -> Result<Option<i64>, Error> {
        credits(
            "--max-price",
            self.max_price.as_deref(),
            Error::Usage,
            "a price cap cannot be negative; give credits per minute like 0.5",
        )
    }
}
