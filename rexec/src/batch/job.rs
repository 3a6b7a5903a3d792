//! What `rexec submit` signs: the [`JobSpec`] built from the command line
//! (width, length, worth, priority, attempts, expiry, program) and this
//! process (environment and working directory, taken as `rexec` takes them
//! for an interactive job), with a fresh random id; then checked as a node
//! would check it and signed with the user's own key ([`certs::jobsign`]).

use std::time::{SystemTime, UNIX_EPOCH};

use certs::jobsign::{JobSignError, JobSigner, check_spec};
use proto::batch::{JobSpec, SignedJob, Worth};
use timespan::parse_span;

use super::worth;
use crate::cli::batch::{DEFAULT_ATTEMPTS, SubmitArgs};
use crate::config::Config;
use crate::exit::Error;

/// Seconds since the epoch, now.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A span option (`--length`, `--expires`) in whole seconds; an error is a
/// usage error naming the option.
pub fn span_secs(flag: &str, text: &str) -> Result<u64, Error> {
    let d = parse_span(text).map_err(|e| Error::Usage(format!("{flag} {text}: {e}")))?;
    if d.subsec_millis() != 0 {
        return Err(Error::Usage(format!(
            "{flag} {text}: give whole seconds (such as 90s, 20m or 2h)"
        )));
    }
    Ok(d.as_secs())
}

/// What the job is worth, from `-r`, `--value`/`--deadline` or `--utility`
/// (clap has made them exclusive); a bid is checked against `max_rate` as
/// `rexec -r` is.
pub fn worth_of(args: &SubmitArgs, length_s: u64, config: &Config) -> Result<Worth, Error> {
    let usage = |e: worth::WorthError| Error::Usage(e.to_string());
    if let Some(spec) = &args.utility {
        return worth::utility(spec).map_err(usage);
    }
    match (&args.value, &args.deadline) {
        (Some(v), Some(d)) => worth::value_by_deadline(v, d, length_s).map_err(usage),
        (Some(_), None) | (None, Some(_)) => Err(Error::Usage(
            "--value and --deadline go together: worth V credits if done within --length, \
             falling to 0 at the deadline"
                .into(),
        )),
        (None, None) => {
            let rate = args.rate.as_deref().unwrap_or("0");
            let bid = crate::request::bid(rate, "-r", config)?;
            Ok(Worth::Rate(bid.micros_per_minute()))
        }
    }
}

/// The spec of the job `args` describe, run as `user`, signed at `now`.
pub fn spec(args: &SubmitArgs, user: &str, config: &Config, now: u64) -> Result<JobSpec, Error> {
    let length_s = span_secs("--length", &args.length)?;
    let worth = worth_of(args, length_s, config)?;
    let expires = span_secs("--expires", &args.expires)?;
    let array = match &args.array {
        Some(text) => Some(
            text.parse::<proto::batch::ArraySpec>()
                .map_err(|e| Error::Usage(format!("--array {e}")))?,
        ),
        None => None,
    };
    let spec = JobSpec {
        id: crate::plan::new_job_id(),
        user: user.to_string(),
        argv: args.command.clone(),
        env: crate::plan::process_env(),
        cwd: crate::plan::process_cwd(),
        width: args.width,
        length_s,
        worth,
        priority: args.priority,
        max_attempts: if args.no_requeue { 1 } else { DEFAULT_ATTEMPTS },
        signed_at: now,
        expires_at: now.saturating_add(expires),
        array,
        after: args
            .after
            .iter()
            .map(|a| {
                a.parse()
                    .map_err(|e: proto::batch::after::AfterError| Error::Usage(e.to_string()))
            })
            .collect::<Result<_, _>>()?,
        options: options(args)?,
    };
    check_spec(&spec).map_err(|e| Error::Usage(format!("cannot submit this: {e}")))?;
    Ok(spec)
}

/// `--mem`, `-o` and `-e` as the spec carries them (patterns checked, size parsed).
fn options(args: &SubmitArgs) -> Result<proto::batch::JobOptions, Error> {
    let mem_bytes = args
        .mem
        .as_deref()
        .map(|m| proto::size::parse_size(m).map_err(|e| Error::Usage(format!("--mem: {e}"))))
        .transpose()?;
    for (flag, pattern) in [("-o", &args.output), ("-e", &args.error)] {
        if let Some(p) = pattern {
            proto::output::check(p).map_err(|e| Error::Usage(format!("{flag}: {e}")))?;
        }
    }
    Ok(proto::batch::JobOptions {
        mem_bytes,
        stdout: args.output.clone(),
        stderr: args.error.clone(),
    })
}

