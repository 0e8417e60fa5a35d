//! Nsight Systems JSON exports (`nsys export --type json`): one JSON object per
//! line. The first line holds the string table (`data`); kernels, copies and
//! memsets are `CudaEvent`s, CUDA runtime/driver calls `TraceProcessEvent`s of
//! class 0/1, NVTX ranges `NvtxEvent`s of type 59/60. The same content as the
//! SQLite export (minus GPU names), so both feed one assembly step.

use crate::model::Warning;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

use super::nsys::{assemble, pid, tid, OwnNames, Raw};
use super::nsys_cpu::{Calls, Cpu};
use super::split::Splitter;
use super::RankFile;
use crate::error::Error;
use crate::model::{Activity, Ns, PackedWork, Work};

/// An integer that nsys writes either as a number or as a decimal string.
#[derive(Deserialize, Clone, Copy, Default)]
#[serde(from = "NumOrText")]
struct Int(Option<i64>);

#[derive(Deserialize)]
#[serde(untagged)]
enum NumOrText {
    Num(i64),
    Text(String),
}

impl From<NumOrText> for Int {
    fn from(v: NumOrText) -> Self {
        Int(match v {
            NumOrText::Num(n) => Some(n),
            NumOrText::Text(s) => s.trim().parse().ok(),
        })
    }
}

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "Type", default)]
    ty: Option<i64>,
    /// First line: the string table; another `data` line holds thread names.
    #[serde(default)]
    data: Option<Vec<serde_json::Value>>,
    #[serde(rename = "CudaEvent")]
    cuda: Option<CudaEvent>,
    #[serde(rename = "TraceProcessEvent")]
    process: Option<ProcessEvent>,
    #[serde(rename = "NvtxEvent")]
    nvtx: Option<NvtxEvent>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CudaEvent {
    #[serde(default)]
    start_ns: Int,
    #[serde(default)]
    end_ns: Int,
    #[serde(default)]
    correlation_id: Int,
    #[serde(default)]
    device_id: Int,
    #[serde(default)]
    stream_id: Int,
    #[serde(default)]
    global_pid: Int,
    kernel: Option<Kernel>,
    memcpy: Option<Copy>,
    memset: Option<Copy>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Kernel {
    #[serde(default)]
    demangled_name: Int,
    #[serde(default)]
    short_name: Int,
    #[serde(default)]
    grid_x: Int,
    #[serde(default)]
    grid_y: Int,
    #[serde(default)]
    grid_z: Int,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Copy {
    #[serde(default)]
    sizebytes: Int,
    #[serde(default)]
    copy_kind: Int,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProcessEvent {
    #[serde(default)]
    start_ns: Int,
    #[serde(default)]
    end_ns: Int,
    #[serde(default)]
    correlation_id: Int,
    #[serde(default)]
    event_class: Int,
    #[serde(default)]
    name: Int,
    #[serde(default)]
    global_tid: Int,
}

#[derive(Deserialize)]
struct NvtxEvent {
    #[serde(rename = "Type", default)]
    ty: Int,
    #[serde(rename = "Timestamp", default)]
    start: Int,
    #[serde(rename = "EndTimestamp", default)]
    end: Int,
    #[serde(rename = "Text")]
    text: Option<String>,
    #[serde(rename = "TextId", default)]
    text_id: Int,
    #[serde(rename = "GlobalTid", default)]
    global_tid: Int,
}

/// Reads one export from `reader` (already decompressed); one `RankFile` per GPU.
/// A truncated file is read up to its last complete line, with a warning.
/// With `cpu_ranges`, the launching threads become CPU lanes.
pub fn read(
    reader: impl Read,
    path: &Path,
    name_rank: Option<u32>,
    cpu_ranges: bool,
) -> Result<Vec<(Option<u32>, RankFile)>, Error> {
    let mut strings: Vec<Arc<str>> = Vec::new();
    let own = OwnNames::default();
    let mut raw = Vec::new();
    // Which calls issued a device op is known only once the ops are read.
    let mut runtime = Calls::new(cpu_ranges);
    let mut nvtx = Vec::new();
    let mut warnings = Vec::new();
    let mut events = 0usize;
    let mut sp = Splitter::new(reader);
    let mut values = 0usize;
    let loaded = |events: usize| format!("loaded the {events} events before it");
    loop {
        let at = match sp.peek() {
            Ok(None) => break,
            Ok(Some(_)) => sp.pos(),
            Err(e) => {
                // A damaged gzip stream: keep what came before.
                if values == 0 {
                    return Err(Error::Io {
                        path: path.to_owned(),
                        source: e,
                    });
                }
                warnings.push(Warning::damaged(format!(
                    "{}: unreadable at {} ({e}); {}",
                    path.display(),
                    sp.pos(),
                    loaded(events)
                )));
                break;
            }
        };
        // One object per line: the line is the value when it ends with `}`;
        // otherwise (the string table's line can be megabytes) brackets
        // find its end.
        let guess = sp.line_value().ok().flatten();
        let fast = guess.map(|len| (len, serde_json::from_slice::<Line>(sp.ahead(len))));
        let parsed = match fast {
            Some((len, Ok(line))) => {
                sp.consume(len);
                Ok(line)
            }
            _ => match sp.value() {
                Ok(Some(raw)) => serde_json::from_slice::<Line>(raw),
                Ok(None) | Err(_) if values == 0 => {
                    return Err(Error::NotATrace {
                        path: path.to_owned(),
                        why: format!(
                            "not an `nsys export --type json` file: the first value, at {at}, does not end"
                        ),
                    })
                }
                Ok(None) | Err(_) => {
                    warnings.push(Warning::damaged(format!(
                        "{}: cut off at {at}: the last value is not a complete JSON object; {}",
                        path.display(),
                        loaded(events)
                    )));
                    break;
                }
            },
        };
        values += 1;
        let parsed = match parsed {
            Ok(l) => l,
            Err(e) if values == 1 => {
                return Err(Error::NotATrace {
                    path: path.to_owned(),
                    why: format!(
                        "not an `nsys export --type json` file: {}: {}",
                        at.advanced_to(&e),
                        super::events::serde_message(&e)
                    ),
                })
            }
            Err(e) => {
                warnings.push(Warning::damaged(format!(
                    "{}: the value at {} is not a complete JSON object ({}); {}",
                    path.display(),
                    at.advanced_to(&e),
                    super::events::serde_message(&e),
                    loaded(events)
                )));
                break;
            }
        };
        if let Some(data) = parsed.data {
            if strings.is_empty() && data.iter().all(|v| v.is_string()) {
                strings = data
                    .into_iter()
                    .map(|v| match v {
                        serde_json::Value::String(s) => Arc::from(s),
                        _ => Arc::from(""),
                    })
                    .collect();
            }
            continue;
        }
        let name = |id: Int| -> Option<Arc<str>> {
            let i = usize::try_from(id.0?).ok()?;
            strings.get(i).filter(|s| !s.is_empty()).cloned()
        };
        if let Some(c) = parsed.cuda {
            let (Some(start), Some(end)) = (c.start_ns.0, c.end_ns.0) else {
                continue;
            };
            let mut op = Raw {
                device: c.device_id.0.unwrap_or(0),
                pid: pid(c.global_pid.0.unwrap_or(0)),
                correlation: c.correlation_id.0.unwrap_or(-1),
                start: Ns(start),
                end: Ns(end),
                name: own.unknown_kernel(),
                activity: Activity::Kernel,
                stream: c.stream_id.0.unwrap_or(0),
                work: PackedWork::NONE,
            };
            if let Some(k) = c.kernel {
                op.name = name(k.demangled_name)
                    .or_else(|| name(k.short_name))
                    .unwrap_or_else(|| own.unknown_kernel());
                // In floating point: a damaged grid cannot overflow.
                let blocks = match (k.grid_x.0, k.grid_y.0, k.grid_z.0) {
                    (Some(x), Some(y), Some(z)) => Some(x as f64 * y as f64 * z as f64),
                    _ => None,
                };
                op.work = Work::of(Activity::Kernel, blocks, None).into();
            } else if let Some(m) = c.memcpy {
                op.activity = Activity::Memcpy;
                op.name = own.copy(m.copy_kind.0.unwrap_or(0));
                let bytes = m.sizebytes.0.and_then(|b| u64::try_from(b).ok());
                op.work = Work::of(Activity::Memcpy, None, bytes).into();
            } else if let Some(m) = c.memset {
                op.activity = Activity::Memset;
                op.name = own.memset();
                let bytes = m.sizebytes.0.and_then(|b| u64::try_from(b).ok());
                op.work = Work::of(Activity::Memset, None, bytes).into();
            } else {
                // Event records and synchronisations are not device work.
                continue;
            }
            events += 1;
            raw.push(op);
        } else if let Some(p) = parsed.process {
            // Classes 0 and 1: CUDA runtime and driver API calls.
            let api = parsed.ty == Some(48) && matches!(p.event_class.0, Some(0 | 1));
            if let (true, Some(start), Some(end)) = (api, p.start_ns.0, p.end_ns.0) {
                events += 1;
                let global = p.global_tid.0.unwrap_or(0);
                let call = Cpu {
                    pid: pid(global),
                    tid: tid(global),
                    start: Ns(start),
                    end: Ns(end),
                    name: name(p.name).unwrap_or_default(),
                };
                runtime.push(call, p.correlation_id.0.unwrap_or(-1));
            }
        } else if let Some(n) = parsed.nvtx {
            // Ranges only (push/pop 59, start/end 60); marks have no end.
            let range = matches!(n.ty.0, Some(59 | 60));
            if let (true, Some(start), Some(end)) = (range, n.start.0, n.end.0) {
                if end >= start {
                    events += 1;
                    nvtx.push(Cpu {
                        pid: pid(n.global_tid.0.unwrap_or(0)),
                        tid: tid(n.global_tid.0.unwrap_or(0)),
                        start: Ns(start),
                        end: Ns(end),
                        name: n
                            .text
                            .map(Arc::from)
                            .or_else(|| name(n.text_id))
                            .unwrap_or_default(),
                    });
                }
            }
        }
    }
    if strings.is_empty() {
        return Err(Error::NotATrace {
            path: path.to_owned(),
            why: "no string table on the first line: not an `nsys export --type json` file".into(),
        });
    }
    if raw.is_empty() && nvtx.is_empty() {
        return Err(Error::NotATrace {
            path: path.to_owned(),
            why: "an Nsight Systems JSON export without GPU activity or NVTX ranges (was CUDA tracing on: `nsys profile -t cuda,nvtx`?)".into(),
        });
    }
    warnings.push(Warning::reading(format!(
        "{}: an nsys JSON export names no GPU model or SM count; metrics that need them (SM coverage) apply to the SQLite export (`nsys export --type sqlite`)",
        path.display()
    )));
    let runtime = runtime.finish(raw.iter().map(|o| (o.pid, o.correlation)));
    let mut files = assemble(path, name_rank, raw, (runtime, nvtx, cpu_ranges), &[]);
    if let Some((_, first)) = files.first_mut() {
        first.warnings = warnings;
    }
    Ok(files)
}
