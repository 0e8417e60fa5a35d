//! Kernel classification, in one table. A device op's name (and whether it is a
//! kernel or a memory copy/set) decides its class; communication kernels also get
//! their collective kind. `ccl-bench --list-classes` prints this table.

use std::sync::LazyLock;

use regex::{Regex, RegexBuilder};

/// What kind of device activity an op is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Activity {
    Kernel,
    Memcpy,
    Memset,
}

impl Activity {
    pub fn name(self) -> &'static str {
        match self {
            Self::Kernel => "kernel",
            Self::Memcpy => "memcpy",
            Self::Memset => "memset",
        }
    }

    /// The activity `name` writes (summaries store it as text).
    pub fn from_name(s: &str) -> Option<Self> {
        [Self::Kernel, Self::Memcpy, Self::Memset]
            .into_iter()
            .find(|a| a.name() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KernelClass {
    Communication,
    Memory,
    Moe,
    Gemm,
    Attention,
    Normalization,
    Optimizer,
    Reduction,
    Elementwise,
    Other,
}

impl KernelClass {
    pub const ALL: [Self; 10] = [
        Self::Communication,
        Self::Memory,
        Self::Moe,
        Self::Gemm,
        Self::Attention,
        Self::Normalization,
        Self::Optimizer,
        Self::Reduction,
        Self::Elementwise,
        Self::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Communication => "communication",
            Self::Memory => "memory",
            Self::Moe => "moe",
            Self::Gemm => "gemm",
            Self::Attention => "attention",
            Self::Normalization => "normalization",
            Self::Optimizer => "optimizer",
            Self::Reduction => "reduction",
            Self::Elementwise => "elementwise",
            // No rule matched: shown as such, so misclassification is visible.
            Self::Other => "unclassified",
        }
    }

    /// The class with this name (as `name` writes it; `other` also accepted).
    pub fn from_name(s: &str) -> Option<Self> {
        let s = s.trim().to_ascii_lowercase();
        if s == "other" {
            return Some(Self::Other);
        }
        Self::ALL.into_iter().find(|c| c.name() == s)
    }

    /// Compute = a kernel that is neither communication nor a memory operation.
    pub fn is_compute(self) -> bool {
        !matches!(self, Self::Communication | Self::Memory)
    }
}

/// The kind of collective a communication op performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CollKind {
    AllReduce,
    AllGather,
    ReduceScatter,
    /// All-to-all, including NCCL `SendRecv` kernels issued for an all-to-all.
    AllToAll,
    /// Point-to-point send/recv (and peer-to-peer copies).
    SendRecv,
    Broadcast,
    Reduce,
    Unknown,
}

impl CollKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::AllReduce => "all_reduce",
            Self::AllGather => "all_gather",
            Self::ReduceScatter => "reduce_scatter",
            Self::AllToAll => "all_to_all",
            Self::SendRecv => "send_recv",
            Self::Broadcast => "broadcast",
            Self::Reduce => "reduce",
            Self::Unknown => "unknown",
        }
    }

    /// The kind `name` writes (summaries store it as text).
    pub fn from_name(s: &str) -> Option<Self> {
        [
            Self::AllReduce,
            Self::AllGather,
            Self::ReduceScatter,
            Self::AllToAll,
            Self::SendRecv,
            Self::Broadcast,
            Self::Reduce,
            Self::Unknown,
        ]
        .into_iter()
        .find(|k| k.name() == s)
    }

    /// nccl-tests' bus-bandwidth factor for a group of `n`: 2(n−1)/n for
    /// all-reduce, (n−1)/n for all-gather, reduce-scatter and all-to-all, 1
    /// for point-to-point, broadcast and reduce.
    pub fn bus_factor(self, n: u32) -> Option<f64> {
        let n = f64::from(n);
        match self {
            Self::AllReduce => Some(2.0 * (n - 1.0) / n),
            Self::AllGather | Self::ReduceScatter | Self::AllToAll => Some((n - 1.0) / n),
            Self::SendRecv | Self::Broadcast | Self::Reduce => Some(1.0),
            Self::Unknown => None,
        }
    }
}

/// One row of the rule table: a class, the case-insensitive pattern that selects
/// it, and what the pattern recognises (for `--list-classes`). Rules are tried
/// in order; the first match wins.
pub struct Rule {
    pub class: KernelClass,
    pub pattern: &'static str,
    pub what: &'static str,
}

const fn rule(class: KernelClass, what: &'static str, pattern: &'static str) -> Rule {
    Rule {
        class,
        pattern,
        what,
    }
}

