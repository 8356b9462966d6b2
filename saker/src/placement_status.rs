//! The placement `saker admin status` shows: each chunkstore's zone, each group's voters and
//! their zones, and warnings where copies or voters cannot spread over zones (pure: built
//! from what [`crate::nodes::Nodes::placement`] gathered).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::chunk_members::{Entry, Membership};

/// One voter: raft id, address, zone.
#[derive(Debug, Serialize, Deserialize)]
pub struct Voter {
    pub id: u64,
    pub addr: String,
    pub zone: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Placement {
    /// The chunkstores, as the record has them.
    pub chunkstores: Vec<Entry>,
    /// Copies per chunk.
    pub copies: usize,
    /// Each group's voters.
    pub groups: BTreeMap<u32, Vec<Voter>>,
    /// What cannot spread over zones, and why.
    pub warnings: Vec<String>,
}

impl Placement {
    /// The placement of `voters` (each group's raft id and address) and of `copies` copies
    /// per chunk over `members`, whose zones are the nodes' (a node without a chunkstore has
    /// none).
    pub fn new(voters: &crate::spread::Voters, members: Membership, copies: usize) -> Placement {
        let zone_of = |a: &str| members.zone_of(a).unwrap_or("");
        let mut warnings = Vec::new();
        let zoned = members.members.iter().any(|e| !e.zone.is_empty());
        let zones = members.zones();
        if zoned && zones.len() < copies {
            warnings.push(format!(
                "{copies} copies per chunk but {} zones take chunks: a chunk may keep two \
                 copies in one zone (add a node in another zone)",
                zones.len()
            ));
        }
        let nodes: Vec<String> = voters
            .values()
            .flatten()
            .map(|(_, a)| a.clone())
            .chain(members.members.iter().map(|e| e.addr.clone()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let node_zones: BTreeSet<&str> = nodes.iter().map(|a| zone_of(a)).collect();
        let most = voters.values().map(Vec::len).max().unwrap_or(0);
        if zoned && node_zones.len() < most {
            warnings.push(format!(
                "{most} voters per group but nodes in {} zones: losing a zone may take a \
                 group's majority (add a node in another zone)",
                node_zones.len()
            ));
        }
        for g in crate::spread::unspread(voters, &nodes, zone_of) {
            warnings.push(format!(
                "group {g}'s voters share a zone though other zones have nodes: run `saker \
                 admin node add ADDR` for one of them to spread the voters"
            ));
        }
        let groups = voters
            .iter()
            .map(|(g, vs)| {
                let vs = vs
                    .iter()
                    .map(|(id, addr)| Voter {
                        id: *id,
                        addr: addr.clone(),
                        zone: zone_of(addr).to_string(),
                    })
                    .collect();
                (*g, vs)
            })
            .collect();
        Placement {
            chunkstores: members.members.clone(),
            copies,
            groups,
            warnings,
        }
    }

    /// The text `saker admin status` prints after the group table.
    pub fn render(&self) -> String {
        let zone = |z: &str| {
            if z.is_empty() {
                "-".to_string()
            } else {
                z.to_string()
            }
        };
        let mut out = format!("\nchunkstore\tzone\tid\tstate ({} copies)\n", self.copies);
        for e in &self.chunkstores {
            let state = if e.leaving { "leaving" } else { "placing" };
            out.push_str(&format!(
                "{}\t{}\t{}\t{state}\n",
                e.addr,
                zone(&e.zone),
                e.id
            ));
        }
        out.push_str("\ngroup\tvoters (zone)\n");
        for (g, vs) in &self.groups {
            let list: Vec<String> = vs
                .iter()
                .map(|v| format!("node {} {} ({})", v.id, v.addr, zone(&v.zone)))
                .collect();
            out.push_str(&format!("{g}\t{}\n", list.join(", ")));
        }
        for w in &self.warnings {
            out.push_str(&format!("warning: {w}\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(list: &[(&str, &str)]) -> Membership {
        let members = list
            .iter()
            .map(|(addr, zone)| Entry {
                id: addr.to_string(),
                addr: addr.to_string(),
                zone: zone.to_string(),
                leaving: false,
            })
            .collect();
        Membership { members }
    }

    fn voters(list: &[(u32, &[&str])]) -> crate::spread::Voters {
        list.iter()
            .map(|(g, addrs)| {
                let vs = addrs
                    .iter()
                    .enumerate()
                    .map(|(i, a)| (i as u64 + 1, a.to_string()));
                (*g, vs.collect())
            })
            .collect()
    }

    #[test]
    fn it_warns_when_copies_or_voters_cannot_spread() {
        // Three zones, every group in all three: nothing to say.
        let m = members(&[("n1:1", "a"), ("n2:1", "b"), ("n3:1", "c"), ("n4:1", "a")]);
        let spread = voters(&[
            (1, &["n1:1", "n2:1", "n3:1"]),
            (2, &["n2:1", "n3:1", "n4:1"]),
        ]);
        let p = Placement::new(&spread, m.clone(), 3);
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        assert_eq!(p.groups[&2][2].zone, "a");
        let text = p.render();
        assert!(text.contains("node 3 n4:1 (a)"), "{text}");
        // A group with two voters in zone a while zone c has a node.
        let bunched = voters(&[(1, &["n1:1", "n4:1", "n2:1"])]);
        let p = Placement::new(&bunched, m, 3);
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
        assert!(p.warnings[0].contains("group 1"), "{:?}", p.warnings);
        // Two zones for three copies and three voters.
        let m = members(&[("n1:1", "a"), ("n2:1", "b"), ("n3:1", "b")]);
        let p = Placement::new(&voters(&[(1, &["n1:1", "n2:1", "n3:1"])]), m, 3);
        assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
        assert!(p
            .render()
            .contains("warning: 3 copies per chunk but 2 zones"));
        // No zones at all: a cluster without zones is not warned about.
        let m = members(&[("n1:1", ""), ("n2:1", ""), ("n3:1", "")]);
        let p = Placement::new(&voters(&[(1, &["n1:1", "n2:1", "n3:1"])]), m, 3);
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    }
}
