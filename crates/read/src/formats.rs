//! The input formats, one table entry each: its name, how a file is
//! recognised (name endings, then its first bytes), what role it plays in a
//! run, and its reader. Discovery sniffs with this table and loading
//! dispatches through it, so a new format is a reader plus one entry here.

use std::path::Path;

use crate::error::Result;
use crate::model::exec_trace::EtRank;
use crate::model::flight::FrDump;
use crate::model::memory::MemoryTimeline;
use crate::model::WorkloadCard;
use crate::read::{self, RankFile};
use crate::source::FileIn;

/// A file's timelines, each with the rank its file name gives.
pub type Ranked = (Option<u32>, RankFile);

/// A per-rank reader: what it read, and warnings about it.
pub(crate) type ReadWithNotes<T> = fn(&FileIn) -> Result<(T, Vec<crate::model::Warning>)>;

/// One input format.
#[derive(Clone, Copy)]
pub struct Format {
    /// What `--inputs`, warnings and errors call it.
    pub name: &'static str,
    /// Lowercase file-name endings that may hold it.
    pub exts: &'static [&'static str],
    /// Its files as a user would name them, for "not a trace" messages.
    pub files: &'static str,
    /// How strongly a file's first bytes say it is this format (0: not at
    /// all); the strongest wins, ties go to the earlier entry. `None`: the
    /// name ending alone decides.
    pub sniff: Option<fn(&Head) -> u8>,
    pub role: Role,
}

impl PartialEq for Format {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Format {}

impl std::fmt::Debug for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// How to read a file that annotates one rank, and find which.
pub struct PerRank<T> {
    pub read: ReadWithNotes<T>,
    /// The rank in the file's name.
    pub rank_of: fn(&Path) -> Option<u32>,
    /// The file naming `rank_of` expects, for the warning when it fails.
    pub naming: &'static str,
}

// Fields are fn pointers and a &str: copyable whatever `T` is.
impl<T> Clone for PerRank<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for PerRank<T> {}

/// What a format contributes to a run.
#[derive(Clone, Copy)]
pub enum Role {
    /// Per-rank device timelines. Exports of one run in several formats are
    /// the same ranks twice, so only the formats of the lowest `precedence`
    /// present are read (the others are named in a warning).
    Timeline {
        precedence: u8,
        /// Gives each rank to the closure as soon as it is read, so that a
        /// load can make what it keeps of one (and let its ops go) before the
        /// next is read: a file of many devices is then never held whole.
        read: fn(&FileIn, &mut dyn FnMut(Ranked)) -> Result<()>,
        /// Each file numbers its devices from 0 (one XSpace per host): the
        /// files after the first, in name order, continue the numbering.
        devices_per_host: bool,
    },
    /// A CUDA memory timeline of one rank.
    Memory(PerRank<MemoryTimeline>),
    /// The execution trace of one rank.
    ExecTrace(PerRank<EtRank>),
    /// One rank's NCCL Flight Recorder dump.
    Flight(PerRank<FrDump>),
    /// The run's workload card (a broken one is a warning).
    Card {
        read: fn(&Path) -> Result<WorkloadCard>,
    },
    /// Recognised but not readable as it is: what to do instead.
    Unreadable { advice: fn(&Path) -> String },
}

impl Format {
    pub fn is_timeline(&self) -> bool {
        matches!(self.role, Role::Timeline { .. })
    }

    /// Whether a directory holding only files of this format has something
    /// to show (a card alone does not).
    pub(crate) fn is_usable(&self) -> bool {
        matches!(
            self.role,
            Role::Timeline { .. } | Role::Memory(_) | Role::ExecTrace(_) | Role::Flight(_)
        )
    }

    /// Whether `name` (lowercase) ends like a file of this format.
    pub(crate) fn named_like(&self, name: &str) -> bool {
        self.exts.iter().any(|e| name.ends_with(e))
    }
}

/// What sniffing looks at: the lowercase file name and the first
/// [`HEAD`] bytes, decompressed.
pub struct Head {
    pub name: String,
    pub bytes: Vec<u8>,
}

impl Head {
    /// Whether the bytes contain `needle` (a SIMD search: a directory of
    /// 1,024 ranks sniffs 64 MB).
    pub(crate) fn has(&self, needle: &str) -> bool {
        memchr::memmem::find(&self.bytes, needle.as_bytes()).is_some()
    }

