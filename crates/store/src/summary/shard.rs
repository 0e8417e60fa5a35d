//! Which share of a run's inputs one `summarize` process takes: `--shard
//! I/N`, or what Slurm tells the task (an `sbatch --array` element, or one
//! task of `srun -n N`), so a job fans out with no glue script.

/// Share `index` of `count` (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Default for Shard {
    fn default() -> Self {
        Self { index: 0, count: 1 }
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    /// `I/N` with 0 <= I < N.
    fn from_str(s: &str) -> Result<Self, String> {
        let parsed = s
            .split_once('/')
            .and_then(|(i, n)| Some((i.trim().parse().ok()?, n.trim().parse().ok()?)));
        match parsed {
            Some((index, count)) if index < count => Ok(Self { index, count }),
            _ => Err(format!(
                "'{s}' is not a shard: I/N with 0 <= I < N, e.g. 3/64"
            )),
        }
    }
}

impl Shard {
    /// The shard Slurm's variables give, read through `var`: an array task
    /// (`SLURM_ARRAY_TASK_ID` less `SLURM_ARRAY_TASK_MIN`, of
    /// `SLURM_ARRAY_TASK_COUNT`), else an `srun` task (`SLURM_PROCID` of
    /// `SLURM_NTASKS`), else the whole run. Returns where it came from.
    pub fn from_slurm(
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<(Self, &'static str), String> {
        let num = |name: &str| -> Result<Option<u32>, String> {
            var(name)
                .map(|v| {
                    v.trim()
                        .parse()
                        .map_err(|_| format!("{name}={v} is not a number"))
                })
                .transpose()
        };
        let check = |index: u32, count: u32, from: &'static str| {
            if index < count {
                Ok((Self { index, count }, from))
            } else {
                Err(format!("{from} gives task {index} of {count}"))
            }
        };
        if let (Some(id), Some(count)) =
            (num("SLURM_ARRAY_TASK_ID")?, num("SLURM_ARRAY_TASK_COUNT")?)
        {
            let min = num("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let index = id.checked_sub(min).ok_or_else(|| {
                format!("SLURM_ARRAY_TASK_ID={id} is below SLURM_ARRAY_TASK_MIN={min}")
            })?;
            return check(index, count, "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT");
        }
        if let (Some(id), Some(count)) = (num("SLURM_PROCID")?, num("SLURM_NTASKS")?) {
            return check(id, count, "SLURM_PROCID/SLURM_NTASKS");
        }
        Ok((Self::default(), "the whole run"))
    }

    /// Deals `sizes` (one per input) to `count` shards, the largest first to
    /// the least loaded (ties to the lower shard), and returns the inputs of
    /// this one. Every shard computes the same deal from the same listing.
    pub(crate) fn pick(&self, sizes: &[u64]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..sizes.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(sizes[i]), i));
        let mut load = vec![0u64; self.count as usize];
        let mut mine = Vec::new();
        for i in order {
            let (s, _) = load
                .iter()
                .enumerate()
                .min_by_key(|&(s, l)| (*l, s))
                .expect("at least one shard");
            load[s] += sizes[i].max(1);
            if s == self.index as usize {
                mine.push(i);
            }
        }
        mine.sort_unstable();
        mine
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn shards_from_flags_and_slurm() {
        assert_eq!(
            "3/64".parse(),
            Ok(Shard {
                index: 3,
                count: 64
            })
        );
        assert!("64/64".parse::<Shard>().is_err());
        assert!("x".parse::<Shard>().is_err());
        let s = |pairs| Shard::from_slurm(env(pairs)).map(|(s, _)| s);
        assert_eq!(s(&[]), Ok(Shard::default()));
        // sbatch --array=1-8: ids 1..8, min 1.
        let array = [
            ("SLURM_ARRAY_TASK_ID", "3"),
            ("SLURM_ARRAY_TASK_MIN", "1"),
            ("SLURM_ARRAY_TASK_COUNT", "8"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "1"),
        ];
        assert_eq!(s(&array), Ok(Shard { index: 2, count: 8 }));
        assert_eq!(
            s(&[("SLURM_PROCID", "5"), ("SLURM_NTASKS", "64")]),
            Ok(Shard {
                index: 5,
                count: 64
            })
        );
        assert!(s(&[("SLURM_PROCID", "64"), ("SLURM_NTASKS", "64")]).is_err());
        assert!(s(&[("SLURM_PROCID", "x"), ("SLURM_NTASKS", "64")]).is_err());
    }

    #[test]
    fn shards_deal_every_input_once_balancing_bytes() {
        let sizes = [100, 10, 10, 90, 5, 5, 0];
        let shards: Vec<Vec<usize>> = (0..3)
            .map(|i| Shard { index: i, count: 3 }.pick(&sizes))
            .collect();
        let mut all: Vec<usize> = shards.concat();
        all.sort_unstable();
        assert_eq!(all, (0..sizes.len()).collect::<Vec<_>>());
        // 100 | 90 | 10 + 10 + 5 + 5, and the empty file to the lightest.
        assert_eq!(shards[0], vec![0]);
        assert_eq!(shards[1], vec![3]);
        assert_eq!(shards[2], vec![1, 2, 4, 5, 6]);
    }
}
