//! Versions through S3: a PUT's version id, a GET by version id, and a bucket's whole
//! version listing walked page by page.

use aws_sdk_s3::Client;

use super::body;

pub async fn put_v(c: &Client, b: &str, k: &str, data: &[u8]) -> Option<String> {
    c.put_object()
        .bucket(b)
        .key(k)
        .body(body(data))
        .send()
        .await
        .expect("put")
        .version_id
}

pub async fn get_v(c: &Client, b: &str, k: &str, v: &str) -> Vec<u8> {
    let r = c
        .get_object()
        .bucket(b)
        .key(k)
        .version_id(v)
        .send()
        .await
        .unwrap_or_else(|e| panic!("get {k}?versionId={v}: {e:?}"));
    assert_eq!(r.version_id(), Some(v));
    r.body.collect().await.unwrap().into_bytes().to_vec()
}

/// Every version of the bucket as (key, version id, latest, delete marker), in listing
/// order, walked `page` at a time.
pub async fn all_versions(c: &Client, b: &str, page: i32) -> Vec<(String, String, bool, bool)> {
    let mut out = Vec::new();
    let (mut km, mut vm): (Option<String>, Option<String>) = (None, None);
    loop {
        let r = c
            .list_object_versions()
            .bucket(b)
            .max_keys(page)
            .set_key_marker(km.clone())
            .set_version_id_marker(vm.clone())
            .send()
            .await
            .expect("list object versions");
        let mut lines: Vec<(String, String, bool, bool, i64)> = Vec::new();
        for v in r.versions() {
            let t = v.last_modified().unwrap().to_millis().unwrap();
            lines.push((
                v.key().unwrap().into(),
                v.version_id().unwrap().into(),
                v.is_latest().unwrap(),
                false,
                t,
            ));
        }
        for m in r.delete_markers() {
            let t = m.last_modified().unwrap().to_millis().unwrap();
            lines.push((
                m.key().unwrap().into(),
                m.version_id().unwrap().into(),
                m.is_latest().unwrap(),
                true,
                t,
            ));
        }
        // S3 sends versions and markers in two lists: one order by key, newest first.
        lines.sort_by(|a, b| a.0.cmp(&b.0).then(b.4.cmp(&a.4)));
        assert!(lines.len() <= page as usize);
        out.extend(lines.into_iter().map(|(k, v, l, m, _)| (k, v, l, m)));
        if !r.is_truncated().unwrap_or(false) {
            return out;
        }
        km = r.next_key_marker().map(str::to_string);
        vm = r.next_version_id_marker().map(str::to_string);
    }
}
