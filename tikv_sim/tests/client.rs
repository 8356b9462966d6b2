//! `tikv-client` 0.4 against the test server: transactions, snapshot reads, conflicts, lock
//! resolution after a crashed transaction, scans across splitting regions and injected
//! region errors.

use std::net::SocketAddr;

use saker_tikv_sim::{Faults, Sim};
use tikv_client::{CheckLevel, Config, Key, TransactionClient, TransactionOptions};

async fn start(faults: Faults) -> (Sim, TransactionClient) {
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let sim = Sim::start(listen, faults).await.unwrap();
    let client = TransactionClient::new_with_config(vec![sim.addr.to_string()], Config::default())
        .await
        .expect("the client connects to the test server");
    (sim, client)
}

fn opts() -> TransactionOptions {
    TransactionOptions::new_optimistic().drop_check(CheckLevel::Warn)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_commit_and_snapshots_isolate() {
    let (_sim, client) = start(Faults::default()).await;
    let mut t = client.begin_with_options(opts()).await.unwrap();
    t.put(b"k1".to_vec(), b"v1".to_vec()).await.unwrap();
    t.put(b"k2".to_vec(), b"v2".to_vec()).await.unwrap();
    t.commit().await.unwrap();

    let mut reader = client.begin_with_options(opts()).await.unwrap();
    let mut w = client.begin_with_options(opts()).await.unwrap();
    w.put(b"k1".to_vec(), b"changed".to_vec()).await.unwrap();
    w.delete(b"k2".to_vec()).await.unwrap();
    w.commit().await.unwrap();
    assert_eq!(
        reader.get(b"k1".to_vec()).await.unwrap(),
        Some(b"v1".to_vec()),
        "a snapshot started before a commit does not see it"
    );
    reader.rollback().await.unwrap();
    let mut now = client.begin_with_options(opts()).await.unwrap();
    assert_eq!(
        now.get(b"k1".to_vec()).await.unwrap(),
        Some(b"changed".to_vec())
    );
    assert_eq!(now.get(b"k2".to_vec()).await.unwrap(), None);
    now.rollback().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_of_one_key_conflict() {
    let (_sim, client) = start(Faults::default()).await;
    let mut a = client.begin_with_options(opts()).await.unwrap();
    let mut b = client.begin_with_options(opts()).await.unwrap();
    a.put(b"epoch".to_vec(), b"a".to_vec()).await.unwrap();
    b.put(b"epoch".to_vec(), b"b".to_vec()).await.unwrap();
    a.commit().await.unwrap();
    let err = b.commit().await.expect_err("the later writer must fail");
    b.rollback().await.ok();
    let text = format!("{err:?}");
    assert!(
        text.contains("onflict") || text.contains("Conflict"),
        "{text}"
    );
    let mut r = client.begin_with_options(opts()).await.unwrap();
    assert_eq!(r.get(b"epoch".to_vec()).await.unwrap(), Some(b"a".to_vec()));
    r.rollback().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_resolves_the_locks_of_a_crashed_transaction() {
    let (sim, client) = start(Faults::default()).await;
    // A transaction that prewrote and died: its locks sit in the keyspace with a short TTL.
    let start = sim.cluster.timestamps(1);
    let errs = sim.cluster.mvcc.lock().prewrite(
        &[
            saker_tikv_sim::mvcc::Mutation {
                op: saker_tikv_sim::mvcc::Op::Put,
                key: b"p".to_vec(),
                value: b"lost".to_vec(),
            },
            saker_tikv_sim::mvcc::Mutation {
                op: saker_tikv_sim::mvcc::Op::Put,
                key: b"s".to_vec(),
                value: b"lost".to_vec(),
            },
        ],
        b"p",
        start,
        1,
        2,
        None,
    );
    assert!(errs.is_empty());
    let mut t = client.begin_with_options(opts()).await.unwrap();
    assert_eq!(
        t.get(b"s".to_vec()).await.unwrap(),
        None,
        "the dead transaction is rolled back, not read"
    );
    t.put(b"s".to_vec(), b"new".to_vec()).await.unwrap();
    t.commit().await.unwrap();
    let mut r = client.begin_with_options(opts()).await.unwrap();
    assert_eq!(r.get(b"s".to_vec()).await.unwrap(), Some(b"new".to_vec()));
    assert_eq!(r.get(b"p".to_vec()).await.unwrap(), None);
    r.rollback().await.unwrap();
    assert!(sim
        .cluster
        .mvcc
        .lock()
        .scan_locks(b"", b"", u64::MAX, 0)
        .iter()
        .all(|(k, _)| k != b"s"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scans_cross_splitting_regions_through_injected_errors() {
    let faults = Faults {
        split_keys: 40,
        region_error_every: 7,
    };
    let (sim, client) = start(faults).await;
    for chunk in (0..300u32).collect::<Vec<_>>().chunks(50) {
        let mut t = client.begin_with_options(opts()).await.unwrap();
        for i in chunk {
            t.put(format!("key/{i:05}").into_bytes(), i.to_be_bytes().to_vec())
                .await
                .unwrap();
        }
        t.commit().await.unwrap();
    }
    assert!(
        sim.cluster.regions().len() > 3,
        "the regions split as they grew"
    );
    let mut t = client.begin_with_options(opts()).await.unwrap();
    let start: Key = b"key/00010".to_vec().into();
    let end: Key = b"key/00290".to_vec().into();
    let pairs: Vec<_> = t
        .scan(start.clone()..end.clone(), 1000)
        .await
        .unwrap()
        .collect();
    assert_eq!(pairs.len(), 280);
    let keys: Vec<Vec<u8>> = pairs.iter().map(|p| Vec::from(p.0.clone())).collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "in key order");
    assert_eq!(Vec::<u8>::from(pairs[0].0.clone()), b"key/00010".to_vec());
    let some: Vec<_> = t
        .scan(start.clone()..end.clone(), 25)
        .await
        .unwrap()
        .collect();
    assert_eq!(some.len(), 25, "the limit holds across regions");
    let back: Vec<_> = t.scan_reverse(start..end, 5).await.unwrap().collect();
    let back: Vec<Vec<u8>> = back.iter().map(|p| Vec::from(p.0.clone())).collect();
    assert_eq!(
        back[0],
        b"key/00289".to_vec(),
        "reverse scans start at the end"
    );
    assert_eq!(back.len(), 5);
    let got = t.get(b"key/00123".to_vec()).await.unwrap();
    assert_eq!(got, Some(123u32.to_be_bytes().to_vec()));
    t.rollback().await.unwrap();
}
