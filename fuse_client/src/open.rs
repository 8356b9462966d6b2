//! Opening files: open(2) with its checks, create (and open(O_CREAT) as MKNOD then OPEN,
//! see [`crate::created`]), and the handles they register.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use parking_lot::Mutex;
use saker_client::sealed::Opening;
use saker_rpc::{access, Attr, FileKind, MetaError, MetaRequest, MetaResponse, Want};

use crate::created::{syscall_of, Created, Syscall, Ticket};
use crate::error::{FuseError, Result};
use crate::file::OpenFile;
use crate::fs::{create_request, Caller, Handle, NewNode, SakerFs};

impl SakerFs {
    fn new_handle(&self, ino: u64, append: bool) -> u64 {
        let fh = self.new_fh();
        self.handles.lock().insert(fh, Handle { ino, append });
        fh
    }

    /// Registers an open of `ino` with what the server answered (close-to-open: a file nobody
    /// here is writing takes the server's current bytes).
    fn opened(
        &self,
        attr: Attr,
        inline: Option<Bytes>,
        opening: Option<Arc<Opening>>,
        append: bool,
    ) -> u64 {
        let ino = attr.id;
        let file = self
            .files
            .lock()
            .entry(ino)
            .or_insert_with(|| Arc::new(Mutex::new(OpenFile::new(attr.clone(), inline.clone()))))
            .clone();
        {
            let mut f = file.lock();
            if f.buf.is_none() {
                f.attr = attr;
                f.inline = inline;
                f.opening = opening;
            }
            f.handles += 1;
        }
        self.new_handle(ino, append)
    }

    /// open(2) of `ino` by thread `tid`. An OPEN by the thread of an unprobed create, soon
    /// after it, opens the new file as made ([`crate::created`]). The OPEN that follows a
    /// probed MKNOD of the same open(2) waits for the create to be durable and opens the new,
    /// empty file without a check (the creator may open what it made whatever its mode, as
    /// with CREATE).
    pub fn open(&self, caller: &Caller, tid: u32, ino: u64, flags: i32) -> Result<u64> {
        let made = self.created.lock().get(&ino).cloned();
        let Some(made) = made else {
            return self.open_checked(caller, ino, flags);
        };
        // Opened unchecked only by its creator: the thread, and (thread ids of callers in
        // another pid namespace are all 0) the file's owner.
        let creator = made.tid == tid && made.attr.uid == caller.cred.uid;
        if made.fresh_until.is_some() {
            // An unprobed create: its creator's OPEN, in time, opens the new file as made,
            // unless someone has it open already (their view of it stays).
            let now = Instant::now();
            let own = creator && !made.stale(now);
            if own || made.stale(now) {
                self.created.lock().remove(&ino);
            }
            if !own || self.files.lock().contains_key(&ino) {
                return self.open_checked(caller, ino, flags);
            }
            return Ok(self.opened_new(made.attr, flags));
        }
        // A file found instead of made is opened checked below, whoever owns it.
        let own = made.tid == tid && (made.existing || creator);
        let settled = self.settle(&made);
        if own {
            self.created.lock().remove(&ino);
        }
        settled?;
        if !own {
            return self.open_checked(caller, ino, flags);
        }
        if !made.existing {
            return Ok(self.opened_new(made.attr, flags));
        }
        let flags = if made.trunc {
            flags | libc::O_TRUNC
        } else {
            flags
        };
        let fh = self.open_checked(caller, ino, flags)?;
        if made.trunc {
            if let Err(e) = self.setattr(caller, ino, None, None, None, Some(0), None, None, true) {
                self.release(fh)?;
                return Err(e);
            }
        }
        Ok(fh)
    }

    /// Opens the new, empty file a create of this mount just made, without asking its MNode.
    fn opened_new(&self, attr: Attr, flags: i32) -> u64 {
        self.opened(attr, Some(Bytes::new()), None, flags & libc::O_APPEND != 0)
    }

