//! [`StopFile`]: a file a scenario leaves once it has checked what it needed
//! while jobs ran, so that those jobs end then instead of at the end of a
//! fixed length chosen to outlast a slow machine. The jobs run as the test
//! user: the file lives in a temporary directory every user may enter.

use std::path::PathBuf;

/// A file not there yet, in a world-searchable temporary directory (removed
/// on drop).
pub struct StopFile {
    dir: tempfile::TempDir,
}

impl StopFile {
    /// A new directory for the file; panics if it cannot be made.
    pub fn new() -> StopFile {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("rexec-stop-")
            .tempdir()
            .expect("cannot create the stop file's directory");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("cannot open the stop file's directory to every user");
        StopFile { dir }
    }

    /// The file's path.
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("stop")
    }

    /// Perl that spins the CPU until the file appears or `secs` pass.
    pub fn perl_spin(&self, secs: u32) -> String {
        format!(
            "$e=time+{secs}; 1 while time<$e && ! -e '{}'",
            self.path().display()
        )
    }

    /// Shell that sleeps until the file appears or about `secs` pass.
    pub fn sh_idle(&self, secs: u32) -> String {
        format!(
            "i=0; while [ $i -lt {} ] && [ ! -e '{}' ]; do sleep 0.1; i=$((i+1)); done",
            secs * 10,
            self.path().display()
        )
    }

    /// Leaves the file: the jobs waiting for it end.
    pub fn stop(&self) {
        std::fs::write(self.path(), "").expect("cannot leave the stop file");
    }
}

impl Default for StopFile {
    fn default() -> Self {
        StopFile::new()
    }
}
