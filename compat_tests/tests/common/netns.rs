//! Network namespaces for partition tests: one namespace per node, each with a veth pair whose
//! other end is a port of a bridge in the root namespace. The bridge has an address in the
//! nodes' /24, so this test process reaches every node while the nodes may be cut off from one
//! another ([`Netns::isolate`], [`Netns::cut`]: blackhole routes inside the namespaces, no
//! packet filter needed).
//!
//! Names start with `sk<pid in hex>` (interface names stay within 15 characters); dropping a
//! [`Netns`] deletes its namespaces, veths and bridge, also when the test panics, and a new
//! one first deletes what runs of processes that no longer exist left behind. Setting up needs
//! root and `ip` (iproute2): without them the test fails saying so.

use std::collections::BTreeSet;
use std::process::{Command, Output};
use std::sync::Mutex;

/// What every name of this harness starts with.
const PREFIX: &str = "sk";

/// Namespaces, veths and a bridge, deleted on drop.
pub struct Netns {
    /// `sk<pid hex>`: the start of every name this instance made.
    tag: String,
    /// Namespace of node i.
    pub names: Vec<String>,
    /// IPv4 address of node i (inside its namespace).
    pub ips: Vec<String>,
    /// The bridge's address in the root namespace (this test process's side).
    pub host_ip: String,
    bridge: String,
    /// Blackhole routes in place: (in the namespace of node `from`, to node `to`'s address).
    cuts: Mutex<BTreeSet<(usize, usize)>>,
    /// Blackhole routes in place to the service address: the nodes cut off from it.
    service_cuts: Mutex<BTreeSet<usize>>,
}

/// Runs `ip ARGS`; the output, or a description of why it could not run or failed.
fn ip_try(args: &[&str]) -> Result<Output, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip {}`: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "`ip {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Runs `ip ARGS`, panicking with its stderr unless it succeeds.
#[track_caller]
fn ip(args: &[&str]) -> String {
    match ip_try(args) {
        Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
        Err(e) => panic!("{e}"),
    }
}

/// The process id in a name of this harness (`sk<hex pid>-…` for namespaces, `sk<hex pid>x…`
/// for interfaces), if it is one.
fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let end = rest.find(|c: char| !c.is_ascii_hexdigit())?;
    if end == 0 || !matches!(rest[end..].chars().next(), Some('-' | 'x')) {
        return None;
    }
    u32::from_str_radix(&rest[..end], 16).ok()
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Deletes namespaces (and kills what still runs in them) and bridges that runs of processes
/// no longer alive left behind (their veths go with them). Best effort: what cannot be deleted
/// stays.
fn remove_leftovers() {
    if let Ok(out) = ip_try(&["netns", "list"]) {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            if owner_pid(name).is_some_and(|p| !alive(p)) {
                // A crashed run's servers may still run in it.
                if let Ok(out) = ip_try(&["netns", "pids", name]) {
                    for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                        if let Ok(pid) = pid.parse::<i32>() {
                            // SAFETY: kill(2) with a pid and a signal number has no memory
                            // effects.
                            unsafe { libc::kill(pid, libc::SIGKILL) };
                        }
                    }
                }
                let _ = ip_try(&["netns", "del", name]);
            }
        }
    }
    if let Ok(out) = ip_try(&["-o", "link", "show", "type", "bridge"]) {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            // `7: skab12xbr: <…>`
            let Some(name) = line.split(':').nth(1).map(str::trim) else {
                continue;
            };
            if owner_pid(name).is_some_and(|p| !alive(p)) {
                let _ = ip_try(&["link", "del", name]);
            }
        }
    }
}

/// A /24 no route of the root namespace covers yet: `10.<a>.<b>`.
fn free_subnet() -> String {
    let routes = ip(&["-4", "route", "show", "table", "all"]);
    let pid = std::process::id();
    (0..256u32)
        .map(|k| {
            let b = (pid + k) % 256;
            format!("10.{}.{b}", 200 + (pid / 256 + k / 256) % 50)
        })
        .find(|net| !routes.contains(&format!("{net}.")))
        .expect("a free 10.x.y.0/24")
}

