//! Connectors: where a source's rows come from (Nexmark generator, files, Kafka).

pub mod nexmark;
