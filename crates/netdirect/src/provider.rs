//! Provider discovery (`IND2Provider`, `docs/ND-RULES.md` §6.2 for the Windows original).
//!
//! Windows finds providers in the Winsock catalog; here they are registered in-process. The
//! built-in providers are always present; [`Provider::register`] adds others (a future verbs
//! provider, a test double) without touching this crate. `ND_PROVIDER` chooses among them with
//! libfabric's `FI_PROVIDER` syntax: `tcp`, `shm,tcp` (first available wins), `^shm` (anything
//! but shm).

use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock, RwLock};

use netdirect_spi::traits;

use crate::{Adapter, Error, Result, Status};

fn registry() -> &'static RwLock<Vec<Arc<dyn traits::Provider>>> {
    static R: OnceLock<RwLock<Vec<Arc<dyn traits::Provider>>>> = OnceLock::new();
    R.get_or_init(|| {
        RwLock::new(vec![
            Arc::new(netdirect_tcp::TcpProvider::new()) as Arc<dyn traits::Provider>,
            Arc::new(netdirect_shm::ShmProvider::new()) as Arc<dyn traits::Provider>,
        ])
    })
}

/// The name of the default provider when `ND_PROVIDER` is unset.
pub const DEFAULT_PROVIDER: &str = "tcp";

/// An ND provider (`IND2Provider`): a software RDMA implementation, which opens adapters.
///
/// ```
/// use netdirect::Provider;
///
/// # fn main() -> netdirect::Result<()> {
/// // The built-in providers, by name; `Provider::from_env()` honours `ND_PROVIDER`.
/// let names: Vec<_> = Provider::all().iter().map(Provider::name).collect();
/// assert!(names.contains(&"tcp") && names.contains(&"shm"));
///
/// let provider = Provider::open("shm")?;
/// let adapter = provider.open_adapter_for("127.0.0.1:0".parse().unwrap())?;
/// assert_eq!(adapter.provider_name(), "shm");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Provider {
    inner: Arc<dyn traits::Provider>,
}

impl fmt::Debug for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Provider")
            .field("name", &self.name())
            .finish()
    }
}

impl Provider {
    /// Add a provider to the registry (later registrations with the same name win).
    pub fn register(provider: Arc<dyn traits::Provider>) {
        let mut r = registry().write().unwrap_or_else(|e| e.into_inner());
        r.retain(|p| p.name() != provider.name());
        r.insert(0, provider);
    }

    /// Every registered provider.
    pub fn all() -> Vec<Self> {
        registry()
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|p| Self { inner: p.clone() })
            .collect()
    }

    /// The provider called `name`; `ND_INVALID_PARAMETER` if there is none.
    pub fn open(name: &str) -> Result<Self> {
        Self::all()
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or(Error::new(Status::INVALID_PARAMETER))
    }

    /// The provider `ND_PROVIDER` selects, or [`DEFAULT_PROVIDER`].
    pub fn from_env() -> Result<Self> {
        match std::env::var("ND_PROVIDER") {
            Ok(spec) if !spec.trim().is_empty() => Self::select(&spec),
            _ => Self::open(DEFAULT_PROVIDER),
        }
    }

    /// Pick a provider by an `FI_PROVIDER`-style list: `a,b` (first present), `^a,b` (any
    /// provider not listed).
    pub fn select(spec: &str) -> Result<Self> {
        Self::admitted(spec)
            .into_iter()
            .next()
            .ok_or(Error::new(Status::INVALID_PARAMETER))
    }

    /// The providers `ND_PROVIDER` admits, in the order the ND support helpers
    /// ([`crate::support`]) try them, as the Windows framework walks its provider catalog: the
    /// listed ones in their order (`shm,tcp`), or with `^` every registered one not listed;
    /// when it is unset, every registered provider, [`DEFAULT_PROVIDER`] first.
    /// `ND_INVALID_PARAMETER` if that leaves none.
    pub fn catalog() -> Result<Vec<Self>> {
        let list = match std::env::var("ND_PROVIDER") {
            Ok(spec) if !spec.trim().is_empty() => Self::admitted(&spec),
            _ => {
                let mut all = Self::all();
                all.sort_by_key(|p| p.name() != DEFAULT_PROVIDER);
                all
            }
        };
        if list.is_empty() {
            return Err(Error::new(Status::INVALID_PARAMETER));
        }
        Ok(list)
    }

    /// The registered providers an `FI_PROVIDER`-style list names, in its order (`^`: the
    /// registered ones it does not name, in registry order).
    fn admitted(spec: &str) -> Vec<Self> {
        let all = Self::all();
        let spec = spec.trim();
        if let Some(neg) = spec.strip_prefix('^') {
            let excluded: Vec<&str> = neg.split(',').map(str::trim).collect();
            return all
                .into_iter()
                .filter(|p| !excluded.contains(&p.name()))
                .collect();
        }
        let mut picked: Vec<Self> = Vec::new();
        for name in spec.split(',').map(str::trim) {
            if let Some(p) = all.iter().find(|p| p.name() == name) {
                if !picked.iter().any(|q| q.name() == name) {
                    picked.push(p.clone());
                }
            }
        }
        picked
    }

    /// The provider's name.
    pub fn name(&self) -> &'static str {
        self.inner.name()
    }

    /// `QueryAddressList`: every local address this provider serves (ports are 0).
    pub fn query_address_list(&self) -> Result<Vec<SocketAddr>> {
        self.inner.query_address_list()
    }

    /// `ResolveAddress`: the id of the adapter serving local address `addr` (port ignored);
    /// `ND_INVALID_ADDRESS` if none does.
    pub fn resolve_address(&self, addr: SocketAddr) -> Result<u64> {
        self.inner.resolve_address(&addr)
    }

    /// `OpenAdapter`: `ND_INVALID_PARAMETER` for an unknown id.
    pub fn open_adapter(&self, adapter_id: u64) -> Result<Adapter> {
        let a = self.inner.open_adapter(adapter_id)?;
        Ok(Adapter::from_spi(a, self.name()))
    }

    /// Resolve `local` and open its adapter (`NdOpenAdapter`).
    pub fn open_adapter_for(&self, local: SocketAddr) -> Result<Adapter> {
        let id = self.resolve_address(local)?;
        self.open_adapter(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: Vec<Provider>) -> Vec<&'static str> {
        list.into_iter().map(|p| p.name()).collect()
    }

    #[test]
    fn a_list_admits_providers_in_its_order() {
        assert_eq!(names(Provider::admitted("shm,tcp")), ["shm", "tcp"]);
        assert_eq!(names(Provider::admitted(" tcp , tcp ")), ["tcp"]);
        assert_eq!(names(Provider::admitted("verbs,shm")), ["shm"]);
        assert_eq!(names(Provider::admitted("^tcp")), ["shm"]);
        assert!(Provider::admitted("verbs").is_empty());
        assert_eq!(Provider::select("shm,tcp").expect("shm").name(), "shm");
        assert_eq!(
            Provider::select("^tcp,shm")
                .expect_err("none left")
                .status(),
            Status::INVALID_PARAMETER
        );
    }
}
