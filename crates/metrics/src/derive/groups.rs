//! Process groups and the parallelism each serves (tensor, context, expert,
//! data, pipeline or the whole world). A group's role comes, in this order,
//! from its description (`pg_desc`: `mesh_tp`, `TENSOR_MODEL_PARALLEL_GROUP`),
//! from the workload card's parallelism (a dimension of the group's size and
//! rank stride), or from its layout alone (see [`by_layout`]).

use std::collections::{BTreeMap, BTreeSet};

use crate::model::card::Parallelism;
use crate::model::collectives::{group_of, DEFAULT};
use crate::model::{CollKind, StrId, Trace};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Tp,
    Cp,
    Ep,
    Dp,
    Pp,
    /// Every rank of the job (the default group).
    World,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Self::Tp => "tp",
            Self::Cp => "cp",
            Self::Ep => "ep",
            Self::Dp => "dp",
            Self::Pp => "pp",
            Self::World => "world",
        }
    }
}

/// How a group is called in breakdowns: its role, or `group NAME` when none
/// could be inferred (groups of one role are taken together); `unknown` for
/// collectives that record no group.
pub fn label(role: Option<Role>, name: &str) -> String {
    match role {
        Some(r) => r.name().to_owned(),
        None if name == DEFAULT => "unknown".to_owned(),
        None => format!("group {name}"),
    }
}

/// What a role was inferred from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The group's `pg_desc`.
    Desc,
    /// The workload card's parallelism.
    Card,
    /// Size and rank stride alone (see [`by_layout`]).
    Layout,
}

impl Basis {
    pub fn name(self) -> &'static str {
        match self {
            Self::Desc => "pg_desc",
            Self::Card => "workload card",
            Self::Layout => "layout",
        }
    }
}

/// One process group collectives were issued in.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupInfo {
    /// The name collectives carry (`Process Group Name`), `default` without one.
    pub name: String,
    pub desc: Option<String>,
    /// Member ranks, sorted: as `pg_config` or `Process Group Ranks` lists
    /// them, else the traced ranks that issued collectives in the group.
    pub ranks: Vec<u32>,
    pub role: Option<(Role, Basis)>,
}

impl GroupInfo {
    /// The role's name, or `group NAME` when none could be inferred.
    pub(crate) fn label(&self) -> String {
        label(self.role.map(|r| r.0), &self.name)
    }

    /// Distance between consecutive members when it is constant.
    pub(crate) fn stride(&self) -> Option<u32> {
        let d = self.ranks.get(1)?.checked_sub(self.ranks[0])?;
        self.ranks.windows(2).all(|w| w[1] - w[0] == d).then_some(d)
    }
}

