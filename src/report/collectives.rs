//! `ccl-bench collectives`: every collective matched across ranks, and the
//! same grouped by (kind, size, group), as a table, CSV or JSON.

use std::io::{self, Write};

use serde_json::json;

use super::Format;
use crate::derive::groups::{GroupInfo, Role};
use crate::derive::instances::{FitRow, GroupRow, InstanceRow};
use crate::model::time::{human, Ns};

/// Columns the instance list can be sorted by (largest first, but `id` and
/// `start`, which go in time order).
pub(crate) const SORT_KEYS: [&str; 7] =
    ["id", "start", "wait", "transfer", "busbw", "size", "late"];

/// Sorts `rows` by `key` (one of [`SORT_KEYS`]).
pub(crate) fn sort(rows: &mut [InstanceRow], key: &str) {
    let bw = |r: &InstanceRow| r.busbw().unwrap_or(-1.0);
    match key {
        "start" => rows.sort_by_key(|r| (r.start, r.id)),
        "wait" => rows.sort_by_key(|r| (std::cmp::Reverse(r.wait), r.id)),
        "transfer" => rows.sort_by_key(|r| (std::cmp::Reverse(r.transfer), r.id)),
        "busbw" => rows.sort_by(|a, b| bw(b).total_cmp(&bw(a)).then(a.id.cmp(&b.id))),
        "size" => rows.sort_by_key(|r| (std::cmp::Reverse(r.bytes), r.id)),
        "late" => rows.sort_by_key(|r| (std::cmp::Reverse(r.last_by), r.id)),
        _ => rows.sort_by_key(|r| r.id),
    }
}

fn kind(r: Option<crate::model::CollKind>) -> &'static str {
    r.map_or("?", |k| k.name())
}

fn gbps(v: Option<f64>) -> String {
    v.map_or("-".to_owned(), |v| format!("{:.2}", v / 1e9))
}

fn role(r: Option<Role>) -> &'static str {
    r.map_or("-", Role::name)
}

fn bytes(v: Option<u64>) -> String {
    v.map_or("-".to_owned(), super::human::bytes)
}

/// What the command shows: the instances, their groups and the fits.
pub(crate) struct View<'a> {
    /// The run the rows are of (their members' ops).
    pub trace: &'a crate::model::Trace,
    /// The run's matched instances (the rows' members).
    pub instances: &'a crate::model::collectives::Instances,
    pub rows: &'a [InstanceRow<'a>],
    pub groups: &'a [GroupRow],
    pub fits: &'a [FitRow],
    /// The process groups and their roles.
    pub process_groups: &'a [GroupInfo],
    pub grouped_only: bool,
    /// The instances matched (of the kind asked for), of which `rows` are
    /// the first (`--top`).
    pub matched: usize,
    /// Whether the JSON lists each instance's members.
    pub members: bool,
    /// The time the table shows as 0: the first device op of any rank, the
    /// Timeline's origin.
    pub origin: Ns,
}

pub(crate) fn write(format: Format, v: &View, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Table => {
            table(v.rows, v.groups, (v.grouped_only, v.origin), out)?;
            fits_table(v.fits, out)?;
            process_groups_table(v.process_groups, out)
        }
        Format::Csv => csv(v.rows, v.groups, v.grouped_only, out),
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, &document(v))?;
            writeln!(out)
        }
    }
}

/// The JSON document: the instances (with their members when
/// `v.members`), the grouped view, the fits and the process groups.
pub(crate) fn document(v: &View) -> serde_json::Value {
    let mut doc = to_json(v, v.rows, v.groups, v.grouped_only);
    doc["schema_version"] = json!(super::json::SCHEMA_VERSION);
    if !v.grouped_only {
        doc["matched"] = json!(v.matched);
        doc["left_out"] = json!(v.matched.saturating_sub(v.rows.len()));
        if v.rows.is_empty() {
            doc["not_applicable"] = json!(if v.matched == 0 {
                "no collective is matched across ranks (it needs communication kernels on 2 or more ranks)"
            } else {
                "no matched collective is of the kind asked for"
            });
        }
    }
    doc["fits"] = v
        .fits
        .iter()
        .map(|f| {
            json!({
                "kind": f.kind.name(),
                "role": f.role,
                "n": f.size,
                "alpha_s": f.line.alpha,
                "beta_s_per_byte": f.line.beta,
                "residual_s": f.line.residual,
                "points": f.line.points,
                "sizes": f.sizes,
            })
        })
        .collect();
    doc["process_groups"] = v
        .process_groups
        .iter()
        .map(|g| {
            json!({
                "name": g.name,
                "desc": g.desc,
                "ranks": g.ranks,
                "role": g.role.map(|r| r.0.name()),
                "role_from": g.role.map(|r| r.1.name()),
            })
        })
        .collect();
    doc
}