/// Communication first (so `reduce_scatter` never lands in reduction, and
/// DeepEP's `dispatch`/`combine` never in MoE), MoE before GEMM (so
/// `grouped_gemm` counts as MoE), attention before GEMM (attention kernels are
/// often built on CUTLASS: `fmha_cutlassB_*`, `flash_fwd_kernel<… cutlass::bfloat16_t …>`).
/// Communication libraries that bypass NCCL are matched by their namespaces
/// and prefixes, since their kernel names need not name a collective.
pub const RULES: &[Rule] = &[
    // DeepEP's layout kernel counts the tokens each rank and expert gets,
    // on the local GPU: it moves no data between ranks, though its
    // namespace is that of the all-to-all kernels below.
    rule(
        KernelClass::Moe,
        "DeepEP's local dispatch layout (get_dispatch_layout): routing counts, no communication",
        r"(deep_ep|dpsk::ep)::[a-z_:]*get_dispatch_layout",
    ),
    rule(
        KernelClass::Communication,
        "NCCL, RCCL, MSCCL, MSCCL++ kernels",
        r"nccl|rccl|msccl",
    ),
    rule(
        KernelClass::Communication,
        "MoE expert-parallel all-to-all: DeepEP (deep_ep::, or a fork's dpsk::ep::) and AMD's MORI",
        r"deep_ep::|dpsk::ep::|(^|::)(internode|intranode)(_ll)?::|^mori::",
    ),
    rule(
        KernelClass::Communication,
        "NVSHMEM and PyTorch symmetric memory",
        r"nvshmem|symmetric_memory|(^|::)symm_mem|multimem_",
    ),
    rule(
        KernelClass::Communication,
        "custom all-reduce (vLLM/SGLang cross_device_reduce, TensorRT-LLM, quick reduce), Megatron/TE userbuffers, UCC",
        r"cross_device|allreduce|all_reduce|quickreduce|userbuffers|(^|::)ucc_|(^|::)ucc::",
    ),
    rule(
        KernelClass::Communication,
        "a collective named in the kernel",
        r"allgather|reducescatter|all_gather|reduce_scatter|alltoall|all_to_all|sendrecv|broadcast",
    ),
    rule(
        KernelClass::Communication,
        "peer-to-peer copies",
        r"memcpy ptop|memcpy peer",
    ),
    // XLA's async copies (`copy-start.2` … `copy-done.2`) move data between
    // memories; the done's time is mostly waiting for the copy.
    rule(
        KernelClass::Memory,
        "copies and sets",
        r"^memcpy|^memset|^memory copy|^memory set|^copy-start|^copy-done",
    ),
    rule(
        KernelClass::Moe,
        "MoE routing, permutation and expert GEMMs",
        r"moe|expert|routing|gating|topk|fused_expert|dispatch|combine|grouped_gemm",
    ),
    // Not `softmax` alone: a loss's `cunn_SoftMaxForward` / `log_softmax` is a
    // row reduction, not attention (fused attention names say so).
    rule(
        KernelClass::Attention,
        "fused attention",
        r"flash|fmha|attention|attn|sdpa",
    ),
    rule(
        KernelClass::Gemm,
        "matrix multiplies and convolutions",
        r"gemm|cutlass|cublas|matmul|^bmm_|^fc(-|_|$)|wgmma|sm90_xmma|nvjet|triton_mm|^triton_tem_|^cijk_|hipblaslt|rocblas|convolve|convolution|conv_(fwd|bwd|wrw)",
    ),
    rule(
        KernelClass::Normalization,
        "norms",
        r"layer_?norm|rms_?norm|batch_?norm|group_?norm|(^|::)bn_(fw|bw)",
    ),
    rule(
        KernelClass::Optimizer,
        "fused optimizers",
        r"multi_tensor_apply|adam",
    ),
    // torch.compile (Inductor) names its Triton kernels by kind: `triton_poi_`
    // pointwise, `triton_per_` / `triton_red_` reductions (persistent or
    // looped), `triton_tem_` templates (matmul, convolution; attention
    // templates are caught above by name).
    rule(
        KernelClass::Reduction,
        "reductions and softmax",
        r"reduce_kernel|sum_kernel|mean_kernel|softmax|^triton_(per|red)_",
    ),
    rule(
        KernelClass::Elementwise,
        "elementwise",
        r"elementwise|vectorized|unrolled|pointwise|^triton_poi_",
    ),
];