    /// Waits until a create answered before its sync is durable (`Committed`), once for all
    /// who wait on the same record.
    fn settle(&self, made: &Created) -> Result<()> {
        let Some(t) = &made.ticket else {
            return Ok(());
        };
        let outcome = self.block(made.settled.get_or_init(|| async move {
            let committed = MetaRequest::Committed { ticket: t.ticket };
            match self.cluster.call_group(t.group, committed).await {
                // The leader that answered the create lost its leadership (and its tickets,
                // kept in memory) since: the create goes again under its tag, and the new
                // leader answers its first result if it was committed, else makes it now.
                Err(MetaError::Unavailable(_) | MetaError::NotLeader { .. }) => {
                    crate::metrics::CREATE_RESENDS.inc();
                    let again = self
                        .cluster
                        .call_tagged(&t.path, t.tag, t.create.clone())
                        .await?;
                    match again {
                        MetaResponse::Attr(a) if a.id == made.attr.id => Ok(()),
                        // Not committed before the failover, and made anew since: the file
                        // the kernel was given is not the one stored.
                        other => Err(MetaError::Unavailable(format!(
                            "a create was lost in a failover (made again as {other:?})"
                        ))),
                    }
                }
                r => r.map(|_| ()),
            }
        }));
        Ok(outcome.clone()?)
    }

    /// Waits for a pending create of `ino` (see [`Self::open`]), if there is one.
    pub(crate) fn settle_ino(&self, ino: u64) -> Result<()> {
        let made = self.created.lock().get(&ino).cloned();
        made.map_or(Ok(()), |made| self.settle(&made))
    }

    /// open(2) of an existing file: the caller's access checked by its MNode.
    fn open_checked(&self, caller: &Caller, ino: u64, flags: i32) -> Result<u64> {
        let path = self.path(ino)?;
        let mut mask = match flags & libc::O_ACCMODE {
            libc::O_WRONLY => access::WRITE,
            libc::O_RDWR => access::READ | access::WRITE,
            _ => access::READ,
        };
        if flags & libc::O_TRUNC != 0 {
            mask |= access::WRITE;
        }
        let want = Want::DATA;
        let view = self.block(self.access_view(&path, mask, caller, want))?;
        if view.attr.id != ino {
            return Err(FuseError::Stale);
        }
        if view.attr.kind == FileKind::Dir {
            return Err(MetaError::IsDir.into());
        }
        // A sealed file's bytes are decrypted for reading and for a rewrite (unless it is
        // truncated first); a rewrite is sealed again at its commit.
        let wants_bytes = mask & access::READ != 0 || flags & libc::O_TRUNC == 0;
        let opening = match view.attr.sealed && wants_bytes {
            true => Some(self.read_key(&path, ino, caller)?),
            false => None,
        };
        Ok(self.opened(view.attr, view.data, opening, flags & libc::O_APPEND != 0))
    }