fn fits_table(fits: &[FitRow], out: &mut dyn Write) -> io::Result<()> {
    if fits.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\nHockney fit of the transfer, t = α + β·S, per kind and group role (2 or more sizes)"
    )?;
    writeln!(
        out,
        "{:<14}  {:<10}  {:>3}  {:>10}  {:>12}  {:>10}  {:>10}  {:>6}",
        "kind", "role", "n", "α", "1/β GB/s", "residual", "instances", "sizes"
    )?;
    for f in fits {
        let inv = if f.line.beta > 0.0 {
            format!("{:.2}", 1.0 / f.line.beta / 1e9)
        } else {
            "-".to_owned()
        };
        writeln!(
            out,
            "{:<14}  {:<10}  {:>3}  {:>10}  {:>12}  {:>10}  {:>10}  {:>6}",
            f.kind.name(),
            super::safe::text(&f.role),
            f.size,
            human(Ns::rounded(f.line.alpha * 1e9)),
            inv,
            human(Ns::rounded(f.line.residual * 1e9)),
            f.line.points,
            f.sizes,
        )?;
    }
    Ok(())
}

fn process_groups_table(groups: &[GroupInfo], out: &mut dyn Write) -> io::Result<()> {
    if groups.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "
Process groups"
    )?;
    writeln!(
        out,
        "{:<10}  {:<6}  {:<14}  {:>4}  {:<24}  description",
        "group", "role", "role from", "n", "ranks"
    )?;
    for g in groups {
        writeln!(
            out,
            "{:<10}  {:<6}  {:<14}  {:>4}  {:<24}  {}",
            super::safe::text(&g.name),
            role(g.role.map(|r| r.0)),
            g.role.map_or("-", |r| r.1.name()),
            g.ranks.len(),
            if g.ranks.is_empty() {
                "-".to_owned()
            } else {
                super::human::ranks(&g.ranks)
            },
            super::safe::text(g.desc.as_deref().unwrap_or("-")),
        )?;
    }
    Ok(())
}

/// `origin`: the time shown as 0 (the Timeline's).
fn table(
    rows: &[InstanceRow],
    groups: &[GroupRow],
    (grouped_only, origin): (bool, Ns),
    out: &mut dyn Write,
) -> io::Result<()> {
    if rows.is_empty() {
        return writeln!(
            out,
            "no collective is matched across ranks (it needs communication kernels on 2 or more ranks)"
        );
    }
    if !grouped_only {
        writeln!(
            out,
            "{:>5}  {:<14}  {:<10}  {:<5}  {:>3}  {:>10}  {:>12}  {:>10}  {:>10}  {:>9}  {:>9}  {:>5}  {:>10}",
            "id", "kind", "group", "role", "n", "size", "start", "wait", "transfer", "algbw", "busbw", "last", "late by"
        )?;
        for r in rows {
            writeln!(
                out,
                "{:>5}  {:<14}  {:<10}  {:<5}  {:>3}  {:>10}  {:>12}  {:>10}  {:>10}  {:>9}  {:>9}  {:>5}  {:>10}",
                r.id,
                kind(r.kind),
                super::safe::text(r.group),
                role(r.role),
                r.size,
                bytes(r.bytes),
                human(r.start - origin),
                human(r.wait),
                human(r.transfer),
                gbps(r.algbw()),
                gbps(r.busbw()),
                if r.last_by > Ns::ZERO {
                    r.last_rank.to_string()
                } else {
                    "-".to_owned()
                },
                human(r.last_by),
            )?;
        }
        writeln!(
            out,
            "\nstart: from the first device op of any rank, as on the Timeline; wait: summed over the members, until the last \
             started; transfer: after that; bandwidth in GB/s (busbw: nccl-tests factors)\n"
        )?;
    }
    writeln!(
        out,
        "{:<14}  {:>10}  {:<10}  {:<5}  {:>3}  {:>6}  {:>10}  {:>10}  {:>9}  {:>10}  most wait caused by",
        "kind", "size", "group", "role", "n", "count", "p50 xfer", "p95 xfer", "busbw", "wait"
    )?;
    for g in groups {
        let culprit = g
            .culprit
            .map_or("-".to_owned(), |(r, c)| format!("rank {r} ({})", human(c)));
        writeln!(
            out,
            "{:<14}  {:>10}  {:<10}  {:<5}  {:>3}  {:>6}  {:>10}  {:>10}  {:>9}  {:>10}  {culprit}",
            kind(g.kind),
            bytes(g.bytes),
            super::safe::text(&g.group),
            role(g.role),
            g.size,
            g.count,
            human(g.transfer_p50),
            human(g.transfer_p95),
            gbps(g.busbw),
            human(g.wait),
        )?;
    }
    Ok(())
}

