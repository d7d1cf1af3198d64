//! The Nexmark generator (being written).
