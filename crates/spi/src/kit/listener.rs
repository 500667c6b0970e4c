//! The state of a software provider's `IND2Listener` (IND2Listener in Microsoft's NetworkDirect SPI reference,
//! `docs/ND-RULES.md` §2.11) and the rules that do not depend on the transport: Bind and Listen
//! validity, the ND backlog, and the pairing of arrived connection requests with
//! `GetConnectionRequest` calls.
//!
//! A provider keeps a [`ListenerState`] under its listener's lock. Its transport accepts
//! connections, runs each one's handshake until the connection request has arrived, and then
//! calls [`ListenerState::deliver`].

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::kit::overlapped::{Driver, OvCompleter, Overlapped};
use crate::{fail, Result, Status};

mod object;
pub use object::{Listener, ListenerProvider};

/// What a provider's listener holds.
pub trait Transport: 'static {
    /// What `Bind` prepares (a socket holding the port).
    type Bound;
    /// The listening socket, registered with the provider's engine.
    type Listening;
    /// An accepted connection whose request is still arriving.
    type Handshake;
    /// A connection request that arrived, waiting for a connector.
    type Incoming;
    /// The provider's connector.
    type Connector: TakesRequests<Self::Incoming>;
}

/// What the listener asks of the connector a request is handed to.
pub trait TakesRequests<I> {
    /// Whether the connector may take a request (it is fresh: not connecting, connected or
    /// done).
    fn is_fresh(&self) -> bool;
    /// Hand it a request (`GetConnectionRequest` completes next), checking under the
    /// connector's own lock that it is still fresh; if it is not, the request comes back.
    fn set_incoming(&self, incoming: I) -> Result<(), I>;
}

/// A listener's state.
pub struct ListenerState<T: Transport> {
    /// What `Bind` prepared, until `Listen`.
    pub bound: Option<T::Bound>,
    /// The listening socket, from `Listen` on.
    pub listening: Option<T::Listening>,
    /// The bound address.
    pub local: Option<SocketAddr>,
    /// Accepted connections whose request is still arriving (they hold themselves alive here).
    pub handshakes: Vec<Arc<T::Handshake>>,
    /// ND's backlog: how many arrived requests may wait for `GetConnectionRequest` (0: no
    /// limit).
    backlog: usize,
    ready: VecDeque<T::Incoming>,
    waiting: VecDeque<(Arc<T::Connector>, OvCompleter)>,
}

impl<T: Transport> fmt::Debug for ListenerState<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenerState")
            .field("local", &self.local)
            .field("ready", &self.ready.len())
            .field("waiting", &self.waiting.len())
            .finish()
    }
}

impl<T: Transport> Default for ListenerState<T> {
    fn default() -> Self {
        Self {
            bound: None,
            listening: None,
            local: None,
            handshakes: Vec::new(),
            backlog: 0,
            ready: VecDeque::new(),
            waiting: VecDeque::new(),
        }
    }
}

impl<T: Transport> ListenerState<T> {
    /// A fresh listener.
    pub fn new() -> Self {
        Self::default()
    }

    /// `Bind`'s checks: `ND_ADDRESS_ALREADY_ASSOCIATED` for a listener already bound (or
    /// listening), `ND_INVALID_ADDRESS` for an address of another host.
    pub fn check_bind(&self, addr: SocketAddr, is_local: bool) -> Result<()> {
        if self.bound.is_some() || self.listening.is_some() {
            return fail(Status::ADDRESS_ALREADY_ASSOCIATED);
        }
        if !addr.ip().is_unspecified() && !is_local {
            return fail(Status::INVALID_ADDRESS);
        }
        Ok(())
    }

    /// `Listen`: what `Bind` prepared, to listen on; `ND_INVALID_DEVICE_STATE` when already
    /// listening or not bound. The provider puts it back in `bound` if listening fails, and
    /// sets `listening` and [`Self::set_backlog`] when it succeeds.
    pub fn take_bound_for_listen(&mut self) -> Result<T::Bound> {
        if self.listening.is_some() {
            return fail(Status::INVALID_DEVICE_STATE);
        }
        self.bound
            .take()
            .ok_or(crate::Error::new(Status::INVALID_DEVICE_STATE))
    }

    /// ND's backlog from `Listen` (0: no limit). The kernel's own backlog holds connections;
    /// this one counts requests waiting for `GetConnectionRequest`.
    pub fn set_backlog(&mut self, backlog: u32) {
        self.backlog = backlog as usize;
    }

    /// The handshake `of` points to, if it is still in the list.
    pub fn find_handshake(&self, of: *const T::Handshake) -> Option<Arc<T::Handshake>> {
        self.handshakes
            .iter()
            .find(|h| std::ptr::eq(h.as_ref(), of))
            .cloned()
    }

