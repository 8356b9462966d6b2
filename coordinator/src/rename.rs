//! Rename through the coordinator (FalconFS §4.3): of a directory, and of a file whose old and
//! new names live in different MNode groups. Either way only the inode's own record moves,
//! from the owner of the old name to the owner of the new one, in two logged steps.
//!
//! A directory's entries are keyed by its inode id, so they stay where they are:
//!
//! 1. Lock the paths: shared on every ancestor, exclusive on both names (see [`crate::locks`]).
//! 2. Check that the caller may remove the source (and write it, when it changes parent: its
//!    `..` changes) and create at the target; freeze the source at its owner (writes through
//!    it and remote lookups of it wait).
//! 3. A target that exists must be a directory (ENOTDIR), may not be replaced with
//!    `noreplace` (EEXIST), and must be empty on every group (ENOTEMPTY): it is frozen and its
//!    dentry invalidated everywhere, as rmdir does.
//! 4. Invalidate the source's dentry everywhere (each group drops its replica entry and waits
//!    for batches that resolved through it), then have every group push its change-log, so the
//!    directory's attributes at its owner are exact, and read them.
//! 5. Log the intent in the [`crate::intents::RenameJournal`], put the directory at the new name
//!    (`RenameDirIn`), remove the old name (`RenameDirOut`), drop the intent, thaw.
//!
//! A file keeps its inode id and its chunk references (no byte is copied): the coordinator
//! checks the caller's rights, blocks writes to the old path at its owner (`BlockPath`, which
//! also drains the writes evaluated before it), reads the file, logs the intent, creates the
//! new name (`RenameIn`, replacing a file there unless `noreplace`), removes the old one
//! (`RenameOut`, which keeps the chunks) and unblocks.
//!
//! Both steps are idempotent, so a crash anywhere between them is resolved by rolling forward:
//! a coordinator replays its logged intents when it starts, and retries an intent whose MNode
//! did not answer until it does. An intent whose first step fails for good (the target's
//! parent vanished meanwhile) is dropped: the directory keeps its old name.

use futures::future::join_all;
use saker_rpc::{
    access, Attr, Cred, InodeId, MetaError, MetaRequest, MetaResponse, RenameVersioning, Want,
};

use crate::calls::{tag, transient, RETRY_EVERY};
use crate::intents::RenameIntent;
use crate::namespace::NamespaceCoordinator;

/// How a file moves: whether it may replace a file at its new name, for whom, and how the
/// two buckets keep versions.
#[derive(Clone, Copy)]
struct FileMove<'a> {
    noreplace: bool,
    cred: &'a Cred,
    versioning: RenameVersioning,
}

/// The access mask the caller needs on a directory it moves: remove it from its parent, and
/// write it when its parent changes (its `..` entry does). A file needs only the first.
pub fn source_mask(from: &[String], to: &[String]) -> u32 {
    if from[..from.len() - 1] == to[..to.len() - 1] {
        access::DELETE
    } else {
        access::DELETE | access::WRITE
    }
}

/// Whether `to` lies inside `from` (a directory cannot move below itself: EINVAL).
pub fn into_itself(from: &[String], to: &[String]) -> bool {
    to.len() > from.len() && to[..from.len()] == *from
}

impl NamespaceCoordinator {
    pub(crate) async fn call_owner(
        &self,
        path: &[String],
        req: MetaRequest,
    ) -> Result<MetaResponse, MetaError> {
        self.owner(path)?.call(tag(), req).await
    }

    /// Checks `cred` may do `mask` on `path` (`Access`); answers its attributes.
    pub(crate) async fn checked(
        &self,
        path: &[String],
        mask: u32,
        cred: Option<&Cred>,
        want: Want,
    ) -> Result<saker_rpc::ObjectView, MetaError> {
        let req = match cred {
            Some(cred) => MetaRequest::Access {
                path: path.to_vec(),
                mask,
                cred: cred.clone(),
                want,
            },
            None => MetaRequest::Lookup {
                path: path.to_vec(),
                want,
            },
        };
        match self.call_owner(path, req).await? {
            MetaResponse::Object(v) => Ok(*v),
            other => Err(MetaError::Internal(format!("access answered {other:?}"))),
        }
    }