/// Every group a communication kernel of `trace` names, by name, with its role.
pub(crate) fn infer(trace: &Trace) -> Vec<GroupInfo> {
    struct Seen {
        desc: Option<String>,
        listed: Option<Vec<u32>>,
        issuers: BTreeSet<u32>,
        kinds: BTreeSet<CollKind>,
    }
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    // Each distinct list parsed once in the run: every member of a group
    // states it (a group of 1,024 ranks: its list 1,024 times).
    let mut by_text: foldhash::HashMap<&str, Option<Vec<u32>>> = Default::default();
    for t in &trace.ranks {
        // A rank's ops gathered by group first (kinds, and the first rank
        // list that parses): the run's map is visited once per group a rank
        // issues in, not once per op. A group whose list an earlier rank
        // gave is not looked up again, nor the same list twice in a row.
        struct Mine {
            kinds: Vec<CollKind>,
            listed: Option<Vec<u32>>,
            done: bool,
            tried: Option<StrId>,
        }
        let mut mine: Vec<(&str, Mine)> = Vec::new();
        // An op's group follows from its collective record: each record's
        // is looked up once (a rank has a few records and thousands of
        // ops; hashing each op's group name was 5 % of a first open of 64
        // ranks of collectives). The last place: ops without one.
        let mut by_name: foldhash::HashMap<&str, usize> = Default::default();
        let mut of_record = vec![usize::MAX; t.colls.len() + 1];
        for op in t.ops.iter().filter(|o| o.is_comm() && o.is_kernel()) {
            let record = (op.meta.get().map(|m| m as usize))
                .filter(|&m| m < t.colls.len())
                .unwrap_or(t.colls.len());
            if of_record[record] == usize::MAX {
                let g = group_of(t, op);
                of_record[record] = *by_name.entry(g).or_insert_with(|| {
                    mine.push((
                        g,
                        Mine {
                            kinds: Vec::new(),
                            listed: None,
                            done: seen.get(g).is_some_and(|s| s.listed.is_some()),
                            tried: None,
                        },
                    ));
                    mine.len() - 1
                });
            }
            let m = &mut mine[of_record[record]].1;
            if let Some(k) = op.coll.filter(|k| !m.kinds.contains(k)) {
                m.kinds.push(k);
            }
            let id = t.coll_meta(op).and_then(|c| c.pg_ranks);
            if m.done || id.is_none() || id == m.tried {
                continue;
            }
            m.tried = id;
            let text = id.map_or("", |id| t.name(id));
            m.listed = (by_text.entry(text))
                .or_insert_with(|| parse_ranks(text))
                .clone();
            m.done = m.listed.is_some();
        }
        for (g, Mine { kinds, listed, .. }) in mine {
            let s = seen.entry(g.to_owned()).or_insert_with(|| Seen {
                desc: None,
                listed: None,
                issuers: BTreeSet::new(),
                kinds: BTreeSet::new(),
            });
            s.issuers.insert(t.rank);
            s.kinds.extend(kinds);
            if s.listed.is_none() {
                s.listed = listed;
            }
        }
    }
    // `pg_config` knows more than a truncated `Process Group Ranks`.
    for t in &trace.ranks {
        for g in &t.groups {
            if let Some(s) = seen.get_mut(&g.name) {
                s.desc = s.desc.take().or_else(|| g.desc.clone());
                if !g.ranks.is_empty() {
                    s.listed = Some(g.ranks.clone());
                }
            }
        }
    }
    let world = trace
        .ranks
        .iter()
        .filter_map(|t| t.world_size)
        .max()
        .unwrap_or(trace.ranks.len() as u32);
    let card = trace
        .card
        .as_ref()
        .map(|c| dims(&c.executor.model_plan_parallelization));
    seen.into_iter()
        .map(|(name, s)| {
            let mut g = GroupInfo {
                name,
                desc: s.desc,
                ranks: s.listed.unwrap_or_else(|| s.issuers.into_iter().collect()),
                role: None,
            };
            g.role = g
                .desc
                .as_deref()
                .and_then(by_desc)
                .map(|r| (r, Basis::Desc))
                .or_else(|| {
                    let r = by_card(&g, card.as_deref()?, &s.kinds)?;
                    Some((r, Basis::Card))
                })
                .or_else(|| Some((by_layout(&g, world, &s.kinds)?, Basis::Layout)));
            g
        })
        .collect()
}

/// `[0, 2, 4]` as written in `Process Group Ranks`; `None` when cut short
/// (`[0, 1, ..., 63]`) or not a list of ranks.
pub(crate) fn parse_ranks(text: &str) -> Option<Vec<u32>> {
    let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?;
    if inner.trim().is_empty() {
        return None;
    }
    let mut ranks = inner
        .split(',')
        .map(|r| r.trim().parse::<u32>().ok())
        .collect::<Option<Vec<u32>>>()?;
    ranks.sort_unstable();
    ranks.dedup();
    Some(ranks)
}

/// The role a group description names: its first word that names one
/// (`mesh_dp_shard` → dp, `EXPERT_MODEL_PARALLEL_GROUP` → ep, `default_pg` →
/// world); `None` for `undefined` and descriptions naming none.
pub(crate) fn by_desc(desc: &str) -> Option<Role> {
    desc.split(|c: char| !c.is_ascii_alphanumeric())
        .find_map(|w| match w.to_ascii_lowercase().as_str() {
            "tp" | "tensor" => Some(Role::Tp),
            "cp" | "context" => Some(Role::Cp),
            "ep" | "expert" | "moe" => Some(Role::Ep),
            "dp" | "data" | "fsdp" | "ddp" | "hsdp" | "shard" | "replicate" => Some(Role::Dp),
            "pp" | "pipeline" => Some(Role::Pp),
            "default" | "world" => Some(Role::World),
            _ => None,
        })
}