    /// A handshake finished (with a request, or `None` when it failed): forget it, and hand
    /// the request to the oldest waiting connector, or queue it. Requests withdrawn one by one
    /// (`Overlapped::cancel`) are skipped, never handed a connection. With the backlog full
    /// the request comes back: the provider refuses it, so that the connecting side sees
    /// `ND_CONNECTION_REFUSED`.
    pub fn deliver(
        &mut self,
        hs: &Arc<T::Handshake>,
        inc: Option<T::Incoming>,
    ) -> Option<T::Incoming> {
        self.handshakes.retain(|h| !Arc::ptr_eq(h, hs));
        let mut inc = inc?;
        // A request withdrawn on its own (`Overlapped::cancel`, which does not take our lock)
        // is claimed first, so it is either cancelled or handed the connection, never both.
        while let Some((conn, ov)) = self.waiting.pop_front() {
            if ov.claim() {
                match conn.set_incoming(inc) {
                    Ok(()) => {
                        ov.complete(Status::SUCCESS);
                        return None;
                    }
                    // The caller used this connector for something else (a Connect, or
                    // another GetConnectionRequest served first) while this one waited: it
                    // fails as a GetConnectionRequest on such a connector does when made, and
                    // the request goes on to the next waiter, or the queue.
                    Err(back) => {
                        ov.complete(Status::INVALID_DEVICE_STATE);
                        inc = back;
                    }
                }
            }
        }
        if self.backlog == 0 || self.ready.len() < self.backlog {
            self.ready.push_back(inc);
        } else {
            return Some(inc);
        }
        None
    }

    /// `GetConnectionRequest` for `conn` (already checked fresh by [`check_connector`]):
    /// `ND_INVALID_DEVICE_STATE` unless listening. Completes at once with a queued request;
    /// otherwise the request waits (cancellable one by one) and the result says `true`: the
    /// provider should then, without its lock, accept what already sits in the kernel's queue.
    pub fn get_connection_request(
        &mut self,
        conn: Arc<T::Connector>,
        driver: Arc<dyn Driver>,
    ) -> Result<(Overlapped, bool)> {
        if self.listening.is_none() {
            return fail(Status::INVALID_DEVICE_STATE);
        }
        if let Some(inc) = self.ready.pop_front() {
            if let Err(back) = conn.set_incoming(inc) {
                // It stopped being fresh since `check_connector` (another thread's Connect):
                // the request stays first in the queue.
                self.ready.push_front(back);
                return fail(Status::INVALID_DEVICE_STATE);
            }
            let (ov, c) = Overlapped::pending(driver);
            c.complete(Status::SUCCESS);
            Ok((ov, false))
        } else {
            let (ov, c) = Overlapped::pending(driver);
            c.allow_cancel();
            self.waiting.push_back((conn, c));
            Ok((ov, true))
        }
    }

    /// `CancelOverlappedRequests` (and release): every waiting `GetConnectionRequest`
    /// completes with `ND_CANCELED`, in order.
    pub fn cancel_overlapped_requests(&mut self) {
        for (_, c) in self.waiting.drain(..) {
            c.complete(Status::CANCELED);
        }
    }
}

