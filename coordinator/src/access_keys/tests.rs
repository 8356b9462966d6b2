use super::*;

/// A key without privileges, of its own account or the root's.
fn test_key(ak: &str, account: bool, canonical: Option<CanonicalUser>) -> AccessKey {
    AccessKey {
        access_key: ak.into(),
        secret_key: "password1".into(),
        uid: 0,
        gid: 0,
        root: false,
        policy: None,
        account,
        canonical,
    }
}

#[test]
fn root_key_is_generated_once_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.json");
    let root = AccessKeyStore::open(&path, None).unwrap().root();
    let again = AccessKeyStore::open(&path, None).unwrap().root();
    assert_eq!(root, again);
    let forced = AccessKeyStore::open(&path, Some(("admin".into(), "secret-123".into()))).unwrap();
    assert_eq!(forced.root().access_key, "admin");
    assert_eq!(
        forced.list().iter().filter(|k| k.root).count(),
        1,
        "one root key only"
    );
}

#[test]
fn a_key_file_of_version_1_opens_with_its_keys_as_admin() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.json");
    let old = r#"{"version":1,"keys":[
        {"access_key":"rootak","secret_key":"rootsecret1","uid":0,"gid":0,"root":true},
        {"access_key":"olduser","secret_key":"oldsecret1","uid":0,"gid":0,"root":false}]}"#;
    std::fs::write(&path, old).unwrap();
    let s = AccessKeyStore::open(&path, None).unwrap();
    assert_eq!(s.root().access_key, "rootak");
    assert_eq!(s.root().policy, None);
    let admin = Some(saker_policy::admin_identity_json());
    assert_eq!(s.get("olduser").unwrap().policy.as_deref(), admin);
    // Written back as version 2, the policy kept.
    let file = std::fs::read_to_string(&path).unwrap();
    assert!(file.contains("\"version\": 2"), "{file}");
    let again = AccessKeyStore::open(&path, None).unwrap();
    assert_eq!(again.get("olduser").unwrap().policy.as_deref(), admin);
}

#[tokio::test]
async fn a_key_belongs_to_its_own_account_or_the_roots() {
    let dir = tempfile::tempdir().unwrap();
    let root = ("rootak".to_string(), "rootsecret1".to_string());
    let s = AccessKeyStore::open(&dir.path().join("keys.json"), Some(root)).unwrap();
    let key = |ak: &str, account| test_key(ak, account, None);
    s.create(key("team", true)).await.unwrap();
    s.create(key("member", false)).await.unwrap();
    assert_eq!(s.account_of("team").as_deref(), Some("team"));
    assert_eq!(s.account_of("member").as_deref(), Some("rootak"));
    assert_eq!(s.account_of("rootak").as_deref(), Some("rootak"));
    assert_eq!(s.account_of("nobody"), None);
    assert_eq!(s.root_account(), "rootak");
    // The flag survives a reopen, and so does the account's canonical user.
    let team = s.canonical_user("team").await;
    assert!(is_canonical_id(&team.id), "{team:?}");
    assert_eq!(team.display_name, format!("saker-{}", &team.id[..8]));
    let again = AccessKeyStore::open(&dir.path().join("keys.json"), None).unwrap();
    assert_eq!(again.account_of("team").as_deref(), Some("team"));
    assert_eq!(again.canonical_user("team").await, team);
}

