//! `COPY (SELECT ...) TO STDOUT` and `COPY table TO STDOUT`, in text, CSV or binary.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::sql::sqlparser::ast::{
    CopyLegacyCsvOption, CopyLegacyOption, CopyOption, CopySource, CopyTarget, Ident, ObjectName,
    Query, Statement,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use eddy_planner::statement::ParsedStatement;
use eddy_planner::EddyStatement;
use futures::stream;
use pgwire::api::portal::Format;
use pgwire::api::results::{CopyCsvOptions, CopyEncoder, CopyResponse, CopyTextOptions, FieldInfo};
use pgwire::messages::copy::CopyData;
use pgwire::types::format::FormatOptions;

use crate::database::{Database, Outcome};
use crate::error::{Result, ServerError};

#[derive(Debug, PartialEq)]
enum CopyFormat {
    Text,
    Csv,
    Binary,
}

/// What a `COPY ... TO STDOUT` asked for.
struct CopySpec {
    format: CopyFormat,
    header: bool,
    delimiter: Option<char>,
    null: Option<String>,
    quote: Option<char>,
    escape: Option<char>,
}

fn spec(options: &[CopyOption], legacy: &[CopyLegacyOption]) -> Result<CopySpec> {
    let mut spec = CopySpec {
        format: CopyFormat::Text,
        header: false,
        delimiter: None,
        null: None,
        quote: None,
        escape: None,
    };
    for option in options {
        match option {
            CopyOption::Format(name) => {
                spec.format = match name.value.to_ascii_lowercase().as_str() {
                    "text" => CopyFormat::Text,
                    "csv" => CopyFormat::Csv,
                    "binary" => CopyFormat::Binary,
                    other => {
                        return Err(ServerError::new(
                            "22023",
                            format!("COPY format \"{other}\" not recognized"),
                        ))
                    }
                }
            }
            CopyOption::Header(on) => spec.header = *on,
            CopyOption::Delimiter(c) => spec.delimiter = Some(*c),
            CopyOption::Null(s) => spec.null = Some(s.clone()),
            CopyOption::Quote(c) => spec.quote = Some(*c),
            CopyOption::Escape(c) => spec.escape = Some(*c),
            CopyOption::Encoding(e) if e.eq_ignore_ascii_case("utf8") => {}
            other => return Err(ServerError::not_supported(format!("COPY option {other}"))),
        }
    }
    for option in legacy {
        match option {
            CopyLegacyOption::Binary => spec.format = CopyFormat::Binary,
            CopyLegacyOption::Csv(csv) => {
                spec.format = CopyFormat::Csv;
                for o in csv {
                    match o {
                        CopyLegacyCsvOption::Header => spec.header = true,
                        CopyLegacyCsvOption::Quote(c) => spec.quote = Some(*c),
                        CopyLegacyCsvOption::Escape(c) => spec.escape = Some(*c),
                        other => {
                            return Err(ServerError::not_supported(format!("COPY option {other}")))
                        }
                    }
                }
            }
            CopyLegacyOption::Header => spec.header = true,
            CopyLegacyOption::Delimiter(c) => spec.delimiter = Some(*c),
            CopyLegacyOption::Null(s) => spec.null = Some(s.clone()),
            other => return Err(ServerError::not_supported(format!("COPY option {other}"))),
        }
    }
    if spec.header && spec.format != CopyFormat::Csv {
        return Err(ServerError::new(
            "0A000",
            "COPY HEADER is available only in CSV mode",
        ));
    }
    Ok(spec)
}

/// `SELECT columns FROM table` for `COPY table [(columns)] TO STDOUT`.
fn table_query(table_name: &ObjectName, columns: &[Ident]) -> Result<Query> {
    let columns = if columns.is_empty() {
        "*".to_string()
    } else {
        columns
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    // Built as text and parsed back: simpler and steadier than the AST's constructors.
    let sql = format!("SELECT {columns} FROM {table_name}");
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&sql)
        .and_then(|mut parser| parser.parse_query())
        .map(|query| *query)
        .map_err(|e| ServerError::new("42601", e.to_string()))
}

/// The target and options of a `COPY ... TO STDOUT`, checked: its spec.
fn copy_spec(statement: &Statement) -> Result<(CopySpec, &CopySource)> {
    let Statement::Copy {
        source,
        to,
        target,
        options,
        legacy_options,
        ..
    } = statement
    else {
        return Err(ServerError::internal("not a COPY statement"));
    };
    if !*to {
        return Err(ServerError::not_supported(
            "COPY ... FROM: use INSERT (Eddy's tables are fed by INSERT or a connector)",
        ));
    }
    if *target != CopyTarget::Stdout {
        return Err(ServerError::not_supported(format!(
            "COPY TO {target}: only TO STDOUT"
        )));
    }
    Ok((spec(options, legacy_options)?, source))
}

