//! The OTLP/gRPC listener: opentelemetry-proto's `TraceService` and `MetricsService` behind
//! tonic's server.
//!
//! Each export is recorded at once (or, when the receiver was told to fail, counted and not
//! recorded); the answer (an empty response, or `unavailable`) goes out after the delay.
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
use tonic::metadata::KeyAndValueRef;
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

/// Records the request (or counts the refusal, when told to fail), then waits the delay
/// before the answer goes out.
async fn answer<T: Default>(
    shared: &Shared,
    record: impl FnOnce(&Shared),
) -> Result<Response<T>, Status> {
    let behaviour = shared.behaviour();
    let answer = if behaviour.fail {
        shared.count(Transport::Grpc, Outcome::FailedOnPurpose);
        Err(Status::unavailable("the receiver was told to fail"))
    } else {
        record(shared);
        Ok(Response::new(T::default()))
    };
    if !behaviour.delay.is_zero() {
        tokio::time::sleep(behaviour.delay).await;
    }
    answer
}

#[tonic::async_trait]
impl TraceService for Traces {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let headers = request
            .metadata()
            .iter()
            .filter_map(|entry| match entry {
                KeyAndValueRef::Ascii(name, value) => {
                    Some((name.to_string(), value.to_str().ok()?.to_string()))
                }
                KeyAndValueRef::Binary(..) => None,
            })
            .collect();
        let request = request.into_inner();
        answer(&self.0, |shared| {
            shared.record_traces(Transport::Grpc, headers, request)
        })
        .await
    }
}

#[tonic::async_trait]
impl MetricsService for Metrics {
    async fn export(
        &self,
        request: Request<ExportMetricsServiceRequest>,
    ) -> Result<Response<ExportMetricsServiceResponse>, Status> {
        let request = request.into_inner();
        answer(&self.0, |shared| {
            shared.record_metrics(Transport::Grpc, request)
        })
        .await
    }
}
