//! Reaching a TiKV cluster at start, within bounded waits, and saying what went wrong.
//!
//! Every PD endpoint is tried at once: a TCP connection within [`DIAL_FOR`], then an answer
//! as PD (`GetMembers`) within [`ANSWER_FOR`], then the client URLs its leader advertises must
//! be reachable from here (a cluster in containers may advertise names only its own network
//! resolves), then `tikv-client` connects through it. A PD is not enough: TiKV itself must
//! answer a read, and when it does not, the stores PD hands out are named with what dialling
//! each did. So a PD that is not there, a port that speaks something else, a listener that
//! never answers, and a PD whose TiKV cannot be reached all fail the start in well under a
//! minute, with a message naming every endpoint tried and what each did. `tikv-client` alone
//! would wait for ever on a listener that never answers (its connect has no timeout) and say
//! only "PD cluster failed to respond".

use std::time::Duration;

use tikv_client::{Config, TransactionClient};
use tokio::time::{timeout, Instant};
use tonic::codegen::http::uri::PathAndQuery;

/// How long a TCP connection to a PD endpoint, an advertised URL or a TiKV store may take.
pub(super) const DIAL_FOR: Duration = Duration::from_secs(3);
/// How long a connected PD endpoint may take to answer.
pub(super) const ANSWER_FOR: Duration = Duration::from_secs(5);
/// How long TiKV may take to answer the first read (retries through region errors included).
pub(super) const READ_FOR: Duration = Duration::from_secs(10);

/// A PD that answered at start, on which TiKV answered a read.
pub(super) struct Connected {
    pub client: TransactionClient,
    pub cluster_id: u64,
    /// The endpoint that answered.
    pub endpoint: String,
}

/// A client of the PD at one of `endpoints` on which TiKV answered a read of `probe`, or why
/// there is none: every endpoint tried and what it did.
pub(super) async fn connect(
    endpoints: &[String],
    config: Config,
    probe: Vec<u8>,
) -> Result<Connected, String> {
    let tried = futures::future::join_all(endpoints.iter().map(|ep| {
        let config = config.clone();
        async move { (ep, try_pd(ep, config).await) }
    }))
    .await;
    let mut failures = Vec::new();
    let mut answered = None;
    for (ep, outcome) in tried {
        match outcome {
            Ok(pd) if answered.is_none() => answered = Some((ep, pd)),
            Ok(_) => {}
            Err(e) => failures.push(format!("  {ep}: {e}")),
        }
    }
    let Some((ep, (client, cluster_id))) = answered else {
        return Err(format!("no PD endpoint answered:\n{}", failures.join("\n")));
    };
    match read(&client, probe).await {
        Ok(()) => Ok(Connected {
            client,
            cluster_id,
            endpoint: ep.clone(),
        }),
        Err(e) => Err(format!(
            "PD {ep} answered, but TiKV did not: {e}{}",
            stores(ep, cluster_id).await
        )),
    }
}

/// `host:port` of an endpoint or URL (`http://host:port`).
fn host_port(url: &str) -> &str {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(url);
    rest.trim_end_matches('/')
}

/// Whether a TCP connection to `url` opens within [`DIAL_FOR`].
async fn dial(url: &str) -> Result<(), String> {
    match timeout(DIAL_FOR, tokio::net::TcpStream::connect(host_port(url))).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("cannot connect: {e}")),
        Err(_) => Err(format!("no TCP connection within {DIAL_FOR:?}")),
    }
}

