//! Stateless operators and the materialize sink, one per file.

mod filter;
mod materialize;
mod project;
mod window;

pub use filter::FilterOperator;
pub use materialize::MaterializeOperator;
pub use project::ProjectOperator;
pub use window::WindowOperator;