    pub(crate) async fn freeze(&self, path: &[String]) -> Result<(InodeId, Attr), MetaError> {
        let req = MetaRequest::Freeze {
            path: path.to_vec(),
            coord: self.term,
        };
        match self.call_owner(path, req).await? {
            MetaResponse::Frozen { parent, attr } => Ok((parent, attr)),
            other => Err(MetaError::Internal(format!("freeze answered {other:?}"))),
        }
    }

    pub(crate) async fn thaw(&self, parent: InodeId, name: &str, dir: InodeId) {
        let g = self.router.read().owner(parent, name);
        let Some(owner) = self.groups.get(&g) else {
            return;
        };
        let thaw = MetaRequest::Unfreeze {
            dir,
            coord: self.term,
        };
        if let Err(e) = owner.call(tag(), thaw).await {
            tracing::warn!(error = %e, "unfreeze failed");
        }
    }

    /// The rename protocol (module docs).
    pub(crate) async fn rename_protocol(
        &self,
        from: Vec<String>,
        to: Vec<String>,
        noreplace: bool,
        cred: Cred,
        versioning: RenameVersioning,
    ) -> Result<Attr, MetaError> {
        if from.len() < 2 || to.len() < 2 {
            return Err(MetaError::Invalid("buckets are not renamed".into()));
        }
        if into_itself(&from, &to) {
            return Err(MetaError::Invalid(
                "a directory cannot move below itself".into(),
            ));
        }
        let _held = self.locks.lock(&[&from, &to]).await;
        // The caller's rights on both sides, before anything changes.
        let source = self
            .checked(&from, access::DELETE, Some(&cred), Want::ATTR)
            .await?;
        if from == to {
            return Ok(source.attr);
        }
        if !source.attr.is_dir() {
            let file = FileMove {
                noreplace,
                cred: &cred,
                versioning,
            };
            return self.move_file(&from, &to, file, &source.attr).await;
        }
        if versioning != RenameVersioning::default() {
            // The files below would change keys without versions of their own (or, where a
            // bucket keeps a change feed, without an event each): EXDEV, and mv(1) copies
            // and deletes them, which keeps versions and makes the events.
            return Err(MetaError::CrossGroup);
        }
        let mask = source_mask(&from, &to);
        if mask != access::DELETE {
            self.checked(&from, mask, Some(&cred), Want::ATTR).await?;
        }
        let (parent, attr) = self.freeze(&from).await?;
        let from_name = from.last().expect("checked length");
        let result = self
            .rename_frozen(&from, &to, noreplace, &cred, parent, &attr)
            .await;
        self.thaw(parent, from_name, attr.id).await;
        result
    }

    async fn rename_frozen(
        &self,
        from: &[String],
        to: &[String],
        noreplace: bool,
        cred: &Cred,
        parent: InodeId,
        attr: &Attr,
    ) -> Result<Attr, MetaError> {
        let to_parent = &to[..to.len() - 1];
        self.checked(
            to_parent,
            access::WRITE | access::EXEC,
            Some(cred),
            Want::ATTR,
        )
        .await?;
        // The target: nothing, or an empty directory to replace (frozen while we work).
        let mut replace = None;
        let mut frozen_target = None;
        match self.checked(to, 0, None, Want::ATTR).await {
            Err(MetaError::NotFound) => {}
            Err(e) => return Err(e),
            Ok(t) if !t.attr.is_dir() => return Err(MetaError::NotDir),
            Ok(_) if noreplace => return Err(MetaError::Exists),
            Ok(_) => {
                self.checked(to, access::DELETE, Some(cred), Want::ATTR)
                    .await?;
                let (tparent, tattr) = self.freeze(to).await?;
                frozen_target = Some((tparent, tattr.id));
                let name = to.last().expect("checked length").clone();
                let empty = self
                    .usage_everywhere(|| MetaRequest::Invalidate {
                        pid: tparent,
                        name: name.clone(),
                        dir: tattr.id,
                    })
                    .await
                    .map(|reports| {
                        reports
                            .iter()
                            .all(|u| !u.objects && u.implicit_dirs.is_empty())
                    });
                match empty {
                    Ok(true) => replace = Some(tattr.id),
                    Ok(false) => {
                        self.thaw(tparent, &name, tattr.id).await;
                        return Err(MetaError::NotEmpty);
                    }
                    Err(e) => {
                        self.thaw(tparent, &name, tattr.id).await;
                        return Err(e);
                    }
                }
            }
        }
        let result = self
            .move_record(from, to, parent, attr, replace, cred)
            .await;
        if let Some((tparent, tid)) = frozen_target {
            self.thaw(tparent, to.last().expect("checked length"), tid)
                .await;
        }
        result
    }

