//! Buckets' change feeds, group by group: read a page of one group's feed of a bucket, and
//! acknowledge what was delivered so the group drops it ([`saker_rpc::FeedRequest`]).

use saker_namespace::GroupId;
use saker_rpc::{FeedPage, FeedRequest, MetaRequest, MetaResponse};

use crate::{ClientError, Cluster};

fn page_of(answer: MetaResponse) -> Result<FeedPage, ClientError> {
    match answer {
        MetaResponse::Feed(p) => Ok(p),
        other => Err(ClientError::Protocol(format!(
            "a feed request answered {other:?}"
        ))),
    }
}

impl Cluster {
    /// Up to `limit` records of `bucket`'s feed in group `g` after seq `after`, oldest first,
    /// with where that feed stands.
    pub async fn feed_read(
        &self,
        g: GroupId,
        bucket: &str,
        after: u64,
        limit: u32,
    ) -> Result<FeedPage, ClientError> {
        let req = FeedRequest::Read {
            bucket: bucket.to_string(),
            after,
            limit,
        };
        page_of(self.call_group(g, MetaRequest::Feed(req)).await?)
    }

    /// Drops `bucket`'s records in group `g` up to seq `upto` (they were delivered); answers
    /// where the feed stands after.
    pub async fn feed_ack(
        &self,
        g: GroupId,
        bucket: &str,
        upto: u64,
    ) -> Result<FeedPage, ClientError> {
        let req = FeedRequest::Ack {
            bucket: bucket.to_string(),
            upto,
        };
        page_of(self.call_group(g, MetaRequest::Feed(req)).await?)
    }

    /// Group `g`'s feed clock once it is not `seen` (feed records were applied since), or
    /// after `wait` (at most 20 s) as it is: a long-poll.
    pub async fn feed_wait(
        &self,
        g: GroupId,
        seen: u64,
        wait: std::time::Duration,
    ) -> Result<u64, ClientError> {
        let req = FeedRequest::Wait {
            seen,
            wait_ms: wait.as_millis().min(u32::MAX as u128) as u32,
        };
        match self.call_group(g, MetaRequest::Feed(req)).await? {
            MetaResponse::FeedClock(c) => Ok(c),
            other => Err(ClientError::Protocol(format!(
                "a feed wait answered {other:?}"
            ))),
        }
    }

    /// The ids of every group, for reading each one's feed.
    pub fn group_ids(&self) -> Vec<GroupId> {
        self.groups().map(|(g, _)| *g).collect()
    }
}