fn csv(
    rows: &[InstanceRow],
    groups: &[GroupRow],
    grouped_only: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    let optu = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
    if grouped_only {
        w.write_record([
            "kind",
            "bytes",
            "group",
            "role",
            "n",
            "count",
            "transfer_p50_ns",
            "transfer_p95_ns",
            "busbw_Bps",
            "wait_ns",
            "culprit_rank",
            "culprit_wait_ns",
        ])?;
        for g in groups {
            w.write_record([
                kind(g.kind).to_owned(),
                optu(g.bytes),
                g.group.clone(),
                g.role.map_or("", Role::name).to_owned(),
                g.size.to_string(),
                g.count.to_string(),
                g.transfer_p50.to_string(),
                g.transfer_p95.to_string(),
                opt(g.busbw),
                g.wait.to_string(),
                g.culprit.map_or(String::new(), |c| c.0.to_string()),
                g.culprit.map_or(String::new(), |c| c.1.to_string()),
            ])?;
        }
        return w.flush();
    }
    w.write_record([
        "id",
        "kind",
        "group",
        "role",
        "seq",
        "n",
        "bytes",
        "start_ns",
        "end_ns",
        "wait_ns",
        "transfer_ns",
        "algbw_Bps",
        "busbw_Bps",
        "last_rank",
        "last_by_ns",
    ])?;
    for r in rows {
        w.write_record([
            r.id.to_string(),
            kind(r.kind).to_owned(),
            r.group.to_string(),
            r.role.map_or("", Role::name).to_owned(),
            r.seq.to_string(),
            r.size.to_string(),
            optu(r.bytes),
            r.start.to_string(),
            r.end.to_string(),
            r.wait.to_string(),
            r.transfer.to_string(),
            opt(r.algbw()),
            opt(r.busbw()),
            r.last_rank.to_string(),
            r.last_by.to_string(),
        ])?;
    }
    w.flush()
}

fn to_json(
    v: &View,
    rows: &[InstanceRow],
    groups: &[GroupRow],
    grouped_only: bool,
) -> serde_json::Value {
    let groups: Vec<_> = groups
        .iter()
        .map(|g| {
            json!({
                "kind": g.kind.map(|k| k.name()),
                "bytes": g.bytes,
                "group": g.group,
                "role": g.role.map(Role::name),
                "n": g.size,
                "count": g.count,
                "transfer_p50_ns": g.transfer_p50,
                "transfer_p95_ns": g.transfer_p95,
                "busbw_Bps": g.busbw,
                "wait_ns": g.wait,
                "culprit": g.culprit.map(|(r, c)| json!({"rank": r, "caused_ns": c})),
            })
        })
        .collect();
    if grouped_only {
        return json!({ "groups": groups });
    }
    let instances: Vec<_> = rows
        .iter()
        .map(|r| {
            let mut i = json!({
                "id": r.id,
                "kind": r.kind.map(|k| k.name()),
                "group": crate::model::collectives::group_of_channel(r.group),
                "role": r.role.map(Role::name),
                "seq": r.seq,
                // What made these ops one collective: the sequence they were
                // matched in and the position in it.
                "key": { "channel": r.group, "position": r.seq },
                "matched_by": if r.group.contains(" p2p ") {
                    "order between the send's and the recv's ranks (Src/Dst Rank)"
                } else {
                    "position in the process group's calls, checked for equal kind, size and Seq"
                },
                "name": r.name,
                "bytes": r.bytes,
                "start_ns": r.start,
                "end_ns": r.end,
                "wait_ns": r.wait,
                "transfer_ns": r.transfer,
                "algbw_Bps": r.algbw(),
                "busbw_Bps": r.busbw(),
                "last_rank": r.last_rank,
                "last_by_ns": r.last_by,

            });
            if v.members {
                i["members"] = r
                    .members(v.trace, v.instances)
                    .map(|m| {
                        json!({
                            "rank": m.rank,
                            "start_ns": m.start,
                            "end_ns": m.end(),
                            "wait_ns": m.wait,
                            "transfer_ns": m.transfer,
                            "step": m.step(v.trace),
                        })
                    })
                    .collect::<Vec<_>>()
                    .into();
            }
            i
        })
        .collect();
    json!({ "instances": instances, "groups": groups })
}