    /// Steps 4 and 5: invalidate, drain, log, move.
    async fn move_record(
        &self,
        from: &[String],
        to: &[String],
        parent: InodeId,
        attr: &Attr,
        replace: Option<InodeId>,
        cred: &Cred,
    ) -> Result<Attr, MetaError> {
        let name = from.last().expect("checked length").clone();
        self.usage_everywhere(|| MetaRequest::Invalidate {
            pid: parent,
            name: name.clone(),
            dir: attr.id,
        })
        .await?;
        for r in join_all(
            self.groups
                .values()
                .map(|g| g.call(tag(), MetaRequest::PushChanges)),
        )
        .await
        {
            r?;
        }
        let want = Want {
            meta: true,
            data: true,
            tags: true,
            link: false,
            lock: false,
            acl: false,
        };
        let view = self.checked(from, 0, None, want).await?;
        if view.attr.id != attr.id {
            return Err(MetaError::NotFound);
        }
        let intent = RenameIntent {
            from: from.to_vec(),
            to: to.to_vec(),
            attr: view.attr,
            meta: view.meta.unwrap_or_default(),
            data: view.data,
            tags: view.tags.unwrap_or_default(),
            replace,
            noreplace: false,
            cred: cred.clone(),
            // Directories keep no versions.
            versioning: RenameVersioning::default(),
        };
        self.log_and_move(intent).await
    }

    /// A file: block its path, read it, check the target, log, move.
    async fn move_file(
        &self,
        from: &[String],
        to: &[String],
        file: FileMove<'_>,
        source: &Attr,
    ) -> Result<Attr, MetaError> {
        let FileMove {
            noreplace, cred, ..
        } = file;
        let to_parent = &to[..to.len() - 1];
        self.checked(
            to_parent,
            access::WRITE | access::EXEC,
            Some(cred),
            Want::ATTR,
        )
        .await?;
        match self.checked(to, 0, None, Want::ATTR).await {
            Err(MetaError::NotFound) => {}
            Err(e) => return Err(e),
            Ok(t) if t.attr.is_dir() => return Err(MetaError::IsDir),
            // Two hard links of one file: rename(2) does nothing.
            Ok(t) if t.attr.id == source.id => return Ok(source.clone()),
            Ok(_) if noreplace => return Err(MetaError::Exists),
            Ok(_) => {
                self.checked(to, access::DELETE, Some(cred), Want::ATTR)
                    .await?;
            }
        }
        self.call_owner(
            from,
            MetaRequest::BlockPath {
                path: from.to_vec(),
                coord: self.term,
            },
        )
        .await?;
        let result = self.move_blocked_file(from, to, file).await;
        if self.journal.moving(from) {
            // Logged but not finished: the path stays blocked until the resolver finishes
            // the move (a write there now could release the chunks the new name holds).
            return result;
        }
        let unblock = MetaRequest::UnblockPath {
            path: from.to_vec(),
            coord: self.term,
        };
        if let Err(e) = self.call_owner(from, unblock).await {
            tracing::warn!(error = %e, "unblock failed");
        }
        result
    }

    async fn move_blocked_file(
        &self,
        from: &[String],
        to: &[String],
        file: FileMove<'_>,
    ) -> Result<Attr, MetaError> {
        // The name's own entry: a hard link's reference moves as it is (its payloads stay
        // with the shared inode).
        let want = Want {
            meta: true,
            data: true,
            tags: true,
            link: true,
            lock: false,
            acl: false,
        };
        let view = self.checked(from, 0, None, want).await?;
        if view.attr.is_dir() {
            return Err(MetaError::NotFound);
        }
        let intent = RenameIntent {
            from: from.to_vec(),
            to: to.to_vec(),
            attr: view.attr,
            meta: view.meta.unwrap_or_default(),
            data: view.data,
            tags: view.tags.unwrap_or_default(),
            replace: None,
            noreplace: file.noreplace,
            cred: file.cred.clone(),
            versioning: file.versioning,
        };
        self.log_and_move(intent).await
    }

