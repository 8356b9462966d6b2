//! The library client against a running `saker server`: `Cluster::connect` to its RPC address,
//! then the same namespace through the library and through S3, both ways.
//!
//! File data goes to the server's chunkstore over the same RPC address, so chunked objects
//! cross over too.

mod common;

use bytes::Bytes;
use common::*;
use futures::TryStreamExt;
use saker_client::{ChunkWriter, Cluster, ClusterConfig, ListItem, Lister, ReadRange};
use saker_rpc::{fetch_cluster_map, Layout, MetaError, MetaRequest, NewObject, ObjectMeta, Want};

/// A library client on `srv`'s RPC address, writing chunks of `chunk_size` to the server's
/// chunkstore.
async fn connect(srv: &Server, chunk_size: usize) -> Cluster {
    let config = ClusterConfig {
        chunk_size,
        ..ClusterConfig::default()
    };
    srv.use_credential();
    Cluster::connect_all(&srv.rpc_addr, config)
        .await
        .unwrap_or_else(|e| panic!("connect to {}: {e}", srv.rpc_addr))
}

fn path(bucket: &str, key: &str) -> Vec<String> {
    std::iter::once(bucket)
        .chain(key.split('/'))
        .map(str::to_string)
        .collect()
}

/// Writes `data` at `bucket/key` through the library as S3 would store it.
async fn lib_put(cluster: &Cluster, bucket: &str, key: &str, data: &[u8], meta: ObjectMeta) {
    let mut w = ChunkWriter::new(cluster);
    w.write(data).await.expect("write chunks");
    let written = w.finish().await.expect("finish chunks");
    let obj = NewObject {
        size: written.size,
        etag: md5_hex(data),
        layout: written.layout,
        inline: written.inline,
        meta,
        ..Default::default()
    };
    let attr = cluster
        .put_object(&path(bucket, key), obj, false, None, Default::default())
        .await
        .unwrap_or_else(|e| panic!("library put {key}: {e}"));
    assert_eq!(attr.size, data.len() as u64);
}

/// Reads `bucket/key` through the library: one lookup, then the data.
async fn lib_get(cluster: &Cluster, bucket: &str, key: &str) -> (Vec<u8>, saker_rpc::ObjectView) {
    let view = cluster
        .lookup(&path(bucket, key), Want::OBJECT)
        .await
        .unwrap_or_else(|e| panic!("library lookup {key}: {e}"));
    let range = ReadRange {
        start: 0,
        end: view.attr.size,
    };
    let parts: Vec<Bytes> = cluster
        .read_data(&view.attr.layout, view.data.clone(), range)
        .try_collect()
        .await
        .expect("read data");
    (parts.concat(), view)
}

#[tokio::test]
async fn rpc_cluster_map_describes_the_server_groups() {
    let srv = Server::start(Opts::default().arg("--mnodes", "3"));
    srv.use_credential();
    let map = fetch_cluster_map(&srv.rpc_addr).await.expect("cluster map");
    assert_eq!(map.groups, vec![1, 2, 3]);
    assert_eq!(map.vnodes, 256, "a new namespace's ring");
    assert_eq!(map.version, 1);
    assert!(map.exceptions.is_empty());
    let cluster = connect(&srv, 8 * 1024 * 1024).await;
    assert_eq!(
        cluster.groups().map(|(g, _)| *g).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
}

#[tokio::test]
async fn rpc_library_writes_are_read_through_s3() {
    let srv = Server::default_start();
    let s3 = srv.client();
    // Small chunks, so the large object spans several.
    let cluster = connect(&srv, 32 * 1024).await;
    let bucket = bucket_name("rpc-lib");
    cluster
        .call(
            std::slice::from_ref(&bucket),
            MetaRequest::CreateBucket {
                name: bucket.clone(),
                uid: 0,
                gid: 0,
            },
        )
        .await
        .expect("create bucket through the library");

    let small = b"hello from the library client".to_vec();
    let meta = ObjectMeta {
        content_type: Some("text/plain".into()),
        user: vec![("origin".into(), "rpc".into())],
        ..Default::default()
    };
    lib_put(&cluster, &bucket, "dir/sub/small.txt", &small, meta).await;
    let big = random_bytes(100 * 1024 + 7);
    lib_put(&cluster, &bucket, "big.bin", &big, ObjectMeta::default()).await;
    // 100 KiB in 32 KiB chunks: four of them, on the server's disk.
    let (_, view) = lib_get(&cluster, &bucket, "big.bin").await;
    assert!(matches!(&view.attr.layout, Layout::Chunks(c) if c.len() == 4));

    s3.head_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect("S3 sees the bucket");
    assert_eq!(
        list_all(&s3, &bucket, None).await,
        vec!["big.bin", "dir/sub/small.txt"]
    );
    let out = s3
        .get_object()
        .bucket(&bucket)
        .key("dir/sub/small.txt")
        .send()
        .await
        .expect("S3 GET of a library object");
    assert_eq!(out.e_tag.as_deref(), Some(quoted_md5(&small).as_str()));
    assert_eq!(out.content_type.as_deref(), Some("text/plain"));
    assert_eq!(
        out.metadata()
            .and_then(|m| m.get("origin"))
            .map(String::as_str),
        Some("rpc")
    );
    assert_eq!(
        out.body.collect().await.unwrap().into_bytes().to_vec(),
        small
    );
    assert_eq!(get_bytes(&s3, &bucket, "big.bin").await, big);
    let head = s3
        .head_object()
        .bucket(&bucket)
        .key("big.bin")
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_length, Some(big.len() as i64));
    assert_eq!(head.e_tag.as_deref(), Some(quoted_md5(&big).as_str()));

    // A delete through the library is seen by S3.
    cluster
        .call(
            &path(&bucket, "dir/sub/small.txt"),
            MetaRequest::DeleteObject {
                path: path(&bucket, "dir/sub/small.txt"),
                dir_marker: false,
                cond: None,
                version_id: None,
                versioning: Default::default(),
                bypass_governance: false,
                lifecycle: false,
            },
        )
        .await
        .expect("library delete");
    assert_status(
        s3.head_object()
            .bucket(&bucket)
            .key("dir/sub/small.txt")
            .send()
            .await,
        404,
    );
    assert_eq!(list_all(&s3, &bucket, None).await, vec!["big.bin"]);
}

