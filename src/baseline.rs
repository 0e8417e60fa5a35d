//! Baselines: what a later gate needs of a run, kept under a name: its
//! figures per rank and measured step (`gate::StepFigures`) and every
//! metric's value, in one small JSON file per name in a folder of
//! baselines (`--baselines DIR`, else `$CCL_BENCH_BASELINES`, else the
//! repository's `.ccl-bench/baselines`). A baseline is read like any input:
//! bounded, through no link, its values checked before a gate uses them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::gate::StepFigures;

/// The file's layout version.
const SCHEMA: u32 = 1;

/// The largest baseline file read: figures per rank and step, not events.
const MAX_BYTES: u64 = 64 << 20;

/// The environment variable naming the folder of baselines.
pub(crate) const ENV: &str = "CCL_BENCH_BASELINES";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Baseline {
    pub schema: u32,
    pub name: String,
    /// The run it was saved from, as named, and when (UTC).
    pub run: String,
    pub saved: String,
    pub tool: String,
    pub figures: StepFigures,
    /// Every metric that applied, by name; written as text, which reads
    /// back to the last bit (a JSON number read back may not).
    #[serde(with = "exact")]
    pub metrics: BTreeMap<String, f64>,
}

/// `f64` values as their shortest round-trip text.
mod exact {
    use std::collections::BTreeMap;