/// A client through the PD endpoint `ep` and its cluster id, or what `ep` did instead.
async fn try_pd(ep: &str, config: Config) -> Result<(TransactionClient, u64), String> {
    dial(ep).await?;
    let members: GetMembersResponse = pd_call(ep, "GetMembers", GetMembersRequest::default())
        .await
        .map_err(|e| e.in_answer_to("GetMembers"))?;
    let cluster_id = header_ok(members.header.as_ref())?;
    let leader = members
        .leader
        .ok_or("answered as PD, but it has no leader (is the PD cluster up?)")?;
    let mut unreachable = Vec::new();
    for url in &leader.client_urls {
        match dial(url).await {
            Ok(()) => {
                unreachable.clear();
                break;
            }
            Err(e) => unreachable.push(format!("{url}: {e}")),
        }
    }
    if !unreachable.is_empty() || leader.client_urls.is_empty() {
        return Err(format!(
            "answered as PD, but the client URLs its leader {:?} advertises are not reachable \
             from here ({}); set PD's --advertise-client-urls to an address this host reaches",
            leader.name,
            unreachable.join("; ")
        ));
    }
    match timeout(
        ANSWER_FOR,
        TransactionClient::new_with_config(vec![ep.to_string()], config),
    )
    .await
    {
        Ok(Ok(client)) => Ok((client, cluster_id)),
        Ok(Err(e)) => Err(format!(
            "answered as PD, but the client failed: {}",
            describe(&e)
        )),
        Err(_) => Err(format!(
            "answered as PD, but the client did not connect within {ANSWER_FOR:?}"
        )),
    }
}

/// A snapshot read of `key` at a fresh timestamp, retried through errors until [`READ_FOR`]
/// has passed; the last error if it never succeeded.
async fn read(client: &TransactionClient, key: Vec<u8>) -> Result<(), String> {
    let until = Instant::now() + READ_FOR;
    let mut last: Option<String> = None;
    let mut attempt = 0;
    while Instant::now() < until {
        let tried = timeout(until - Instant::now(), async {
            let ts = client.current_timestamp().await?;
            client
                .snapshot(ts, super::tikv_engine::options())
                .get(key.clone())
                .await
        })
        .await;
        match tried {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(e)) => last = Some(describe(&e)),
            Err(_) => break,
        }
        attempt += 1;
        tokio::time::sleep(super::tikv_engine::backoff(attempt)).await;
    }
    Err(match last {
        Some(e) => format!("no read succeeded within {READ_FOR:?}; the last failed: {e}"),
        None => format!("no answer to a read within {READ_FOR:?}"),
    })
}

/// The TiKV stores PD at `ep` hands out and whether each is reachable from here, as lines to
/// append to an error (empty if PD does not say).
async fn stores(ep: &str, cluster_id: u64) -> String {
    let req = GetAllStoresRequest {
        header: Some(RequestHeader {
            cluster_id,
            sender_id: 0,
        }),
        exclude_tombstone_stores: true,
    };
    let Ok(resp) = pd_call::<_, GetAllStoresResponse>(ep, "GetAllStores", req).await else {
        return String::new();
    };
    let mut out = String::new();
    for s in resp.stores {
        let state = match dial(&s.address).await {
            Ok(()) => "accepts TCP connections".to_string(),
            Err(e) => e,
        };
        out.push_str(&format!(
            "\n  TiKV store {} at {}: {state}",
            s.id, s.address
        ));
    }
    out
}

/// Why a PD call got no answer.
pub(super) enum CallError {
    NoAnswer,
    Failed(String),
}

impl CallError {
    pub(super) fn in_answer_to(self, call: &str) -> String {
        match self {
            CallError::NoAnswer => format!(
                "accepts connections but did not answer a PD request ({call}) within \
                 {ANSWER_FOR:?}"
            ),
            CallError::Failed(e) => format!("does not answer as PD ({call}): {e}"),
        }
    }
}

