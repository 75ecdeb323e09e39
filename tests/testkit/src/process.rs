//! Where things are, and running commands.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// The repository root (the workspace's directory), canonical.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|e| panic!("repository root above {}: {e}", env!("CARGO_MANIFEST_DIR")))
}

/// The cargo target directory of the running test or bench: cargo puts its executable in
/// `<target>/<profile>/deps/`. Falls back to `CARGO_TARGET_DIR`, then `<root>/target`.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().ok();
    let deps = exe.as_deref().and_then(Path::parent);
    if let Some(deps) = deps.filter(|d| d.file_name() == Some(OsStr::new("deps"))) {
        if let Some(target) = deps.parent().and_then(Path::parent) {
            return target.to_path_buf();
        }
    }
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => workspace_root().join(d),
        None => workspace_root().join("target"),
    }
}

/// A new, empty directory `<prefix>-<pid>-<n>` under `<target>/tmp` (where cargo's
/// `CARGO_TARGET_TMPDIR` points), so that parallel tests and processes never share one.
pub fn tmpdir(prefix: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let d = target_dir().join("tmp").join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    if d.exists() {
        std::fs::remove_dir_all(&d).unwrap_or_else(|e| panic!("remove {}: {e}", d.display()));
    }
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("create {}: {e}", d.display()));
    d
}