    use serde::{de::Error, Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(m: &BTreeMap<String, f64>, s: S) -> Result<S::Ok, S::Error> {
        let text: BTreeMap<&str, String> =
            m.iter().map(|(k, v)| (k.as_str(), v.to_string())).collect();
        text.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
        let text = BTreeMap::<String, String>::deserialize(d)?;
        text.into_iter()
            .map(|(k, v)| match v.parse::<f64>() {
                Ok(x) => Ok((k, x)),
                Err(_) => Err(D::Error::custom(format!("{k}: '{v}' is not a number"))),
            })
            .collect()
    }
}

impl Baseline {
    /// How it is named where run A would be.
    pub(crate) fn describe(&self) -> String {
        format!(
            "baseline {} ({}, saved {})",
            self.name, self.run, self.saved
        )
    }
}

/// The folder of baselines: `flag`, else `$CCL_BENCH_BASELINES`, else
/// `.ccl-bench/baselines` at the root of the git repository holding the
/// working directory (or in it, outside any repository).
pub(crate) fn folder(flag: Option<&Path>) -> PathBuf {
    if let Some(f) = flag {
        return f.to_owned();
    }
    if let Some(v) = std::env::var_os(ENV).filter(|v| !v.is_empty()) {
        return PathBuf::from(v);
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let root = cwd
        .ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(&cwd);
    root.join(".ccl-bench").join("baselines")
}

/// A baseline's name: letters, digits, `.`, `_` and `-`, not starting with
/// `.` (it names a file in the folder, nothing else).
fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !ok {
        bail!(
            "'{}' is not a baseline name: letters, digits, '.', '_' and '-', not starting with '.'",
            crate::safe::text(name)
        );
    }
    Ok(())
}

fn file(dir: &Path, name: &str) -> Result<PathBuf> {
    check_name(name)?;
    Ok(dir.join(format!("{name}.json")))
}

/// Keeps `figures` and `metrics` of the run at `run` as baseline `name` in
/// `dir` (replacing one of that name); returns its file.
pub(crate) fn save(
    dir: &Path,
    name: &str,
    run: &Path,
    figures: StepFigures,
    metrics: BTreeMap<String, f64>,
) -> Result<PathBuf> {
    let path = file(dir, name)?;
    let saved = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .and_then(|d| chrono::DateTime::from_timestamp(d.as_secs() as i64, 0))
        .map_or_else(String::new, |t| {
            t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
        });
    let b = Baseline {
        schema: SCHEMA,
        name: name.to_owned(),
        run: run.display().to_string(),
        saved,
        tool: format!("ccl-bench {}", env!("CARGO_PKG_VERSION")),
        figures,
        metrics,
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
    let text = serde_json::to_vec(&b)?;
    crate::atomic::write(&path, &text)?;
    Ok(path)
}

/// Reads baseline `name` from `dir`, checked.
pub(crate) fn load(dir: &Path, name: &str) -> Result<Baseline> {
    let path = file(dir, name)?;
    read(&path).with_context(|| {
        let have = list(dir).map(|l| l.into_iter().map(|b| b.name).collect::<Vec<_>>());
        match have {
            Ok(names) if !names.is_empty() => format!(
                "baseline {name} in {} (there: {})",
                dir.display(),
                names.join(", ")
            ),
            _ => format!(
                "baseline {name} in {} (`ccl-bench baseline save {name} DIR` keeps one)",
                dir.display()
            ),
        }
    })
}

fn read(path: &Path) -> Result<Baseline> {
    let bytes = crate::confined::read_file(path, MAX_BYTES)
        .map_err(|e| anyhow!("cannot read {}: {e}", path.display()))?;
    let b: Baseline = serde_json::from_slice(&bytes)
        .map_err(|e| anyhow!("{}: not a baseline: {e}", path.display()))?;
    if b.schema != SCHEMA {
        bail!(
            "{}: a baseline of layout {} where this tool reads {SCHEMA}; save it again",
            path.display(),
            b.schema
        );
    }
    b.figures
        .check()
        .map_err(|why| anyhow!("{}: a damaged baseline: {why}", path.display()))?;
    if let Some((m, v)) = b.metrics.iter().find(|(_, v)| !v.is_finite()) {
        bail!("{}: a damaged baseline: {m} = {v}", path.display());
    }
    Ok(b)
}

/// The baselines in `dir`, by name; damaged ones are left out with a
/// warning.
pub(crate) fn list(dir: &Path) -> Result<Vec<Baseline>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(anyhow!("cannot read {}: {e}", dir.display())),
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".json") else {
            continue;
        };
        if check_name(stem).is_err() {
            continue;
        }
        match read(&e.path()) {
            Ok(b) => out.push(b),
            Err(err) => crate::say!("warning: {err:#}"),
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures() -> StepFigures {
        StepFigures {
            steps: 2,
            ranks: vec![0, 1],
            values: vec![
                Ok(vec![vec![1.0, 1.1], vec![1.0, 1.2]]),
                Err("no communication ops".into()),
                Err("no communication ops".into()),
                Ok(vec![vec![0.5, 0.5], vec![0.6, 0.6]]),
            ],
        }
    }

    #[test]
    fn a_baseline_comes_back_as_saved_and_a_damaged_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let metrics = BTreeMap::from([("avg_step_time".to_owned(), 1.1)]);
        let path = save(dir.path(), "main", Path::new("runs/x"), figures(), metrics).unwrap();
        assert_eq!(path, dir.path().join("main.json"));
        let b = load(dir.path(), "main").unwrap();
        assert_eq!((b.figures, b.metrics["avg_step_time"]), (figures(), 1.1));
        // Per step, the mean over ranks: (1.0 + 1.0) / 2, (1.1 + 1.2) / 2.
        let s = load(dir.path(), "main").unwrap().figures.samples();
        let step = s.values[0].as_ref().unwrap();
        assert!((step[0] - 1.0).abs() < 1e-12 && (step[1] - 1.15).abs() < 1e-12);
        assert_eq!(list(dir.path()).unwrap().len(), 1);
        // Names are file names of the folder's, nothing else.
        assert!(save(
            dir.path(),
            "../x",
            Path::new("r"),
            figures(),
            BTreeMap::new()
        )
        .is_err());
        assert!(load(dir.path(), ".hidden").is_err());
        // A negative step time or a missing rank's row is damage.
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("[1.0,1.1]", "[-1.0,1.1]")).unwrap();
        let e = format!("{:#}", load(dir.path(), "main").unwrap_err());
        assert!(e.contains("damaged baseline"), "{e}");
        std::fs::write(&path, text.replace("[1.0,1.1],", "")).unwrap();
        let e = format!("{:#}", load(dir.path(), "main").unwrap_err());
        assert!(e.contains("not one value per rank and step"), "{e}");
        // One not there: named, with the ones that are.
        let e = format!("{:#}", load(dir.path(), "other").unwrap_err());
        assert!(e.contains("baseline other"), "{e}");
    }
}