    /// The MKNOD of a regular file when open(O_CREAT) comes as MKNOD then OPEN
    /// ([`crate::created`]). An open(2) queued behind another create in its directory is
    /// answered as evaluated, and its OPEN waits for the sync; any other create is durable
    /// before the answer. The thread's syscall is read from /proc only where it matters (see
    /// the module).
    pub fn mknod_file(
        &self,
        caller: &Caller,
        tid: u32,
        parent: u64,
        name: &OsStr,
        mode: u32,
    ) -> Result<Attr> {
        let path = self.new_node_path(parent, name)?;
        let queued = self.recent.lock().queued(parent, tid, Instant::now());
        let owner_rw = mode & 0o600 == 0o600;
        let probed = (queued || !owner_rw).then(|| syscall_of(tid));
        let defer = queued && matches!(probed, Some(Syscall::Open { .. }));
        // Always exclusive, so that a file found instead is known to be someone else's.
        let file = NewNode::File { exclusive: true };
        let versioning = self.versioning(&path)?;
        let req = create_request(caller, &path, mode, file.clone(), defer, versioning);
        let tag = self.cluster.new_tag();
        let answer = self.block(self.cluster.call_tagged(&path, tag, req));
        let (attr, ticket) = match answer.map_err(FuseError::from) {
            Ok(MetaResponse::Deferred {
                resp,
                group,
                ticket,
            }) => match *resp {
                MetaResponse::Attr(a) => {
                    let create = create_request(caller, &path, mode, file, false, versioning);
                    let t = Ticket {
                        group,
                        ticket,
                        path: path.clone(),
                        tag,
                        create,
                    };
                    (a, Some(t))
                }
                other => {
                    return Err(MetaError::Internal(format!("create answered {other:?}")).into())
                }
            },
            Ok(MetaResponse::Attr(a)) => (a, None),
            Ok(other) => {
                return Err(MetaError::Internal(format!("create answered {other:?}")).into())
            }
            Err(FuseError::Meta(MetaError::Exists)) => {
                // Another client made it since the kernel's lookup: an open(2) without
                // O_EXCL opens it (checked, as any existing file), truncated if asked.
                let Syscall::Open { flags: Some(flags) } =
                    probed.unwrap_or_else(|| syscall_of(tid))
                else {
                    return Err(MetaError::Exists.into());
                };
                if flags & libc::O_EXCL != 0 {
                    return Err(MetaError::Exists.into());
                }
                let view = self.block(self.access_view(&path, 0, caller, Want::ATTR))?;
                if view.attr.kind != FileKind::File {
                    return Err(MetaError::Exists.into());
                }
                let trunc = flags & libc::O_TRUNC != 0;
                let made = Created::new(tid, view.attr.clone(), None, trunc, true);
                self.remember_created(parent, &path, made);
                return Ok(view.attr);
            }
            Err(e) => return Err(e),
        };
        if matches!(probed, Some(Syscall::Open { .. } | Syscall::Unknown)) {
            // Unknown: taken for an open(2), so that its OPEN is not refused by the new mode.
            let made = Created::new(tid, attr.clone(), ticket, false, false);
            self.remember_created(parent, &path, made);
        } else if probed.is_none() {
            let made = Created::fresh(tid, attr.clone(), Instant::now());
            self.remember_created(parent, &path, made);
        } else {
            self.inodes
                .lock()
                .remember(attr.id, parent, path.last().expect("child"), false);
        }
        self.recent.lock().answered(parent, tid, Instant::now());
        Ok(attr)
    }

    fn remember_created(&self, parent: u64, path: &[String], made: Created) {
        let ino = made.attr.id;
        self.inodes
            .lock()
            .remember(ino, parent, path.last().expect("child"), false);
        let mut created = self.created.lock();
        if created.len() >= 4096 && created.len().is_multiple_of(4096) {
            // Unprobed creates of mknod(2) are never opened by their record. (At every 4096th
            // record, so that many live ones do not make each insert a scan.)
            let now = Instant::now();
            created.retain(|_, c| !c.stale(now));
        }
        created.insert(ino, made);
    }

    /// create(2): a new empty file, opened.
    pub fn create(
        &self,
        caller: &Caller,
        parent: u64,
        name: &OsStr,
        mode: u32,
        flags: i32,
    ) -> Result<(Attr, u64)> {
        let exclusive = flags & libc::O_EXCL != 0;
        let attr = self.create_node(caller, parent, name, mode, NewNode::File { exclusive })?;
        if attr.kind != FileKind::File {
            return Err(MetaError::Exists.into());
        }
        let inline = if attr.size == 0 {
            Some(Bytes::new())
        } else {
            // An existing file (a create racing another client's): its bytes as of now.
            let path = self.path(attr.id)?;
            let want = Want::DATA;
            self.block(self.access_view(&path, 0, caller, want))?.data
        };
        let fh = self.opened(attr.clone(), inline, None, flags & libc::O_APPEND != 0);
        if flags & libc::O_TRUNC != 0 && attr.size > 0 {
            let attr =
                self.setattr(caller, attr.id, None, None, None, Some(0), None, None, true)?;
            return Ok((attr, fh));
        }
        Ok((attr, fh))
    }
}
