//! One line on stderr when perfcast dies of a signal with library code in its process.
//!
//! A library loaded in process that crashes takes perfcast down with it (what `--isolate` is
//! for); without this the shell only says "Segmentation fault" (exit 139). Before the first
//! in-process library is opened, [`loading`] installs a handler for the signals a crash
//! raises (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) that writes one `error:` line naming the
//! libraries in the process and the way out, then hands the signal on: to the handler that
//! was there before (Rust's stack-overflow report), else the default action, so the exit
//! status is still the signal's. The handler only reads a message built beforehand and calls
//! `write`, `sigaction` and `raise` (async-signal-safe).
//!
//! The isolated plugin host ([`crate::isolate`]) calls [`quiet`] first: its crash is reported
//! by perfcast as an error naming the call.

use std::path::Path;

/// Note that the library at `path` is about to be opened in this process.
pub(crate) fn loading(path: &Path) {
    #[cfg(target_os = "linux")]
    imp::loading(path);
    #[cfg(not(target_os = "linux"))]
    let _ = path;
}

/// This process is a plugin host: no note (its parent reports the crash).
pub(crate) fn quiet() {
    #[cfg(target_os = "linux")]
    imp::QUIET.store(true, std::sync::atomic::Ordering::SeqCst);
}

#[cfg(target_os = "linux")]
mod imp {
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
    use std::sync::{Mutex, Once};

    pub(super) static QUIET: AtomicBool = AtomicBool::new(false);
    /// The whole message after the signal's name, published once built (leaked: a handful
    /// of libraries per process).
    static MESSAGE: AtomicPtr<&'static [u8]> = AtomicPtr::new(std::ptr::null_mut());
    static REPORTED: AtomicBool = AtomicBool::new(false);
    const SIGNALS: [(libc::c_int, &str); 5] = [
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGABRT, "SIGABRT"),
    ];
    /// The handlers in place before ours, by index in `SIGNALS`.
    static mut PREVIOUS: [Option<libc::sigaction>; 5] = [None; 5];

    pub(super) fn loading(path: &Path) {
        if QUIET.load(Ordering::SeqCst) {
            return;
        }
        static NAMES: Mutex<Vec<String>> = Mutex::new(Vec::new());
        let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
        let name = path.display().to_string();
        if names.contains(&name) {
            return;
        }
        names.push(name);
        let text = format!(
            " with plugin library code in its process ({}): a library loaded in process ends \
             perfcast when it crashes; load it isolated (`--isolate`, or `isolate = true` in its \
             `[[plugins]]` entry) to get an error naming the call instead\n",
            names.join(", ")
        );
        let bytes: &'static [u8] = Box::leak(text.into_bytes().into_boxed_slice());
        MESSAGE.store(Box::into_raw(Box::new(bytes)), Ordering::SeqCst);
        static INSTALL: Once = Once::new();
        INSTALL.call_once(install);
    }

    fn install() {
        for (i, (sig, _)) in SIGNALS.iter().enumerate() {
            // SAFETY: a zeroed sigaction is a valid value to fill in; `handler` has the
            // SA_SIGINFO signature; PREVIOUS is written here, once, before the handler can
            // read it (it is installed by the sigaction call that fills it).
            unsafe {
                let mut new: libc::sigaction = std::mem::zeroed();
                new.sa_sigaction = handler as *const () as usize;
                new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut new.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(*sig, &new, &mut old) == 0 {
                    *std::ptr::addr_of_mut!(PREVIOUS[i]) = Some(old);
                }
            }
        }
    }

    fn write_all(bytes: &[u8]) {
        let mut rest = bytes;
        while !rest.is_empty() {
            // SAFETY: write(2) on a valid buffer.
            let n = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
            if n <= 0 {
                return;
            }
            rest = &rest[n as usize..];
        }
    }

    extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        let i = SIGNALS.iter().position(|(s, _)| *s == sig);
        if !REPORTED.swap(true, Ordering::SeqCst) {
            let msg = MESSAGE.load(Ordering::SeqCst);
            if let (Some(i), false) = (i, msg.is_null()) {
                write_all(b"\nerror: perfcast was killed by ");
                write_all(SIGNALS[i].1.as_bytes());
                // SAFETY: MESSAGE only ever holds a leaked, never freed `&'static [u8]`.
                write_all(unsafe { *msg });
            }
        }
        // SAFETY: PREVIOUS was filled before this handler was installed; calling the previous
        // SA_SIGINFO handler with our arguments is what it expects; resetting to the default
        // action and raising the signal (blocked until we return) ends the process with it.
        unsafe {
            if let Some(Some(old)) = i.map(|i| *std::ptr::addr_of!(PREVIOUS[i])) {
                let f = old.sa_sigaction;
                if f != libc::SIG_DFL && f != libc::SIG_IGN {
                    if old.sa_flags & libc::SA_SIGINFO != 0 {
                        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                            std::mem::transmute(f);
                        f(sig, info, ctx);
                    } else {
                        let f: extern "C" fn(libc::c_int) = std::mem::transmute(f);
                        f(sig);
                    }
                }
            }
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
}
