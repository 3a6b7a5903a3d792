//! The guide's text as steps: the commands of its `sh` blocks, in order, each with the
//! machines named by the "On `HOST`:" line right before its block (and whether it runs
//! as the guide's user), a node block as run on each node, and the `systemctl` lines
//! the test plays.
//!
//! A command is one line of a block (with the lines of a here-document, up to `EOF`,
//! when it ends in `<<'EOF'`); lines starting with `#` are comments.

use std::fs;

/// The guide's nodes: a block marked for them is written for `n1` (address
/// `10.0.0.1`) and run on each with its own name and address.
pub const NODES: [&str; 2] = ["n1", "n2"];

/// One command of the guide.
#[derive(Debug, Clone)]
pub struct GuideCommand {
    /// Line number of its first line.
    pub line: usize,
    /// The command, here-document included.
    pub text: String,
    /// The machines it runs on, from the "On" line before its block.
    pub hosts: Vec<String>,
    /// Run as the guide's user ("On `HOST`, as alice:"), else as root.
    pub as_user: bool,
}

impl GuideCommand {
    pub fn first_line(&self) -> &str {
        self.text.lines().next().unwrap_or("").trim()
    }

    /// The command as run on `host`: a block for the nodes names `n1`; on another node
    /// its name and address replace `n1`'s.
    pub fn on(&self, host: &str) -> String {
        if host == NODES[0] || !NODES.contains(&host) {
            return self.text.clone();
        }
        self.text
            .replace("10.0.0.1", &format!("10.0.0.{}", &host[1..]))
            .replace(NODES[0], host)
    }
}

/// The line right before an `sh` block, "On `HOST`, `HOST` and `HOST`:" or
/// "On `HOST`, as alice:": the hosts (every name in backquotes), and
/// whether it runs as the user.
fn marker(line: &str) -> Option<(Vec<String>, bool)> {
    let inner = line.trim().strip_prefix("On `")?.strip_suffix(':')?;
    let (inner, as_user) = match inner.strip_suffix(", as alice") {
        Some(rest) => (rest, true),
        None => (inner, false),
    };
    let names = format!("`{inner}");
    let hosts = names
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    Some((hosts, as_user))
}

/// The commands of every ```` ```sh ```` block, in order, each with the hosts of the
/// "On" line that precedes its block. Panics on a block without one.
pub fn commands(markdown: &str) -> Vec<GuideCommand> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut heredoc: Option<GuideCommand> = None;
    let mut on: Option<(Vec<String>, bool)> = None;
    for (i, raw) in markdown.lines().enumerate() {
        let line = raw.trim_end();
        if let Some(cmd) = heredoc.as_mut() {
            cmd.text.push('\n');
            cmd.text.push_str(line);
            if line.trim() == "EOF" {
                out.push(heredoc.take().unwrap());
            }
            continue;
        }
        let fence = line.trim_start();
        if !in_sh {
            if let Some(m) = marker(line) {
                on = Some(m);
            } else if fence == "```sh" {
                in_sh = true;
                assert!(
                    on.is_some(),
                    "OPERATIONS.md:{}: an sh block without an \"On `HOST`:\" line right before it",
                    i + 1
                );
            } else if !fence.is_empty() {
                on = None;
            }
            continue;
        }
        if fence.starts_with("```") {
            in_sh = false;
            on = None;
            continue;
        }
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let (hosts, as_user) = on.clone().unwrap();
        let cmd = GuideCommand {
            line: i + 1,
            text: text.to_string(),
            hosts,
            as_user,
        };
        if text.ends_with("<<'EOF'") || text.ends_with("<<EOF") {
            heredoc = Some(cmd);
        } else {
            out.push(cmd);
        }
    }
    assert!(
        heredoc.is_none(),
        "a here-document in OPERATIONS.md has no EOF"
    );
    assert!(!in_sh, "an sh block in OPERATIONS.md is not closed");
    out
}

pub fn guide() -> String {
    let path = crate::workspace().join("docs/OPERATIONS.md");
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

#[test]
fn the_parser_sees_blocks_markers_here_documents_and_comments() {
    let md = "text\nOn `admin`:\n```sh\n# a comment\nls /etc/rexec   # trailing\n\ncat > f <<'EOF'\na = 1\nEOF\n```\n```toml\nx = 1\n```\nOn `n1` and `n2`, as alice:\n```sh\necho hi\n```\n";
    let cmds = commands(md);
    let texts: Vec<&str> = cmds.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "ls /etc/rexec   # trailing",
            "cat > f <<'EOF'\na = 1\nEOF",
            "echo hi"
        ]
    );
    assert_eq!(cmds.iter().map(|c| c.line).collect::<Vec<_>>(), [5, 7, 16]);
    assert_eq!(cmds[0].hosts, ["admin"]);
    assert!(!cmds[0].as_user);
    assert_eq!(cmds[2].hosts, ["n1", "n2"]);
    assert!(cmds[2].as_user);
    let node = GuideCommand {
        text: "name = \"n1\" at 10.0.0.1:7070, node-n1.pem".into(),
        ..cmds[2].clone()
    };
    assert_eq!(node.on("n2"), "name = \"n2\" at 10.0.0.2:7070, node-n2.pem");
    assert_eq!(node.on("n1"), node.text);
    let unmarked = std::panic::catch_unwind(|| commands("text\n\n```sh\nls\n```\n"));
    assert!(unmarked.is_err(), "a block without a marker is refused");
    let far = std::panic::catch_unwind(|| commands("On `admin`:\nmore text\n```sh\nls\n```\n"));
    assert!(far.is_err(), "a marker counts only right before its block");
    assert_eq!(
        marker("On `build`, the build machine:").unwrap().0,
        ["build"]
    );
}

/// `systemctl daemon-reload && systemctl enable --now UNIT`, `systemctl VERB UNIT`:
/// the verbs and units, `enable --now` as `start`; `daemon-reload` does nothing here.
pub fn systemctl(line: &str) -> Option<Vec<(&'static str, String)>> {
    let line = line.split('#').next().unwrap().trim();
    if !line.starts_with("systemctl ") {
        return None;
    }
    let mut out = Vec::new();
    for part in line.split("&&") {
        let words: Vec<&str> = part.split_whitespace().collect();
        match words[1..] {
            ["daemon-reload"] => {}
            ["enable", "--now", unit] | ["start", unit] => out.push(("start", unit.to_string())),
            ["stop", unit] => out.push(("stop", unit.to_string())),
            ["reload", unit] => out.push(("reload", unit.to_string())),
            _ => panic!("systemctl line the test does not play: {line}"),
        }
    }
    Some(out)
}
