//! POSIX permission checks for requests that carry the caller's credentials (FUSE requests);
//! S3 requests carry none and are not checked here.

use saker_rpc::{access, Attr, Cred, FileKind, MetaError};

use crate::tree::Located;

/// The set-group-id bit (directories: new entries inherit the directory's group).
pub const S_ISGID: u32 = 0o2000;
pub const S_ISUID: u32 = 0o4000;
/// The sticky bit (directories: only owners may remove entries).
pub const S_ISVTX: u32 = 0o1000;

/// Whether `cred` has every bit of `mask` (`access::READ|WRITE|EXEC`) on an inode with `attr`.
/// Root reads and writes anything and executes what has some execute bit (directories always).
pub fn may(attr: &Attr, cred: &Cred, mask: u32) -> bool {
    let mask = mask & 0o7;
    if cred.uid == 0 {
        return mask & access::EXEC == 0 || attr.kind == FileKind::Dir || attr.mode & 0o111 != 0;
    }
    let bits = if cred.uid == attr.uid {
        attr.mode >> 6
    } else if cred.in_group(attr.gid) {
        attr.mode >> 3
    } else {
        attr.mode
    } & 0o7;
    bits & mask == mask
}

/// `AccessDenied` unless `cred` has `mask` on `attr`.
pub fn check(attr: &Attr, cred: &Cred, mask: u32) -> Result<(), MetaError> {
    if may(attr, cred, mask) {
        Ok(())
    } else {
        Err(MetaError::AccessDenied)
    }
}

/// Search permission on every directory of a resolved chain (root first).
pub fn search(chain: &[Located], cred: Option<&Cred>) -> Result<(), MetaError> {
    let Some(cred) = cred else { return Ok(()) };
    chain
        .iter()
        .try_for_each(|dir| check(&dir.attr, cred, access::EXEC))
}

/// May `cred` remove (or rename away) `victim` from the directory `parent`: write and search
/// permission on the parent, and in a sticky directory only the owner of either (or root).
pub fn may_delete(parent: &Attr, victim: &Attr, cred: Option<&Cred>) -> Result<(), MetaError> {
    let Some(cred) = cred else { return Ok(()) };
    check(parent, cred, access::WRITE | access::EXEC)?;
    if parent.mode & S_ISVTX != 0
        && cred.uid != 0
        && cred.uid != victim.uid
        && cred.uid != parent.uid
    {
        return Err(MetaError::NotPermitted);
    }
    Ok(())
}

/// May `cred` create an entry in `parent`.
pub fn may_create(parent: &Attr, cred: Option<&Cred>) -> Result<(), MetaError> {
    match cred {
        Some(cred) => check(parent, cred, access::WRITE | access::EXEC),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::root_attr;

    fn attr(kind: FileKind, mode: u32, uid: u32, gid: u32) -> Attr {
        let mut a = root_attr();
        a.kind = kind;
        a.mode = mode;
        a.uid = uid;
        a.gid = gid;
        a
    }

    fn cred(uid: u32, gid: u32, groups: &[u32]) -> Cred {
        Cred {
            uid,
            gid,
            groups: groups.to_vec(),
        }
    }

    #[test]
    fn owner_group_and_other_bits_apply_in_that_order() {
        let f = attr(FileKind::File, 0o640, 1000, 100);
        assert!(may(&f, &cred(1000, 1, &[]), access::READ | access::WRITE));
        assert!(!may(&f, &cred(1000, 1, &[]), access::EXEC));
        assert!(may(&f, &cred(2000, 100, &[]), access::READ));
        assert!(!may(&f, &cred(2000, 100, &[]), access::WRITE));
        assert!(may(&f, &cred(2000, 5, &[7, 100]), access::READ));
        assert!(!may(&f, &cred(2000, 5, &[]), access::READ));
        // The owner class decides even when the group class would allow more.
        let g = attr(FileKind::File, 0o070, 1000, 100);
        assert!(!may(&g, &cred(1000, 100, &[]), access::READ));
        assert!(may(&f, &cred(2000, 5, &[]), 0));
    }

    #[test]
    fn root_executes_only_with_some_x_bit_but_searches_any_directory() {
        let root = Cred::ROOT;
        assert!(may(
            &attr(FileKind::File, 0, 5, 5),
            &root,
            access::READ | access::WRITE
        ));
        assert!(!may(
            &attr(FileKind::File, 0o600, 5, 5),
            &root,
            access::EXEC
        ));
        assert!(may(&attr(FileKind::File, 0o001, 5, 5), &root, access::EXEC));
        assert!(may(&attr(FileKind::Dir, 0, 5, 5), &root, access::EXEC));
    }

    #[test]
    fn sticky_directories_keep_other_users_entries() {
        let dir = attr(FileKind::Dir, 0o1777, 0, 0);
        let theirs = attr(FileKind::File, 0o644, 1001, 1001);
        let mine = attr(FileKind::File, 0o644, 1000, 1000);
        let me = cred(1000, 1000, &[]);
        assert_eq!(may_delete(&dir, &mine, Some(&me)), Ok(()));
        assert_eq!(
            may_delete(&dir, &theirs, Some(&me)),
            Err(MetaError::NotPermitted)
        );
        assert_eq!(may_delete(&dir, &theirs, Some(&Cred::ROOT)), Ok(()));
        assert_eq!(may_delete(&dir, &theirs, None), Ok(()));
        let closed = attr(FileKind::Dir, 0o755, 0, 0);
        assert_eq!(
            may_delete(&closed, &mine, Some(&me)),
            Err(MetaError::AccessDenied)
        );
    }
}