/// One unary PD call to `ep`, within [`ANSWER_FOR`].
pub(super) async fn pd_call<Req, Resp>(ep: &str, method: &str, req: Req) -> Result<Resp, CallError>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let call = async {
        let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{}", host_port(ep)))
            .map_err(|e| CallError::Failed(describe(&e)))?
            .connect_timeout(DIAL_FOR);
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| CallError::Failed(describe(&e)))?;
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready()
            .await
            .map_err(|e| CallError::Failed(describe(&e)))?;
        let path = PathAndQuery::try_from(format!("/pdpb.PD/{method}"))
            .map_err(|e| CallError::Failed(e.to_string()))?;
        grpc.unary(
            tonic::Request::new(req),
            path,
            tonic_prost::ProstCodec::default(),
        )
        .await
        .map(tonic::Response::into_inner)
        .map_err(|s| CallError::Failed(status(&s)))
    };
    timeout(ANSWER_FOR, call)
        .await
        .unwrap_or(Err(CallError::NoAnswer))
}

fn status(s: &tonic::Status) -> String {
    let mut out = format!("{:?}", s.code());
    if !s.message().is_empty() {
        out.push_str(&format!(": {}", s.message()));
    }
    out
}

/// The cluster id of a PD answer's header, or PD's error.
pub(super) fn header_ok(h: Option<&ResponseHeader>) -> Result<u64, String> {
    let h = h.ok_or("answered, but not as PD does (no response header)")?;
    match &h.error {
        Some(e) if e.r#type != 0 => Err(format!("PD refused: {} (type {})", e.message, e.r#type)),
        _ => Ok(h.cluster_id),
    }
}

/// An error and its causes on one line, without `tikv-client`'s `[file:line]: ` prefixes.
pub(super) fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(e);
    while let Some(e) = next {
        let text = e.to_string();
        let text = match text.strip_prefix('[').and_then(|t| t.split_once("]: ")) {
            Some((_, rest)) => rest.to_string(),
            None => text,
        };
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    parts.join(": ")
}

// The few PD messages the start-up checks send (kvproto's `pdpb` and `metapb`, fields the
// checks read; prost skips the others).

#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct RequestHeader {
    #[prost(uint64, tag = "1")]
    pub cluster_id: u64,
    #[prost(uint64, tag = "2")]
    pub sender_id: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ResponseHeader {
    #[prost(uint64, tag = "1")]
    cluster_id: u64,
    #[prost(message, optional, tag = "2")]
    error: Option<PdError>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PdError {
    #[prost(int32, tag = "1")]
    r#type: i32,
    #[prost(string, tag = "2")]
    message: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Member {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, repeated, tag = "4")]
    client_urls: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct GetMembersRequest {
    #[prost(message, optional, tag = "1")]
    header: Option<RequestHeader>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct GetMembersResponse {
    #[prost(message, optional, tag = "1")]
    header: Option<ResponseHeader>,
    #[prost(message, optional, tag = "3")]
    leader: Option<Member>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct GetAllStoresRequest {
    #[prost(message, optional, tag = "1")]
    header: Option<RequestHeader>,
    #[prost(bool, tag = "2")]
    exclude_tombstone_stores: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
struct GetAllStoresResponse {
    #[prost(message, optional, tag = "1")]
    header: Option<ResponseHeader>,
    #[prost(message, repeated, tag = "2")]
    stores: Vec<Store>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Store {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(string, tag = "2")]
    address: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_dialled_without_their_scheme() {
        assert_eq!(host_port("http://pd:2379"), "pd:2379");
        assert_eq!(host_port("https://10.0.0.1:2379/"), "10.0.0.1:2379");
        assert_eq!(host_port("127.0.0.1:2379"), "127.0.0.1:2379");
    }

    #[test]
    fn a_pd_error_header_is_a_refusal() {
        let ok = ResponseHeader {
            cluster_id: 7,
            error: None,
        };
        assert_eq!(header_ok(Some(&ok)), Ok(7));
        let refused = ResponseHeader {
            cluster_id: 7,
            error: Some(PdError {
                r#type: 2,
                message: "not bootstrapped".into(),
            }),
        };
        assert!(header_ok(Some(&refused))
            .unwrap_err()
            .contains("not bootstrapped"));
        assert!(header_ok(None).is_err());
    }
}
