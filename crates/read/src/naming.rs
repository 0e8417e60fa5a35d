//! Ranks in file names: `rank3_trace.json`, `worker3_step_12.*.pt.trace.json`,
//! `kineto_trace_3.json`, `torch_et_3.json`. A leaf: discovery and the
//! readers of per-rank files both use it.

use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

// Matched against the lowercased name, and ASCII only (`-u`): a rank is ASCII
// digits, and case-insensitive or Unicode patterns cost ms to compile.
static RANK_PATTERNS: LazyLock<[Regex; 3]> = LazyLock::new(|| {
    [
        Regex::new(r"(?-u)(?:rank|worker)[-_]?([0-9]+)").expect("valid regex"),
        Regex::new(r"(?-u)kineto_trace_([0-9]+)").expect("valid regex"),
        Regex::new(r"(?-u)[-_]([0-9]+)\.(?:pt\.)?trace\.json").expect("valid regex"),
    ]
});

/// Rank carried by a file name: `rank3_trace.json`, `rank-3.*.json.gz`,
/// `worker3_step_12.*.pt.trace.json`, `kineto_trace_3.json`, `foo_3.pt.trace.json`.
pub fn rank_from_name(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?.to_ascii_lowercase();
    RANK_PATTERNS
        .iter()
        .find_map(|re| re.captures(&name)?[1].parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_from_file_names() {
        let r = |n: &str| rank_from_name(Path::new(n));
        assert_eq!(r("rank3_trace.json"), Some(3));
        assert_eq!(r("kineto_trace_12.json"), Some(12));
        assert_eq!(r("worker7_step_12.1694128201553.pt.trace.json"), Some(7));
        assert_eq!(r("rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"), Some(34));
        assert_eq!(r("sampled_rank-1.json.gz"), Some(1));
        assert_eq!(r("host_5.pt.trace.json"), Some(5));
        assert_eq!(r("Rank_2.Trace.JSON"), Some(2));
        assert_eq!(r("eager_trace.json.gz"), None);
    }
}
