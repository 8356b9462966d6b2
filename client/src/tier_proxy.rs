//! Reads of tiered versions by a process that holds no tier keys (a library mount with a
//! client credential): a node reads them through for it over RPC
//! ([`saker_rpc::TierReadService`]), a bounded piece per call.

use saker_rpc::{RpcChannel, TierRef};

use crate::{channel_stream, ClientError, DataStream, ReadRange, TierReader};

/// How much one call asks for: a FUSE read asks for far less, a streamed GET keeps one
/// call in flight ahead of its consumer.
const PIECE: u64 = 4 << 20;

/// A [`TierReader`] that asks the node behind `channel`.
pub struct NodeTierReads {
    channel: RpcChannel,
}

impl NodeTierReads {
    pub fn new(channel: RpcChannel) -> Self {
        Self { channel }
    }
}

impl TierReader for NodeTierReads {
    fn read(&self, t: &TierRef, range: ReadRange) -> DataStream {
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        let (channel, t) = (self.channel.clone(), t.clone());
        tokio::spawn(async move {
            // Past the data: the records that follow it in an encrypted version's copy.
            let end = match range.start >= t.size {
                true => range.end,
                false => range.end.min(t.size),
            };
            let mut at = range.start.min(end);
            while at < end {
                let to = end.min(at + PIECE);
                let piece = match channel.tier_read(&t, at, to).await {
                    Ok(b) if b.len() as u64 == to - at => Ok(b),
                    Ok(b) => Err(format!("{} bytes of {}", b.len(), to - at)),
                    Err(e) => Err(e.to_string()),
                };
                let piece = piece.map_err(|e| ClientError::Tier(format!("tier {}: {e}", t.tier)));
                let failed = piece.is_err();
                if tx.send(piece).await.is_err() || failed {
                    return;
                }
                at = to;
            }
        });
        channel_stream(rx)
    }
}