/// `GetConnectionRequest`'s connector, before the listener's lock: `ND_INVALID_DEVICE_STATE`
/// for one that is not fresh (it is connecting, connected, or holds a request already).
pub fn check_connector<I, C: TakesRequests<I>>(conn: &C) -> Result<()> {
    if !conn.is_fresh() {
        return fail(Status::INVALID_DEVICE_STATE);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::kit::overlapped::tests::NullDriver;
    use crate::Error;

    #[derive(Default)]
    struct Conn {
        got: Mutex<Option<u32>>,
    }

    impl TakesRequests<u32> for Conn {
        fn is_fresh(&self) -> bool {
            self.got.lock().unwrap().is_none()
        }
        fn set_incoming(&self, incoming: u32) -> Result<(), u32> {
            let mut got = self.got.lock().unwrap();
            if got.is_some() {
                return Err(incoming);
            }
            *got = Some(incoming);
            Ok(())
        }
    }

    enum Test {}

    impl Transport for Test {
        type Bound = ();
        type Listening = ();
        type Handshake = u8;
        type Incoming = u32;
        type Connector = Conn;
    }

    fn listening(backlog: u32) -> ListenerState<Test> {
        let mut l = ListenerState::<Test>::new();
        l.bound = Some(());
        l.take_bound_for_listen().expect("bound");
        l.listening = Some(());
        l.set_backlog(backlog);
        l
    }

    fn driver() -> Arc<dyn Driver> {
        Arc::new(NullDriver)
    }

    #[test]
    fn bind_and_listen_rules() {
        let mut l = ListenerState::<Test>::new();
        let a: SocketAddr = "10.9.9.9:1".parse().unwrap();
        assert_eq!(
            l.check_bind(a, false),
            Err(Error::new(Status::INVALID_ADDRESS))
        );
        assert_eq!(
            l.take_bound_for_listen().unwrap_err(),
            Error::new(Status::INVALID_DEVICE_STATE),
            "not bound"
        );
        let e = l.get_connection_request(Arc::default(), driver());
        assert_eq!(e.unwrap_err(), Error::new(Status::INVALID_DEVICE_STATE));
        l.bound = Some(());
        assert_eq!(
            l.check_bind(a, true),
            Err(Error::new(Status::ADDRESS_ALREADY_ASSOCIATED))
        );
        let mut l = listening(0);
        assert_eq!(
            l.take_bound_for_listen().unwrap_err(),
            Error::new(Status::INVALID_DEVICE_STATE),
            "already listening"
        );
    }

    #[test]
    fn requests_meet_waiters_in_order() {
        let mut l = listening(0);
        let hs = Arc::new(1u8);
        l.handshakes.push(hs.clone());
        assert!(Arc::ptr_eq(&l.find_handshake(&*hs).unwrap(), &hs));
        let (a, b) = (Arc::new(Conn::default()), Arc::new(Conn::default()));
        let (ova, wait) = l.get_connection_request(a.clone(), driver()).unwrap();
        assert!(wait && !ova.is_complete());
        let (ovb, _) = l.get_connection_request(b.clone(), driver()).unwrap();
        ova.cancel();
        assert_eq!(l.deliver(&hs, Some(5)), None);
        assert!(l.handshakes.is_empty(), "forgotten once delivered");
        assert_eq!(*a.got.lock().unwrap(), None, "a withdrew its request");
        assert_eq!(*b.got.lock().unwrap(), Some(5));
        assert_eq!(ovb.try_result(), Some(Ok(())));
        assert!(!b.is_fresh() && check_connector(&*b).is_err());
    }

    /// A connector used for something else while its GetConnectionRequest waited (here, a
    /// second GetConnectionRequest served first) is not overwritten: that request fails
    /// `ND_INVALID_DEVICE_STATE` and the connection goes to the next waiter, or the queue.
    #[test]
    fn a_waiter_that_stopped_being_fresh_is_passed_over() {
        let mut l = listening(0);
        let hs = Arc::new(0u8);
        let (a, b) = (Arc::new(Conn::default()), Arc::new(Conn::default()));
        let (first, _) = l.get_connection_request(a.clone(), driver()).unwrap();
        let (second, _) = l.get_connection_request(a.clone(), driver()).unwrap();
        let (third, _) = l.get_connection_request(b.clone(), driver()).unwrap();
        assert_eq!(l.deliver(&hs, Some(1)), None);
        assert_eq!(first.try_result(), Some(Ok(())));
        assert_eq!(l.deliver(&hs, Some(2)), None);
        assert_eq!(
            second.try_result(),
            Some(Err(Error::new(Status::INVALID_DEVICE_STATE)))
        );
        assert_eq!(third.try_result(), Some(Ok(())));
        assert_eq!(*a.got.lock().unwrap(), Some(1), "the first request stays");
        assert_eq!(*b.got.lock().unwrap(), Some(2));
        // With nobody waiting, the next one is queued, not lost, and a connector that is not
        // fresh any more when it asks leaves it first in the queue.
        let (again, _) = l.get_connection_request(a.clone(), driver()).unwrap();
        assert_eq!(l.deliver(&hs, Some(3)), None);
        assert!(again.try_result().unwrap().is_err());
        assert_eq!(
            l.get_connection_request(a, driver()).unwrap_err(),
            Error::new(Status::INVALID_DEVICE_STATE)
        );
        let c = Arc::new(Conn::default());
        let (ov, wait) = l.get_connection_request(c.clone(), driver()).unwrap();
        assert!(!wait && ov.try_result() == Some(Ok(())));
        assert_eq!(*c.got.lock().unwrap(), Some(3));
    }

    #[test]
    fn backlog_queues_then_refuses() {
        let mut l = listening(1);
        let hs = Arc::new(0u8);
        assert_eq!(l.deliver(&hs, None), None, "a failed handshake");
        assert_eq!(l.deliver(&hs, Some(1)), None, "queued");
        assert_eq!(l.deliver(&hs, Some(2)), Some(2), "backlog full: refused");
        let c = Arc::new(Conn::default());
        let (ov, wait) = l.get_connection_request(c.clone(), driver()).unwrap();
        assert!(!wait && ov.is_complete());
        assert_eq!(*c.got.lock().unwrap(), Some(1));
        let (ov, _) = l.get_connection_request(Arc::default(), driver()).unwrap();
        l.cancel_overlapped_requests();
        assert_eq!(ov.try_result(), Some(Err(Error::CANCELED)));
    }
}
