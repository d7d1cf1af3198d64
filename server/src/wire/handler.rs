//! The Postgres wire protocol: simple and extended queries over [`Database`].

use std::fmt::Debug;
use std::sync::Arc;

use arrow_pg::datatypes::into_pg_type;
use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, FieldRef, SchemaRef};
use datafusion::common::ParamValues;
use datafusion::sql::sqlparser::ast::Statement;
use eddy_planner::limits::StatementLimits;
use eddy_planner::statement::{ParsedStatement, SubscribeOutput};
use eddy_planner::EddyStatement;
use futures::{stream, Sink, SinkExt};
use pgwire::api::auth::StartupHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{FieldInfo, QueryResponse, Response, Tag};
use pgwire::api::stmt::QueryParser;
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::DEFAULT_NAME;
use pgwire::api::{ClientInfo, ClientPortalStore, PgWireServerHandlers, Type};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::extendedquery::{
    Describe, TARGET_TYPE_BYTE_PORTAL, TARGET_TYPE_BYTE_STATEMENT,
};
use pgwire::messages::PgWireBackendMessage;
use pgwire::types::format::FormatOptions;

use crate::database::{Database, Outcome};
use crate::error::ServerError;
use crate::pg::ast::rewrite_for_datafusion;
use crate::pg::types::session_time_zone;
use crate::session::statement_shape::StatementShapes;
use crate::session::transactions::QueryBlock;
use crate::session::{cursors, settings, Answer};
use crate::wire::auth::Authentication;
use crate::wire::{copy, copy_subscribe, encoding};

/// What `Parse` produces: the statement, and what Describe needs to know about it.
#[derive(Clone, Debug)]
pub struct PreparedStatement {
    parsed: ParsedStatement,
    /// Parameter types as DataFusion inferred them (by position), with Eddy's markings
    /// (`uuid`, `jsonb`: see [`crate::pg::types::column_types`]).
    parameter_types: Vec<Option<FieldRef>>,
    /// The result's columns, for statements that return rows.
    schema: Option<SchemaRef>,
}

pub struct EddyHandler {
    db: Arc<Database>,
    parser: Arc<EddyQueryParser>,
}

impl EddyHandler {
    pub fn new(db: Arc<Database>) -> Self {
        Self::with_limits(db, StatementLimits::default())
    }

    /// A handler refusing statements over `limits` (54001).
    pub fn with_limits(db: Arc<Database>, limits: StatementLimits) -> Self {
        Self {
            parser: Arc::new(EddyQueryParser {
                shapes: StatementShapes::new(db.clone(), limits),
            }),
            db,
        }
    }
}

impl EddyHandler {
    /// Runs one statement: settings and COPY here, the rest in the database (within the
    /// connection's statement_timeout).
    async fn run<C>(
        &self,
        client: &mut C,
        parsed: &ParsedStatement,
        params: Option<ParamValues>,
        format: &Format,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let error = |e: ServerError| Ok(Response::Error(Box::new(e.into_error_info())));
        // EXECUTE runs the statement PREPARE kept, with the values given.
        let bound;
        let (parsed, params) = match &parsed.statement {
            EddyStatement::Sql(statement) if matches!(**statement, Statement::Execute { .. }) => {
                match crate::session::sql_prepare::bind(&self.db, client, statement).await {
                    Ok((statement, params)) => {
                        bound = statement;
                        (&bound, params)
                    }
                    Err(e) => return error(e),
                }
            }
            _ => (parsed, params),
        };
        if let EddyStatement::Subscribe {
            subscribe,
            output: SubscribeOutput::Copy(copy),
        } = &parsed.statement
        {
            let zone = settings::setting(client.metadata(), "timezone");
            let run = copy_subscribe::run(&self.db, client, subscribe, copy);
            return session_time_zone::within(zone, run).await;
        }
        if let Some(answer) =
            crate::session::answer(&self.parser.shapes, &self.db, client, parsed).await
        {
            let options = settings::format_options(client.metadata());
            return match answer {
                Ok(Answer { outcome, binary }) => {
                    let format = if binary {
                        &Format::UnifiedBinary
                    } else {
                        format
                    };
                    to_response(outcome, format, options, None)
                }
                Err(e) => error(e),
            };
        }
        if let EddyStatement::Sql(statement) = &parsed.statement {
            if matches!(statement.as_ref(), Statement::Copy { .. }) {
                let zone = settings::setting(client.metadata(), "timezone");
                let copy = copy::copy_out(&self.db, statement, client.metadata());
                return match session_time_zone::within(zone, copy).await {
                    Ok(copy) => Ok(Response::CopyOut(copy)),
                    Err(e) => error(e),
                };
            }
        }
        let substituted;
        let parsed = if parsed.sql.to_ascii_lowercase().contains("current_setting") {
            substituted = crate::pg::ast::with_session_settings(parsed, |name| {
                settings::setting(client.metadata(), name)
            });
            &substituted
        } else {
            parsed
        };
        let options = settings::format_options(client.metadata());
        let timeout = settings::statement_timeout(client.metadata());
        // The timeout covers running the statement and sending its rows.
        let deadline = timeout.map(|limit| std::time::Instant::now() + limit);
        let zone = session_time_zone::applies_to(&parsed.statement)
            .then(|| settings::setting(client.metadata(), "timezone"))
            .flatten();
        let execute = crate::query::blocking_polls::future(session_time_zone::within(
            zone,
            self.db.execute(parsed, params),
        ));
        let execute = crate::query::activity::track(client, &parsed.sql, execute);
        let outcome = match timeout {
            None => execute.await,
            Some(limit) => match tokio::time::timeout(limit, execute).await {
                Ok(result) => result,
                Err(_) => Err(ServerError::new(
                    "57014",
                    "canceling statement due to statement timeout",
                )),
            },
        };
        match outcome {
            Ok(outcome) => {
                let outcome = match outcome {
                    Outcome::Stream { schema, stream } => Outcome::Stream {
                        schema,
                        stream: crate::query::activity::track_stream(
                            client,
                            crate::query::blocking_polls::stream(stream),
                        ),
                    },
                    other => other,
                };
                let notices = outcome.notices().to_vec();
                send_notices(client, &notices).await?;
                if outcome.ends_transaction() {
                    cursors::end_transaction(client).await;
                }
                to_response(outcome, format, options, deadline)
            }
            Err(e) => error(e),
        }
    }
}

