//! A batch script's file on the node: the bytes a user signed with a job
//! ([`proto::batch::JobTerms::script`]) written where only the job's user can
//! read them, run in place of the program, and removed when the rank ends.
//!
//! [`ScriptFile::write`] makes a fresh directory under rexecd's temporary
//! directory (`$TMPDIR`, else `/tmp`), mode 0700, and in it the script, mode
//! 0700, named as the user named it; both are created new (never through a
//! name someone else made first), written and synced while still rexecd's, and
//! only then given to the user (file first, directory last), so nobody else can
//! read or replace the script at any moment. Dropping the [`ScriptFile`] removes
//! the directory with everything in it: the session keeps it with the running
//! rank, so it goes when the rank ends (exit, kill) or when the start fails.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::spawn::JobUser;

/// A written script, removed on drop (see the module doc).
#[derive(Debug)]
pub struct ScriptFile {
    dir: PathBuf,
    path: PathBuf,
}

/// How many fresh directory names are tried before giving up.
const TRIES: u32 = 8;

impl ScriptFile {
    /// Writes `bytes` for `user`'s rank `tag` (a name unique on this node, such as
    /// `user-job-attempt-rank`) as `name`'s last component under `base`.
    pub fn write(
        base: &Path,
        tag: &str,
        name: &str,
        bytes: &[u8],
        user: &JobUser,
    ) -> std::io::Result<ScriptFile> {
        let dir = fresh_dir(base, tag)?;
        // From here the directory is removed on any failure (by the guard's drop).
        let file_name = Path::new(name)
            .file_name()
            .filter(|n| !n.is_empty())
            .map_or_else(|| "script".into(), |n| n.to_os_string());
        let script = ScriptFile {
            path: dir.join(file_name),
            dir,
        };
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o700)
            .open(&script.path)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        let (uid, gid) = (Some(user.uid().0), Some(user.gid().0));
        std::os::unix::fs::fchown(&file, uid, gid)?;
        drop(file);
        std::os::unix::fs::lchown(&script.dir, uid, gid)?;
        Ok(script)
    }

    /// The script's path, the program the rank runs.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScriptFile {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_dir_all(&self.dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.dir.display(), error = %e, "cannot remove a batch script");
        }
    }
}

/// A new directory `base/rexec-script-TAG[-N]`, mode 0700, created by this call.
fn fresh_dir(base: &Path, tag: &str) -> std::io::Result<PathBuf> {
    let mut last = None;
    for n in 0..TRIES {
        let name = match n {
            0 => format!("rexec-script-{tag}"),
            n => format!("rexec-script-{tag}-{}-{n}", std::process::id()),
        };
        let dir = base.join(name);
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no fresh directory name")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn me() -> JobUser {
        let name = nix::unistd::User::from_uid(nix::unistd::getuid())
            .unwrap()
            .unwrap()
            .name;
        JobUser::resolve(&name, crate::spawn::SpawnPolicy { allow_root: true }).unwrap()
    }

    #[test]
    fn the_script_is_private_and_goes_with_its_guard() {
        let base = tempfile::tempdir().unwrap();
        let user = me();
        let s = ScriptFile::write(
            base.path(),
            "u-1-0-0",
            "./jobs/run.sh",
            b"#!/bin/sh\n",
            &user,
        )
        .unwrap();
        assert_eq!(s.path().file_name().unwrap(), "run.sh");
        assert_eq!(fs::read(s.path()).unwrap(), b"#!/bin/sh\n");
        let file = fs::metadata(s.path()).unwrap();
        let dir = fs::metadata(s.path().parent().unwrap()).unwrap();
        assert_eq!(file.permissions().mode() & 0o777, 0o700);
        assert_eq!(dir.permissions().mode() & 0o777, 0o700);
        assert_eq!((file.uid(), dir.uid()), (user.uid().0, user.uid().0));
        // A second rank with the same tag (a stale directory) gets its own.
        let t = ScriptFile::write(base.path(), "u-1-0-0", "x", b"#!/bin/sh\n", &user).unwrap();
        assert_ne!(s.path().parent(), t.path().parent());
        let (sd, td) = (s.dir.clone(), t.dir.clone());
        drop(s);
        drop(t);
        assert!(!sd.exists() && !td.exists());
    }
}
