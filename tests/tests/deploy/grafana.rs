//! The Grafana dashboard in `deploy/grafana/` against the metrics the daemons
//! export: it is a dashboard Grafana imports as it is (a `DS_PROMETHEUS` input
//! every panel's queries use, unique panel ids), every query is PromQL that
//! `promtool check rules` accepts, every series it asks for is one a daemon
//! exports (the tables in the daemons' metrics modules), and every exported
//! metric is on some panel.

use std::collections::BTreeSet;
use std::fs;

use serde_json::Value;

use crate::workspace;

/// The metrics modules whose `//! | \`name\` |` tables list what the daemons export.
const MODULES: [&str; 4] = [
    "rexecd/src/metrics.rs",
    "vexecd/src/daemon/metrics.rs",
    "accountd/src/metrics.rs",
    "batchd/src/metrics.rs",
];

/// The series names the daemons export.
pub(crate) fn exported() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for m in MODULES {
        let text = fs::read_to_string(workspace().join(m)).expect("a metrics module");
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("//! | `rexec_") {
                let name = rest.split('`').next().unwrap_or_default();
                names.insert(format!("rexec_{name}"));
            }
        }
    }
    names
}

/// The `rexec_*` names in a PromQL expression.
pub(crate) fn names_in(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("rexec_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        out.push(name);
    }
    out
}

/// The exported metric `series` belongs to (a histogram's `_bucket`, `_count`, `_sum`).
pub(crate) fn metric_of<'a>(series: &'a str, exported: &BTreeSet<String>) -> Option<&'a str> {
    if exported.contains(series) {
        return Some(series);
    }
    ["_bucket", "_count", "_sum"]
        .iter()
        .filter_map(|s| series.strip_suffix(s))
        .find(|base| exported.contains(*base))
}

#[test]
fn the_grafana_dashboard_imports_and_queries_only_what_the_daemons_export() {
    let path = workspace().join("deploy/grafana/rexec-market.json");
    let dash: Value = serde_json::from_str(&fs::read_to_string(&path).expect("the dashboard"))
        .expect("the dashboard is JSON");
    assert_eq!(dash["__inputs"][0]["name"], "DS_PROMETHEUS");
    assert_eq!(dash["__inputs"][0]["pluginId"], "prometheus");
    let panels = dash["panels"].as_array().expect("panels");
    let ids: BTreeSet<u64> = panels.iter().filter_map(|p| p["id"].as_u64()).collect();
    assert_eq!(ids.len(), panels.len(), "panel ids are unique");

    let exported = exported();
    assert!(exported.len() >= 30, "{exported:?}");
    let mut used = BTreeSet::new();
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for p in panels.iter().filter(|p| p["type"] != "row") {
        let title = p["title"].as_str().unwrap_or_default();
        assert_eq!(p["datasource"]["uid"], "${DS_PROMETHEUS}", "{title}");
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title} queries nothing");
        for t in targets {
            assert_eq!(t["datasource"]["uid"], "${DS_PROMETHEUS}", "{title}");
            let expr = t["expr"].as_str().expect("expr");
            for series in names_in(expr) {
                let metric = metric_of(&series, &exported)
                    .unwrap_or_else(|| panic!("{title}: {series} is not exported by any daemon"));
                used.insert(metric.to_string());
            }
            rules.push_str(&format!(
                "      - record: dashboard:panel_{}_{}\n        expr: {}\n",
                p["id"],
                t["refId"].as_str().unwrap_or("A"),
                serde_json::to_string(expr).unwrap()
            ));
        }
    }
    let unused: Vec<&String> = exported.difference(&used).collect();
    assert!(unused.is_empty(), "exported but on no panel: {unused:?}");

    // Every query parses as PromQL.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("dashboard-rules.yml");
    fs::write(&file, &rules).expect("the rules file");
    crate::alerts::promtool(&["check", "rules", file.to_str().expect("a UTF-8 path")]);
}
