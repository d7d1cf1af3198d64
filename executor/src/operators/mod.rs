//! Stateless operators and the materialize sink, one per file.

mod filter;
mod input;
mod materialize;
mod project;
mod window;

pub use filter::FilterOperator;
pub use input::InputOperator;
pub use materialize::MaterializeOperator;
pub use project::ProjectOperator;
pub use window::WindowOperator;