#[tokio::test]
async fn accounts_are_shown_by_canonical_user_never_by_access_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.json");
    let root = ("rootak".to_string(), "rootsecret1".to_string());
    let s = AccessKeyStore::open(&path, Some(root.clone())).unwrap();
    let key = test_key;
    let named = CanonicalUser::generate(Some("Team A".into())).unwrap();
    let made = s
        .create(key("team", true, Some(named.clone())))
        .await
        .unwrap();
    assert_eq!(made.canonical.as_ref(), Some(&named));
    let other = s.create(key("other", true, None)).await.unwrap();
    let other = other.canonical.expect("an account gets a canonical user");
    assert_ne!(other.id, named.id);
    s.create(key("member", false, None)).await.unwrap();
    // The root account's: derived from its key, the same for its other keys.
    let root_user = s.canonical_user("rootak").await;
    assert_eq!(root_user, CanonicalUser::derived("rootak", "rootsecret1"));
    assert_eq!(s.canonical_user("member").await, root_user);
    assert_eq!(s.canonical_user("team").await, named);
    assert_eq!(s.account_with_id(&named.id).await.as_deref(), Some("team"));
    assert_eq!(
        s.account_with_id(&root_user.id).await.as_deref(),
        Some("rootak")
    );
    assert_eq!(s.account_with_id("team").await, None);
    // A deleted account is shown by a stable stand-in, not by its key.
    s.delete("other").await.unwrap();
    let gone = s.canonical_user("other").await;
    assert!(is_canonical_id(&gone.id) && gone.id != other.id);
    assert_eq!(s.canonical_user("other").await, gone);
    assert!(!gone.display_name.contains("other"));
    // Refused: an id another account has, a bad display name, a name for a non-account.
    let dup = s.create(key("dup", true, Some(named.clone()))).await;
    assert!(matches!(dup, Err(KeyError::Exists(_))), "{dup:?}");
    let bad = CanonicalUser {
        id: named.id.to_uppercase(),
        display_name: "x".into(),
    };
    let bad = s.create(key("bad", true, Some(bad))).await;
    assert!(matches!(bad, Err(KeyError::Invalid(_))), "{bad:?}");
    let blank = CanonicalUser {
        id: "cd".repeat(32),
        display_name: "tab\there".into(),
    };
    let blank = s.create(key("blank", true, Some(blank))).await;
    assert!(matches!(blank, Err(KeyError::Invalid(_))), "{blank:?}");
    let not_account = s.create(key("plain", false, Some(other.clone()))).await;
    assert!(matches!(not_account, Err(KeyError::Invalid(_))));
    // The root account keeps its canonical user across restarts, and when its key is
    // replaced.
    let again = AccessKeyStore::open(&path, None).unwrap();
    assert_eq!(again.canonical_user("rootak").await, root_user);
    assert_eq!(again.canonical_user("team").await, named);
    let replaced =
        AccessKeyStore::open(&path, Some(("newroot".into(), "newsecret1".into()))).unwrap();
    assert_eq!(replaced.canonical_user("newroot").await, root_user);
}

/// A key file of version 2 written before accounts had canonical ids: the root key and
/// the account keys get the ids derived from them, written back at open, kept after.
#[tokio::test]
async fn a_key_file_from_before_canonical_ids_gets_them_once_and_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.json");
    let old = r#"{"version":2,"keys":[
        {"access_key":"rootak","secret_key":"rootsecret1","uid":0,"gid":0,"root":true},
        {"access_key":"team","secret_key":"teamsecret1","uid":0,"gid":0,"root":false,
         "policy":"{}","account":true},
        {"access_key":"member","secret_key":"membersecret1","uid":0,"gid":0,
         "root":false}]}"#;
    std::fs::write(&path, old).unwrap();
    let root = ("rootak".to_string(), "rootsecret1".to_string());
    let s = AccessKeyStore::open(&path, Some(root)).unwrap();
    let root_user = CanonicalUser::derived("rootak", "rootsecret1");
    let team = CanonicalUser::derived("team", "teamsecret1");
    assert_eq!(s.canonical_user("rootak").await, root_user);
    assert_eq!(s.canonical_user("team").await, team);
    assert_eq!(s.canonical_user("member").await, root_user);
    let file = std::fs::read_to_string(&path).unwrap();
    assert!(
        file.contains(&root_user.id) && file.contains(&team.id),
        "{file}"
    );
    assert_eq!(s.get("member").unwrap().canonical, None);
    let again = AccessKeyStore::open(&path, None).unwrap();
    assert_eq!(again.canonical_user("team").await, team);
}

#[tokio::test]
async fn create_delete_and_validation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.json");
    let s = AccessKeyStore::open(&path, None).unwrap();
    let k = AccessKey {
        access_key: "user1".into(),
        secret_key: "password1".into(),
        uid: 1000,
        gid: 1000,
        root: false,
        policy: None,
        account: false,
        canonical: None,
    };
    s.create(k.clone()).await.unwrap();
    assert!(matches!(
        s.create(k.clone()).await,
        Err(KeyError::Exists(_))
    ));
    assert!(matches!(
        s.create(AccessKey {
            access_key: "a b".into(),
            ..k.clone()
        })
        .await,
        Err(KeyError::Invalid(_))
    ));
    assert_eq!(
        AccessKeyStore::open(&path, None).unwrap().get("user1"),
        Some(k)
    );
    assert!(matches!(
        s.delete(&s.root().access_key).await,
        Err(KeyError::Root)
    ));
    s.delete("user1").await.unwrap();
    assert!(matches!(
        s.delete("user1").await,
        Err(KeyError::NotFound(_))
    ));
    assert_eq!(
        AccessKeyStore::open(&path, None).unwrap().get("user1"),
        None
    );
    assert!(
        !format!("{:?}", s.root()).contains(&s.root().secret_key),
        "Debug hides the secret"
    );
}

