//! Sleeping inside `recv(2)`, and the signal that ends such a sleep early.
//!
//! A blocking waiter normally sleeps in `poll(2)` on the wake eventfd and the data sockets, then
//! reads what woke it: two system calls per wake-up where a blocking `recv` needs one. On this
//! 2-vCPU VM the extra call is about half of what separates `nd pingpong --blocking` from a
//! raw TCP ping-pong (docs/ARCHITECTURE.md, "What a blocking message costs"). So when the
//! engine's leader has exactly one thing to wait for, one data socket's next bytes, it sleeps
//! in a blocking `recv` on that socket instead ([`Sleeper::recv`]).
//!
//! Everything else that must wake the leader (another thread's completion, a cancel, a new
//! socket or deadline to watch) then cannot use the eventfd. It uses a signal instead: a
//! real-time signal, sent to the sleeping thread with `tgkill`, whose handler makes the socket
//! non-blocking. Whether the signal lands while the thread is inside `recv` (which then
//! returns `EINTR`, or restarts and finds the socket non-blocking) or just before it enters
//! `recv` (which then returns `EAGAIN` at once), the sleep ends; no wake-up is lost in the gap
//! between the sleeper's last check and its system call, which a flag alone could not close.
//! The sleeper restores blocking mode afterwards.
//!
//! The mode is used only if it is safe for the process:
//! * the signal (`ND_TCP_WAKE_SIGNAL`, default `SIGRTMAX - 1`; 0 turns the mode off) had no
//!   handler when the provider first looked: an application that uses it keeps it;
//! * the handler is installed with `SA_RESTART`, so a stray signal (one sent just as the
//!   sleeper woke on its own) interrupts none of the application's restartable calls;
//! * a thread that blocks the signal never sleeps in `recv` (its mask is checked once per
//!   thread), and a socket receive timeout ([`BACKSTOP`]) bounds the sleep in case the mask
//!   changes later: a thread whose wake-up was found pending after such a timeout goes back
//!   to `poll(2)` for good.
//!
//! This module holds the provider's only signal handling, and its `unsafe`.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use rustix::fs::OFlags;
use rustix::io::Errno;
use socket2::Socket;

/// The longest a sleep in `recv` lasts without data or a signal: the leader then looks again
/// whether it was woken (a signal that never arrived, say because the thread blocked it).
pub(crate) const BACKSTOP: Duration = Duration::from_secs(1);

/// The signal the mode uses, if it is on and ours (installed once per process).
pub(crate) fn signal() -> Option<i32> {
    static SIGNAL: OnceLock<Option<i32>> = OnceLock::new();
    *SIGNAL.get_or_init(|| {
        let default = libc::SIGRTMAX() - 1;
        let sig = netdirect_spi::kit::config::var::<i32>("ND_TCP_WAKE_SIGNAL", default);
        if sig < libc::SIGRTMIN() || sig > libc::SIGRTMAX() {
            return None; // 0 (off) or not a real-time signal
        }
        install(sig).then_some(sig)
    })
}

/// Install [`on_signal`] for `sig` unless something else handles (or ignores) it.
fn install(sig: i32) -> bool {
    // SAFETY: `sigaction` is given valid pointers to initialized structures (all-zero is a
    // valid `sigaction`: no handler, no flags, an empty mask). The handler is
    // async-signal-safe (see `on_signal`).
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
            return false;
        }
        let ours = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        if old.sa_sigaction == ours {
            return true;
        }
        if old.sa_sigaction != libc::SIG_DFL {
            tracing::debug!(
                sig,
                "ND_TCP_WAKE_SIGNAL has a handler: blocking waits use poll"
            );
            return false;
        }
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = ours;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut()) == 0
    }
}

/// What the signal handler needs to know about its thread's sleep. Atomics, because the
/// handler interrupts the thread anywhere (they are plain loads and stores on x86-64).
struct Asleep {
    /// The socket the thread sleeps (or is about to sleep) in `recv` on; -1 outside a sleep.
    fd: AtomicI32,
    /// The handler made `fd` non-blocking during this sleep.
    fired: AtomicBool,
    /// 0 unknown, 1 the signal reaches this thread, 2 it does not (blocked, or a wake-up was
    /// once lost): sleep in `poll` instead.
    usable: AtomicI32,
    /// The thread's kernel id (0 until first asked: `gettid` is a system call).
    tid: AtomicI32,
}

thread_local! {
    static ASLEEP: Asleep = const {
        Asleep {
            fd: AtomicI32::new(-1),
            fired: AtomicBool::new(false),
            usable: AtomicI32::new(0),
            tid: AtomicI32::new(0),
        }
    };
}

