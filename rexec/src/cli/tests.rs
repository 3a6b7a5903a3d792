//! The command line's rules, checked through clap as `rexec` parses them.

use super::*;

fn run(line: &str) -> RunArgs {
    let argv: Vec<OsString> = std::iter::once("rexec")
        .chain(line.split(' '))
        .map(OsString::from)
        .collect();
    match parse(argv) {
        Invocation::Run(r) => r,
        other => panic!("not the run form: {other:?}"),
    }
}

#[test]
fn options_stop_at_the_program() {
    let r = run("-r 2.5 -n 4 -l --stdin 0 ls -l --nodes x");
    assert_eq!(r.rate, "2.5");
    assert_eq!(r.nranks, Some(4));
    assert!(r.label);
    assert_eq!(r.stdin, StdinMode::Rank0);
    assert_eq!(r.nodes, None);
    assert_eq!(r.command, ["ls", "-l", "--nodes", "x"]);
}

#[test]
fn max_cost_and_account_are_read_alike_by_the_run_form_and_submit() {
    use crate::exit::Class;
    let submit = |line: &str| {
        let argv = format!("rexec submit --length 1m {line}");
        match parse(argv.split(' ').map(OsString::from).collect()) {
            Invocation::Batch(b) => match b.command {
                batch::BatchCommand::Submit(s) => s.spending,
                other => panic!("not submit: {other:?}"),
            },
            other => panic!("not submit: {other:?}"),
        }
    };
    for spending in [
        run("--max-cost 2.5 -A lab ./prog").spending,
        submit("--max-cost 2.5 -A lab ./prog"),
    ] {
        assert_eq!(spending.max_cost().unwrap(), Some(2_500_000));
        assert_eq!(spending.account.as_deref(), Some("lab"));
    }
    for spending in [run("./prog").spending, submit("./prog")] {
        assert_eq!(spending.max_cost().unwrap(), None);
        assert_eq!(spending.account, None);
    }
    for (text, class) in [("-1", Class::Refused), ("lots", Class::Usage)] {
        let line = format!("--max-cost {text} ./prog");
        for spending in [run(&line).spending, submit(&line)] {
            let e = spending.max_cost().unwrap_err();
            assert_eq!(e.class(), class, "{text}");
            assert!(e.to_string().contains("--max-cost"), "{e}");
        }
    }
    let e = run("--max-cost -1 ./prog").spending.max_cost().unwrap_err();
    assert_eq!(
        e.to_string(),
        "--max-cost -1: a spending ceiling cannot be negative (0 runs the job at bid 0 from \
         its start)"
    );
    let e = run("--max-price -1 ./prog").choice.max_price().unwrap_err();
    assert_eq!(e.class(), Class::Usage);
    assert_eq!(
        e.to_string(),
        "--max-price -1: a price cap cannot be negative; give credits per minute like 0.5"
    );
    assert_eq!(
        run("--max-price 0.5 ./prog").choice.max_price().unwrap(),
        Some(500_000)
    );
}

#[test]
fn nodes_list_and_double_dash() {
    let r = run("--nodes a,b,a -t --kill-on-bad-exit -- jobs --help");
    assert_eq!(r.nodes.unwrap(), ["a", "b", "a"]);
    assert!(r.tty && r.kill_on_bad_exit);
    assert_eq!(r.command, ["jobs", "--help"]);
}

#[test]
fn admin_forms() {
    let argv = ["rexec", "kill", "00ff", "--nodes", "n1", "-s", "TERM"];
    let Invocation::Admin(a) = parse(argv.iter().map(OsString::from).collect()) else {
        panic!("not admin");
    };
    assert_eq!(a.nodes.unwrap(), ["n1"]);
    let AdminCommand::Kill(k) = a.command else {
        panic!("not kill")
    };
    assert_eq!((k.job.as_str(), k.signal.as_str()), ("00ff", "TERM"));
    let argv = ["rexec", "--nodes", "n2", "bid", "00ff", "2.5"];
    let Invocation::Admin(a) = parse(argv.iter().map(OsString::from).collect()) else {
        panic!("not admin");
    };
    let AdminCommand::Bid(b) = a.command else {
        panic!("not bid")
    };
    assert_eq!((b.job.as_str(), b.rate.as_str()), ("00ff", "2.5"));
    assert!(run("-v -- bid 1").verbose);
}

#[test]
fn attached_short_values_are_skipped() {
    let w = |s: &str| s.split(' ').map(OsString::from).collect::<Vec<_>>();
    assert!(!is_admin(&w("-ln4 jobs2")));
    assert!(is_admin(&w("-ln4 jobs")));
    assert!(is_admin(&w("--rate=2 jobs")));
    assert!(!is_admin(&w("--rate jobs ls")));
    assert!(!is_admin(&w("--policy nodes ls")));
    assert!(is_admin(&w("--policy random nodes")));
}

#[test]
fn selection_options_and_the_nodes_form() {
    let r = run("-r 1 -n 3 --policy history --max-price 0.5 --length 90s ./prog");
    assert_eq!(r.choice.policy, "history");
    assert_eq!(r.choice.max_price.as_deref(), Some("0.5"));
    assert_eq!(r.length.as_deref(), Some("90s"));
    assert_eq!(run("ls").choice.policy, "lowest-price");
    let argv = [
        "rexec", "nodes", "--length", "20m", "--policy", "history", "-v",
    ];
    let Invocation::Admin(a) = parse(argv.iter().map(OsString::from).collect()) else {
        panic!("not admin");
    };
    let AdminCommand::Nodes(n) = a.command else {
        panic!("not nodes")
    };
    assert_eq!(n.length.as_deref(), Some("20m"));
    assert_eq!(n.policy.as_deref(), Some("history"));
    assert!(n.verbose);
    assert_eq!(run("-- nodes").command, ["nodes"]);
}

#[test]
fn batch_words_select_the_batch_forms_unless_after_double_dash() {
    use crate::cli::batch::BatchCommand;
    let argv = "rexec --config c.toml submit -n 2 --length 1h ./prog --nodes x"
        .split(' ')
        .map(OsString::from)
        .collect();
    let Invocation::Batch(b) = parse(argv) else {
        panic!("not batch");
    };
    assert_eq!(b.config.as_deref(), Some(std::path::Path::new("c.toml")));
    let BatchCommand::Submit(s) = b.command else {
        panic!("not submit")
    };
    assert_eq!((s.width, s.length.as_str()), (2, "1h"));
    assert_eq!(s.command, ["./prog", "--nodes", "x"]);
    for word in BATCH_WORDS {
        assert_eq!(run(&format!("-- {word}")).command, [word]);
        assert_eq!(run(&format!("-r {word} ls")).command, ["ls"]);
    }
    let w = |s: &str| s.split(' ').map(OsString::from).collect::<Vec<_>>();
    assert_eq!(form(&w("-n 2 wait 3")), Form::Batch);
    assert_eq!(form(&w("./wait 3")), Form::Run);
}
