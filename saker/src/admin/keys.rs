//! Access keys on the admin API (`/admin/keys`) and the `saker admin key` commands: create,
//! list, delete, and the identity policy a key's S3 requests are checked against. A key
//! without a policy may do nothing (but what bucket policies and ACLs grant it) until one is
//! set; `admin` is the ready-made policy that allows everything.

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use clap::Subcommand;
use saker_coordinator::access_keys::CanonicalUser;
use saker_coordinator::{AccessKey, KeyError};
use serde::{Deserialize, Serialize};

use crate::admin::request::send;
use crate::admin::state::{authorized, deny, json_body, AdminState};

#[derive(Subcommand)]
pub enum KeyCommand {
    /// Add an access key (a secret is generated when none is given).
    Create {
        #[arg(long)]
        access_key: String,
        #[arg(long)]
        secret_key: Option<String>,
        /// POSIX uid S3 requests with this key act as.
        #[arg(long, default_value_t = 0)]
        uid: u32,
        #[arg(long, default_value_t = 0)]
        gid: u32,
        /// What the key may do: `admin` (everything), `readonly`, `readwrite`, `writeonly`
        /// (with `--bucket`, in that bucket only) or a file with an IAM policy document.
        /// Without it the key may do nothing until a policy is set (`key policy set`), but
        /// what bucket policies and ACLs grant it.
        #[arg(long)]
        policy: Option<String>,
        /// Limits a ready-made `--policy` to one bucket.
        #[arg(long, requires = "policy")]
        bucket: Option<String>,
        /// Make the key an account of its own: it owns the buckets it creates and reaches
        /// other accounts' buckets only through their bucket policies and ACLs. Without it
        /// the key belongs to the root key's account. The account gets a canonical user id
        /// (64 hex digits), which S3 shows as its owner id in listings and ACLs and which
        /// ACL grants name it by.
        #[arg(long)]
        account: bool,
        /// The account's display name, shown with its canonical user id (default
        /// `saker-` and the id's first 8 hex digits).
        #[arg(long, requires = "account")]
        display_name: Option<String>,
    },
    /// List access keys (secrets are not shown) with the canonical user id and display name
    /// of the account each belongs to.
    List {
        /// Print JSON (one object per key) instead of tab-separated lines.
        #[arg(long)]
        json: bool,
    },
    /// Delete an access key.
    Delete {
        #[arg(long)]
        access_key: String,
    },
    /// Show, set or remove the identity policy of a key.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
}

#[derive(Subcommand)]
pub enum PolicyCommand {
    /// Give the key a policy: `admin`, `readonly`, `readwrite`, `writeonly` or a file with an
    /// IAM policy document (checked before it is stored).
    Set {
        #[arg(long)]
        access_key: String,
        policy: String,
        /// Limits a ready-made policy to one bucket.
        #[arg(long)]
        bucket: Option<String>,
    },
    /// Print the key's policy document.
    Show {
        #[arg(long)]
        access_key: String,
    },
    /// Remove the key's policy: it may do nothing from now on (but what bucket policies and
    /// ACLs grant it); `policy set KEY admin` gives it everything.
    Remove {
        #[arg(long)]
        access_key: String,
    },
}