/// The card's parallel dimensions as (role, size, rank stride), innermost
/// first, in the order Megatron-LM and torchtitan lay ranks out: tp, cp,
/// dp_shard, dp_replicate, pp (expert groups span the ranks next to tp × cp).
/// Dimensions of size 1 are left out.
pub(crate) fn dims(p: &Parallelism) -> Vec<(Role, u32, u32)> {
    let n = |x: Option<f64>| {
        x.filter(|v| v.fract() == 0.0 && *v >= 1.0 && *v <= f64::from(u32::MAX))
            .map_or(1, |v| v as u32)
    };
    let (tp, cp, shard, repl, pp, ep) = (
        n(p.tp),
        n(p.cp),
        n(p.dp_shard),
        n(p.dp_replicate),
        n(p.pp),
        n(p.ep),
    );
    let mut out = Vec::new();
    let mut stride: u32 = 1;
    for (role, size) in [
        (Role::Tp, tp),
        (Role::Cp, cp),
        (Role::Dp, shard),
        (Role::Dp, repl),
        (Role::Pp, pp),
    ] {
        if size > 1 {
            out.push((role, size, stride));
        }
        stride = stride.saturating_mul(size);
    }
    // Sharded and replicated data parallelism together form one dp group too.
    if shard > 1 && repl > 1 {
        out.push((Role::Dp, shard.saturating_mul(repl), tp.saturating_mul(cp)));
    }
    if ep > 1 {
        out.push((Role::Ep, ep, tp.saturating_mul(cp)));
    }
    out
}

/// The card dimension with the group's size (and, among several, its
/// stride). Where an expert and a data dimension coincide, all-to-alls say
/// expert.
fn by_card(g: &GroupInfo, dims: &[(Role, u32, u32)], kinds: &BTreeSet<CollKind>) -> Option<Role> {
    let n = u32::try_from(g.ranks.len()).ok()?;
    let sized: Vec<&(Role, u32, u32)> = dims.iter().filter(|d| d.1 == n).collect();
    let pick = |c: &[&(Role, u32, u32)]| -> Option<Role> {
        let mut roles: Vec<Role> = c.iter().map(|d| d.0).collect();
        roles.dedup();
        match roles[..] {
            [r] => Some(r),
            _ if roles.contains(&Role::Ep) => Some(if kinds.contains(&CollKind::AllToAll) {
                Role::Ep
            } else {
                *roles.iter().find(|&&r| r != Role::Ep)?
            }),
            _ => None,
        }
    };
    match sized.len() {
        0 => None,
        1 => Some(sized[0].0),
        _ => {
            let strided: Vec<&(Role, u32, u32)> = sized
                .iter()
                .copied()
                .filter(|d| Some(d.2) == g.stride())
                .collect();
            pick(if strided.is_empty() { &sized } else { &strided })
        }
    }
}