impl Netns {
    /// `n` namespaces, node i at `10.a.b.(i+1)`, the bridge at `10.a.b.254`. Fails the test
    /// (never skips it) if they cannot be made.
    pub fn new(n: usize) -> Netns {
        assert!(n < 10, "at most 9 nodes");
        if let Err(e) = ip_try(&["netns", "list"]) {
            panic!("this test needs iproute2 (`ip`) and root for network namespaces: {e}");
        }
        remove_leftovers();
        // `x` ends the pid in interface names (`b` of `br` would read as a hex digit).
        let tag = format!("{PREFIX}{:x}", std::process::id());
        let net = free_subnet();
        let mut ns = Netns {
            names: (0..n).map(|i| format!("{tag}-n{}", i + 1)).collect(),
            ips: (0..n).map(|i| format!("{net}.{}", i + 1)).collect(),
            host_ip: format!("{net}.254"),
            bridge: format!("{tag}xbr"),
            tag,
            cuts: Mutex::new(BTreeSet::new()),
            service_cuts: Mutex::new(BTreeSet::new()),
        };
        // From here on, drop cleans up whatever was made.
        if let Err(e) = ip_try(&["link", "add", &ns.bridge, "type", "bridge"]) {
            panic!(
                "cannot create a bridge: this partition test needs root (CAP_NET_ADMIN) and \
                 network namespaces: {e}"
            );
        }
        ip(&[
            "addr",
            "add",
            &format!("{}/24", ns.host_ip),
            "dev",
            &ns.bridge,
        ]);
        ip(&[
            "addr",
            "add",
            &format!("{}/24", ns.service_ip()),
            "dev",
            &ns.bridge,
        ]);
        ip(&["link", "set", &ns.bridge, "up"]);
        for i in 0..n {
            ns.add_node(i);
        }
        ns
    }

    fn host_veth(&self, i: usize) -> String {
        format!("{}xh{}", self.tag, i + 1)
    }

    fn node_veth(&self, i: usize) -> String {
        format!("{}xv{}", self.tag, i + 1)
    }

    fn add_node(&mut self, i: usize) {
        let (name, host, inner) = (&self.names[i], self.host_veth(i), self.node_veth(i));
        assert!(host.len() <= 15 && inner.len() <= 15, "{host}: too long");
        if let Err(e) = ip_try(&["netns", "add", name]) {
            panic!("cannot create network namespace {name} (needs root): {e}");
        }
        ip(&["link", "add", &host, "type", "veth", "peer", "name", &inner]);
        ip(&["link", "set", &inner, "netns", name]);
        ip(&["link", "set", &host, "master", &self.bridge]);
        ip(&["link", "set", &host, "up"]);
        let addr = format!("{}/24", self.ips[i]);
        ip(&["-n", name, "addr", "add", &addr, "dev", &inner]);
        ip(&["-n", name, "link", "set", &inner, "up"]);
        ip(&["-n", name, "link", "set", "lo", "up"]);
    }

    /// `ip netns exec <namespace of node i>`: a command prefix that runs a program there (it
    /// execs the program: the child's pid is the program's).
    pub fn exec_prefix(&self, i: usize) -> Vec<String> {
        vec!["netns".into(), "exec".into(), self.names[i].clone()]
    }

    /// Drops node `from`'s packets to node `to` (a blackhole route in `from`'s namespace): new
    /// connections fail, established ones stall. One direction only.
    pub fn cut(&self, from: usize, to: usize) {
        let mut cuts = self.cuts.lock().unwrap();
        if cuts.insert((from, to)) {
            let dest = format!("{}/32", self.ips[to]);
            ip(&["-n", &self.names[from], "route", "add", "blackhole", &dest]);
        }
    }

    /// Cuts node `i` off from every other node in both directions; this process still
    /// reaches it (and them) through the bridge.
    pub fn isolate(&self, i: usize) {
        for j in (0..self.names.len()).filter(|&j| j != i) {
            self.cut(i, j);
            self.cut(j, i);
        }
    }

    /// A second address of the bridge, for a service the test process runs for the nodes
    /// (a TiKV): a node can be cut off from it ([`Netns::cut_from_service`]) while this
    /// process still reaches the node at [`Netns::host_ip`].
    pub fn service_ip(&self) -> String {
        self.host_ip.replace(".254", ".253")
    }

    /// Drops node `i`'s packets to the service address.
    pub fn cut_from_service(&self, i: usize) {
        if self.service_cuts.lock().unwrap().insert(i) {
            let dest = format!("{}/32", self.service_ip());
            ip(&["-n", &self.names[i], "route", "add", "blackhole", &dest]);
        }
    }

    /// Removes every cut.
    pub fn heal(&self) {
        let mut cuts = self.cuts.lock().unwrap();
        for (from, to) in std::mem::take(&mut *cuts) {
            let dest = format!("{}/32", self.ips[to]);
            ip(&["-n", &self.names[from], "route", "del", "blackhole", &dest]);
        }
        for i in std::mem::take(&mut *self.service_cuts.lock().unwrap()) {
            let dest = format!("{}/32", self.service_ip());
            ip(&["-n", &self.names[i], "route", "del", "blackhole", &dest]);
        }
    }

    /// The cuts in place, as (from, to) node indexes.
    pub fn cuts(&self) -> Vec<(usize, usize)> {
        self.cuts.lock().unwrap().iter().copied().collect()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end inside it, and with it the pair.
        for name in &self.names {
            let _ = ip_try(&["netns", "del", name]);
        }
        for i in 0..self.names.len() {
            let _ = ip_try(&["link", "del", &self.host_veth(i)]);
        }
        let _ = ip_try(&["link", "del", &self.bridge]);
    }
}
