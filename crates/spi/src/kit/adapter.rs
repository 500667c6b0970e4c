//! What the kit's provider objects need from a provider's adapter state.

use std::sync::Arc;

use crate::kit::mr::Table;
use crate::kit::overlapped::Driver;

/// The state every object of one software adapter shares, as the kit's objects
/// ([`Region`](crate::kit::mr::Region), [`Window`](crate::kit::mw::Window),
/// [`Srq`](crate::kit::srq::Srq)) use it. Objects of one adapter hold the same `Arc` of it,
/// which is how they recognise each other (an object of another adapter is an invalid
/// parameter).
pub trait AdapterState: Send + Sync + 'static {
    /// The adapter's registrations (regions and bound windows).
    fn registrations(&self) -> &Table;
    /// What completes the adapter's overlapped requests.
    fn driver(&self) -> Arc<dyn Driver>;
    /// `ND2_ADAPTER_INFO::MaxRegistrationSize`.
    fn max_registration_size(&self) -> usize;
}
