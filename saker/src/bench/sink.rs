//! `saker bench sink`: an S3 endpoint that stores nothing, the loopback HTTP ceiling of
//! `saker bench s3` on this machine (issue 34's physical limit beside the disk's).
//!
//! A PUT reads its whole body and keeps only the key's length; a GET answers the bytes the
//! benchmark wrote, which it seeds by the object's size ([`super::s3::payload`]), so its body
//! checks pass; HEAD, DELETE, CreateBucket and an (always empty) listing answer as S3 does. It
//! neither checks signatures nor hashes anything: what it costs is the HTTP stack alone.

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
            sink.lengths.lock().expect("sink lock").insert(path, n);
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
            Response::new(Body::from(payload))
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

fn xml(text: &'static str) -> Response {
    ([(header::CONTENT_TYPE, "application/xml")], text).into_response()
}
