//! A software provider's `IND2Listener` object (IND2Listener in Microsoft's NetworkDirect SPI reference, `docs/ND-RULES.md`
//! §2.11): the [`ListenerState`] under its lock, with the calls that need only the state. The
//! provider plugs in, through [`ListenerProvider`], what speaks its transport: Bind, Listen,
//! GetLocalAddress, accepting connections and refusing a request.

use std::any::Any;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::{check_connector, ListenerState, Transport};
use crate::kit::adapter::AdapterState;
use crate::kit::overlapped::Overlapped;
use crate::traits;
use crate::{Error, Result};

/// The parts of a listener that depend on the provider's transport. Each call returns the
/// statuses `IND2Listener` documents for the call of the same name; `l` is the listener, whose
/// state the provider locks with [`Listener::lock`].
pub trait ListenerProvider: Transport + Sized {
    /// The adapter state every object of the provider shares.
    type Adapter: AdapterState;

    /// `Bind` to a local address.
    fn bind(l: &Listener<Self>, addr: SocketAddr) -> Result<()>;
    /// `Listen`, with ND's `backlog` (0: no limit).
    fn listen(l: &Listener<Self>, backlog: u32) -> Result<()>;
    /// `GetLocalAddress`.
    fn get_local_address(l: &Listener<Self>) -> Result<SocketAddr>;
    /// Accept every connection pending on the listening socket and start its handshake; called
    /// when a `GetConnectionRequest` found no request waiting.
    fn accept_all(l: &Listener<Self>);
    /// `c` as a connector of this provider; `None` for another provider's.
    fn downcast_connector(c: &Arc<dyn traits::Connector>) -> Option<Arc<Self::Connector>>;
    /// Refuse a request the backlog has no room for: the connecting side sees
    /// `ND_CONNECTION_REFUSED`. Best effort.
    fn refuse(incoming: Self::Incoming);
    /// The listener is going away, its requests canceled: release what `Bind` claimed beyond
    /// the state's own sockets. Nothing by default.
    fn release(_state: &mut ListenerState<Self>) {}
}

/// A listener of provider `P`.
pub struct Listener<P: ListenerProvider> {
    me: Weak<Self>,
    adapter: Arc<P::Adapter>,
    inner: Mutex<ListenerState<P>>,
}

impl<P: ListenerProvider> fmt::Debug for Listener<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listener")
            .field("local", &self.lock().local)
            .finish()
    }
}

impl<P: ListenerProvider> Listener<P> {
    /// A fresh listener of `adapter`.
    pub fn new(adapter: Arc<P::Adapter>) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            adapter,
            inner: Mutex::new(ListenerState::new()),
        })
    }

    /// The listener's state. A panic while it was held leaves it as it was: every change to
    /// it is made whole before anything can panic.
    pub fn lock(&self) -> MutexGuard<'_, ListenerState<P>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A weak handle on this listener, for what must not keep it alive (engine registrations,
    /// handshakes in progress).
    pub fn me(&self) -> &Weak<Self> {
        &self.me
    }

    /// The adapter state.
    pub fn adapter(&self) -> &Arc<P::Adapter> {
        &self.adapter
    }

    /// The handshake `hs` finished with `incoming` (`None`: it failed): hand the request to
    /// the oldest waiting connector or queue it, refusing it when the backlog is full
    /// ([`ListenerState::deliver`]).
    pub fn deliver(&self, hs: &Arc<P::Handshake>, incoming: Option<P::Incoming>) {
        let mut g = self.lock();
        if let Some(inc) = g.deliver(hs, incoming) {
            P::refuse(inc);
        }
    }

    /// [`Listener::deliver`] for the handshake `of` (the handshake object calling back,
    /// found in the listener's list by address), if it is still in the list.
    pub fn finish_handshake(&self, of: &P::Handshake, incoming: Option<P::Incoming>) {
        let hs = self.lock().find_handshake(of);
        if let Some(hs) = hs {
            self.deliver(&hs, incoming);
        }
    }
}

impl<P: ListenerProvider> traits::Listener for Listener<P>
where
    Self: Send + Sync,
{
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn bind(&self, addr: SocketAddr) -> Result<()> {
        P::bind(self, addr)
    }

    fn listen(&self, backlog: u32) -> Result<()> {
        P::listen(self, backlog)
    }

    fn get_local_address(&self) -> Result<SocketAddr> {
        P::get_local_address(self)
    }

    fn get_connection_request(&self, connector: &Arc<dyn traits::Connector>) -> Result<Overlapped> {
        let conn = P::downcast_connector(connector).ok_or(Error::invalid_parameter(1))?;
        check_connector(&*conn)?;
        let mut g = self.lock();
        let (ov, wait) = g.get_connection_request(conn, self.adapter.driver())?;
        drop(g);
        if wait {
            // A request may already be sitting in the kernel's queue.
            P::accept_all(self);
        }
        Ok(ov)
    }

    fn cancel_overlapped_requests(&self) -> Result<()> {
        self.lock().cancel_overlapped_requests();
        Ok(())
    }
}

impl<P: ListenerProvider> Drop for Listener<P> {
    fn drop(&mut self) {
        let g = self.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        g.cancel_overlapped_requests();
        // Queued requests are dropped with their sockets: the connecting sides see end-of-file,
        // which is ND_CONNECTION_REFUSED.
        P::release(g);
    }
}