/// The handler: end the thread's sleep in `recv`, if it is in (or entering) one.
extern "C" fn on_signal(_: libc::c_int) {
    let _ = ASLEEP.try_with(|a| {
        let fd = a.fd.load(Ordering::Relaxed);
        if fd < 0 {
            return; // a stray signal: the sleep it was meant to end is over
        }
        // SAFETY: `fd` is the socket of the sleep in progress on this very thread, which holds
        // a reference to it until it has cleared `fd` (`Sleeper::recv`), so it is open.
        let sock = unsafe { BorrowedFd::borrow_raw(fd) };
        // fcntl is async-signal-safe, and rustix's raw system calls leave errno alone.
        if let Ok(fl) = rustix::fs::fcntl_getfl(sock) {
            let _ = rustix::fs::fcntl_setfl(sock, fl | OFlags::NONBLOCK);
        }
        a.fired.store(true, Ordering::Relaxed);
    });
}

/// Whether the calling thread can be woken by `sig` (not blocked in its mask). Asked once per
/// thread.
fn reaches_this_thread(sig: i32) -> bool {
    ASLEEP.with(|a| match a.usable.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            // SAFETY: `pthread_sigmask` with no new set only reads the mask into `set`.
            let open = unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set) == 0
                    && libc::sigismember(&set, sig) == 0
            };
            a.usable.store(if open { 1 } else { 2 }, Ordering::Relaxed);
            open
        }
    })
}

/// How a [`Sleeper::recv`] ended.
#[derive(Debug)]
pub(crate) enum Woke {
    /// Bytes arrived (`Ok(0)`: the peer's end of stream) or the socket failed.
    Read(Result<usize, Errno>),
    /// Woken with nothing read.
    Early,
    /// Neither bytes nor a wake-up within [`BACKSTOP`].
    TimedOut,
}

/// The engine's side of the handshake: who sleeps in `recv` and whether a wake-up is owed.
#[derive(Debug, Default)]
pub(crate) struct Sleeper {
    /// The kernel thread id of the leader asleep in `recv`; 0 if none.
    tid: AtomicI32,
    /// A wake-up was asked for since the last sleep in `recv` began.
    pending: AtomicBool,
}

impl Sleeper {
    /// Whether the calling thread may sleep in [`Sleeper::recv`]: the mode is on and its
    /// signal reaches this thread.
    pub(crate) fn available(&self) -> bool {
        signal().is_some_and(reaches_this_thread)
    }

    /// Make `sock` (a data socket, every other read and write of which passes `MSG_DONTWAIT`)
    /// ready for [`Sleeper::recv`]: blocking, with the backstop receive timeout.
    pub(crate) fn prepare(sock: &Socket) {
        if signal().is_some() {
            let _ = sock.set_read_timeout(Some(BACKSTOP));
            // One `ioctl` (socket2's setter reads and writes the flags: two `fcntl`s).
            let _ = rustix::io::ioctl_fionbio(sock, false);
        }
    }

    /// Sleep in a blocking `recv` on `sock` into `buf` until bytes arrive or [`Sleeper::wake`]
    /// is called (a call made before this one began also counts). Only the engine's leader
    /// calls it, after [`Sleeper::available`].
    pub(crate) fn recv(&self, sock: &Socket, buf: &mut [u8]) -> Woke {
        let fd = sock.as_raw_fd();
        let tid = ASLEEP.with(|a| {
            a.fired.store(false, Ordering::Relaxed);
            a.fd.store(fd, Ordering::Relaxed);
            match a.tid.load(Ordering::Relaxed) {
                0 => {
                    let tid = rustix::thread::gettid().as_raw_nonzero().get();
                    a.tid.store(tid, Ordering::Relaxed);
                    tid
                }
                tid => tid,
            }
        });
        // The handler (on this thread) must see `fd` before any waker can find `tid`.
        // A Dekker pair with `wake`: either it sees our `tid` and signals, or we see its
        // `pending` here and do not sleep.
        self.tid.store(tid, Ordering::SeqCst);
        let got = if self.pending.swap(false, Ordering::SeqCst) {
            None
        } else {
            Some(rustix::net::recv(
                sock,
                buf,
                rustix::net::RecvFlags::empty(),
            ))
        };
        self.tid.store(0, Ordering::SeqCst);
        // Whatever asked for a wake-up until now is answered by this return (the leader looks
        // at everything again before it sleeps next); a later request finds `tid` 0 and leaves
        // `pending` for the next sleep.
        let asked = self.pending.swap(false, Ordering::SeqCst);
        ASLEEP.with(|a| {
            a.fd.store(-1, Ordering::Relaxed);
            compiler_fence(Ordering::SeqCst);
            let fired = a.fired.load(Ordering::Relaxed);
            if fired {
                let _ = rustix::io::ioctl_fionbio(sock, false);
            }
            match got {
                None | Some(Err(Errno::INTR)) => Woke::Early,
                // The handler made the socket non-blocking just before the call.
                Some(Err(Errno::AGAIN)) if fired => Woke::Early,
                Some(Err(Errno::AGAIN)) => {
                    if asked {
                        // The backstop ended the sleep, not the signal a waker sent: it does
                        // not reach this thread (its mask changed). Sleep in `poll` from now on.
                        a.usable.store(2, Ordering::Relaxed);
                    }
                    Woke::TimedOut
                }
                Some(r) => Woke::Read(r.map(|(n, _)| n)),
            }
        })
    }

