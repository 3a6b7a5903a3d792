//! The alerting rules in `deploy/etc/rexec-alerts.yml`: `promtool test rules`
//! passes their unit tests (`deploy/etc/rexec-alerts.test.yml`: a correct 3:1 run
//! whose share error spikes in 5 of 17 scrapes does not alert, a node really off
//! does, an uncontended one does not), `deploy/etc/prometheus.yml` loads them, and
//! every series they ask for is one a daemon exports.

use std::process::Command;

use crate::grafana::{exported, metric_of, names_in};
use crate::workspace;

/// Run `promtool` in `deploy/etc` with `args`, failing the test unless it succeeds.
pub(crate) fn promtool(args: &[&str]) {
    assert!(
        std::path::Path::new("/usr/bin/promtool").exists(),
        "promtool is not installed: run deploy/setup-host"
    );
    let out = Command::new("promtool")
        .args(args)
        .current_dir(workspace().join("deploy/etc"))
        .output()
        .expect("cannot run promtool");
    assert!(
        out.status.success(),
        "promtool {args:?}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_alerting_rules_pass_their_promtool_unit_tests_and_ask_only_for_exported_series() {
    promtool(&["test", "rules", "rexec-alerts.test.yml"]);
    promtool(&["check", "config", "prometheus.yml"]);
    let rules = std::fs::read_to_string(workspace().join("deploy/etc/rexec-alerts.yml"))
        .expect("the rules file");
    let exported = exported();
    let asked = names_in(&rules);
    assert!(asked.len() >= 5, "{asked:?}");
    for series in asked {
        assert!(
            metric_of(&series, &exported).is_some(),
            "{series} is not exported by any daemon"
        );
    }
}