/// What a command printed, and its exit code.
#[derive(Debug)]
pub struct Out {
    /// Exit code, -1 if the process was killed by a signal.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// How long a test's child may run when the test names no limit: a `perfcast` command of the
/// suite takes seconds in debug, so a child still running after this has hung (or waits on
/// something that never comes), and the test fails saying so instead of waiting for ever.
pub const DEADLINE: Duration = Duration::from_secs(180);

/// How long a build a test starts (cargo building the example plugins, the C compiler) may take:
/// a cold build of the plugin crates is minutes on a loaded 2-core machine.
pub const BUILD_DEADLINE: Duration = Duration::from_secs(900);

/// The most a child may print on one stream (64 MiB): more is a flood, and the child is killed.
pub const OUTPUT_CAP: usize = 64 << 20;

/// Run `cmd` to its end within [`DEADLINE`] and collect its exit code, stdout and stderr (lossy
/// UTF-8). See [`output_within`].
pub fn output(cmd: &mut Command) -> Out {
    output_within(cmd, DEADLINE)
}

/// Run `cmd` within `limit` and collect its exit code, stdout and stderr (lossy UTF-8). The
/// child starts as [`spawn`] starts it (its own process group, default signal actions, no
/// stdin); if it runs past `limit` or prints more than [`OUTPUT_CAP`] on a stream, its process
/// group is killed and the test fails with a message naming the command, the time waited and
/// the end of what it printed.
pub fn output_within(cmd: &mut Command, limit: Duration) -> Out {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut running = spawn(cmd);
    let streams = [
        running.child.stdout.take().map(|s| capture(s, "stdout")),
        running.child.stderr.take().map(|s| capture(s, "stderr")),
    ];
    let floods = || {
        streams
            .iter()
            .flatten()
            .find(|c| c.flooded())
            .map(|c| c.name)
    };
    let (exited, waited) = running.wait_for(limit, &floods);
    // The streams end with the child unless something it started still holds them: one
    // deadline for both. The child is not reaped yet, so its process group is still its own.
    let deadline = Instant::now() + limit.saturating_sub(waited).max(Duration::from_secs(5));
    let held = exited.is_ok() && streams.iter().flatten().any(|c| !c.ended_by(deadline));
    let flooded = floods();
    if exited.is_err() || held || flooded.is_some() {
        running.kill_group();
        // The kill closed every pipe the group held: what the readers have is all there is.
        let [out, err] = streams.each_ref().map(|c| {
            c.as_ref()
                .map(|c| c.text(Instant::now() + Duration::from_secs(5)))
                .unwrap_or_default()
        });
        let why = match (exited, flooded) {
            (_, Some(name)) => format!("printed more than {} MiB on {name}", OUTPUT_CAP >> 20),
            (Err(why), None) => format!("{why} after {:.1} s", waited.as_secs_f64()),
            (Ok(()), None) => "exited but a process it left behind held its output open".into(),
        };
        panic!(
            "{}: {why} (limit {:.1} s); its process group was killed\n\
             --- stdout (end) ---\n{}\n--- stderr (end) ---\n{}",
            running.what,
            limit.as_secs_f64(),
            tail(&out),
            tail(&err),
        )
    }
    let status = running.reap();
    let [stdout, stderr] = streams.map(|c| c.map(|c| c.text(Instant::now())).unwrap_or_default());
    Out {
        code: status.code().unwrap_or(-1),
        stdout,
        stderr,
    }
}

/// Run `cmd` within [`DEADLINE`]; panic with its stderr unless it succeeds.
pub fn run(cmd: &mut Command) {
    run_within(cmd, DEADLINE);
}

/// Run `cmd` within `limit` (as [`output_within`]); panic with its stderr unless it succeeds.
pub fn run_within(cmd: &mut Command, limit: Duration) {
    let what = describe(cmd);
    let out = output_within(cmd, limit);
    assert!(
        out.code == 0,
        "{what} failed ({}):\n{}",
        out.code,
        out.stderr
    );
}

/// A child a test started with [`spawn`]: waited for with a deadline ([`Running::wait`]), and
/// its process group killed if the test lets go of it unwaited (a failed assertion, say), so
/// that nothing a test starts outlives it.
pub struct Running {
    child: Child,
    /// The command, for messages.
    pub what: String,
    reaped: bool,
}

/// Start `cmd` as a test's child: in a process group of its own (so that a deadline can kill it
/// with everything it started), with no stdin, and with the
/// default action for SIGINT, SIGQUIT, SIGTERM, SIGHUP and SIGPIPE and no signal blocked,
/// whatever the test process inherited: a test run from the background of a non-interactive
/// shell inherits SIGINT and SIGQUIT ignored (POSIX), and a test that signals its child must
/// test the child, not the shell that started `cargo test`. On Linux the child is also killed
/// if the test process dies first (`PR_SET_PDEATHSIG`; it fires when the *thread* that
/// spawned the child ends, so a test waits for its child on the thread that started it, as
/// every test here does). A process the child starts is in its group: the deadlines kill it
/// too; a test interrupted from the terminal (Ctrl-C reaches the test's group, not its
/// children's) leaves them to the next run's deadline or to `kill`.
pub fn spawn(cmd: &mut Command) -> Running {
    let what = describe(cmd);
    let parent = std::process::id();
    cmd.stdin(Stdio::null()).process_group(0);
    // SAFETY: between fork and exec the closure calls only async-signal-safe functions
    // (signal(2), sigprocmask(2), prctl(2), getppid(2)) on memory of its own.
    unsafe {
        cmd.pre_exec(move || {
            for sig in [
                libc::SIGINT,
                libc::SIGQUIT,
                libc::SIGTERM,
                libc::SIGHUP,
                libc::SIGPIPE,
            ] {
                if libc::signal(sig, libc::SIG_DFL) == libc::SIG_ERR {
                    return Err(std::io::Error::last_os_error());
                }
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            if libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            #[cfg(target_os = "linux")]
            {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                // The parent may have died before the request took hold.
                if u32::try_from(libc::getppid()) != Ok(parent) {
                    libc::_exit(1);
                }
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    Running {
        child,
        what,
        reaped: false,
    }
}

impl Running {
    /// The child's exit status, waited for at most `limit`; past it the child's process group
    /// is killed and the test fails with a message naming the command and the time waited.
    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        match self.wait_for(limit, &|| None) {
            (Ok(()), _) => self.reap(),
            (Err(why), waited) => {
                self.kill_group();
                panic!(
                    "{}: {why} after {:.1} s (limit {:.1} s); its process group was killed",
                    self.what,
                    waited.as_secs_f64(),
                    limit.as_secs_f64()
                )
            }
        }
    }

    /// Send the child (not its group) the signal `name`: `KILL`, `TERM`, `INT`, `QUIT` or `HUP`.
    pub fn signal(&self, name: &str) {
        assert!(
            !self.reaped,
            "signal {name} to {} after it was reaped",
            self.what
        );
        let sig = match name {
            "KILL" => libc::SIGKILL,
            "TERM" => libc::SIGTERM,
            "INT" => libc::SIGINT,
            "QUIT" => libc::SIGQUIT,
            "HUP" => libc::SIGHUP,
            _ => panic!("no signal SIG{name} in the test kit"),
        };
        // SAFETY: kill(2) on the pid of a child not reaped yet (a zombie holds its pid).
        let r = unsafe { libc::kill(self.pid(), sig) };
        assert_eq!(
            r,
            0,
            "kill -{name} {}: {}",
            self.what,
            std::io::Error::last_os_error()
        );
    }

    fn pid(&self) -> libc::pid_t {
        libc::pid_t::try_from(self.child.id()).unwrap_or_else(|e| panic!("pid: {e}"))
    }

    /// Kill the child's process group (SIGKILL: a child that ignores SIGTERM dies too) and reap
    /// the child. Only before the child is reaped: until then its pid, the group's id, cannot
    /// be anyone else's.
    pub fn kill_group(&mut self) {
        if !self.reaped {
            // SAFETY: kill(2) with a negative pid signals the process group `spawn` created
            // for this child, whose leader (the child, perhaps a zombie) is not reaped.
            unsafe {
                libc::kill(-self.pid(), libc::SIGKILL);
            }
            self.reap();
        }
    }

    /// Reap the child and return its status.
    fn reap(&mut self) -> ExitStatus {
        let status = self
            .child
            .wait()
            .unwrap_or_else(|e| panic!("cannot wait for {}: {e}", self.what));
        self.reaped = true;
        status
    }

    /// Wait for the child's exit until `limit` without reaping it (`waitid` with `WNOWAIT`,
    /// so its process group stays its own), giving up early when `flood` names a stream past
    /// [`OUTPUT_CAP`]. Polls every 1 ms for the first 50 ms (most commands of the suite end
    /// there), then every 10 ms. Returns `Ok` on exit or why it gave up, and the time waited.
    fn wait_for(
        &mut self,
        limit: Duration,
        flood: &dyn Fn() -> Option<&'static str>,
    ) -> (Result<(), String>, Duration) {
        let start = Instant::now();
        loop {
            // SAFETY: waitid(2) on this child's pid, into a zeroed siginfo_t of our own.
            let (r, pid) = unsafe {
                let mut info: libc::siginfo_t = std::mem::zeroed();
                let r = libc::waitid(
                    libc::P_PID,
                    self.child.id(),
                    &mut info,
                    libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
                );
                (r, info.si_pid())
            };
            if r != 0 {
                let e = std::io::Error::last_os_error();
                return (Err(format!("cannot wait: {e}")), start.elapsed());
            }
            if pid != 0 {
                return (Ok(()), start.elapsed());
            }
            let waited = start.elapsed();
            if let Some(name) = flood() {
                let why = format!("printed more than {} MiB on {name}", OUTPUT_CAP >> 20);
                return (Err(why), waited);
            }
            if waited >= limit {
                return (Err("still running".into()), waited);
            }
            let step = if waited < Duration::from_millis(50) {
                1
            } else {
                10
            };
            std::thread::sleep(Duration::from_millis(step).min(limit - waited));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill_group();
    }
}

/// A thread reading one of a child's streams into a buffer, up to [`OUTPUT_CAP`] (it drains
/// past it, so the child never blocks on a full pipe, but keeps nothing more).
struct Capture {
    name: &'static str,
    text: Arc<Mutex<Vec<u8>>>,
    flood: Arc<AtomicBool>,
    done: mpsc::Receiver<()>,
    ended: std::cell::Cell<bool>,
}

fn capture(mut stream: impl Read + Send + 'static, name: &'static str) -> Capture {
    let text = Arc::new(Mutex::new(Vec::new()));
    let flood = Arc::new(AtomicBool::new(false));
    let (tx, done) = mpsc::channel();
    let (t, f) = (Arc::clone(&text), Arc::clone(&flood));
    std::thread::spawn(move || {
        let mut buf = [0u8; 64 << 10];
        while let Ok(n @ 1..) = stream.read(&mut buf) {
            let mut t = t.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if f.load(Ordering::SeqCst) || t.len() + n > OUTPUT_CAP {
                f.store(true, Ordering::SeqCst);
            } else {
                t.extend_from_slice(&buf[..n]);
            }
        }
        let _ = tx.send(());
    });
    Capture {
        name,
        text,
        flood,
        done,
        ended: std::cell::Cell::new(false),
    }
}

impl Capture {
    fn flooded(&self) -> bool {
        self.flood.load(Ordering::SeqCst)
    }

    /// Whether the stream has ended, waiting for it until `deadline`.
    fn ended_by(&self, deadline: Instant) -> bool {
        if !self.ended.get() {
            let left = deadline.saturating_duration_since(Instant::now());
            self.ended.set(self.done.recv_timeout(left).is_ok());
        }
        self.ended.get()
    }

    /// What was read (lossy UTF-8), once the stream ended or `deadline` passed.
    fn text(&self, deadline: Instant) -> String {
        self.ended_by(deadline);
        let t = self
            .text
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        String::from_utf8_lossy(&t).into_owned()
    }
}

/// The last 40 lines of `text` (what a failure message shows of a child's output), from its
/// last 16 KiB at most: a flood is 64 MiB of lines.
fn tail(text: &str) -> String {
    let mut from = text.len().saturating_sub(16 << 10);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    let lines: Vec<&str> = text[from..].lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// `program arg …` in the working directory, for messages.
pub fn describe(cmd: &Command) -> String {
    let mut s = format!("`{}", cmd.get_program().to_string_lossy());
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s.push('`');
    if let Some(d) = cmd.get_current_dir() {
        s.push_str(&format!(" (in {})", d.display()));
    }
    s
}

/// `bin args` in `dir`, without any `PERFCAST_*` variable of the test's own environment (the
/// configuration loader reads those as config keys, so a developer's shell must not change
/// what a test sees).
pub fn command(bin: impl AsRef<OsStr>, dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin);
    cmd.current_dir(dir).args(args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PERFCAST_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message of the panic `f` raises.
    fn panic_of(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
        let e = std::panic::catch_unwind(f).expect_err("expected a failure");
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    }

    /// The processes whose command line contains `marker` (Linux: from /proc).
    #[cfg(target_os = "linux")]
    fn processes_with(marker: &str) -> Vec<String> {
        let me = std::process::id().to_string();
        std::fs::read_dir("/proc")
            .map(|d| {
                d.filter_map(|e| {
                    let e = e.ok()?;
                    let pid = e.file_name().to_str()?.to_string();
                    pid.parse::<u32>().ok().filter(|_| pid != me)?;
                    let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
                    let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
                    cmd.contains(marker).then(|| format!("{pid}: {cmd}"))
                })
                .collect()
            })
            .unwrap_or_default()
    }

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn a_child_is_run_to_its_end_with_what_it_printed() {
        let o = output(&mut sh("echo out; echo err >&2; exit 3"));
        assert_eq!(
            (o.code, o.stdout.as_str(), o.stderr.as_str()),
            (3, "out\n", "err\n")
        );
        let m = panic_of(|| run(&mut sh("echo why >&2; exit 4")));
        assert!(
            m.contains("`sh -c echo why >&2; exit 4` failed (4)") && m.contains("why"),
            "{m}"
        );
    }

    /// A child that sleeps for ever, and one that also ignores SIGTERM and has started a child
    /// of its own, are killed at the deadline, with everything they started, and reported.
    #[test]
    fn a_hung_child_is_killed_at_its_deadline_and_reported() {
        for (marker, script) in [
            ("1001.25", "echo started; exec sleep 1001.25"),
            (
                "1001.5",
                "trap '' TERM; echo started; sleep 1001.5 & sleep 1001.5; wait",
            ),
        ] {
            let start = Instant::now();
            let m = panic_of(|| {
                output_within(&mut sh(script), Duration::from_millis(500));
            });
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{:?}",
                start.elapsed()
            );
            for want in ["`sh -c ", marker, "still running after 0.5 s", "started"] {
                assert!(m.contains(want), "{want:?} not in: {m}");
            }
            #[cfg(target_os = "linux")]
            {
                // Killed processes are reaped by their parent (or init) within moments.
                let deadline = Instant::now() + Duration::from_secs(5);
                while !processes_with(marker).is_empty() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
                assert_eq!(processes_with(marker), Vec::<String>::new());
            }
        }
    }

    /// A child that exits but leaves a process of its group holding its output: the group is
    /// killed (the child is reaped only after, so the group is still its own) and reported.
    #[test]
    fn a_child_that_leaves_its_output_held_is_reported() {
        let m = panic_of(|| {
            output_within(&mut sh("sleep 1003.5 & echo bye"), Duration::from_secs(1));
        });
        assert!(
            m.contains("exited but a process it left behind held its output open"),
            "{m}"
        );
        assert!(m.contains("bye"), "{m}");
        #[cfg(target_os = "linux")]
        {
            let deadline = Instant::now() + Duration::from_secs(5);
            while !processes_with("1003.5").is_empty() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            assert_eq!(processes_with("1003.5"), Vec::<String>::new());
        }
    }

    #[test]
    fn a_flooding_child_is_killed_and_reported() {
        let start = Instant::now();
        let m = panic_of(|| {
            output_within(&mut Command::new("yes"), Duration::from_secs(120));
        });
        assert!(
            m.contains("`yes`: printed more than 64 MiB on stdout"),
            "{m}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{:?}",
            start.elapsed()
        );
    }

    /// A test started from the background of a non-interactive shell inherits SIGINT and
    /// SIGQUIT ignored; its children start with the default actions all the same.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_child_starts_with_default_signal_actions_whatever_the_test_inherited() {
        let mask = |line: &str| u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16);
        // SAFETY: signal(2) swaps this process's dispositions of SIGINT and SIGQUIT for a
        // moment and puts them back; no other test of this binary relies on them.
        let before =
            unsafe { [libc::SIGINT, libc::SIGQUIT].map(|s| (s, libc::signal(s, libc::SIG_IGN))) };
        let o = output(&mut sh("grep -E '^Sig(Ign|Blk):' /proc/self/status"));
        // SAFETY: as above, restoring the dispositions saved.
        unsafe {
            for (s, h) in before {
                libc::signal(s, h);
            }
        }
        let bits = |n: i32| 1u64 << (n - 1);
        let watched = [
            libc::SIGINT,
            libc::SIGQUIT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGPIPE,
        ]
        .map(bits)
        .iter()
        .fold(0, |a, b| a | b);
        let lines: Vec<&str> = o.stdout.lines().collect();
        assert_eq!(lines.len(), 2, "{}", o.stdout);
        for line in lines {
            assert_eq!(mask(line).unwrap() & watched, 0, "{line}");
        }
    }

    /// A child the test lets go of unwaited (an assertion failed first) dies with its group.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_child_let_go_of_is_killed() {
        let running = spawn(&mut sh("exec sleep 1002.25"));
        let proc_dir = PathBuf::from(format!("/proc/{}", running.pid()));
        assert!(proc_dir.exists());
        drop(running);
        // Killed and reaped: its /proc entry is gone.
        assert!(!proc_dir.exists(), "{} still there", proc_dir.display());
    }
}
