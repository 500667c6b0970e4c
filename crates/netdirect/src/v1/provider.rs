//! `INDProvider`: the addresses a provider serves, and adapters opened by IP address.

use std::net::SocketAddr;

use super::Adapter;
use crate::Result;

/// A v1 provider (`INDProvider`): the same providers as [`crate::Provider`], opened the v1
/// way.
///
/// ```
/// use netdirect::v1;
///
/// # fn main() -> netdirect::Result<()> {
/// let provider = v1::Provider::open("tcp")?;
/// assert!(!provider.query_address_list()?.is_empty());
/// let adapter = provider.open_adapter("127.0.0.1:0".parse().unwrap())?;
/// assert_eq!(adapter.address().ip(), std::net::Ipv4Addr::LOCALHOST);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Provider {
    inner: crate::Provider,
}

impl Provider {
    /// The v1 face of a v2 provider.
    pub fn from_v2(inner: crate::Provider) -> Self {
        Self { inner }
    }

    /// The provider called `name` (`tcp`, `shm`); `ND_INVALID_PARAMETER` if there is none.
    pub fn open(name: &str) -> Result<Self> {
        crate::Provider::open(name).map(Self::from_v2)
    }

    /// The provider `ND_PROVIDER` selects (see [`crate::Provider::from_env`]).
    pub fn from_env() -> Result<Self> {
        crate::Provider::from_env().map(Self::from_v2)
    }

    /// The provider's name.
    pub fn name(&self) -> &'static str {
        self.inner.name()
    }

    /// `QueryAddressList`: every local address the provider serves (ports 0).
    pub fn query_address_list(&self) -> Result<Vec<SocketAddr>> {
        self.inner.query_address_list()
    }

    /// `OpenAdapter` by IP address (the port is ignored): `ND_INVALID_ADDRESS` if no adapter
    /// of this provider serves it. The adapter remembers the IP: its listeners listen there
    /// and its connectors connect from there.
    pub fn open_adapter(&self, address: SocketAddr) -> Result<Adapter> {
        let a = self.inner.open_adapter_for(address)?;
        Ok(Adapter::new(a, address.ip()))
    }
}