/// Rows written as COPY data, in the format a `COPY ... TO STDOUT` asked for.
pub(crate) struct CopyWriter {
    encoder: CopyEncoder,
    fields: Arc<Vec<FieldInfo>>,
    options: Arc<FormatOptions>,
    /// The CSV header line, until it is sent.
    header: Option<Vec<u8>>,
    binary: bool,
}

impl CopyWriter {
    /// A writer of rows of `schema` as `statement` (a `COPY ... TO STDOUT`) asks.
    pub(crate) fn new(
        statement: &Statement,
        schema: &SchemaRef,
        metadata: &HashMap<String, String>,
    ) -> Result<Self> {
        let (spec, _) = copy_spec(statement)?;
        Self::with_spec(&spec, schema, metadata)
    }

    fn with_spec(
        spec: &CopySpec,
        schema: &SchemaRef,
        metadata: &HashMap<String, String>,
    ) -> Result<Self> {
        let binary = spec.format == CopyFormat::Binary;
        let format = if binary {
            Format::UnifiedBinary
        } else {
            Format::UnifiedText
        };
        let options = crate::session::settings::format_options(metadata);
        let fields = Arc::new(crate::wire::result_columns::pg_fields(
            schema,
            &format,
            Some(options.clone()),
        )?);
        let encoder = match spec.format {
            CopyFormat::Binary => CopyEncoder::new_binary(fields.clone()),
            CopyFormat::Text => {
                let mut options = CopyTextOptions::default();
                if let Some(c) = spec.delimiter {
                    options.delimiter = c.to_string().into();
                }
                if let Some(n) = &spec.null {
                    options.null_string = n.as_str().into();
                }
                CopyEncoder::new_text(fields.clone(), options)
            }
            CopyFormat::Csv => {
                let mut options = CopyCsvOptions::default();
                if let Some(c) = spec.delimiter {
                    options.delimiter = c.to_string().into();
                }
                if let Some(n) = &spec.null {
                    options.null_string = n.as_str().into();
                }
                if let Some(c) = spec.quote {
                    options.quote = c.to_string().into();
                    options.escape = c.to_string().into();
                }
                if let Some(c) = spec.escape {
                    options.escape = c.to_string().into();
                }
                CopyEncoder::new_csv(fields.clone(), options)
            }
        };
        let header = spec.header.then(|| {
            let delimiter = spec.delimiter.unwrap_or(',').to_string();
            let mut line = schema
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect::<Vec<_>>()
                .join(&delimiter)
                .into_bytes();
            line.push(b'\n');
            line
        });
        Ok(Self {
            encoder,
            fields,
            options,
            header,
            binary,
        })
    }

    /// The overall format code of the COPY (1 for binary).
    pub(crate) fn format_code(&self) -> i8 {
        i8::from(self.binary)
    }

    pub(crate) fn columns(&self) -> usize {
        self.fields.len()
    }

    /// The header line, the first time (CSV with HEADER).
    pub(crate) fn take_header(&mut self) -> Option<CopyData> {
        self.header.take().map(|line| CopyData::new(line.into()))
    }

    /// `batch` as COPY data, one message per row: Postgres' text forms (and binary
    /// NUMERIC), the same values as a query's rows.
    pub(crate) fn rows(&mut self, batch: &RecordBatch) -> Result<Vec<CopyData>> {
        Ok(crate::wire::encoding::encode_rows(
            &mut self.encoder,
            batch,
            &self.fields,
            &self.options,
        )?)
    }
}

/// Runs a `COPY ... TO STDOUT` and returns the rows as COPY data.
pub async fn copy_out(
    db: &Database,
    statement: &Statement,
    metadata: &HashMap<String, String>,
) -> Result<CopyResponse> {
    let (spec, source) = copy_spec(statement)?;
    let query = match source {
        CopySource::Query(query) => (**query).clone(),
        CopySource::Table {
            table_name,
            columns,
        } => table_query(table_name, columns)?,
    };
    let parsed = ParsedStatement {
        sql: query.to_string(),
        statement: EddyStatement::Sql(Box::new(Statement::Query(Box::new(query)))),
    };
    let (schema, batches) = match db.execute(&parsed, None).await? {
        Outcome::Rows { schema, batches } => (schema, batches),
        Outcome::Stream { schema, stream } => (
            schema,
            crate::query::query_memory::collect_within(stream, db.query_memory_limit()).await?,
        ),
        Outcome::Command { .. } => {
            return Err(ServerError::internal("COPY's query returned no rows"))
        }
    };
    let mut writer = CopyWriter::with_spec(&spec, &schema, metadata)?;
    let mut data = Vec::new();
    for batch in &batches {
        data.extend(writer.rows(batch)?);
    }
    if let Some(header) = writer.take_header() {
        // One message with the first row, so that the row count stays the number of rows.
        match data.first_mut() {
            Some(first) => {
                let mut line = header.data.to_vec();
                line.extend_from_slice(&first.data);
                *first = CopyData::new(line.into());
            }
            None => data.push(header),
        }
    }
    Ok(CopyResponse::new(
        writer.format_code(),
        writer.columns(),
        stream::iter(data.into_iter().map(Ok)),
    ))
}
