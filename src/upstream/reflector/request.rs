//! The reflector's requests: a list page, a watch, a streaming list, each
//! a GET of the resource's collection through the upstream client.

use http::StatusCode;

use super::{Reflector, StepError};
use crate::api::media::{self, Encoding};
use crate::cache::object::ObjectError;
use crate::upstream::client::Reply;

impl Reflector {
    /// What the upstream is asked for: the store's encoding (custom
    /// resources' protobuf: their metadata, which is all they have in it).
    fn accept(&self, watch: bool) -> &'static str {
        match (self.encoding(), self.resource.gvr.is_builtin(), watch) {
            (Encoding::Json, _, _) => "application/json",
            (Encoding::Protobuf, true, _) => media::PROTOBUF,
            (Encoding::Protobuf, false, false) => {
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
            }
            (Encoding::Protobuf, false, true) => {
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
            }
        }
    }

    /// `GET {collection}?{query}`, any status; a silence past
    /// [`Reflector::patience`] is an error. The answer is a sign of life.
    pub(super) async fn request(&mut self, query: &str) -> Result<Reply, StepError> {
        let patience = self.patience();
        let at = self.upstream.preferred();
        // A scoped cache (a node's pods) lists and watches its scope only.
        let uri = format!(
            "{}?{query}{}",
            self.writer
                .store()
                .scope()
                .collection_path(&self.resource.gvr),
            self.writer.store().scope().query_suffix()
        );
        let accept = self.accept(query.starts_with("watch=1"));
        let reply = match tokio::time::timeout(patience, self.upstream.get(&uri, accept)).await {
            Err(_) => {
                return Err(StepError::Silent {
                    server: Some(at),
                    why: format!("the upstream did not answer within {patience:?}"),
                });
            }
            // A server that takes connections and drops them (a balancer
            // with nothing behind it, a crashing process): a list or watch
            // has no effects, so the next attempt goes to the next server.
            Ok(Err(e)) => {
                self.upstream.fail_over(at, "its requests fail");
                return Err(StepError::Failed(e.to_string()));
            }
            Ok(Ok(reply)) => reply,
        };
        self.writer.heard();
        Ok(reply)
    }

    /// A list or watch request: 200, or the error its status means.
    pub(super) async fn get(&mut self, query: &str) -> Result<Reply, StepError> {
        let reply = self.request(query).await?;
        match reply.status() {
            StatusCode::OK => {
                self.answered(&reply)?;
                Ok(reply)
            }
            StatusCode::GONE => Err(StepError::Expired),
            s => Err(StepError::Failed(format!(
                "GET {}: HTTP {s}",
                self.resource.gvr.collection_path()
            ))),
        }
    }

    /// A streaming list request: 200, streaming lists refused (a 4xx other
    /// than 410 or 429: an upstream that does not serve them), or the error
    /// its status means.
    pub(super) async fn get_streaming_list(&mut self, query: &str) -> Result<Reply, StepError> {
        let reply = self.request(query).await?;
        match reply.status() {
            StatusCode::OK => {
                self.answered(&reply)?;
                Ok(reply)
            }
            s if s.is_client_error()
                && s != StatusCode::GONE
                && s != StatusCode::TOO_MANY_REQUESTS =>
            {
                Err(StepError::StreamingUnsupported(format!("HTTP {s}")))
            }
            s => Err(StepError::Failed(format!("streaming list: HTTP {s}"))),
        }
    }

    /// A 200 in the encoding asked for: an upstream that answers a
    /// protobuf request in JSON (a resource without protobuf, a server that
    /// does not speak it) makes this encoding uncacheable, not a relist
    /// loop. Counts as answered for the backoff.
    fn answered(&mut self, reply: &Reply) -> Result<(), StepError> {
        if self.encoding() == Encoding::Protobuf && !reply.is_protobuf() {
            return Err(StepError::Uncacheable(ObjectError::Malformed(format!(
                "the upstream answers protobuf requests with Content-Type {:?}",
                reply.content_type()
            ))));
        }
        self.backoff.answered();
        Ok(())
    }
}