/// A role from the layout alone: every rank of the job is the world; a group
/// that only sends and receives is a pipeline; one that only exchanges
/// all-to-all is expert parallel; otherwise consecutive ranks are tensor
/// parallel (the innermost dimension in Megatron-LM, torchtitan and
/// DeviceMesh layouts) and evenly spaced ones data parallel. A guess a card
/// or `pg_desc` overrides.
pub(crate) fn by_layout(g: &GroupInfo, world: u32, kinds: &BTreeSet<CollKind>) -> Option<Role> {
    let n = g.ranks.len();
    if n < 2 {
        return None;
    }
    if n as u64 >= u64::from(world) {
        return Some(Role::World);
    }
    let only = |k: CollKind| !kinds.is_empty() && kinds.iter().all(|&c| c == k);
    if only(CollKind::SendRecv) {
        return Some(Role::Pp);
    }
    if only(CollKind::AllToAll) {
        return Some(Role::Ep);
    }
    match g.stride()? {
        0 => None,
        1 => Some(Role::Tp),
        _ => Some(Role::Dp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(ranks: &[u32]) -> GroupInfo {
        GroupInfo {
            name: "1".into(),
            desc: None,
            ranks: ranks.to_vec(),
            role: None,
        }
    }

    #[test]
    fn ranks_as_recorded() {
        assert_eq!(parse_ranks("[4, 0, 2]"), Some(vec![0, 2, 4]));
        assert_eq!(parse_ranks("[0, 1, ..., 63]"), None);
        assert_eq!(parse_ranks("[]"), None);
        assert_eq!(parse_ranks("0,1"), None);
        assert_eq!(parse_ranks("[0, -1]"), None);
    }

    #[test]
    fn roles_from_descriptions() {
        assert_eq!(by_desc("mesh_tp"), Some(Role::Tp));
        assert_eq!(by_desc("mesh_dp_shard_cp"), Some(Role::Dp));
        assert_eq!(by_desc("TENSOR_MODEL_PARALLEL_GROUP"), Some(Role::Tp));
        assert_eq!(by_desc("EXPERT_MODEL_PARALLEL_GROUP"), Some(Role::Ep));
        assert_eq!(by_desc("PIPELINE_MODEL_PARALLEL_GROUP"), Some(Role::Pp));
        assert_eq!(by_desc("default_pg"), Some(Role::World));
        assert_eq!(by_desc("undefined"), None);
        assert_eq!(by_desc("EMBEDDING_GROUP"), None);
        // Words, not substrings: "step" holds no "tp".
        assert_eq!(by_desc("step_group"), None);
    }

    #[test]
    fn card_dimensions_and_strides() {
        // tp 2 × dp_shard 2 × pp 2 on 8 ranks: strides 1, 2, 4.
        let p = Parallelism {
            tp: Some(2.0),
            dp_shard: Some(2.0),
            pp: Some(2.0),
            ..Parallelism::default()
        };
        let d = dims(&p);
        assert_eq!(
            d,
            vec![(Role::Tp, 2, 1), (Role::Dp, 2, 2), (Role::Pp, 2, 4)]
        );
        let none = BTreeSet::new();
        // Three dimensions of size 2: the stride decides.
        assert_eq!(by_card(&group(&[0, 1]), &d, &none), Some(Role::Tp));
        assert_eq!(by_card(&group(&[1, 3]), &d, &none), Some(Role::Dp));
        assert_eq!(by_card(&group(&[2, 6]), &d, &none), Some(Role::Pp));
        // Size and stride fit nothing.
        assert_eq!(by_card(&group(&[0, 1, 2, 3]), &d, &none), None);
        assert_eq!(by_card(&group(&[0, 3]), &d, &none), None);
        // ep 4 beside dp_shard 4 (tp 2): all-to-all says expert.
        let p = Parallelism {
            tp: Some(2.0),
            dp_shard: Some(4.0),
            ep: Some(4.0),
            ..Parallelism::default()
        };
        let d = dims(&p);
        let g = group(&[0, 2, 4, 6]);
        assert_eq!(by_card(&g, &d, &none), Some(Role::Dp));
        let a2a = BTreeSet::from([CollKind::AllToAll]);
        assert_eq!(by_card(&g, &d, &a2a), Some(Role::Ep));
    }

    #[test]
    fn roles_from_layout() {
        let none = BTreeSet::new();
        let ar = BTreeSet::from([CollKind::AllReduce]);
        assert_eq!(by_layout(&group(&[0, 1, 2, 3]), 4, &ar), Some(Role::World));
        assert_eq!(by_layout(&group(&[4, 5]), 8, &ar), Some(Role::Tp));
        assert_eq!(by_layout(&group(&[1, 3, 5, 7]), 8, &ar), Some(Role::Dp));
        assert_eq!(by_layout(&group(&[0, 1, 4]), 8, &ar), None, "uneven");
        let p2p = BTreeSet::from([CollKind::SendRecv]);
        assert_eq!(by_layout(&group(&[0, 4]), 8, &p2p), Some(Role::Pp));
        let a2a = BTreeSet::from([CollKind::AllToAll]);
        assert_eq!(by_layout(&group(&[0, 1]), 8, &a2a), Some(Role::Ep));
        assert_eq!(by_layout(&group(&[0]), 8, &none), None);
    }
}
