//! Parking on the memory store.
