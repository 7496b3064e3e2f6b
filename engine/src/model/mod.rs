//! The data model: values and keys (`types`), table schemas and options (`schema`), the rules
//! every write and read is checked against (`validate`), what a row's stored records mean
//! (`rowstate`: the one place versions, TTL and deletes are interpreted), and the key-design
//! helpers of the guidance (`keydesign`). Nothing here does I/O.

pub mod keydesign;
pub mod rowstate;
pub mod schema;
pub mod types;
pub mod validate;