    async fn log_and_move(&self, intent: RenameIntent) -> Result<Attr, MetaError> {
        let seq = self.journal.log(&intent).await?;
        saker_rpc::fail_point::abort_at("rename_logged");
        match self.roll_forward(&intent).await {
            Ok(moved) => {
                self.journal.done(seq).await;
                Ok(moved)
            }
            Err(e) if transient(&e) => {
                // Logged: it will be finished (the resolver retries).
                tracing::warn!(error = %e, from = ?intent.from, to = ?intent.to, "rename left to the resolver");
                Err(e)
            }
            Err(e) => {
                self.journal.done(seq).await;
                Err(e)
            }
        }
    }

    /// Both steps of a logged intent, each idempotent.
    async fn roll_forward(&self, intent: &RenameIntent) -> Result<Attr, MetaError> {
        let dir = intent.attr.is_dir();
        let put = if dir {
            MetaRequest::RenameDirIn {
                to: intent.to.clone(),
                attr: Box::new(intent.attr.clone()),
                meta: intent.meta.clone(),
                data: intent.data.clone(),
                tags: intent.tags.clone(),
                replace: intent.replace,
                cred: intent.cred.clone(),
            }
        } else {
            MetaRequest::RenameIn {
                from: intent.from.clone(),
                to: intent.to.clone(),
                attr: Box::new(intent.attr.clone()),
                meta: intent.meta.clone(),
                data: intent.data.clone(),
                tags: intent.tags.clone(),
                noreplace: intent.noreplace,
                cred: intent.cred.clone(),
                versioning: intent.versioning,
            }
        };
        let moved = match self.call_owner(&intent.to, put).await? {
            MetaResponse::Attr(a) => a,
            other => {
                return Err(MetaError::Internal(format!(
                    "rename step 1 answered {other:?}"
                )))
            }
        };
        saker_rpc::fail_point::abort_at("rename_in_done");
        let out = if dir {
            MetaRequest::RenameDirOut {
                from: intent.from.clone(),
                id: intent.attr.id,
            }
        } else {
            MetaRequest::RenameOut {
                from: intent.from.clone(),
                id: intent.attr.id,
                versioning: intent.versioning.from,
            }
        };
        self.call_owner(&intent.from, out).await?;
        Ok(moved)
    }

    /// After a restart, what a cut-off move left held at the MNodes (the freeze of a
    /// directory, the block of a file's path) is released; neither is held by anyone else.
    async fn release_holds(&self, intent: &RenameIntent) {
        let req = if intent.attr.is_dir() {
            MetaRequest::Unfreeze {
                dir: intent.attr.id,
                coord: self.term,
            }
        } else {
            MetaRequest::UnblockPath {
                path: intent.from.clone(),
                coord: self.term,
            }
        };
        for g in self.groups.values() {
            let _ = g.call(tag(), req.clone()).await;
        }
    }

    /// Runs for the life of the process: finishes renames and redirections whose MNodes did
    /// not answer in time.
    pub async fn run_resolver(self: std::sync::Arc<Self>) {
        loop {
            if self.exceptions.pending().is_some() {
                if let Err(e) = self.resolve_exceptions().await {
                    tracing::debug!(error = %e, "a redirection waits for its groups");
                }
            }
            self.resolve_renames().await;
            self.resolve_links_once().await;
            tokio::time::sleep(RETRY_EVERY).await;
        }
    }