/// The user's signer, from the configuration's `cert` and `key`. Files that
/// cannot be used are a failure (255), as for every connection; a key that is
/// not the certificate's, or a certificate that is not a user's, is the
/// configuration's mistake (2).
pub fn signer(config: &Config) -> Result<JobSigner, Error> {
    JobSigner::load(&config.tls).map_err(|e| {
        let text = format!("client configuration {}: {e}", config.path.display());
        match e {
            JobSignError::Load(_) => Error::Failed(text),
            _ => Error::Usage(text),
        }
    })
}

/// Signs `spec`, under `--max-cost` and `-A` and with the batch script when there
/// are (see [`proto::batch::JobTerms`]).
pub fn sign(signer: &JobSigner, spec: &JobSpec, args: &SubmitArgs) -> Result<SignedJob, Error> {
    let terms = proto::batch::JobTerms {
        max_cost: args.spending.max_cost()?,
        account: args.spending.account.clone(),
        script: args.script.clone(),
    };
    let signed = match terms.is_empty() {
        true => signer.sign(spec),
        false => signer.sign_with_terms(spec, &terms),
    };
    signed.map_err(|e| Error::Failed(format!("cannot sign the job: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn submit(line: &str) -> SubmitArgs {
        let argv = std::iter::once("rexec").chain(line.split(' '));
        let a = crate::cli::batch::BatchArgs::try_parse_from(argv).unwrap();
        match a.command {
            crate::cli::batch::BatchCommand::Submit(s) => s,
            other => panic!("not submit: {other:?}"),
        }
    }

    fn config() -> Config {
        Config::parse(
            "/x/c.toml".as_ref(),
            "ca = \"c\"\ncert = \"u\"\nkey = \"k\"\nmax_rate = 10\n",
        )
        .unwrap()
    }

    #[test]
    fn the_spec_holds_what_was_asked() {
        let a = submit("submit -n 4 --length 2h --value 50 --deadline 6h --no-requeue ./prog -x");
        let s = spec(&a, "alice", &config(), 1_000).unwrap();
        assert_eq!((s.width, s.length_s, s.max_attempts), (4, 7200, 1));
        assert_eq!(
            s.worth,
            Worth::Utility(vec![(7200, 50_000_000), (21_600, 0)])
        );
        assert_eq!(s.argv, ["./prog", "-x"]);
        assert_eq!((s.signed_at, s.expires_at), (1_000, 1_000 + 7 * 86_400));
        assert_eq!((s.user.as_str(), s.priority), ("alice", 1));
        assert!(s.env.iter().all(|(k, _)| k != "REXEC_RANK"));
        assert_ne!(s.id, spec(&a, "alice", &config(), 1_000).unwrap().id);
        let s = spec(
            &submit("submit --length 1m --expires 1h true"),
            "a",
            &config(),
            0,
        )
        .unwrap();
        assert_eq!((s.worth, s.max_attempts, s.width), (Worth::Rate(0), 3, 1));
        assert_eq!(s.expires_at, 3600);
    }

    #[test]
    fn rates_are_checked_like_rexec_r() {
        let s = spec(&submit("submit -r 2.5 --length 1m true"), "a", &config(), 0).unwrap();
        assert_eq!(s.worth, Worth::Rate(2_500_000));
        let e = spec(&submit("submit -r 11 --length 1m true"), "a", &config(), 0).unwrap_err();
        assert_eq!(e.class(), crate::exit::Class::Refused);
        assert!(e.to_string().contains("max_rate = 10"), "{e}");
        let e = spec(&submit("submit -r -1 --length 1m true"), "a", &config(), 0).unwrap_err();
        assert_eq!(e.class(), crate::exit::Class::Refused);
    }

    #[test]
    fn bad_options_are_usage_errors_naming_the_option() {
        let usage = |line: &str, want: &str| {
            let e = spec(&submit(line), "a", &config(), 0).unwrap_err();
            assert_eq!(e.class(), crate::exit::Class::Usage, "{line}: {e}");
            assert!(e.to_string().contains(want), "{line}: {e}");
        };
        usage("submit --length soon true", "--length soon: ");
        usage("submit --length 1500ms true", "whole seconds");
        usage("submit --length 1h --expires 0 true", "--expires 0: ");
        usage(
            "submit --length 1h --utility 0:1,x true",
            "breakpoint 2 `x`",
        );
        usage(
            "submit --length 6h --value 5 --deadline 6h true",
            "later than --length",
        );
    }

    #[test]
    fn worth_options_exclude_each_other() {
        for line in [
            "submit --length 1h -r 1 --value 2 --deadline 2h true",
            "submit --length 1h -r 1 --utility 0:1 true",
            "submit --length 1h --value 2 --deadline 2h --utility 0:1 true",
            "submit --length 1h --value 2 true",
            "submit --length 1h --deadline 2h true",
            "submit -r 1 true",
        ] {
            let argv = std::iter::once("rexec").chain(line.split(' '));
            let e = crate::cli::batch::BatchArgs::try_parse_from(argv).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{line}");
        }
    }
}
