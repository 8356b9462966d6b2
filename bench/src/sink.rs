//! `saker bench sink`: an S3 endpoint that stores nothing, the loopback HTTP ceiling of
//! `saker bench s3` on this machine (issue 34's physical limit beside the disk's).
//!
//! A PUT reads its whole body and keeps only the key's length; a GET answers the bytes the
//! benchmark wrote, which it seeds by the object's size ([`super::s3::payload`]), so its body
//! checks pass; HEAD, DELETE, CreateBucket, an (always empty) listing, multipart uploads and
//! ranged GETs answer as S3 does. It neither checks signatures nor hashes anything: what it
//! costs is the HTTP stack alone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use clap::Args;
use http_body_util::BodyExt;

#[derive(Args, Debug)]
pub struct SinkArgs {
    /// Listen here (HOST:PORT).
    #[arg(long, default_value = "127.0.0.1:19500")]
    addr: String,
}

#[derive(Default)]
struct Sink {
    /// The length of every key written, by path.
    lengths: Mutex<HashMap<String, u64>>,
    /// The bytes of the parts of each multipart upload so far, by path (one upload per key).
    uploads: Mutex<HashMap<String, u64>>,
    /// The benchmark's payload of each size, made once.
    payloads: Mutex<HashMap<u64, Bytes>>,
}

pub async fn run(args: SinkArgs) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(&args.addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.addr))?;
    println!("sink listening on {}", args.addr);
    let app = axum::Router::new()
        .fallback(serve)
        .with_state(Arc::new(Sink::default()));
    axum::serve(listener, app).await?;
    Ok(())
}

async fn serve(State(sink): State<Arc<Sink>>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    let is_object = path.trim_start_matches('/').contains('/');
    let query = req.uri().query().unwrap_or("").to_string();
    match (req.method().clone(), is_object) {
        (Method::PUT, true) => {
            let mut body = req.into_body();
            let mut n = 0u64;
            while let Some(frame) = body.frame().await {
                match frame {
                    Ok(f) => n += f.data_ref().map_or(0, |d| d.len() as u64),
                    Err(_) => return StatusCode::BAD_REQUEST.into_response(),
                }
            }
            if query.contains("uploadId=") {
                *sink
                    .uploads
                    .lock()
                    .expect("sink lock")
                    .entry(path)
                    .or_default() += n;
            } else {
                sink.lengths.lock().expect("sink lock").insert(path, n);
            }
            ([(header::ETAG, "\"0\"")], "").into_response()
        }
        (Method::GET | Method::HEAD, true) => {
            let Some(len) = sink.lengths.lock().expect("sink lock").get(&path).copied() else {
                return StatusCode::NOT_FOUND.into_response();
            };
            if req.method() == Method::HEAD {
                return ([(header::CONTENT_LENGTH, len)], "").into_response();
            }
            let payload = sink
                .payloads
                .lock()
                .expect("sink lock")
                .entry(len)
                .or_insert_with(|| super::s3::payload(len))
                .clone();
            match range(req.headers(), len) {
                Some((start, end)) => (
                    StatusCode::PARTIAL_CONTENT,
                    Body::from(payload.slice(start as usize..end as usize)),
                )
                    .into_response(),
                None => Response::new(Body::from(payload)),
            }
        }
        (Method::POST, true) if query.starts_with("uploads") => {
            sink.uploads.lock().expect("sink lock").insert(path, 0);
            xml("<InitiateMultipartUploadResult><UploadId>sink</UploadId>\
                 </InitiateMultipartUploadResult>")
        }
        (Method::POST, true) if query.contains("uploadId=") => {
            let Some(n) = sink.uploads.lock().expect("sink lock").remove(&path) else {
                return StatusCode::NOT_FOUND.into_response();
            };
            sink.lengths.lock().expect("sink lock").insert(path, n);
            xml("<CompleteMultipartUploadResult><ETag>\"0-1\"</ETag>\
                 </CompleteMultipartUploadResult>")
        }
        (Method::DELETE, true) => {
            sink.lengths.lock().expect("sink lock").remove(&path);
            StatusCode::NO_CONTENT.into_response()
        }
        (Method::PUT, false) => StatusCode::OK.into_response(),
        (Method::GET, false) => xml(
            "<ListBucketResult><IsTruncated>false</IsTruncated><KeyCount>0</KeyCount>\
             </ListBucketResult>",
        ),
        (Method::POST, false) if query.starts_with("delete") => xml("<DeleteResult/>"),
        _ => StatusCode::NOT_IMPLEMENTED.into_response(),
    }
}

/// The [start, end) of a `Range: bytes=A-B` header within `len` bytes.
fn range(headers: &axum::http::HeaderMap, len: u64) -> Option<(u64, u64)> {
    let v = headers.get(header::RANGE)?.to_str().ok()?;
    let (a, b) = v.strip_prefix("bytes=")?.split_once('-')?;
    let start: u64 = a.parse().ok()?;
    let end = b.parse::<u64>().ok()?.saturating_add(1).min(len);
    (start < end).then_some((start, end))
}

fn xml(text: &'static str) -> Response {
    ([(header::CONTENT_TYPE, "application/xml")], text).into_response()
}
