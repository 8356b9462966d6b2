//! Buckets' write settings in every MNode group: a change reaches every group through raft
//! before it is answered, each write is applied under the settings it was decided under or
//! not at all (a gateway whose copy is behind decides it again), and a group keeps its copy
//! across a SIGKILL.

mod common;

use aws_sdk_s3::types::{BucketVersioningStatus, VersioningConfiguration};
use common::cluster::Nodes;
use common::multiproc::LocalCluster;
use common::race::Writers;
use common::versions::{all_versions, put_v};
use common::*;
use saker_rpc::{MetaRequest, MetaResponse, SealedWrites, SettingsRequest, Versioning};

async fn set_status(c: &aws_sdk_s3::Client, b: &str, enabled: bool) {
    let status = match enabled {
        true => BucketVersioningStatus::Enabled,
        false => BucketVersioningStatus::Suspended,
    };
    c.put_bucket_versioning()
        .bucket(b)
        .versioning_configuration(VersioningConfiguration::builder().status(status).build())
        .send()
        .await
        .unwrap();
}

/// Versioning switched through one gateway while two others PUT: every PUT sent after a
/// switch was answered (and answered before the next) is written as the switch says (a
/// version id while Enabled, the `null` version while Suspended), though the other gateways'
/// copies of the settings are refreshed only every 2 s; and what the listing shows is what
/// each PUT answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_versioning_switch_holds_for_every_put_through_every_gateway_after_it() {
    const CHANGES: usize = 8;
    const AFTER_EACH: usize = 6;
    let nodes = Nodes::start(&[]);
    let bucket = "settings-race";
    let admin = nodes.client(0, true);
    eventually("create the bucket", || {
        admin.create_bucket().bucket(bucket).send()
    })
    .await;
    set_status(&admin, bucket, true).await;

    let mut writers = Writers::default();
    for (w, gateway) in [1, 2, 1, 2].into_iter().enumerate() {
        let c = nodes.client(gateway, true);
        writers.spawn(move |n| {
            let c = c.clone();
            async move {
                let key = format!("w{w}/k{n}");
                let vid = put_v(&c, bucket, &key, key.as_bytes()).await;
                (key, vid)
            }
        });
    }
    let settings = (0..CHANGES).map(|i| i % 2 == 1);
    let switch = |enabled| set_status(&admin, bucket, enabled);
    let (changes, puts) = writers.race(true, settings, AFTER_EACH, switch).await;

    let settled = changes.settled(&puts);
    assert!(settled.len() >= CHANGES * AFTER_EACH, "{settled:?}");
    for ((key, vid), enabled) in settled {
        assert_eq!(
            vid.is_some(),
            enabled,
            "{key}: PUT while Enabled was {enabled}"
        );
    }
    // Each key was written once: its one version is the one its PUT answered.
    let listed = all_versions(&admin, bucket, 1000).await;
    assert_eq!(listed.len(), puts.len());
    for (key, listed_vid, _, _) in &listed {
        let (_, _, (_, vid)) = puts.iter().find(|p| &p.2 .0 == key).expect("a PUT key");
        assert_eq!(listed_vid, vid.as_deref().unwrap_or("null"), "{key}");
    }
}

/// The copy of group `g`.
async fn copy_at(lib: &saker_client::Cluster, g: u32, bucket: &str) -> SealedWrites {
    let get = SettingsRequest::Get {
        bucket: bucket.into(),
    };
    match lib.call_group(g, MetaRequest::BucketSettings(get)).await {
        Ok(MetaResponse::Sealed(s)) => s,
        other => panic!("group {g}: {other:?}"),
    }
}

/// An MNode process killed with SIGKILL comes back with its group's copy of the settings
/// (from its own state: the coordinator, which installs copies when it starts, ran on), and
/// its writes go on under them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_group_keeps_its_settings_across_a_kill() {
    let mut cluster = LocalCluster::start();
    let s3 = cluster.client(true);
    let bucket = "settings-kept";
    eventually("create the bucket", || {
        s3.create_bucket().bucket(bucket).send()
    })
    .await;
    set_status(&s3, bucket, true).await;
    let lib = saker_client::Cluster::connect_all(&cluster.rpc["mnode1"], Default::default())
        .await
        .unwrap();
    let sealed = copy_at(&lib, 1, bucket).await;
    assert_eq!(sealed.writes.versioning, Versioning::Enabled);
    assert!(sealed.version > 0);
    for g in 2..=3 {
        assert_eq!(copy_at(&lib, g, bucket).await, sealed, "group {g}");
    }

    cluster.kill("mnode2");
    cluster.spawn("mnode2");
    let again = eventually("group 2 answers", || async {
        let get = SettingsRequest::Get {
            bucket: bucket.into(),
        };
        lib.call_group(2, MetaRequest::BucketSettings(get)).await
    })
    .await;
    assert_eq!(again, MetaResponse::Sealed(sealed));

    // Every group's keys are written as versions still.
    for i in 0..12 {
        let key = format!("after-{i}");
        let put = eventually("a PUT", || {
            s3.put_object()
                .bucket(bucket)
                .key(&key)
                .body(body(key.as_bytes()))
                .send()
        })
        .await;
        assert!(put.version_id.is_some(), "{key}");
    }
}