    /// Finishes the renames a previous run logged (or this one could not finish), retrying
    /// while MNodes do not answer. Returns once none is left.
    pub async fn resolve_renames(&self) {
        loop {
            let pending = self.journal.pending();
            if pending.is_empty() {
                return;
            }
            for (seq, intent) in pending {
                let _held = self.locks.lock(&[&intent.from, &intent.to]).await;
                if !self.journal.is_pending(seq) {
                    // Its own protocol finished it while we waited for the locks.
                    continue;
                }
                match self.roll_forward(&intent).await {
                    Ok(_) => {
                        tracing::info!(from = ?intent.from, to = ?intent.to, "logged rename finished");
                        self.release_holds(&intent).await;
                        self.journal.done(seq).await;
                    }
                    Err(e) if transient(&e) => {
                        tracing::debug!(error = %e, "logged rename waits for its MNodes");
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, from = ?intent.from, to = ?intent.to, "logged rename abandoned: the inode keeps its old name");
                        self.release_holds(&intent).await;
                        self.journal.done(seq).await;
                    }
                }
            }
            tokio::time::sleep(RETRY_EVERY).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use saker_rpc::ObjectMeta;

    use crate::intents::{RenameJournal, RENAMES};
    use crate::journal::JournalError;
    use saker_rpc::{FileKind, Layout};

    fn p(s: &str) -> Vec<String> {
        s.split('/').map(str::to_string).collect()
    }

    fn intent(from: &str, to: &str) -> RenameIntent {
        RenameIntent {
            from: p(from),
            to: p(to),
            attr: Attr {
                id: 42,
                kind: FileKind::Dir,
                mode: 0o755,
                uid: 1,
                gid: 2,
                nlink: 3,
                size: 0,
                atime_ns: 1,
                mtime_ns: 2,
                ctime_ns: 3,
                etag: String::new(),
                implicit: false,
                children: 4,
                layout: Layout::Inline,
                parts: Vec::new(),
                s3_mtime_ns: 5,
                sealed: false,
            },
            meta: ObjectMeta::default(),
            data: Some(Bytes::from_static(b"marker")),
            tags: vec![("k".into(), "v".into())],
            replace: Some(7),
            noreplace: false,
            cred: saker_rpc::Cred::ROOT,
            versioning: RenameVersioning::default(),
        }
    }

    async fn open_in(dir: &std::path::Path) -> Result<RenameJournal, JournalError> {
        let state = std::sync::Arc::new(crate::state::DirState::new(dir));
        RenameJournal::load(state, RENAMES).await
    }

    #[tokio::test]
    async fn logged_intents_survive_a_reopen_until_done() {
        let dir = tempfile::tempdir().unwrap();
        let j = open_in(dir.path()).await.unwrap();
        let a = j.log(&intent("b/x", "b/y")).await.unwrap();
        let b = j.log(&intent("b/p", "b/q")).await.unwrap();
        j.done(a).await;
        drop(j);
        // A torn write leaves only a temporary file, which is not an intent.
        let torn = dir.path().join("renames/rename-99.tmp");
        std::fs::write(&torn, b"{\"half").unwrap();
        let j = open_in(dir.path()).await.unwrap();
        assert_eq!(j.pending(), vec![(b, intent("b/p", "b/q"))]);
        assert!(!torn.exists());
        // Sequence numbers keep growing past what was found.
        let c = j.log(&intent("b/r", "b/s")).await.unwrap();
        assert!(c > b);
        j.done(b).await;
        j.done(c).await;
        assert!(open_in(dir.path()).await.unwrap().pending().is_empty());
    }

    #[tokio::test]
    async fn a_corrupt_intent_is_an_error_not_a_silent_drop() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("renames")).unwrap();
        std::fs::write(dir.path().join("renames/rename-3.json"), b"{not json").unwrap();
        assert!(matches!(
            open_in(dir.path()).await,
            Err(JournalError::Corrupt { .. })
        ));
    }

    #[test]
    fn masks_and_cycles() {
        assert_eq!(source_mask(&p("b/a/x"), &p("b/a/y")), access::DELETE);
        assert_eq!(
            source_mask(&p("b/a/x"), &p("b/c/x")),
            access::DELETE | access::WRITE
        );
        assert!(into_itself(&p("b/a"), &p("b/a/x")));
        assert!(!into_itself(&p("b/a"), &p("b/ab")));
        assert!(!into_itself(&p("b/a/x"), &p("b/a")));
    }
}
