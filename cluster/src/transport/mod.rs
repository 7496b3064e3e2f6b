//! How a group's nodes reach one another. `local`: in one process, with links the caller cuts
//! and heals (tests and simulations).

pub mod http;
pub mod local;