    /// The bytes after a UTF-8 byte order mark and leading whitespace.
    pub(crate) fn text(&self) -> &[u8] {
        let b = &self.bytes;
        b.strip_prefix(b"\xEF\xBB\xBF")
            .unwrap_or(b)
            .trim_ascii_start()
    }
}

/// How much of a file sniffing looks at.
pub(crate) const HEAD: usize = 64 * 1024;

const JSON: &[&str] = &[".json", ".json.gz", ".gz"];

/// Every format this tool knows, in sniffing order.
pub static FORMATS: &[Format] = &[
    Format {
        name: "workload card",
        exts: &[".yaml", ".yml"],
        files: "workload_card.yaml",
        sniff: None,
        role: Role::Card {
            read: read::card::read,
        },
    },
    Format {
        name: "Nsight Systems report",
        exts: &[".nsys-rep", ".qdrep"],
        files: ".nsys-rep",
        sniff: None,
        role: Role::Unreadable {
            advice: nsys_report_advice,
        },
    },
    Format {
        name: "Nsight Systems SQLite export",
        exts: &[".sqlite"],
        files: ".sqlite from `nsys export --type sqlite`",
        sniff: None,
        role: Role::Timeline {
            precedence: 1,
            read: |f, each| {
                let files = read::nsys::read(f.path, f.rank, f.cpu_ranges)?;
                f.count_whole();
                give(files, each)
            },
            devices_per_host: false,
        },
    },
    Format {
        name: "nsys-jax archive",
        exts: &[".zip"],
        files: "*.zip from nsys-jax (JAX-Toolbox)",
        sniff: None,
        role: Role::Timeline {
            precedence: 2,
            read: |f, each| {
                read::nsys_jax::read(f.path, (f.rank, f.cpu_ranges), each)?;
                f.count_whole();
                Ok(())
            },
            devices_per_host: false,
        },
    },
    Format {
        name: "XLA profiler XSpace",
        exts: &[".xplane.pb"],
        files: "*.xplane.pb",
        sniff: None,
        role: Role::Timeline {
            precedence: 3,
            read: |f, each| {
                let (stream, file) = f.stream_and_file()?;
                read::xplane::read_each(stream, f.path, (f.limit()?, file), each)
            },
            devices_per_host: true,
        },
    },
    Format {
        name: "CUDA memory snapshot",
        exts: &[".pickle", ".pkl"],
        files: "rank{N}_memory_snapshot.pickle",
        sniff: None,
        role: Role::Memory(PerRank {
            read: |f| read::snapshot::read(|counted| f.reread(counted), f.path),
            rank_of: crate::naming::rank_from_name,
            naming: "rank{N}_memory_snapshot.pickle",
        }),
    },
    Format {
        name: "XLA profiler trace JSON",
        exts: JSON,
        files: "*.trace.json.gz",
        // The JAX/TF profiler names its processes after devices; a PyTorch
        // trace may mention such a name too, but has markers of its own.
        sniff: Some(|h| {
            let device = h.has("\"/device:TPU:") || h.has("\"/device:GPU:");
            if h.has("\"traceEvents\"") && device && !pytorch_markers(h) {
                3
            } else {
                0
            }
        }),
        role: Role::Timeline {
            precedence: 3,
            read: |f, each| give(read::xla_json::read(f.stream()?, f.path)?, each),
            devices_per_host: true,
        },
    },
    Format {
        name: "PyTorch profiler trace",
        exts: JSON,
        files: ".json or .json.gz, one per rank",
        sniff: Some(|h| {
            if h.has("\"traceEvents\"") {
                2
            } else if h.name.contains(".pt.trace.json")
                || h.text().starts_with(b"[")
                || (h.text().starts_with(b"{") && pytorch_markers(h))
            {
                // A bare event array, or a profiler file whose header (a
                // large job's process groups) runs past the head.
                1
            } else {
                0
            }
        }),
        role: Role::Timeline {
            precedence: 0,
            read: |f, each| {
                let file = read::kineto::read_with(f.stream()?, f.path, f.cpu_ranges)?;
                each((f.rank, file));
                Ok(())
            },
            devices_per_host: false,
        },
    },
    Format {
        name: "Nsight Systems JSON export",
        exts: JSON,
        files: ".json from `nsys export --type json`",
        // The string table first, then one event object per line.
        sniff: Some(|h| 2 * u8::from(h.text().starts_with(b"{\"data\":["))),
        role: Role::Timeline {
            precedence: 2,
            read: |f, each| {
                let files = read::nsys_json::read(f.stream()?, f.path, f.rank, f.cpu_ranges)?;
                give(files, each)
            },
            devices_per_host: false,
        },
    },
    Format {
        name: "PyTorch execution trace",
        exts: JSON,
        files: "torch_et_{N}.json",
        sniff: Some(|h| 2 * u8::from(h.has("\"nodes\"") && h.has("\"schema\""))),
        role: Role::ExecTrace(PerRank {
            read: |f| read::exec_trace::read(f.stream()?, f.path),
            rank_of: read::exec_trace::rank_of,
            naming: "torch_et_{N}.json",
        }),
    },
    Format {
        name: "NCCL Flight Recorder dump",
        // Named `<prefix><rank>` (TORCH_FR_DUMP_TEMP_FILE), any ending.
        exts: &[""],
        files: "nccl_trace_rank_{N} (TORCH_NCCL_TRACE_BUFFER_SIZE, pickle or JSON)",
        sniff: Some(|h| read::flight_recorder::sniff(&h.bytes, |k| h.has(k))),
        role: Role::Flight(PerRank {
            // Hundreds of small dumps, every entry kept: what each one's
            // decoding freed lies among them, kept resident by the
            // allocator unless let go (256 pickled dumps: 75 -> 62 MB).
            read: |f| {
                let bytes = f.bytes()?;
                let dump = read::flight_recorder::read(&bytes, f.path);
                crate::memory::let_go_after(bytes.len());
                dump
            },
            rank_of: read::flight_recorder::rank_of,
            naming: "nccl_trace_rank_{N}, or any prefix ending in the rank",
        }),
    },
];

/// Gives `each` the ranks of a reader that reads them all before it returns.
fn give(files: Vec<Ranked>, each: &mut dyn FnMut(Ranked)) -> Result<()> {
    files.into_iter().for_each(each);
    Ok(())
}

/// Top-level keys and categories only the PyTorch profiler writes.
fn pytorch_markers(h: &Head) -> bool {
    [
        "\"schemaVersion\"",
        "\"distributedInfo\"",
        "\"deviceProperties\"",
        "\"cpu_op\"",
        "\"cuda_runtime\"",
    ]
    .iter()
    .any(|m| h.has(m))
}

fn nsys_report_advice(path: &Path) -> String {
    format!(
        "Nsight Systems reports cannot be read directly; convert with `nsys export --type sqlite --output {} {}` and point --trace at the .sqlite",
        path.with_extension("sqlite").display(),
        path.display()
    )
}

/// Whether any format of `table` needs a file's first bytes to decide.
pub(crate) fn needs_head(table: &[Format], name: &str) -> bool {
    table
        .iter()
        .any(|f| f.sniff.is_some() && f.named_like(name))
}

/// The format of a file named `name` (lowercase) whose first bytes are
/// `head` (read only when [`needs_head`] says so).
pub(crate) fn recognise<'t>(
    table: &'t [Format],
    head: Option<&Head>,
    name: &str,
) -> Option<&'t Format> {
    let mut best: Option<(u8, &Format)> = None;
    for f in table.iter().filter(|f| f.named_like(name)) {
        let score = match (f.sniff, head) {
            (None, _) => u8::MAX,
            (Some(sniff), Some(h)) => sniff(h),
            (Some(_), None) => 0,
        };
        if score > 0 && best.is_none_or(|(b, _)| score > b) {
            best = Some((score, f));
        }
    }
    best.map(|(_, f)| f)
}