#[tokio::test]
async fn replicated_keys_are_seen_by_every_node_and_the_root_is_fixed() {
    let state: Arc<dyn StateStore> = Arc::new(crate::state::MemState::default());
    let dir = tempfile::tempdir().unwrap();
    let root = ("rootkey".to_string(), "rootsecret".to_string());
    let a = AccessKeyStore::replicated(&dir.path().join("a.json"), root.clone(), state.clone())
        .unwrap();
    let b = AccessKeyStore::replicated(&dir.path().join("b.json"), root.clone(), state.clone())
        .unwrap();
    a.check_root().await.unwrap();
    b.check_root().await.unwrap();
    let k = AccessKey {
        access_key: "user2".into(),
        secret_key: "password2".into(),
        uid: 7,
        gid: 7,
        root: false,
        policy: None,
        account: false,
        canonical: None,
    };
    a.create(k.clone()).await.unwrap();
    assert_eq!(b.get("user2"), None, "b has not refreshed yet");
    assert_eq!(b.lookup("user2").await, Some(k.clone()));
    assert!(matches!(
        b.create(k.clone()).await,
        Err(KeyError::Exists(_))
    ));
    // A policy set at one node is the key's at every node once it refreshes.
    b.set_policy("user2", Some("{}".into())).await.unwrap();
    a.refresh(Duration::ZERO).await.unwrap();
    assert_eq!(a.get("user2").unwrap().policy.as_deref(), Some("{}"));
    assert!(matches!(
        a.set_policy("saker-test-root-missing", None).await,
        Err(KeyError::NotFound(_))
    ));
    let root = a.root().access_key;
    assert!(matches!(
        a.set_policy(&root, Some("{}".into())).await,
        Err(KeyError::Root)
    ));
    // An account made at one node is shown by the same canonical user at every node; so
    // is the root account, and an account recorded before canonical ids existed.
    let team = AccessKey {
        access_key: "team".into(),
        account: true,
        ..k.clone()
    };
    let team = a.create(team).await.unwrap().canonical.unwrap();
    // (b refreshed less than MISS_REFRESH ago: a node that has not looks it up.)
    let root_pair = ("rootkey".to_string(), "rootsecret".to_string());
    let c =
        AccessKeyStore::replicated(&dir.path().join("c.json"), root_pair, state.clone()).unwrap();
    assert_eq!(c.account_with_id(&team.id).await.as_deref(), Some("team"));
    b.refresh(Duration::ZERO).await.unwrap();
    assert_eq!(b.canonical_user("team").await, team);
    assert_eq!(
        a.canonical_user("rootkey").await,
        b.canonical_user("rootkey").await
    );
    let before = br#"{"version":2,"access_key":"oldteam","secret_key":"oldsecret1",
        "uid":0,"gid":0,"root":false,"policy":"{}","account":true}"#;
    state
        .put("keys/oldteam", Some(before.to_vec()))
        .await
        .unwrap();
    let derived = CanonicalUser::derived("oldteam", "oldsecret1");
    a.refresh(Duration::ZERO).await.unwrap();
    b.refresh(Duration::ZERO).await.unwrap();
    assert_eq!(a.canonical_user("oldteam").await, derived);
    assert_eq!(b.canonical_user("oldteam").await, derived);
    b.delete("user2").await.unwrap();
    a.refresh(Duration::ZERO).await.unwrap();
    assert_eq!(a.lookup("user2").await, None);
    // A record an older node wrote (version 1, no policy) is an admin key.
    let old = br#"{"access_key":"olduser","secret_key":"oldsecret1","uid":0,"gid":0,"root":false}"#;
    state.put("keys/olduser", Some(old.to_vec())).await.unwrap();
    let admin = Some(saker_policy::admin_identity_json());
    a.refresh(Duration::ZERO).await.unwrap();
    assert_eq!(a.get("olduser").unwrap().policy.as_deref(), admin);
    // The node's own file keeps only the root key.
    let file = std::fs::read_to_string(dir.path().join("a.json")).unwrap();
    assert!(!file.contains("password2"));
    let other = AccessKeyStore::replicated(
        &dir.path().join("d.json"),
        ("otherroot".into(), "othersecret".into()),
        state,
    )
    .unwrap();
    assert!(matches!(
        other.check_root().await,
        Err(KeyError::Invalid(_))
    ));
}
