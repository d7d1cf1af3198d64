//! The metrics endpoint: `GET /metrics` in Prometheus' text exposition format.

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus::{Encoder, Registry, TextEncoder};
use tokio::net::TcpListener;

/// Serves `registry` on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, registry: Registry) -> std::io::Result<()> {
    let app = Router::new().route("/metrics", get(move || metrics(registry.clone())));
    axum::serve(listener, app).await
}

async fn metrics(registry: Registry) -> impl IntoResponse {
    // Gathering reads the engine's published figures: cheap, but off the async threads anyway.
    let gathered = tokio::task::spawn_blocking(move || {
        let encoder = TextEncoder::new();
        let mut body = Vec::new();
        encoder
            .encode(&registry.gather(), &mut body)
            .map(|()| (encoder.format_type().to_string(), body))
    })
    .await;
    match gathered {
        Ok(Ok((content_type, body))) => {
            (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body).into_response()
        }
        Ok(Err(error)) => (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response(),
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response(),
    }
}
