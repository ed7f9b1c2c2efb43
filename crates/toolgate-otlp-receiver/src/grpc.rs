//! The OTLP/gRPC listener: opentelemetry-proto's `TraceService` and `MetricsService` behind
//! tonic's server.
//!
//! Each export waits the configured delay, then answers `unavailable` when the receiver was
//! told to fail (recording nothing), or records the request and answers an empty response.
//! Messages up to [`MAX_BODY_BYTES`](crate::MAX_BODY_BYTES) are accepted (tonic's own default is
//! 4 MiB); a larger or undecodable message is refused by tonic before it reaches these
//! services, so it is neither recorded nor counted here.

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

use crate::state::{Outcome, Shared};
use crate::{MAX_BODY_BYTES, Transport};

struct Traces(Arc<Shared>);
struct Metrics(Arc<Shared>);

/// Serves both services until the task is dropped (the receiver's runtime shutting down).
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let traces = TraceServiceServer::new(Traces(Arc::clone(&shared)))
        .max_decoding_message_size(MAX_BODY_BYTES);
    let metrics =
        MetricsServiceServer::new(Metrics(shared)).max_decoding_message_size(MAX_BODY_BYTES);
    // The server ends only if its listener fails; a test then sees its exports fail to connect.
    let _ = tonic::transport::Server::builder()
        .add_service(traces)
        .add_service(metrics)
        .serve_with_incoming(TcpIncoming::from(listener))
        .await;
}

/// Waits the delay, then says whether to fail (and counts the failure).
async fn before_answer(shared: &Shared) -> Result<(), Status> {
    let behaviour = shared.behaviour();
    if !behaviour.delay.is_zero() {
        tokio::time::sleep(behaviour.delay).await;
    }
    if behaviour.fail {
        shared.count(Transport::Grpc, Outcome::FailedOnPurpose);
        return Err(Status::unavailable("the receiver was told to fail"));
    }
    Ok(())
}

#[tonic::async_trait]
impl TraceService for Traces {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        before_answer(&self.0).await?;
        self.0.record_traces(Transport::Grpc, request.into_inner());
        Ok(Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl MetricsService for Metrics {
    async fn export(
        &self,
        request: Request<ExportMetricsServiceRequest>,
    ) -> Result<Response<ExportMetricsServiceResponse>, Status> {
        before_answer(&self.0).await?;
        self.0.record_metrics(Transport::Grpc, request.into_inner());
        Ok(Response::new(ExportMetricsServiceResponse::default()))
    }
}