/// The patterns are lowercase and matched against the lowercased name: the same
/// as case-insensitive matching of ASCII names, and compiled in a tenth of the
/// time (case-insensitive literals expand into every mix of cases).
static COMPILED: LazyLock<Vec<(&'static Rule, Regex)>> = LazyLock::new(|| {
    RULES
        .iter()
        .map(|r| {
            let re = RegexBuilder::new(r.pattern)
                .unicode(false)
                .build()
                .expect("classification patterns are valid");
            (r, re)
        })
        .collect()
});

/// `name` without template arguments (`<…>`, nested) and without the
/// parameter list; `(anonymous namespace)` is kept as part of the path.
/// How C++ names an anonymous namespace in a qualified name.
const ANON: &str = "(anonymous namespace)";

fn strip_templates(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    // Parentheses inside template arguments: a `>` in them compares
    // (`enable_if<((8)>(0)), void>`), it closes nothing.
    let mut parens = 0usize;
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if depth == 0 && rest.starts_with(ANON) {
            out.push_str(ANON);
            rest = &rest[ANON.len()..];
            continue;
        }
        match c {
            '(' if depth > 0 => parens += 1,
            ')' if depth > 0 => parens = parens.saturating_sub(1),
            '<' if parens == 0 => depth += 1,
            '>' if depth > 0 && parens == 0 => depth -= 1,
            // The parameter list ends the name (`Memcpy HtoD (Pageable -> Device)` too).
            '(' if depth == 0 && !out.trim().is_empty() => break,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// A function's name without the return type its signature starts with,
/// when that type is a qualified one (`std::enable_if::type vllm::f` ->
/// `vllm::f`; `void` is dropped by the callers). A name with spaces of its
/// own (`Memcpy HtoD`, `(anonymous namespace)::f`) stays whole.
fn without_return_type(path: &str) -> &str {
    match path.rsplit_once(' ') {
        Some((ret, own)) if ret.contains("::") && !own.is_empty() && !path.contains(ANON) => own,
        _ => path,
    }
}

/// `name` as a person scans it: without `void`, template arguments and
/// parameters (`void at::native::reduce_kernel<512, 1>(…)` -> `at::native::reduce_kernel`).
pub fn bare_name(name: &str) -> String {
    let bare = strip_templates(name);
    let bare = without_return_type(bare.trim().trim_start_matches("void ").trim());
    if bare.is_empty() {
        name.to_owned()
    } else {
        bare.to_owned()
    }
}

/// The first template argument of `name`, if it has any.
fn first_template_arg(name: &str) -> Option<&str> {
    let open = name.find('<')?;
    let (mut depth, mut parens) = (0usize, 0usize);
    for (i, c) in name[open..].char_indices() {
        match c {
            '(' => parens += 1,
            ')' => parens = parens.saturating_sub(1),
            _ if parens > 0 => {}
            '<' => depth += 1,
            '>' if depth == 1 => return Some(&name[open + 1..open + i]),
            '>' => depth -= 1,
            ',' if depth == 1 => return Some(&name[open + 1..open + i]),
            _ => {}
        }
    }
    None
}

/// Generic launch wrappers whose first template argument says what runs
/// (`cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<…>>>`).
fn is_wrapper(own: &str) -> bool {
    matches!(own, "kernel" | "kernel2" | "device_kernel") || own.starts_with("enable_sm")
}

/// Namespaces of libraries whose names contain a class word: FBGEMM's GPU
/// kernels (`fbgemm_gpu::permute_2D_data_kernel`) are embedding and sparse
/// ops, not GEMMs.
const LIBRARY_NAMESPACES: &[&str] = &["fbgemm_gpu", "fbgemm"];

/// What a kernel is classified by: its own qualified name, without template
/// arguments or parameters, so that words in them do not decide its class
/// (`cunn_SoftMaxForward<…, fbgemm_gpu::…>`); namespaces stay (`moe::dev::…`
/// is MoE) except library ones in `LIBRARY_NAMESPACES`. For a generic wrapper
/// (`cutlass::Kernel2<…>`), the wrapped kernel's name and then the wrapper's.
/// Expects a lowercased name.
pub(crate) fn own_name(name: &str) -> String {
    let stripped = strip_templates(name);
    let path = without_return_type(stripped.trim().trim_start_matches("void ").trim());
    let parts: Vec<&str> = path
        .split("::")
        .map(str::trim)
        .filter(|p| !LIBRARY_NAMESPACES.contains(p))
        .collect();
    let own = parts.last().copied().unwrap_or("");
    if own.is_empty() {
        // Unbalanced brackets (a name cut short): the whole name.
        return name.to_owned();
    }
    let path = parts.join("::");
    if is_wrapper(own) {
        if let Some(arg) = first_template_arg(name) {
            return format!("{} {path}", own_name(arg.trim()));
        }
    }
    path
}

/// Class of a device op. Memory copies and sets are `Memory` unless they cross
/// devices (peer-to-peer copies are communication).
pub fn classify(name: &str, activity: Activity) -> KernelClass {
    let own = own_name(&name.to_ascii_lowercase());
    let by_name = COMPILED
        .iter()
        .find(|(_, re)| re.is_match(&own))
        .map_or(KernelClass::Other, |(rule, _)| rule.class);
    match activity {
        Activity::Kernel => by_name,
        Activity::Memcpy | Activity::Memset if by_name == KernelClass::Communication => by_name,
        Activity::Memcpy | Activity::Memset => KernelClass::Memory,
    }
}

/// Rules a user adds in front of the built-in ones (`--classes FILE`, or
/// `ccl-bench-classes.toml` beside the trace).
#[derive(Debug, Clone)]
pub struct UserRules {
    pub source: std::path::PathBuf,
    pub rules: Vec<(KernelClass, String, Regex)>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    #[serde(default)]
    rule: Vec<RuleEntry>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleEntry {
    class: String,
    pattern: String,
}

/// Limits on a rules file: how many rules, how many bytes of patterns, and
/// how large one compiled pattern may grow.
pub(crate) const MAX_RULES: usize = 256;
pub(crate) const MAX_PATTERN_BYTES: usize = 64 * 1024;
const MAX_COMPILED: usize = 1 << 20;

impl UserRules {
    /// Parses the TOML text of a rules file (`[[rule]] class = "gemm"
    /// pattern = "^my_matmul"`); patterns are case-insensitive regexes.
    pub fn parse(text: &str, source: &std::path::Path) -> Result<Self, String> {
        let file: RulesFile = toml::from_str(text).map_err(|e| e.to_string())?;
        if file.rule.len() > MAX_RULES {
            return Err(format!(
                "{} rules; at most {MAX_RULES} are read (they run against every kernel name)",
                file.rule.len()
            ));
        }
        let total: usize = file.rule.iter().map(|r| r.pattern.len()).sum();
        if total > MAX_PATTERN_BYTES {
            return Err(format!(
                "{total} bytes of patterns; at most {MAX_PATTERN_BYTES} are compiled"
            ));
        }
        let mut rules = Vec::new();
        for (i, r) in file.rule.into_iter().enumerate() {
            let class = KernelClass::from_name(&r.class).ok_or_else(|| {
                let names: Vec<&str> = KernelClass::ALL.iter().map(|c| c.name()).collect();
                format!(
                    "rule {}: unknown class '{}' (classes: {})",
                    i + 1,
                    r.class,
                    names.join(", ")
                )
            })?;
            // A bounded compiled size: a pattern such as `(a{99}){99}` is
            // refused at once instead of taking seconds and gigabytes.
            let re = regex::RegexBuilder::new(&format!("(?i){}", r.pattern))
                .size_limit(MAX_COMPILED)
                .dfa_size_limit(MAX_COMPILED)
                .build()
                .map_err(|e| format!("rule {}: bad pattern '{}': {e}", i + 1, r.pattern))?;
            rules.push((class, r.pattern, re));
        }
        Ok(Self {
            source: source.to_owned(),
            rules,
        })
    }

    /// The class the first matching user rule gives, if any.
    pub(crate) fn class_of(&self, name: &str) -> Option<KernelClass> {
        self.rules
            .iter()
            .find(|(_, _, re)| re.is_match(name))
            .map(|(c, _, _)| *c)
    }

    /// Reclassifies every op a user rule matches; returns how many changed.
    pub fn apply(&self, trace: &mut super::Trace) -> usize {
        trace.ranks.iter_mut().map(|t| self.apply_rank(t)).sum()
    }

    /// [`UserRules::apply`] to one rank; returns the ops reclassified.
    pub fn apply_rank(&self, t: &mut super::RankTimeline) -> usize {
        self.apply_ops(&t.strings, &mut t.ops)
    }

    /// [`UserRules::apply`] to some of a rank's ops (`strings`: the rank's
    /// names); returns the ops reclassified.
    pub fn apply_ops(&self, strings: &super::Interner, ops: &mut [super::DeviceOp]) -> usize {
        let mut changed = 0;
        let mut cache: std::collections::HashMap<super::StrId, Option<KernelClass>> =
            std::collections::HashMap::new();
        for op in ops {
            let id = op.name;
            let class = *cache
                .entry(id)
                .or_insert_with(|| self.class_of(strings.get(id)));
            let Some(class) = class else { continue };
            if op.class != class {
                changed += 1;
                op.class = class;
                op.coll = (class == KernelClass::Communication).then(|| coll_kind(strings.get(id)));
            }
        }
        changed
    }
}

/// Collective kind from a kernel name such as `ncclDevKernel_AllGather_RING_LL`
/// or from a `Collective name` argument such as `_allgather_base`.
pub fn coll_kind(name: &str) -> CollKind {
    if let Some(kind) = library_kind(&own_name(&name.to_ascii_lowercase())) {
        return kind;
    }
    let n: String = name
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect();
    // Longer names first: "reducescatter" and "allreduce" both contain "reduce".
    const TABLE: &[(&str, CollKind)] = &[
        ("reducescatter", CollKind::ReduceScatter),
        ("allreduce", CollKind::AllReduce),
        ("allgather", CollKind::AllGather),
        ("alltoall", CollKind::AllToAll),
        ("sendrecv", CollKind::AllToAll),
        ("broadcast", CollKind::Broadcast),
        ("ptop", CollKind::SendRecv),
        ("send", CollKind::SendRecv),
        ("recv", CollKind::SendRecv),
        ("reduce", CollKind::Reduce),
        ("gather", CollKind::AllGather),
        ("scatter", CollKind::ReduceScatter),
    ];
    TABLE
        .iter()
        .find(|(k, _)| n.contains(k))
        .map_or(CollKind::Unknown, |(_, kind)| *kind)
}

/// Collective kind for libraries whose kernel names say it in their own way
/// (their own name, lowercased, as [`own_name`] gives it).
fn library_kind(own: &str) -> Option<CollKind> {
    // vLLM/SGLang/TensorRT-LLM custom and quick all-reduce: "reduce" alone
    // would read as a reduce.
    if own.contains("cross_device_reduce") || own.contains("quickreduce") {
        return Some(CollKind::AllReduce);
    }
    // Expert-parallel libraries exchange tokens all-to-all: dispatch, combine
    // and the notify kernels that share their counts first.
    let ep = [
        "deep_ep::",
        "dpsk::ep::",
        "internode",
        "intranode",
        "mori::",
    ];
    if ep.iter().any(|p| own.contains(p)) {
        return Some(CollKind::AllToAll);
    }
    // Transformer Engine userbuffers: `_rs` reduce-scatter, `_ag` all-gather,
    // push/pull send and receive; the in-place sum otherwise reduces all.
    if let Some(rest) = own.split("userbuffers").nth(1) {
        let has = |w: &str| rest.split('_').any(|p| p == w);
        return Some(if has("rs") {
            CollKind::ReduceScatter
        } else if has("ag") {
            CollKind::AllGather
        } else if ["send", "recv", "push", "pull"]
            .iter()
            .any(|w| rest.contains(w))
        {
            CollKind::SendRecv
        } else {
            CollKind::AllReduce
        });
    }
    None
}

/// Size in bytes of one element of a PyTorch dtype name as Kineto writes it.
pub fn dtype_size(dtype: &str) -> Option<u64> {
    let d = dtype
        .trim()
        .trim_start_matches("c10::")
        .to_ascii_lowercase();
    let size = match d.as_str() {
        "float" | "float32" | "int" | "int32" | "uint32" | "complexhalf" => 4,
        "double" | "float64" | "long" | "int64" | "uint64" | "complexfloat" => 8,
        "half" | "float16" | "bfloat16" | "short" | "int16" | "uint16" => 2,
        "byte" | "char" | "bool" | "int8" | "uint8" => 1,
        "complexdouble" => 16,
        _ if d.starts_with("float8") => 1,
        _ => return None,
    };
    Some(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_rules_match_whatever_the_case() {
        // Names are lowercased before matching, so the patterns must be lowercase.
        for r in RULES {
            assert_eq!(r.pattern, r.pattern.to_ascii_lowercase(), "{}", r.pattern);
        }
        let k = |name| classify(name, Activity::Kernel);
        assert_eq!(
            k("ncclDevKernel_AllGather_RING_LL"),
            KernelClass::Communication
        );
        assert_eq!(k("Cijk_Ailk_Bljk_BBS_BH_MT128x128x64"), KernelClass::Gemm);
        assert_eq!(k("RMSNorm_fwd_kernel"), KernelClass::Normalization);
    }

    #[test]
    fn classifies_by_the_kernels_own_name() {
        let k = |n| classify(n, Activity::Kernel);
        use KernelClass::*;
        // DLRM (dlrm_8rank_v100): "fbgemm" in the namespace is not a GEMM.
        assert_eq!(
            k("void fbgemm_gpu::permute_2D_data_kernel<false, int, int, decltype(nullptr)>(int, int)"),
            Other
        );
        assert_eq!(
            k("void split_embedding_codegen_forward_unweighted_kernel<float, float>(at::GenericPackedTensorAccessor<float, 1ul, at::RestrictPtrTraits, long>)"),
            Other
        );
        assert_eq!(k("volta_sgemm_128x32_tn"), Gemm);
        // A loss softmax is a reduction, not attention.
        assert_eq!(
            k("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)"),
            Reduction
        );
        assert_eq!(
            k("void at::native::(anonymous namespace)::log_softmax_forward_kernel<float>"),
            Reduction
        );
        // Wrappers: what they wrap decides.
        assert_eq!(
            k("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2>>>>(T1::Params)"),
            Attention
        );
        assert_eq!(
            k("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int>>>(T1::Params)"),
            Gemm
        );
        // XLA async copies (TPU XSpace) are memory, as copies.
        assert_eq!(k("copy-done.2"), Memory);
        assert_eq!(k("copy-start.1"), Memory);
        assert_eq!(
            own_name("void (anonymous namespace)::foo<gemm_t, 4>(int)"),
            "(anonymous namespace)::foo"
        );
        // B200 (tracelens): the `moe::` namespace says what the kernel is part of.
        assert_eq!(
            k("void moe::dev::finalize::finalizeKernelVecLoad<moe::dev::finalize::KernelParams<cutlass::bfloat16_t>>(moe::dev::finalize::KernelParams)"),
            Moe
        );
        assert_eq!(own_name("broken<name"), "broken");
    }

    #[test]
    fn user_rules_come_first() {
        let r = UserRules::parse(
            "[[rule]]\nclass = \"communication\"\npattern = \"^my_a2a\"\n[[rule]]\nclass = \"gemm\"\npattern = \"fancy_mm\"\n",
            "c.toml".as_ref(),
        )
        .unwrap();
        assert_eq!(
            r.class_of("my_a2a_kernel<4>"),
            Some(KernelClass::Communication)
        );
        assert_eq!(r.class_of("triton_FANCY_MM_3"), Some(KernelClass::Gemm));
        assert_eq!(r.class_of("flash_fwd"), None);
        let e = UserRules::parse(
            "[[rule]]\nclass = \"magic\"\npattern = \"x\"\n",
            "c.toml".as_ref(),
        )
        .unwrap_err();
        assert!(e.contains("unknown class 'magic'"), "{e}");
        let e = UserRules::parse(
            "[[rule]]\nclass = \"gemm\"\npattern = \"(\"\n",
            "c.toml".as_ref(),
        )
        .unwrap_err();
        assert!(e.contains("bad pattern"), "{e}");
        assert_eq!(KernelClass::from_name("other"), Some(KernelClass::Other));
        assert_eq!(KernelClass::Other.name(), "unclassified");
    }

    #[test]
    fn classifies_kernel_names() {
        let k = |n| classify(n, Activity::Kernel);
        use KernelClass::*;
        assert_eq!(
            k("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"),
            Communication
        );
        assert_eq!(
            k("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            Communication
        );
        assert_eq!(k("void at::native::reduce_kernel<512, 1>"), Reduction);
        assert_eq!(k("sm90_xmma_gemm_bf16bf16_bf16f32"), Gemm);
        // MTIA's fully connected op (hta/mtia_trace_single_rank), not a name
        // that merely starts with the letters.
        assert_eq!(k("fc-dtype_Float"), Gemm);
        assert_ne!(k("fcmp_kernel"), Gemm);
        // Attention built on CUTLASS is attention (tracelens/h100, nsys corpus).
        assert_eq!(
            k("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t>>(pytorch_flash::Flash_fwd_params)"),
            Attention
        );
        assert_eq!(
            k("fmha_cutlassB_f32_aligned_64x64_k64_dropout_sm80(Params)"),
            Attention
        );
        assert_eq!(
            k("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nt_align1>(T1::Params)"),
            Gemm
        );
        assert_eq!(k("void cutlass::Kernel2<cutlass_80_wmma>"), Gemm);
        assert_eq!(k("flash_fwd_kernel"), Attention);
        // AMD: Tensile GEMMs, composable-kernel convolutions, Triton attention.
        assert_eq!(
            k("Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64"),
            Gemm
        );
        assert_eq!(
            k("_ZN2ck16tensor_operation6device12_GLOBAL__N_139kernel_grouped_conv_fwd_xdl"),
            Gemm
        );
        assert_eq!(k("attn_fwd"), Attention);
        assert_eq!(k("fused_moe_kernel"), Moe);
        assert_eq!(k("grouped_gemm_kernel"), Moe);
        // A return type before the name (vLLM, tracelens/b200), with a `>`
        // inside parentheses inside its template arguments.
        let vllm = "std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16*, c10::BFloat16 const*, float, int, int)";
        assert_eq!(
            own_name(&vllm.to_ascii_lowercase()),
            "vllm::fused_add_rms_norm_kernel"
        );
        assert_eq!(k(vllm), Normalization);
        assert_eq!(bare_name(vllm), "vllm::fused_add_rms_norm_kernel");
        // DeepEP's layout kernel (and a fork's) is local routing, not an
        // all-to-all like the rest of its namespace.
        assert_eq!(
            k("void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int, int, int)"),
            Moe
        );
        assert_eq!(
            k("void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*)"),
            Moe
        );
        assert_eq!(
            k("void dpsk::ep::internode::dispatch<true, 8>(int4*)"),
            Communication
        );
        assert_eq!(
            k("void moe::dev::routing::routingIndicesHistogramKernel<moe::dev::X>(int)"),
            Moe
        );
        // "Dispatch" in a CUB template argument is not MoE dispatch.
        assert_eq!(
            k("void cub::DeviceReduceByKeyKernel<cub::DispatchReduceByKey<long*>>(long*)"),
            Other
        );
        assert_eq!(
            k("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>"),
            Communication
        );
        assert_eq!(
            k("void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel"),
            Other
        );
        assert_eq!(k("triton_red_fused_rms_norm_0"), Normalization);
        // Inductor's kinds.
        assert_eq!(k("triton_poi_fused__to_copy_add_mul_5"), Elementwise);
        assert_eq!(k("triton_per_fused__log_softmax_sum_7"), Reduction);
        assert_eq!(k("triton_red_fused_sum_12"), Reduction);
        assert_eq!(k("triton_tem_fused_addmm_3"), Gemm);
        assert_eq!(k("triton_tem_fused_flex_attention_0"), Attention);
        assert_eq!(k("triton_per_fused_native_layer_norm_2"), Normalization);
        assert_eq!(
            k("void at::native::vectorized_elementwise_kernel<4>"),
            Elementwise
        );
        assert_eq!(k("multi_tensor_apply_kernel"), Optimizer);
        // TensorRT-LLM's generated batched GEMMs; cuDNN's batch norm.
        assert_eq!(
            k("bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_schedP2x1x2x3_biasM_bN_tma_tmaOpt_clmp_swiGlu_dynBatch_sm100f"),
            Gemm
        );
        assert_eq!(
            k("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>(float, float)"),
            Normalization
        );
    }

    /// Kernel names of communication libraries that bypass NCCL, as their
    /// sources and real traces spell them, with the kind each performs.
    #[test]
    fn communication_beyond_nccl() {
        use CollKind::*;
        let cases: &[(&str, CollKind)] = &[
            // DeepEP, and a production fork's namespace for the same kernels.
            ("void deep_ep::internode::combine<__nv_bfloat16, 2, 8, 4096, 8, 4>(int4*, float*, int4 const*)", AllToAll),
            ("void deep_ep::internode::dispatch<true, 8, 2, 4, 8>(int4*, float*)", AllToAll),
            ("void deep_ep::internode::cached_notify<8>(int, int, int*, int)", AllToAll),
            ("void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int)", AllToAll),
            ("void deep_ep::internode_ll::dispatch<false, 3, 7168>(void*, float*)", AllToAll),
            ("void dpsk::ep::internode::combine<__nv_bfloat16, 2, 8>(int4*)", AllToAll),
            ("void dpsk::ep::internode::dispatch<true, 8>(int4*)", AllToAll),
            ("void dpsk::ep::internode::cached_notify<8>(int)", AllToAll),
            ("void dpsk::ep::internode::notify_dispatch<8>(int const*)", AllToAll),
            ("void mori::moe::EpDispatchIntraNodeKernel<__hip_bfloat16>(mori::moe::EpDispatchCombineArgs<__hip_bfloat16>)", AllToAll),
            // NVSHMEM and PyTorch symmetric memory.
            ("void nvshmemi_barrier_all_kernel()", Unknown),
            ("nvshmemx_alltoall_kernel<float>", AllToAll),
            ("void c10d::symmetric_memory::one_shot_all_reduce_kernel<c10::BFloat16, 16, 8>(long, c10::BFloat16**)", AllReduce),
            ("void c10d::symmetric_memory::barrier_kernel(unsigned int**, int, int)", Unknown),
            // Custom all-reduce: vLLM/SGLang, TensorRT-LLM, quick reduce, MSCCL++.
            ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals)", AllReduce),
            ("void sglang::cross_device_reduce_2stage<float, 8>(sglang::RankData*)", AllReduce),
            ("void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport<__nv_bfloat16, 8>(tensorrt_llm::kernels::ar_fusion::AllReduceFusionParams)", AllReduce),
            ("void quickreduce::allreduce_prototype_twoshot<quickreduce::CodecQ4>(int)", AllReduce),
            ("void mscclpp::allreduce8<__nv_bfloat16>(__nv_bfloat16*, mscclpp::DeviceHandle)", AllReduce),
            // Megatron / Transformer Engine userbuffers.
            ("void userbuffers_fp16_sum_inplace_gpu_rr_rs<8>(int, int, int, int, int, int, void**, int, unsigned long)", ReduceScatter),
            ("void userbuffers_fp16_sum_inplace_gpu_rw_ag<8>(int, int, int)", AllGather),
            ("void userbuffers_fp16_sum_inplace_gpu_rw<8>(int, int, int)", AllReduce),
            ("void kuserbuffers_pullsend(int, int, int*, int4*)", SendRecv),
            // UCC's CUDA transport.
            ("void ucc_tl_cuda_alltoallv_ce_kernel(void*)", AllToAll),
        ];
        for (name, kind) in cases {
            assert_eq!(
                classify(name, Activity::Kernel),
                KernelClass::Communication,
                "{name}"
            );
            assert_eq!(coll_kind(name), *kind, "{name}");
        }
        // MoE kernels that only move tokens on one device stay MoE.
        for name in [
            "void moe_align_block_size_kernel<int>(int*, int*)",
            "void vllm::moe::topkGatingSoftmax<8, 128>(float const*)",
            "void sglang::moe::ep_scatter_kernel(int)",
        ] {
            assert_eq!(classify(name, Activity::Kernel), KernelClass::Moe, "{name}");
        }
    }

    #[test]
    fn memory_ops_are_memory_unless_peer_to_peer() {
        assert_eq!(
            classify("Memcpy HtoD (Pageable -> Device)", Activity::Memcpy),
            KernelClass::Memory
        );
        assert_eq!(
            classify("Memset (Device)", Activity::Memset),
            KernelClass::Memory
        );
        assert_eq!(
            classify("Memcpy PtoP (Device -> Device)", Activity::Memcpy),
            KernelClass::Communication
        );
    }

    #[test]
    fn collective_kinds_from_names_and_args() {
        assert_eq!(
            coll_kind("ncclKernel_AllReduce_RING_LL_Sum_float"),
            CollKind::AllReduce
        );
        assert_eq!(
            coll_kind("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL"),
            CollKind::ReduceScatter
        );
        assert_eq!(
            coll_kind("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"),
            CollKind::AllToAll
        );
        assert_eq!(
            coll_kind("ncclKernel_Broadcast_RING_LL_Sum_int8_t"),
            CollKind::Broadcast
        );
        assert_eq!(
            coll_kind("ncclDevKernel_Reduce_Sum_f32_RING_LL"),
            CollKind::Reduce
        );
        assert_eq!(coll_kind("_allgather_base"), CollKind::AllGather);
        assert_eq!(
            coll_kind("allgather_into_tensor_coalesced"),
            CollKind::AllGather
        );
        assert_eq!(
            coll_kind("reduce_scatter_tensor_coalesced"),
            CollKind::ReduceScatter
        );
        assert_eq!(coll_kind("all_to_all"), CollKind::AllToAll);
        assert_eq!(coll_kind("send"), CollKind::SendRecv);
        assert_eq!(coll_kind("allreduce"), CollKind::AllReduce);
        assert_eq!(coll_kind("barrier"), CollKind::Unknown);
    }

    #[test]
    fn dtype_sizes() {
        assert_eq!(dtype_size("Float"), Some(4));
        assert_eq!(dtype_size("BFloat16"), Some(2));
        assert_eq!(dtype_size("c10::Half"), Some(2));
        assert_eq!(dtype_size("Long"), Some(8));
        assert_eq!(dtype_size("Float8_e4m3fn"), Some(1));
        assert_eq!(dtype_size("mystery"), None);
    }
}
