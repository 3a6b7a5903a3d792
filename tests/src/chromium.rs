//! Headless Chromium (Debian's `chromium` package, installed by
//! `deploy/setup-host`) loading a page the way a browser does: scripts run, the
//! page's timers fire on a virtual clock (`--virtual-time-budget`, so a page that
//! refreshes itself every few seconds is refreshed without the test waiting that
//! long), then the rendered DOM is printed or a screenshot taken. Each run has a
//! fresh profile directory and reaches nothing but the given URL (no first-run,
//! sync, component or background fetches).

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

/// The browser binary.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Whether Chromium is installed here.
pub fn installed() -> bool {
    Path::new(CHROMIUM).exists()
}

fn run(profile: &Path, budget: Duration, what: &[String], url: &str) -> Output {
    let out = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--virtual-time-budget={}", budget.as_millis()))
        .args(what)
        .arg(url)
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .output()
        .expect("cannot run chromium");
    assert!(
        out.status.success(),
        "chromium failed on {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The DOM of `url` after `budget` of the page's (virtual) time, as HTML.
pub fn dump_dom(profile: &Path, url: &str, budget: Duration) -> String {
    let out = run(profile, budget, &["--dump-dom".to_string()], url);
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// A PNG screenshot of `url` after `budget`, `width` × `height` pixels, into `png`.
pub fn screenshot(profile: &Path, url: &str, budget: Duration, size: (u32, u32), png: &Path) {
    let what = [
        format!("--screenshot={}", png.display()),
        format!("--window-size={},{}", size.0, size.1),
    ];
    run(profile, budget, &what, url);
    let bytes = std::fs::read(png).unwrap_or_default();
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "chromium wrote no PNG to {}",
        png.display()
    );
}