fn to_response(
    outcome: Outcome,
    format: &Format,
    options: Arc<FormatOptions>,
    deadline: Option<std::time::Instant>,
) -> PgWireResult<Response> {
    match outcome {
        Outcome::Command { tag, rows, .. } => {
            let tag = match (tag.as_str(), rows) {
                ("BEGIN", _) => return Ok(Response::TransactionStart(Tag::new("BEGIN"))),
                ("COMMIT" | "ROLLBACK", _) => return Ok(Response::TransactionEnd(Tag::new(&tag))),
                (_, Some(rows)) => Tag::new(&tag).with_rows(rows),
                (_, None) => Tag::new(&tag),
            };
            Ok(Response::Execution(tag))
        }
        Outcome::Rows { schema, batches } => {
            let stream = datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(
                schema.clone(),
                stream::iter(batches.into_iter().map(Ok)),
            );
            to_response(
                Outcome::Stream {
                    schema,
                    stream: Box::pin(stream),
                },
                format,
                options,
                deadline,
            )
        }
        Outcome::Stream { schema, stream } => {
            crate::wire::result_formats::check(format, schema.fields().len())?;
            let fields = Arc::new(crate::wire::result_columns::pg_fields(
                &schema,
                format,
                Some(options.clone()),
            )?);
            let encoded = fields.clone();
            let rows = crate::wire::result_stream::data_rows(stream, deadline, move |batch| {
                encoding::data_rows(encoded.clone(), &batch, &options)
            });
            Ok(Response::Query(QueryResponse::new(fields, rows)))
        }
    }
}

/// Sends a statement's NOTICEs ahead of its result.
async fn send_notices<C>(client: &mut C, notices: &[String]) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    for notice in notices {
        let info = ErrorInfo::new("NOTICE".to_string(), "00000".to_string(), notice.clone());
        client
            .send(PgWireBackendMessage::NoticeResponse(info.into()))
            .await?;
    }
    Ok(())
}

#[async_trait]
impl SimpleQueryHandler for EddyHandler {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let timeout = settings::statement_timeout(client.metadata());
        let limits = self.parser.shapes.limits();
        let statements = match crate::wire::client_parse::parse(query, limits, timeout).await {
            Ok(statements) => statements,
            Err(e) => {
                let info = e.into_error_info();
                crate::metrics::queries::rejected(&info.code);
                return Ok(vec![Response::Error(Box::new(info))]);
            }
        };
        if statements.is_empty() {
            return Ok(vec![Response::EmptyQuery]);
        }
        if statements.len() > 1 && statements.iter().any(is_copy_subscribe) {
            let info = ServerError::not_supported(
                "COPY (SUBSCRIBE ...) TO STDOUT must be the only statement of its query: it streams until it fails or is cancelled",
            )
            .into_error_info();
            return Ok(vec![Response::Error(Box::new(info))]);
        }
        let mut responses = Vec::with_capacity(statements.len());
        let mut block = QueryBlock::open(client, statements.len());
        // Like Postgres, the first failing statement ends the query string.
        for statement in statements {
            let statement = rewrite_for_datafusion(statement);
            let response = crate::metrics::queries::observe(self.run(
                client,
                &statement,
                None,
                &Format::UnifiedText,
            ))
            .await?;
            block.after(client, &response);
            let failed = matches!(response, Response::Error(_));
            responses.push(response);
            if failed {
                break;
            }
        }
        block.close(client).await;
        Ok(responses)
    }
}

fn is_copy_subscribe(parsed: &ParsedStatement) -> bool {
    matches!(
        parsed.statement,
        EddyStatement::Subscribe {
            output: SubscribeOutput::Copy(_),
            ..
        }
    )
}

pub struct EddyQueryParser {
    shapes: StatementShapes,
}

#[async_trait]
impl QueryParser for EddyQueryParser {
    type Statement = PreparedStatement;

