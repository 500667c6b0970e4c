//! `IND2MemoryRegion` and `IND2MemoryWindow` for the `tcp` provider: the SPI kit's
//! [`Region`] and [`Window`] (with the ND rules of Register, Deregister, Bind and
//! Invalidate), over this provider's adapter state.

use std::sync::Arc;

use netdirect_spi::kit::adapter::AdapterState;
use netdirect_spi::kit::mr::{Region, Table};
use netdirect_spi::kit::mw::Window;
use netdirect_spi::kit::overlapped::Driver;

use crate::adapter::Shared;

/// A memory region object.
pub(crate) type TcpMr = Region<Shared>;

/// A memory window object.
pub(crate) type TcpMw = Window<Shared>;

impl AdapterState for Shared {
    fn registrations(&self) -> &Table {
        &self.mrs
    }

    fn driver(&self) -> Arc<dyn Driver> {
        self.engine.clone()
    }

    fn max_registration_size(&self) -> usize {
        self.info.max_registration_size
    }
}
