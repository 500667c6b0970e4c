//! The `IND2QueuePair` face of a software provider's queue pair: the SPI's calls mapped onto
//! the posts a provider writes ([`Posts`]), so that a provider implements its posts and not
//! the forwarding of each SPI call to them.
//!
//! `Send`, `Read` and `Write` share one initiator post ([`Posts::post`]), told apart by a
//! [`Request`]; the remote token is passed as the application gave it (in network byte order,
//! `GetRemoteToken`), each provider converting it to its own descriptor.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::traits::{self, MemoryRegion, MemoryWindow};
use crate::{fail, OpFlags, Result, Sge, Status};

/// What an initiator post asks of the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// `Send`: a message into the peer's next Receive.
    Send,
    /// `Read` from the peer's `remote_address` under `remote_token`.
    Read {
        /// Where the data is read from in the peer's memory.
        remote_address: u64,
        /// The peer's token, as `GetRemoteToken` gave it.
        remote_token: u32,
    },
    /// `Write` to the peer's `remote_address` under `remote_token`.
    Write {
        /// Where the data is written in the peer's memory.
        remote_address: u64,
        /// The peer's token, as `GetRemoteToken` gave it.
        remote_token: u32,
    },
}

/// The posts of a software provider's queue pair. Every type that implements it is an
/// [`traits::QueuePair`] whose calls go to these methods.
pub trait Posts: Send + Sync + fmt::Debug + 'static {
    /// `Flush`: every outstanding request completes with `ND_CANCELED`.
    fn flush(&self) -> Result<()>;

    /// `Send`, `Read` or `Write`, as `request` says.
    ///
    /// # Safety
    /// As [`traits::QueuePair::send`], [`traits::QueuePair::read`] and
    /// [`traits::QueuePair::write`], for the request of that name.
    unsafe fn post(
        &self,
        context: u64,
        sge: &[Sge],
        flags: OpFlags,
        request: Request,
    ) -> Result<()>;

    /// `Receive`.
    ///
    /// # Safety
    /// As [`traits::QueuePair::receive`].
    unsafe fn post_receive(&self, context: u64, sge: &[Sge]) -> Result<()>;

    /// ND v1's `SendAndInvalidate` ([`traits::QueuePair::send_and_invalidate`]); a provider
    /// that does not send Send with Invalidate keeps this default, `ND_NOT_SUPPORTED`.
    ///
    /// # Safety
    /// As [`traits::QueuePair::send`].
    unsafe fn post_send_and_invalidate(
        &self,
        context: u64,
        sge: &[Sge],
        remote_token: u32,
        flags: OpFlags,
    ) -> Result<()> {
        let _ = (context, sge, remote_token, flags);
        fail(Status::NOT_SUPPORTED)
    }

    /// `Bind` a window over `len` bytes at `buffer` inside `region`.
    fn post_bind(
        &self,
        context: u64,
        region: &Arc<dyn MemoryRegion>,
        window: &Arc<dyn MemoryWindow>,
        buffer: *const u8,
        len: usize,
        flags: OpFlags,
    ) -> Result<()>;

    /// `Invalidate` a window.
    fn post_invalidate(
        &self,
        context: u64,
        window: &Arc<dyn MemoryWindow>,
        flags: OpFlags,
    ) -> Result<()>;
}

impl<Q: Posts> traits::QueuePair for Q {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn flush(&self) -> Result<()> {
        Posts::flush(self)
    }

    #[inline]
    unsafe fn send(&self, context: u64, sge: &[Sge], flags: OpFlags) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.post(context, sge, flags, Request::Send) }
    }

    #[inline]
    unsafe fn receive(&self, context: u64, sge: &[Sge]) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.post_receive(context, sge) }
    }

    unsafe fn send_and_invalidate(
        &self,
        context: u64,
        sge: &[Sge],
        remote_token: u32,
        flags: OpFlags,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.post_send_and_invalidate(context, sge, remote_token, flags) }
    }

    fn bind(
        &self,
        context: u64,
        region: &Arc<dyn MemoryRegion>,
        window: &Arc<dyn MemoryWindow>,
        buffer: *const u8,
        len: usize,
        flags: OpFlags,
    ) -> Result<()> {
        self.post_bind(context, region, window, buffer, len, flags)
    }

    fn invalidate(
        &self,
        context: u64,
        window: &Arc<dyn MemoryWindow>,
        flags: OpFlags,
    ) -> Result<()> {
        self.post_invalidate(context, window, flags)
    }

    #[inline]
    unsafe fn read(
        &self,
        context: u64,
        sge: &[Sge],
        remote_address: u64,
        remote_token: u32,
        flags: OpFlags,
    ) -> Result<()> {
        let request = Request::Read {
            remote_address,
            remote_token,
        };
        // SAFETY: forwarded contract.
        unsafe { self.post(context, sge, flags, request) }
    }

    #[inline]
    unsafe fn write(
        &self,
        context: u64,
        sge: &[Sge],
        remote_address: u64,
        remote_token: u32,
        flags: OpFlags,
    ) -> Result<()> {
        let request = Request::Write {
            remote_address,
            remote_token,
        };
        // SAFETY: forwarded contract.
        unsafe { self.post(context, sge, flags, request) }
    }
}

/// The queue pair's checks of a `Bind` or `Invalidate`, after the kit's checks of its objects
/// ([`crate::kit::mw`]) and under the queue pair's lock, in this order: `ND_CONNECTION_INVALID`
/// for a queue pair that was never connected (`idle`), then `ND_NO_MORE_ENTRIES` when its
/// initiator queue is `full`.
#[inline]
pub fn check_window_post(idle: bool, full: bool) -> Result<()> {
    if idle {
        return fail(Status::CONNECTION_INVALID);
    }
    if full {
        return fail(Status::NO_MORE_ENTRIES);
    }
    Ok(())
}