#[derive(Serialize, Deserialize)]
struct CreateKey {
    access_key: String,
    secret_key: String,
    uid: u32,
    gid: u32,
    #[serde(default)]
    policy: Option<String>,
    #[serde(default)]
    account: bool,
    #[serde(default)]
    display_name: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct KeyInfo {
    access_key: String,
    uid: u32,
    gid: u32,
    root: bool,
    #[serde(default)]
    policy: Option<String>,
    #[serde(default)]
    account: bool,
    /// The canonical user id and display name of the key's account (its own for the root
    /// key and account keys, the root account's for others): what S3 shows as its owner.
    #[serde(default)]
    canonical_id: Option<String>,
    #[serde(default)]
    display_name: Option<String>,
}

impl KeyInfo {
    /// `k` as the admin API shows it, of the account `owner`.
    fn of(k: AccessKey, owner: Option<CanonicalUser>) -> Self {
        KeyInfo {
            access_key: k.access_key,
            uid: k.uid,
            gid: k.gid,
            root: k.root,
            policy: k.policy,
            account: k.account,
            canonical_id: owner.as_ref().map(|o| o.id.clone()),
            display_name: owner.map(|o| o.display_name),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct SetPolicy {
    policy: Option<String>,
}

fn key_error(e: KeyError) -> Response {
    let status = match e {
        KeyError::Exists(_) => StatusCode::CONFLICT,
        KeyError::NotFound(_) => StatusCode::NOT_FOUND,
        KeyError::Invalid(_) | KeyError::Root => StatusCode::BAD_REQUEST,
        KeyError::Io(_) | KeyError::Corrupt(_) => StatusCode::INTERNAL_SERVER_ERROR,
        KeyError::State(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    (status, format!("{e}\n")).into_response()
}

/// A policy sent to the server is checked there too (the client checks it first); a bad
/// one is a 400 saying why.
fn checked_policy(policy: Option<String>) -> Result<Option<String>, Box<Response>> {
    match policy {
        Some(text) => match saker_policy::Policy::parse_identity(&text) {
            Ok(_) => Ok(Some(text)),
            Err(e) => Err(Box::new(
                (
                    StatusCode::BAD_REQUEST,
                    format!("invalid policy document: {e}\n"),
                )
                    .into_response(),
            )),
        },
        None => Ok(None),
    }
}

pub async fn list(State(st): State<AdminState>, headers: HeaderMap) -> Response {
    if !authorized(&st, &Method::GET, "/admin/keys", &headers, b"") {
        return deny();
    }
    let keys = match st.keys.current().await {
        Ok(keys) => keys,
        Err(e) => return key_error(e),
    };
    let root = keys
        .iter()
        .find(|k| k.root)
        .and_then(|k| k.canonical.clone());
    let keys: Vec<KeyInfo> = keys
        .into_iter()
        .map(|k| {
            let owner = k.canonical.clone().or_else(|| root.clone());
            KeyInfo::of(k, owner)
        })
        .collect();
    axum::Json(keys).into_response()
}

pub async fn create(State(st): State<AdminState>, headers: HeaderMap, body: Bytes) -> Response {
    if !authorized(&st, &Method::POST, "/admin/keys", &headers, &body) {
        return deny();
    }
    let req: CreateKey = match json_body(&body) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    let policy = match checked_policy(req.policy) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let canonical = match (req.account, req.display_name) {
        (true, name) => match CanonicalUser::generate(name) {
            Ok(c) => Some(c),
            Err(e) => return key_error(e),
        },
        (false, None) => None,
        (false, Some(_)) => {
            return (
                StatusCode::BAD_REQUEST,
                "a display name is an account's: create the key with --account\n",
            )
                .into_response()
        }
    };
    let key = AccessKey {
        access_key: req.access_key,
        secret_key: req.secret_key,
        uid: req.uid,
        gid: req.gid,
        root: false,
        policy,
        account: req.account,
        canonical,
    };
    match st.keys.create(key).await {
        Ok(k) => {
            let owner = k.canonical.clone().or_else(|| st.keys.root().canonical);
            (StatusCode::CREATED, axum::Json(KeyInfo::of(k, owner))).into_response()
        }
        Err(e) => key_error(e),
    }
}

pub async fn delete(
    State(st): State<AdminState>,
    Path(ak): Path<String>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/admin/keys/{ak}");
    if !authorized(&st, &Method::DELETE, &path, &headers, b"") {
        return deny();
    }
    match st.keys.delete(&ak).await {
        Ok(()) => (StatusCode::OK, "deleted\n").into_response(),
        Err(e) => key_error(e),
    }
}

pub async fn set_policy(
    State(st): State<AdminState>,
    Path(ak): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = format!("/admin/keys/{ak}/policy");
    if !authorized(&st, &Method::PUT, &path, &headers, &body) {
        return deny();
    }
    let req: SetPolicy = match json_body(&body) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    let policy = match checked_policy(req.policy) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    match st.keys.set_policy(&ak, policy).await {
        Ok(()) => (StatusCode::OK, "policy set\n").into_response(),
        Err(e) => key_error(e),
    }
}

/// The policy document a `--policy` argument names: a ready-made one, or a file's text,
/// checked here so a bad one is refused before anything is sent.
fn policy_document(arg: &str, bucket: Option<&str>) -> anyhow::Result<String> {
    if let Some(text) = saker_policy::canned_identity_json(arg, bucket) {
        return Ok(text);
    }
    anyhow::ensure!(
        bucket.is_none(),
        "--bucket goes with a ready-made policy (admin, readonly, readwrite, writeonly), not a \
         file"
    );
    let text = std::fs::read_to_string(arg).with_context(|| {
        format!("{arg} is neither admin, readonly, readwrite, writeonly nor a readable policy file")
    })?;
    saker_policy::Policy::parse_identity(&text)
        .map_err(|e| anyhow::anyhow!("{arg}: invalid policy document: {e}"))?;
    Ok(text)
}

/// How `key list` names a key's policy: the `Id` of a ready-made one, `custom` for another,
/// `none` without one (the key may do nothing).
fn policy_label(policy: Option<&str>) -> String {
    let Some(text) = policy else {
        return "none".to_string();
    };
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v.get("Id")?.as_str().map(str::to_string))
        .filter(|id| id.starts_with("saker-"))
        .map(|id| id.trim_start_matches("saker-").to_string())
        .unwrap_or_else(|| "custom".to_string())
}

pub async fn run(endpoint: &str, command: KeyCommand) -> anyhow::Result<()> {
    match command {
        KeyCommand::Create {
            access_key,
            secret_key,
            uid,
            gid,
            policy,
            bucket,
            account,
            display_name,
        } => {
            let policy = policy
                .map(|p| policy_document(&p, bucket.as_deref()))
                .transpose()?;
            let generated = secret_key.is_none();
            let secret_key =
                secret_key.unwrap_or_else(saker_coordinator::access_keys::generate_secret_key);
            let no_policy = policy.is_none();
            let body = serde_json::to_vec(&CreateKey {
                access_key: access_key.clone(),
                secret_key: secret_key.clone(),
                uid,
                gid,
                policy,
                account,
                display_name,
            })?;
            let reply = send(endpoint, Method::POST, "/admin/keys", body).await?;
            println!("created access key {access_key}");
            if generated {
                println!("secret key: {secret_key}");
            }
            // (A server from before canonical ids answers plain text.)
            if let Ok(k) = serde_json::from_str::<KeyInfo>(&reply) {
                let of = if account {
                    "its account"
                } else {
                    "the root account"
                };
                if let (Some(id), Some(name)) = (k.canonical_id, k.display_name) {
                    println!("canonical user id ({of}): {id}");
                    println!("display name: {name}");
                }
            }
            if no_policy {
                eprintln!(
                    "the key has no policy: it may do nothing until one is set (saker admin key \
                     policy set --access-key {access_key} admin|readonly|readwrite|writeonly|FILE)"
                );
            }
        }
        KeyCommand::List { json } => {
            let text = send(endpoint, Method::GET, "/admin/keys", Vec::new()).await?;
            let keys: Vec<KeyInfo> = serde_json::from_str(&text).context("unexpected reply")?;
            if json {
                println!("{}", serde_json::to_string_pretty(&keys)?);
                return Ok(());
            }
            for k in keys {
                let policy = if k.root {
                    "root".to_string()
                } else {
                    format!("policy={}", policy_label(k.policy.as_deref()))
                };
                let account = if k.account { "\taccount" } else { "" };
                let owner = match (k.canonical_id, k.display_name) {
                    (Some(id), Some(name)) => format!("\tcanonical-id={id}\tdisplay-name={name}"),
                    _ => String::new(),
                };
                println!(
                    "{}\tuid={}\tgid={}\t{policy}{account}{owner}",
                    k.access_key, k.uid, k.gid
                );
            }
        }
        KeyCommand::Delete { access_key } => {
            send(
                endpoint,
                Method::DELETE,
                &format!("/admin/keys/{access_key}"),
                Vec::new(),
            )
            .await?;
            println!("deleted access key {access_key}");
        }
        KeyCommand::Policy { command } => run_policy(endpoint, command).await?,
    }
    Ok(())
}

async fn run_policy(endpoint: &str, command: PolicyCommand) -> anyhow::Result<()> {
    let (access_key, policy) = match command {
        PolicyCommand::Show { access_key } => {
            let text = send(endpoint, Method::GET, "/admin/keys", Vec::new()).await?;
            let keys: Vec<KeyInfo> = serde_json::from_str(&text).context("unexpected reply")?;
            let key = keys
                .into_iter()
                .find(|k| k.access_key == access_key)
                .with_context(|| format!("no access key {access_key}"))?;
            match key.policy {
                Some(p) => println!("{}", p.trim()),
                None if key.root => println!("(root key: no policy applies)"),
                None => println!(
                    "(no policy: the key may do nothing but what bucket policies and ACLs grant \
                     it)"
                ),
            }
            return Ok(());
        }
        PolicyCommand::Set {
            access_key,
            policy,
            bucket,
        } => (
            access_key,
            Some(policy_document(&policy, bucket.as_deref())?),
        ),
        PolicyCommand::Remove { access_key } => (access_key, None),
    };
    let set = policy.is_some();
    let body = serde_json::to_vec(&SetPolicy { policy })?;
    send(
        endpoint,
        Method::PUT,
        &format!("/admin/keys/{access_key}/policy"),
        body,
    )
    .await?;
    if set {
        println!("set the policy of access key {access_key}");
    } else {
        println!("removed the policy of access key {access_key}: it may do nothing now");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_names_ready_made_policies_and_custom_ones() {
        assert_eq!(policy_label(None), "none");
        let admin = saker_policy::canned_identity_json("admin", None).unwrap();
        assert_eq!(policy_label(Some(&admin)), "admin");
        let ro = saker_policy::canned_identity_json("readonly", Some("b")).unwrap();
        assert_eq!(policy_label(Some(&ro)), "readonly");
        assert_eq!(
            policy_label(Some(r#"{"Version":"2012-10-17","Statement":[]}"#)),
            "custom"
        );
    }
}
