//! Files perfcast writes: whole or not at all, and one writer per output directory.
//!
//! A file is written to a temporary `.NAME.partial-PID` beside it and renamed over `NAME`
//! only once complete, so a run that fails (a sweep point that does not validate, a full
//! disk) or is interrupted leaves the previous `NAME` as it was. Commands that fill an `--out`
//! directory hold [`DirLock`] for their whole run, so a second perfcast writing there fails at
//! once with a message instead of interleaving its rows; the lock file goes with the lock.
//!
//! The temporaries and lock files alive are listed ([`remove_live_files`]): a host that
//! catches SIGINT, SIGTERM or SIGHUP (the CLI's signal thread) removes them before it ends,
//! since no destructor runs then. Only SIGKILL, or a crash, leaves one behind.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The temporaries of uncommitted [`OutFile`]s and the lock files of held [`DirLock`]s.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

fn track(path: &Path) {
    live().push(path.to_path_buf());
}

fn untrack(path: &Path) {
    let mut l = live();
    if let Some(i) = l.iter().position(|p| p == path) {
        l.swap_remove(i);
    }
}

/// Remove every temporary and lock file this process has not finished with (what a host
/// does before a signal ends it); returns how many it removed.
pub fn remove_live_files() -> usize {
    let mut l = live();
    l.drain(..)
        .filter(|p| std::fs::remove_file(p).is_ok())
        .count()
}

/// The lock file an [`DirLock`] holds, inside the output directory.
pub const LOCK_FILE: &str = ".perfcast-lock";

/// A file being written to a temporary beside its destination; [`OutFile::commit`] renames
/// it into place, dropping it uncommitted removes the temporary.
pub struct OutFile {
    dest: PathBuf,
    tmp: PathBuf,
    w: Option<BufWriter<File>>,
}

fn with_path(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

impl OutFile {
    /// Start writing `dest` (its directory must exist). Nothing at `dest` changes until
    /// [`OutFile::commit`].
    pub fn create(dest: &Path) -> io::Result<OutFile> {
        let name = dest.file_name().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: not a file name", dest.display()),
            )
        })?;
        let tmp = dest.with_file_name(format!(
            ".{}.partial-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        let f = File::create(&tmp).map_err(|e| with_path(e, &tmp))?;
        track(&tmp);
        Ok(OutFile {
            dest: dest.to_path_buf(),
            tmp,
            w: Some(BufWriter::new(f)),
        })
    }

    /// Flush, sync and rename the temporary over the destination; on failure the temporary
    /// is removed and the destination keeps what it had.
    pub fn commit(mut self) -> io::Result<()> {
        let Some(w) = self.w.take() else {
            return Ok(());
        };
        let done = w
            .into_inner()
            .map_err(|e| e.into_error())
            .and_then(|f| f.sync_all())
            .map_err(|e| with_path(e, &self.tmp))
            .and_then(|()| std::fs::rename(&self.tmp, &self.dest));
        if done.is_err() {
            let _ = std::fs::remove_file(&self.tmp);
        }
        untrack(&self.tmp);
        done
    }
}

impl Write for OutFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.w {
            Some(w) => w.write(buf),
            None => Err(io::Error::other("write after commit")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.w {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for OutFile {
    fn drop(&mut self) {
        if self.w.take().is_some() {
            // Not committed: the run failed, the destination keeps what it had.
            let _ = std::fs::remove_file(&self.tmp);
            untrack(&self.tmp);
        }
    }
}

/// Write `bytes` to `dest` whole or not at all. Errors name the temporary where it is the
/// file at fault; the caller names `dest`.
pub fn write(dest: &Path, bytes: impl AsRef<[u8]>) -> io::Result<()> {
    let mut f = OutFile::create(dest)?;
    f.write_all(bytes.as_ref())?;
    f.commit()
}

/// An output directory held by this process (created if needed); released when dropped or
/// when the process ends, however it ends (an advisory `flock` on [`LOCK_FILE`]). Dropped,
/// it removes the lock file while still holding it; a process that locked the removed file
/// meanwhile sees that the path no longer names it and takes the path's new file instead,
/// so two writers never both hold the directory.
pub struct DirLock {
    file: File,
    path: PathBuf,
}

/// Whether `path` still names the open `file` (Unix: the same device and inode).
fn names_file(path: &Path, file: &File) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(path), file.metadata()) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (path, file);
        true
    }
}