    /// End a sleep in [`Sleeper::recv`], or the next one to begin. Callable from any thread.
    pub(crate) fn wake(&self) {
        self.pending.store(true, Ordering::SeqCst);
        let tid = self.tid.load(Ordering::SeqCst);
        if tid != 0 {
            if let Some(sig) = signal() {
                // SAFETY: a plain system call; a thread that has ended (its id possibly reused
                // by a new thread of ours) only gets a signal our handler ignores.
                unsafe {
                    libc::syscall(
                        libc::SYS_tgkill,
                        rustix::process::getpid().as_raw_nonzero().get(),
                        tid,
                        sig,
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    use std::sync::{Arc, Barrier};

    use super::*;

    /// A connected pair: the sleeper's end prepared as a data socket, and the peer's.
    fn pair() -> (Socket, UnixStream) {
        let (a, b) = UnixStream::pair().expect("socketpair");
        let a = Socket::from(std::os::fd::OwnedFd::from(a));
        Sleeper::prepare(&a);
        (a, b)
    }

    fn nonblocking(s: &Socket) -> bool {
        rustix::fs::fcntl_getfl(s)
            .expect("F_GETFL")
            .contains(OFlags::NONBLOCK)
    }

    #[test]
    fn the_mode_is_on_by_default_and_reaches_test_threads() {
        assert!(signal().is_some(), "ND_TCP_WAKE_SIGNAL's default is free");
        assert!(Sleeper::default().available());
    }

    #[test]
    fn bytes_end_the_sleep() {
        let (a, mut b) = pair();
        let s = Sleeper::default();
        b.write_all(b"hello").expect("write");
        let mut buf = [0u8; 16];
        assert!(matches!(s.recv(&a, &mut buf), Woke::Read(Ok(5))));
        assert_eq!(&buf[..5], b"hello");
        drop(b);
        assert!(
            matches!(s.recv(&a, &mut buf), Woke::Read(Ok(0))),
            "end of stream"
        );
    }

    #[test]
    fn a_wake_before_the_sleep_is_not_lost() {
        let (a, _b) = pair();
        let s = Sleeper::default();
        s.wake();
        let mut buf = [0u8; 16];
        assert!(matches!(s.recv(&a, &mut buf), Woke::Early));
        assert!(!nonblocking(&a));
    }

    /// A wake from another thread ends a sleep in progress, however the signal falls relative
    /// to the system call (before it, inside it, after the sleep ended): each of many rounds
    /// ends woken, and the socket is blocking again after each. A lost wake-up would leave a
    /// round asleep until the backstop, which reports `TimedOut`.
    #[test]
    fn a_wake_from_another_thread_always_ends_the_sleep() {
        let (a, _b) = pair();
        let s = Arc::new(Sleeper::default());
        let rounds = 2_000;
        let go = Arc::new(Barrier::new(2));
        let waker = {
            let (s, go) = (s.clone(), go.clone());
            std::thread::spawn(move || {
                for i in 0..rounds {
                    go.wait();
                    // Vary where the signal falls: right away, or after a short spin.
                    for _ in 0..(i % 7) * 50 {
                        std::hint::spin_loop();
                    }
                    s.wake();
                    go.wait();
                }
            })
        };
        let mut buf = [0u8; 16];
        for i in 0..rounds {
            go.wait();
            // The wake of this round may come before, during or after the call.
            let woke = s.recv(&a, &mut buf);
            assert!(matches!(woke, Woke::Early), "round {i}: {woke:?}");
            go.wait();
            assert!(!nonblocking(&a), "blocking again after the wake");
        }
        waker.join().expect("waker");
    }

    /// A thread that blocks the signal is never put to sleep in `recv`.
    #[test]
    fn a_thread_that_blocks_the_signal_sleeps_in_poll() {
        let sig = signal().expect("on");
        std::thread::spawn(move || {
            // SAFETY: blocks one signal for this thread only.
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, sig);
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            }
            assert!(!Sleeper::default().available());
        })
        .join()
        .expect("thread");
    }
}