    async fn parse_sql<C>(
        &self,
        client: &C,
        sql: &str,
        _types: &[Option<Type>],
    ) -> PgWireResult<Option<PreparedStatement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let timeout = settings::statement_timeout(client.metadata());
        let mut statements = crate::wire::client_parse::parse(sql, self.shapes.limits(), timeout)
            .await
            .map_err(ServerError::into_pgwire)?;
        if statements.len() > 1 {
            return Err(ServerError::new(
                "42601",
                "cannot insert multiple commands into a prepared statement",
            )
            .into_pgwire());
        }
        let Some(parsed) = statements.pop() else {
            return Ok(None);
        };
        let parsed = rewrite_for_datafusion(parsed);
        let (parameter_types, schema) = match &parsed.statement {
            EddyStatement::Fetch(fetch) => (vec![], cursors::fetch_schema(client, fetch)),
            _ => self
                .shapes
                .describe(&parsed)
                .await
                .map_err(ServerError::into_pgwire)?,
        };
        Ok(Some(PreparedStatement {
            parsed,
            parameter_types,
            schema,
        }))
    }

    fn get_parameter_types(&self, statement: &PreparedStatement) -> PgWireResult<Vec<Type>> {
        let mut types = statement
            .parameter_types
            .iter()
            .map(|t| match t {
                Some(field) => match crate::pg::types::column_types::marked_type(field) {
                    Some(marked) => Ok(marked),
                    None => into_pg_type(field.data_type()),
                },
                None => Ok(Type::UNKNOWN),
            })
            .collect::<PgWireResult<Vec<Type>>>()?;
        for (position, oid_type) in crate::wire::parameters::oid_casts(&statement.parsed.sql) {
            if let Some(t) = types.get_mut(position) {
                *t = oid_type;
            }
        }
        Ok(types)
    }

    fn get_result_schema(
        &self,
        statement: &PreparedStatement,
        format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        match &statement.schema {
            Some(schema) => {
                if let Some(format) = format {
                    crate::wire::result_formats::check(format, schema.fields().len())?;
                }
                crate::wire::result_columns::pg_fields(
                    schema,
                    format.unwrap_or(&Format::UnifiedBinary),
                    None,
                )
            }
            None => Ok(vec![]),
        }
    }
}

#[async_trait]
impl ExtendedQueryHandler for EddyHandler {
    type Statement = PreparedStatement;
    type QueryParser = EddyQueryParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        self.parser.clone()
    }

    async fn on_execute<C>(
        &self,
        client: &mut C,
        message: pgwire::messages::extendedquery::Execute,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        crate::wire::portal_execute::execute(self, client, message).await
    }

    async fn on_describe<C>(&self, client: &mut C, message: Describe) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
        // A cursor declared in SQL is a portal of the connection too.
        if message.target_type == TARGET_TYPE_BYTE_PORTAL
            && client.portal_store().get_portal(name).is_none()
            && crate::wire::cursor_portals::describe(client, name).await?
        {
            return Ok(());
        }
        match (
            message.target_type,
            client.portal_store().get_statement(name),
        ) {
            (TARGET_TYPE_BYTE_STATEMENT, Some(Entry::Value(statement))) => {
                let description = self.do_describe_statement(client, &statement).await?;
                crate::wire::describe::send_statement_description(client, &description).await
            }
            _ => self._on_describe(client, message).await,
        }
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let statement = &portal.statement.statement;
        let inferred: Vec<Option<&DataType>> = statement
            .parameter_types
            .iter()
            .map(|t| t.as_ref().map(|field| field.data_type()))
            .collect();
        let params = if portal.parameter_len() > 0 {
            let marked: Vec<Option<Type>> = statement
                .parameter_types
                .iter()
                .map(|t| {
                    t.as_ref()
                        .and_then(|f| crate::pg::types::column_types::marked_type(f))
                })
                .collect();
            Some(crate::wire::parameters::decode(portal, &inferred, &marked)?)
        } else {
            None
        };
        crate::metrics::queries::observe(self.run(
            client,
            &statement.parsed,
            params,
            &portal.result_column_format,
        ))
        .await
    }
}

/// Builds the handlers for each connection.
pub struct EddyServerHandlers {
    handler: Arc<EddyHandler>,
    authentication: Authentication,
}

impl EddyServerHandlers {
    /// Handlers that trust every client.
    pub fn new(db: Arc<Database>) -> Self {
        Self::with_authentication(db, Authentication::Trust)
    }

    /// Handlers with the given authentication.
    pub fn with_authentication(db: Arc<Database>, authentication: Authentication) -> Self {
        Self {
            handler: Arc::new(EddyHandler::new(db)),
            authentication,
        }
    }

    /// The same handlers, refusing statements over `limits`.
    pub fn with_statement_limits(self, limits: StatementLimits) -> Self {
        Self {
            handler: Arc::new(EddyHandler::with_limits(self.handler.db.clone(), limits)),
            authentication: self.authentication,
        }
    }
}

impl PgWireServerHandlers for EddyServerHandlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.handler.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        self.handler.clone()
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        Arc::new(self.authentication.startup())
    }
}