impl DirLock {
    /// Take `dir` for this run, or fail at once naming the directory when another process
    /// (or another `DirLock` of this one) holds it.
    pub fn take(dir: &Path) -> io::Result<DirLock> {
        std::fs::create_dir_all(dir).map_err(|e| with_path(e, dir))?;
        let path = dir.join(LOCK_FILE);
        // A lock file removed by its holder between our open and our lock: open again (a
        // handful of rounds is plenty; each needs another writer to finish meanwhile).
        for _ in 0..64 {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .map_err(|e| with_path(e, &path))?;
            match file.try_lock() {
                Ok(()) if names_file(&path, &file) => {
                    track(&path);
                    return Ok(DirLock { file, path });
                }
                Ok(()) => continue,
                Err(e) => return Err(Self::refused(dir, &path, e)),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!(
                "cannot hold {}: its lock file keeps being replaced",
                dir.display()
            ),
        ))
    }

    fn refused(dir: &Path, path: &Path, e: std::fs::TryLockError) -> io::Error {
        match e {
            std::fs::TryLockError::WouldBlock => io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "another perfcast is writing into {} (it holds {}); wait for it to finish or choose another --out",
                    dir.display(),
                    path.display()
                ),
            ),
            std::fs::TryLockError::Error(e) => with_path(e, path),
        }
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        // Removed while held; the lock goes when `file` closes right after.
        let _ = std::fs::remove_file(&self.path);
        untrack(&self.path);
        let _ = self.file.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = perfcast_testkit::tmpdir(tag);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_committed_file_replaces_the_old_one_and_leaves_nothing_else() {
        let d = dir("perfcast-report-file-commit");
        let p = d.join("a.csv");
        std::fs::write(&p, "old\n").unwrap();
        write(&p, "new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\n");
        assert_eq!(names(&d), ["a.csv"]);
    }

    #[test]
    fn an_uncommitted_file_leaves_the_old_one_as_it_was() {
        let d = dir("perfcast-report-file-abandon");
        let p = d.join("a.csv");
        std::fs::write(&p, "old\n").unwrap();
        {
            let mut f = OutFile::create(&p).unwrap();
            f.write_all(b"half a ro").unwrap();
            // Before the commit, the destination is untouched and the partial file is there.
            assert_eq!(std::fs::read_to_string(&p).unwrap(), "old\n");
            assert_eq!(names(&d).len(), 2);
        }
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old\n");
        assert_eq!(names(&d), ["a.csv"]);
    }

    #[test]
    fn a_second_writer_of_a_directory_is_refused_until_the_first_is_done() {
        let d = dir("perfcast-report-file-lock");
        let first = DirLock::take(&d).unwrap();
        let e = DirLock::take(&d).err().unwrap().to_string();
        assert!(e.contains("another perfcast is writing into"), "{e}");
        assert!(e.contains(&d.display().to_string()), "{e}");
        drop(first);
        // The lock file goes with the lock; the list of live files is empty again.
        assert!(names(&d).is_empty(), "{:?}", names(&d));
        let again = DirLock::take(&d).unwrap();
        assert_eq!(names(&d), [LOCK_FILE]);
        // A holder removed its lock file while this one had it open: the path's new file is
        // taken instead, so it is never held twice.
        let stale = std::fs::File::open(d.join(LOCK_FILE)).unwrap();
        drop(again);
        assert!(names(&d).is_empty());
        let third = DirLock::take(&d).unwrap();
        assert!(stale.try_lock().is_ok(), "the removed file is free");
        assert!(DirLock::take(&d).is_err(), "the path's file is held");
        drop(third);
    }

    #[test]
    fn live_files_are_listed_until_committed_or_dropped() {
        let d = dir("perfcast-report-file-live");
        let f = OutFile::create(&d.join("a.csv")).unwrap();
        let lock = DirLock::take(&d).unwrap();
        let listed = |p: &Path| live().iter().any(|q| q == p);
        assert!(listed(&f.tmp) && listed(&lock.path));
        let tmp = f.tmp.clone();
        f.commit().unwrap();
        assert!(!listed(&tmp));
        let path = lock.path.clone();
        drop(lock);
        assert!(!listed(&path));
    }

    #[test]
    fn bad_destinations_name_the_path() {
        let d = dir("perfcast-report-file-bad");
        let missing = d.join("no-such-dir").join("a.csv");
        let e = write(&missing, "x").err().unwrap().to_string();
        assert!(e.contains("no-such-dir"), "{e}");
        let e = OutFile::create(Path::new("/")).err().unwrap().to_string();
        assert!(e.contains("not a file name"), "{e}");
        // A directory cannot be replaced by a file (the caller names the destination), and
        // nothing is left behind.
        std::fs::create_dir_all(d.join("sub")).unwrap();
        let e = write(&d.join("sub"), "x").err().unwrap().to_string();
        assert!(e.contains("directory"), "{e}");
        assert_eq!(names(&d), ["sub"]);
    }
}
