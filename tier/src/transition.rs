//! Moving a version to a tier and back: upload its bytes (one PUT up to [`PART`], multipart
//! beyond, every request with its CRC32C), then compare-and-set the version to the remote
//! copy in its MNode (`SetTier`), which queues the local bytes for GC in the same batch.
//!
//! Crash safety: until the commit the version keeps its local bytes and the upload is an
//! orphan the tier scrub deletes; after it, the remote copy is the version's and the local
//! chunks go only after their grace period. A retry uploads under a key of its own and
//! commits only if the version is still local: a version moved once is not moved again.

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use saker_client::{ChunkWriter, Cluster, ReadRange};
use saker_rpc::{Attr, Layout, MetaError, MetaRequest, Restored, Sse, TierRef, Want};

use crate::{metrics, Remote, TierError, Tiers};

/// Objects up to this size go up in one PUT; larger ones in parts of this size.
pub const PART: u64 = 8 << 20;

/// What a transition of one version did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Moved {
    /// Its bytes now live in the tier (this many were uploaded).
    Moved(u64),
    /// It already lived there.
    Already,
    /// The version changed or went since it was chosen (nothing moved).
    Changed,
    /// It cannot move (a file with hard links).
    Skipped(&'static str),
}

/// Moves the object at `path` (its noncurrent version `version`, if given) to tier `tier`,
/// if it is still the version `seen` (the attrs a walk found). A version in another tier
/// moves from there.
pub async fn transition(
    cluster: &Cluster,
    tiers: &Tiers,
    tier: &str,
    path: &[String],
    seen: &Attr,
    version: Option<&str>,
) -> Result<Moved, TierError> {
    let view = match lookup(cluster, path, version).await {
        Ok(v) => v,
        Err(TierError::Meta(MetaError::NotFound | MetaError::NoSuchVersion)) => {
            return Ok(Moved::Changed)
        }
        Err(e) => return Err(e),
    };
    let attr = &view.attr;
    if attr.id != seen.id || attr.s3_mtime_ns != seen.s3_mtime_ns {
        return Ok(Moved::Changed);
    }
    match &attr.layout {
        Layout::Tiered(t) if t.tier == tier => return Ok(Moved::Already),
        Layout::Shared { .. } => return Ok(Moved::Skipped("a file with hard links")),
        Layout::Tiered(_) | Layout::Inline | Layout::Chunks(_) | Layout::Coded(_) => {}
    }
    // An encrypted version's copy carries its packages' records after its data.
    let records = match view.meta.as_ref().and_then(|m| m.sse.as_ref()) {
        Some(sse) if saker_client::sealed::packaged(sse) => {
            let segments = saker_client::sealed::segments(sse, &attr.parts);
            let inline = view.data.clone();
            Some(
                cluster
                    .records_of(&attr.layout, inline, attr.size, &segments)
                    .await?,
            )
        }
        _ => None,
    };
    let remote = tiers.remote(tier).await?;
    let cid = tiers.cluster_id().await?;
    let key = remote.config().key_for(cid, attr.id, attr.s3_mtime_ns);
    let crc = upload(cluster, &remote, &key, attr, view.data.clone(), records).await?;
    let to = TierRef {
        tier: tier.to_string(),
        key,
        size: attr.size,
        crc32c: crc,
        restored: None,
    };
    match commit(cluster, path, attr, to.clone(), version.is_some()).await {
        Ok(()) => {
            metrics::TRANSITIONED.with_label_values(&["objects"]).inc();
            metrics::TRANSITIONED
                .with_label_values(&["bytes"])
                .inc_by(attr.size);
            Ok(Moved::Moved(attr.size))
        }
        Err(TierError::Meta(MetaError::PreconditionFailed | MetaError::NotFound)) => {
            // Overwritten meanwhile: the copy is nobody's (the scrub would find it too).
            let _ = remote.delete(&to.key).await;
            Ok(Moved::Changed)
        }
        Err(e) => Err(e),
    }
}

/// The current object at `path`, or its noncurrent `version`, with its bytes.
async fn lookup(
    cluster: &Cluster,
    path: &[String],
    version: Option<&str>,
) -> Result<saker_rpc::ObjectView, TierError> {
    let Some(v) = version else {
        return Ok(cluster.lookup(path, Want::OBJECT).await?);
    };
    let req = MetaRequest::LookupVersion {
        path: path.to_vec(),
        version_id: v.to_string(),
        want: Want::OBJECT,
    };
    match cluster.call(path, req).await? {
        saker_rpc::MetaResponse::Object(v) => Ok(*v),
        other => Err(saker_client::ClientError::Protocol(format!("{other:?}")).into()),
    }
}

async fn commit(
    cluster: &Cluster,
    path: &[String],
    attr: &Attr,
    to: TierRef,
    noncurrent: bool,
) -> Result<(), TierError> {
    let req = MetaRequest::SetTier {
        path: path.to_vec(),
        inode: attr.id,
        mtime_ns: attr.s3_mtime_ns,
        to: Box::new(to),
        noncurrent,
    };
    cluster.call(path, req).await?;
    Ok(())
}

