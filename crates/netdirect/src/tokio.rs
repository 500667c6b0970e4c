//! Running netdirect under tokio (feature `tokio`).
//!
//! ND requests ([`Overlapped`](crate::Overlapped)) and completions
//! ([`CompletionQueue::next_results`](crate::CompletionQueue::next_results)) are futures, but
//! nothing runs in the background: some task must drive the adapter's I/O while they sleep.
//! [`AdapterDriver`] is that task: it puts the adapter's descriptor ([`Adapter::fd`]) on
//! tokio's reactor and calls [`Adapter::progress`] whenever it is readable.
//!
//! ```
//! use netdirect::{tokio::AdapterDriver, Provider};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let rt = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
//! rt.block_on(async {
//!     let adapter = Provider::open("tcp")?.open_adapter_for("127.0.0.1:0".parse()?)?;
//!     let driver = AdapterDriver::spawn(&adapter)?; // one per adapter
//!
//!     // Now any task may await requests of this adapter.
//!     let listener = adapter.create_listener()?;
//!     listener.bind("127.0.0.1:0".parse()?)?;
//!     listener.listen(0)?;
//!     let request = listener.get_connection_request(&adapter.create_connector()?)?;
//!     listener.cancel_overlapped_requests()?;
//!     assert_eq!(request.await.unwrap_err().status(), netdirect::Status::CANCELED);
//!
//!     driver.abort(); // or let the runtime end it
//!     Ok(())
//! })
//! # }
//! ```

use std::fmt;
use std::io;

use ::tokio::io::unix::AsyncFd;
use ::tokio::io::Interest;
use ::tokio::task::JoinHandle;

use crate::Adapter;

/// Drives an adapter's I/O from tokio's reactor, so that tasks can `.await` its requests and
/// completions: one per adapter, in the runtime whose tasks await them.
///
/// It owns a clone of the adapter (keeping it open) and its descriptor's registration with the
/// reactor; [`AdapterDriver::run`] (or [`AdapterDriver::spawn`]) is the task that, each time the
/// descriptor is readable, calls [`Adapter::progress`], which completes the requests and
/// notifications whose events arrived and wakes the tasks awaiting them.
pub struct AdapterDriver {
    fd: AsyncFd<Adapter>,
}

impl fmt::Debug for AdapterDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdapterDriver")
            .field("adapter", self.fd.get_ref())
            .finish()
    }
}

impl AdapterDriver {
    /// Register `adapter`'s descriptor with the current runtime's reactor.
    ///
    /// # Errors
    ///
    /// What the reactor's registration reports (out of memory, descriptor limits).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, or in one built without I/O (`enable_io`), as tokio's
    /// `AsyncFd` does.
    pub fn new(adapter: Adapter) -> io::Result<Self> {
        // SAFETY: `AsyncFd` requires the descriptor to stay open, and `as_raw_fd` to return
        // the same one, for as long as it owns the value. It owns an `Adapter`, which keeps
        // its descriptor open and unchanged for its whole life (`Adapter::fd`).
        let fd = unsafe { AsyncFd::register_with_interest(adapter, Interest::READABLE) }
            .map_err(io::Error::from)?;
        Ok(Self { fd })
    }

    /// Start a task on the current runtime that drives `adapter` until the task is aborted
    /// (or the runtime shuts down): [`AdapterDriver::new`], then [`AdapterDriver::run`].
    ///
    /// The task holds a clone of the adapter; abort the returned handle to let it go.
    ///
    /// # Errors and panics
    ///
    /// As [`AdapterDriver::new`].
    pub fn spawn(adapter: &Adapter) -> io::Result<JoinHandle<io::Result<()>>> {
        let driver = Self::new(adapter.clone())?;
        Ok(::tokio::spawn(driver.run()))
    }

    /// The adapter driven.
    pub fn adapter(&self) -> &Adapter {
        self.fd.get_ref()
    }

    /// Wait until the descriptor is readable, then drive the adapter once.
    ///
    /// # Errors
    ///
    /// What the reactor reports for the descriptor (it does not fail in normal operation).
    pub async fn turn(&self) -> io::Result<()> {
        let mut ready = self.fd.readable().await?;
        self.fd.get_ref().progress();
        // `progress` handled everything the descriptor reported (the providers read their
        // sockets until `EAGAIN`); whatever arrives from now on makes it readable again.
        ready.clear_ready();
        Ok(())
    }

    /// Drive the adapter forever ([`AdapterDriver::turn`] in a loop); returns only on a reactor
    /// error. Spawn it as a task (it is `Send`), or use [`AdapterDriver::spawn`].
    pub async fn run(self) -> io::Result<()> {
        loop {
            self.turn().await?;
        }
    }
}