/// The formats as a Markdown table (docs/inputs.md): what each is, the
/// files it is found in, and what the run takes from it. Timelines first,
/// in order of precedence (the lowest present in a folder is read).
pub fn markdown_table() -> String {
    let mut rows: Vec<&Format> = FORMATS.iter().collect();
    rows.sort_by_key(|f| match f.role {
        Role::Timeline { precedence, .. } => (0, precedence),
        Role::Memory(_) => (1, 0),
        Role::ExecTrace(_) => (1, 1),
        Role::Card { .. } => (1, 2),
        Role::Flight(_) => (1, 3),
        Role::Unreadable { .. } => (2, 0),
    });
    let mut out = String::from("| input | files | read for |\n|---|---|---|\n");
    for f in rows {
        let gives = match f.role {
            Role::Timeline { precedence, .. } => {
                format!("per-rank device timelines (precedence {precedence})")
            }
            Role::Memory(_) => "memory metrics, Memory tab".into(),
            Role::ExecTrace(_) => {
                "collective counts and sizes, linked to the timelines' kernels".into()
            }
            Role::Card { .. } => "MFU, tokens, group roles, Summary".into(),
            Role::Flight(_) => "`ccl-bench hang`, Hang tab".into(),
            Role::Unreadable { .. } => {
                "not read: the error gives the command that converts it".into()
            }
        };
        out.push_str(&format!(
            "| {} | {} | {gives} |\n",
            f.name,
            f.files.replace('|', "\\|")
        ));
    }
    out
}

/// What the formats of `table` are, for "not a trace" messages: timelines
/// in order of precedence, then the files that annotate them.
pub(crate) fn summary(table: &[Format]) -> String {
    let mut usable: Vec<&Format> = table.iter().filter(|f| f.is_usable()).collect();
    usable.sort_by_key(|f| match f.role {
        Role::Timeline { precedence, .. } => precedence,
        _ => u8::MAX,
    });
    usable
        .iter()
        .map(|f| format!("{} ({})", f.name, f.files))
        .collect::<Vec<_>>()
        .join("; ")
}
