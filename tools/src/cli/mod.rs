//! The strata command line.