#[tokio::test]
async fn rpc_s3_writes_are_read_through_the_library() {
    let srv = Server::default_start();
    let s3 = srv.client();
    let cluster = connect(&srv, 8 * 1024 * 1024).await;
    let bucket = new_bucket(&s3, "rpc-s3").await;

    let small = b"written through S3".to_vec();
    s3.put_object()
        .bucket(&bucket)
        .key("a/b/small.txt")
        .content_type("text/csv")
        .metadata("color", "blue")
        .body(body(&small))
        .send()
        .await
        .expect("S3 put");
    // Above the 16 KiB inline threshold: stored as a chunk by the server.
    let big = random_bytes(300 * 1024);
    put(&s3, &bucket, "big.bin", &big).await;

    let (data, view) = lib_get(&cluster, &bucket, "a/b/small.txt").await;
    assert_eq!(data, small);
    assert_eq!(view.attr.etag, md5_hex(&small));
    assert_eq!(view.attr.layout, Layout::Inline);
    let meta = view.meta.expect("object metadata");
    assert_eq!(meta.content_type.as_deref(), Some("text/csv"));
    assert_eq!(meta.user, vec![("color".to_string(), "blue".to_string())]);

    let (data, view) = lib_get(&cluster, &bucket, "big.bin").await;
    assert_eq!(view.attr.size, big.len() as u64);
    assert!(matches!(&view.attr.layout, Layout::Chunks(c) if !c.is_empty()));
    assert_eq!(data, big);

    // Directories S3 created implicitly are directories to the library.
    let dir = cluster
        .lookup(&path(&bucket, "a/b"), Want::ATTR)
        .await
        .expect("implicit directory");
    assert!(dir.attr.is_dir());
    assert!(dir.attr.implicit);

    // The library's listing fans out to every group through the one address.
    let mut lister = Lister::new(&cluster, &bucket).await.expect("lister");
    let (items, more) = lister.page("", Some("/"), "", 100).await.expect("page");
    let names: Vec<String> = items
        .into_iter()
        .map(|i| match i {
            ListItem::Object { key, .. } => key,
            ListItem::CommonPrefix(p) => p,
        })
        .collect();
    assert_eq!(names, vec!["a/", "big.bin"]);
    assert!(!more);

    // The bucket is not empty to the library either; once S3 empties it, the library
    // deletes it and S3 sees it gone.
    let delete_bucket = || {
        cluster.call(
            std::slice::from_ref(&bucket),
            MetaRequest::DeleteBucket {
                name: bucket.clone(),
            },
        )
    };
    assert_eq!(delete_bucket().await, Err(MetaError::NotEmpty));
    for key in ["a/b/small.txt", "big.bin"] {
        s3.delete_object()
            .bucket(&bucket)
            .key(key)
            .send()
            .await
            .expect("S3 delete");
    }
    assert!(delete_bucket().await.is_ok());
    assert_status(s3.head_bucket().bucket(&bucket).send().await, 404);
}
