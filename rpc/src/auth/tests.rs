use super::*;

#[test]
fn tokens_prove_the_kind_and_nothing_more() {
    let node = Credential::generate();
    let client = node.client().unwrap();
    let now = 1_800_000_000;
    let tok = |c: &Credential, at| c.token(at).unwrap();
    assert_eq!(node.verify(&tok(&node, now), now), Ok(Kind::Node));
    assert_eq!(node.verify(&tok(&client, now), now + 10), Ok(Kind::Client));
    // A client credential cannot make a node token, nor pass one off as its own.
    let forged = tok(&client, now).replacen("client", "node", 1);
    assert!(node.verify(&forged, now).is_err());
    // Another cluster's credential, an expired token, garbage.
    let other = Credential::generate();
    assert!(node.verify(&tok(&other, now), now).is_err());
    assert!(node
        .verify(&tok(&other.client().unwrap(), now), now)
        .is_err());
    assert!(node.verify(&tok(&node, now), now + MAX_SKEW + 1).is_err());
    assert!(node.verify(&tok(&node, now + MAX_SKEW + 1), now).is_err());
    for junk in ["", "node", "node.1", "node.x.00", "root.1.00", "node.1.zz"] {
        assert!(node.verify(junk, now).is_err(), "{junk}");
    }
}

#[test]
fn files_are_private_and_checked() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cred.json");
    let made = Credential::load_or_create(&path).unwrap();
    assert!(made.mutual_tls() && made.tls.as_ref().unwrap().has_ca_key());
    assert_eq!(Credential::load_or_create(&path).unwrap(), made);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(made.save(&path).is_err(), "never replaced");
    let shown = format!("{made:?}");
    assert!(!shown.contains(made.secret.as_deref().unwrap()));
    assert!(!shown.contains("PRIVATE"));
    let client = dir.path().join("client.json");
    made.client().unwrap().save(&client).unwrap();
    let loaded = Credential::load(&client).unwrap();
    assert_eq!(loaded.kind, Kind::Client);
    assert!(loaded.mutual_tls() && !loaded.tls.unwrap().has_ca_key());
    std::fs::write(
        &path,
        b"{\"version\":1,\"kind\":\"node\",\"secret\":\"abcd\"}",
    )
    .unwrap();
    assert!(Credential::load(&path).is_err());
    // A version 2 node credential must hold its CA key.
    let mut no_ca = serde_json::to_value(&made).unwrap();
    no_ca["tls"] = serde_json::to_value(made.client().unwrap().tls).unwrap();
    no_ca["kind"] = "node".into();
    assert!(Credential::decode(no_ca.to_string().as_bytes()).is_err());
}

#[test]
fn a_version_1_credential_still_loads_but_cannot_make_mutual_tls() {
    let v1 = format!(
        "{{\"version\":1,\"kind\":\"node\",\"secret\":\"{}\"}}",
        "ab".repeat(32)
    );
    let c = Credential::decode(v1.as_bytes()).unwrap();
    assert!(!c.mutual_tls());
    assert!(c.token(1).is_some());
    assert!(!c.client().unwrap().mutual_tls());
    let up = c.upgraded().unwrap();
    assert!(up.mutual_tls() && up.tls.as_ref().unwrap().has_ca_key());
    assert_eq!(up.secret, c.secret, "the secret is kept for --insecure-rpc");
    assert!(up.upgraded().is_err(), "already upgraded");
    assert!(
        up.client().unwrap().upgraded().is_err(),
        "a client is exported anew"
    );
}

#[test]
fn upgrade_steps_go_one_at_a_time_and_keep_the_secret() {
    let v1 = format!(
        "{{\"version\":1,\"kind\":\"node\",\"secret\":\"{}\"}}",
        "cd".repeat(32)
    );
    let v1 = Credential::decode(v1.as_bytes()).unwrap();
    let t = Transport::of;
    assert_eq!(t(&v1, true), Transport::Insecure);
    assert!(v1.upgrade_step(Some(Transition::DialTls)).is_err());
    let accept = v1.upgrade_step(Some(Transition::AcceptTls)).unwrap();
    assert_eq!(t(&accept, true), Transport::AcceptTls, "the file decides");
    assert_eq!(accept.token(5), v1.token(5));
    let dial = accept.upgrade_step(Some(Transition::DialTls)).unwrap();
    assert!(accept.upgrade_step(None).is_err(), "done follows dial-tls");
    let done = dial.upgrade_step(None).unwrap();
    assert_eq!(t(&done, false), Transport::MutualTls);
    assert!(done.upgrade_step(None).is_err());
    // Saved and loaded, the step is kept.
    let text = serde_json::to_vec(&dial).unwrap();
    assert_eq!(Credential::decode(&text).unwrap(), dial);

    // Neighbouring steps only, of the same cluster.
    let steps = [
        (&v1, Transport::Insecure),
        (&accept, Transport::AcceptTls),
        (&dial, Transport::DialTls),
        (&done, Transport::MutualTls),
    ];
    for (i, (a, ta)) in steps.iter().enumerate() {
        for (j, (b, tb)) in steps.iter().enumerate() {
            let r = check_step(a, *ta, b, *tb);
            assert_eq!(r.is_ok(), i.abs_diff(j) <= 1, "{ta:?} -> {tb:?}: {r:?}");
        }
    }
    let other = Credential::generate().upgrade_step(Some(Transition::AcceptTls));
    let r = check_step(
        &v1,
        Transport::Insecure,
        &other.unwrap(),
        Transport::AcceptTls,
    );
    assert!(r.unwrap_err().contains("not this cluster's"));
}

#[test]
fn rotation_steps_keep_each_neighbour_trusting_the_other() {
    use crate::tls::Rotation;
    let a = Credential::generate();
    let t = Transport::MutualTls;
    let trust = a.rotation_step(Rotation::TrustNew).unwrap();
    assert!(a.rotation_step(Rotation::PresentNew).is_err());
    let present = trust.rotation_step(Rotation::PresentNew).unwrap();
    let done = present.rotation_step(Rotation::None).unwrap();
    let steps = [&a, &trust, &present, &done];
    for (i, x) in steps.iter().enumerate() {
        for (j, y) in steps.iter().enumerate() {
            let r = check_step(x, t, y, t);
            assert_eq!(r.is_ok(), i.abs_diff(j) <= 1, "{i} -> {j}: {r:?}");
        }
    }
    // A client exported at trust-new is signed by the new CA and trusts both.
    let client = trust.client().unwrap();
    let ctls = client.tls.as_ref().unwrap();
    assert_eq!(ctls.ca_cert, done.tls.as_ref().unwrap().ca_cert);
    assert_eq!(ctls.trusted().len(), 2);
    assert_eq!(done.tls.as_ref().unwrap().trusted().len(), 1);
    assert_eq!(done.token(9), a.token(9), "the secret is kept");
}
