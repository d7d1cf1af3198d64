//! Stateless operators and the materialize sink, one per file.

mod failed_rows;
mod filter;
mod input;
mod materialize;
mod proctime;
mod project;
mod union;
mod window;

pub use failed_rows::FailedRow;
pub use filter::FilterOperator;
pub use input::InputOperator;
pub use materialize::MaterializeOperator;
pub use proctime::ProctimeOperator;
pub use project::ProjectOperator;
pub use union::UnionOperator;
pub use window::WindowOperator;
