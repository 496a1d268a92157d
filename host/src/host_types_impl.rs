//! `ahp:interceptor/host-types`: types only, nothing to implement.

use crate::bindings::host_types;
use crate::state::HostState;

impl host_types::Host for HostState {}
