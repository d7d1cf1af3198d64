//! The statements a session answers itself, without the database: its settings (`SET`,
//! `SHOW`, `RESET`), SQL cursors, `PREPARE`/`EXECUTE`, `DEALLOCATE`/`DISCARD`.

pub mod cursors;
pub mod protocol_statements;
pub mod settings;
pub mod sql_prepare;