/// Uploads the version's bytes as `key`, followed by `records` (an encrypted version's);
/// answers the CRC32C of its bytes.
async fn upload(
    cluster: &Cluster,
    remote: &Remote,
    key: &str,
    attr: &Attr,
    inline: Option<Bytes>,
    records: Option<Bytes>,
) -> Result<u32, TierError> {
    let records = records.unwrap_or_default();
    let all = ReadRange {
        start: 0,
        end: attr.size,
    };
    if attr.size <= PART {
        let bytes = Bytes::from(cluster.read_bytes(&attr.layout, inline, all).await?);
        if bytes.len() as u64 != attr.size {
            return Err(TierError::Invalid(format!(
                "read {} bytes of an object of {}",
                bytes.len(),
                attr.size
            )));
        }
        let crc = crc32c::crc32c(&bytes);
        let mut body = BytesMut::from(&bytes[..]);
        body.extend_from_slice(&records);
        let sent = crc32c::crc32c(&body);
        remote.put(key, body.freeze(), sent).await?;
        return Ok(crc);
    }
    let upload = remote.create_upload(key).await?;
    let result = async {
        let mut stream = cluster.read_data(&attr.layout, inline, all);
        let (mut crc, mut parts, mut buf) = (0u32, Vec::new(), BytesMut::new());
        let mut got = 0u64;
        loop {
            let piece = stream.next().await.transpose()?;
            match &piece {
                Some(p) => {
                    crc = crc32c::crc32c_append(crc, p);
                    got += p.len() as u64;
                    buf.extend_from_slice(p);
                }
                None => buf.extend_from_slice(&records),
            }
            while buf.len() as u64 >= PART || (piece.is_none() && !buf.is_empty()) {
                let n = (buf.len() as u64).min(PART) as usize;
                let body = buf.split_to(n).freeze();
                let part = remote
                    .put_part(key, &upload, parts.len() as i32 + 1, body)
                    .await?;
                parts.push(part);
            }
            if piece.is_none() {
                break;
            }
        }
        if got != attr.size {
            return Err(TierError::Invalid(format!(
                "read {got} bytes of an object of {}",
                attr.size
            )));
        }
        remote.complete_upload(key, &upload, parts).await?;
        Ok(crc)
    }
    .await;
    if result.is_err() {
        remote.abort_upload(key, &upload).await;
    }
    result
}

/// Reads the data of the remote copy `t` back and compares its size and CRC32C with the
/// recorded ones (an encrypted version's records, after it, are checked by their tags).
pub async fn verify(tiers: &Tiers, t: &TierRef) -> Result<bool, TierError> {
    let remote = tiers.remote(&t.tier).await?;
    let mut body = remote
        .get(&t.key, (t.size > 0).then_some((0, t.size)))
        .await?;
    let (mut crc, mut size) = (0u32, 0u64);
    while let Some(b) = body.next().await {
        let b = b.map_err(|e| TierError::Remote {
            tier: t.tier.clone(),
            msg: e.to_string(),
        })?;
        crc = crc32c::crc32c_append(crc, &b);
        size += b.len() as u64;
    }
    Ok(size == t.size && crc == t.crc32c)
}

/// Brings a local copy of the tiered object at `path` (version `seen`, a noncurrent one if
/// `noncurrent`) back until `until_ns` (RestoreObject); a copy already there gets the later
/// of the two expiries.
pub async fn restore(
    cluster: &Cluster,
    path: &[String],
    seen: &Attr,
    sse: Option<&Sse>,
    until_ns: i64,
    noncurrent: bool,
) -> Result<(), TierError> {
    let Some(t) = seen.layout.tiered() else {
        return Err(TierError::Invalid(
            "the object does not live in a tier".into(),
        ));
    };
    let mut to = t.clone();
    if let Some(r) = &t.restored {
        to.restored = Some(Restored {
            chunks: r.chunks.clone(),
            until_ns: until_ns.max(r.until_ns),
        });
        return commit(cluster, path, seen, to, noncurrent).await;
    }
    let all = ReadRange {
        start: 0,
        end: seen.size,
    };
    if let Some(sse) = sse.filter(|s| saker_client::sealed::packaged(s)) {
        // Encrypted: chunks cut as its writer cut them, each with its packages' records.
        let segments = saker_client::sealed::segments(sse, &seen.parts);
        let records = cluster
            .records_of(&seen.layout, None, seen.size, &segments)
            .await?;
        let data = cluster.read_data(&seen.layout, None, all);
        let chunks = cluster
            .put_packaged(data, &records, &segments, seen.size)
            .await?;
        to.restored = Some(Restored { chunks, until_ns });
        return commit(cluster, path, seen, to, noncurrent).await;
    }
    let mut stream = cluster.read_data(&seen.layout, None, all);
    let mut w = ChunkWriter::new(cluster);
    while let Some(piece) = stream.next().await {
        match piece {
            Ok(p) => w.write(&p).await?,
            Err(e) => {
                w.abort().await;
                return Err(e.into());
            }
        }
    }
    let written = w.finish_chunked().await?;
    to.restored = Some(Restored {
        chunks: written.layout.chunks().to_vec(),
        until_ns,
    });
    // On a refused commit the MNode queues the new chunks for GC itself.
    commit(cluster, path, seen, to, noncurrent).await
}

/// Drops the restored copy of the tiered object at `path` (version `seen`, a noncurrent one
/// if `noncurrent`), its lapse come.
pub async fn drop_restored(
    cluster: &Cluster,
    path: &[String],
    seen: &Attr,
    noncurrent: bool,
) -> Result<(), TierError> {
    let Some(t) = seen.layout.tiered() else {
        return Ok(());
    };
    let mut to = t.clone();
    to.restored = None;
    commit(cluster, path, seen, to, noncurrent).await
}
