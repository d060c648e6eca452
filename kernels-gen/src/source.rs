//! The source text of the generated kernels, compiled without any device, for snapshot tests.
//!
//! Kernels are defined against a fixed, GPU-like set of device properties and compiled with
//! CubeCL's CUDA C++ and WGSL compilers. Entry points carry an 8-hex-digit hash of the kernel's
//! identity, which [`redact_hashes`] replaces so snapshots stay stable.

use std::sync::Arc;

use cubecl::Compiler;
use cubecl::ir::{AddressType, DeviceProperties, HardwareProperties, MemoryDeviceProperties};
use cubecl::prelude::*;

use crate::dense_set::DenseTiles;
use crate::kernels::dense::{
    ScoreEpilogue, adversarial::adversarial_grad, labels::label_corrections, margin::margin_grad,
    panels::query_panels, query_grad::dense_query_grad, scores::dense_scores,
    softmax::softmax_grad, table_grad::dense_table_grad,
};
use crate::kernels::{
    apply::fused_apply, copy::copy_rows, gather::gather_rows, update::UpdateRule,
};
use crate::{DType, KernelError, TableConfig, with_dtype};

/// The languages kernels can be printed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    /// CUDA C++ (what the `cuda` runtime compiles).
    CudaCpp,
    /// WGSL (what the `wgpu` runtime compiles); cannot express `bf16`.
    Wgsl,
}

impl Language {
    /// Whether kernels over `dtype` can be printed in this language.
    pub fn supports(self, dtype: DType) -> bool {
        !(self == Language::Wgsl && dtype == DType::BF16)
    }

    /// File-name friendly name.
    pub fn name(self) -> &'static str {
        match self {
            Language::CudaCpp => "cuda",
            Language::Wgsl => "wgsl",
        }
    }
}

/// Units per cube and vector width the snapshots are printed with.
const SNAPSHOT_UNITS: u32 = 256;
/// Vector width the snapshots are printed with.
pub const SNAPSHOT_VECTOR: usize = 4;

/// The fixed, GPU-like device properties snapshots are compiled against.
pub fn snapshot_properties() -> Arc<DeviceProperties> {
    let hardware = HardwareProperties {
        load_width: 128,
        vector_register_count: None,
        plane_size_min: 32,
        plane_size_max: 32,
        max_bindings: 32,
        max_shared_memory_size: 49152,
        max_cube_count: (65535, 65535, 65535),
        max_units_per_cube: 1024,
        max_cube_dim: (1024, 1024, 64),
        num_streaming_multiprocessors: None,
        num_cpu_cores: None,
        last_level_cache_size: None,
        num_tensor_cores: None,
        min_tensor_cores_dim: None,
        max_vector_size: 16,
        cube_mma_reserved_shared_memory: 0,
    };
    Arc::new(DeviceProperties::new(
        Default::default(),
        MemoryDeviceProperties::new(1 << 30, 32),
        hardware,
        cubecl::profile::TimingMethod::System,
        Default::default(),
    ))
}

/// The launch settings snapshots are compiled with (256 units per cube, unchecked).
pub fn snapshot_settings() -> KernelSettings {
    KernelSettings::new(
        CubeDim::new_1d(SNAPSHOT_UNITS).into(),
        ExecutionMode::Unchecked,
        AddressType::U32,
    )
}

/// Compiles a kernel definition to `language` and redacts its entry point's hash.
pub fn compile(definition: KernelDefinition, language: Language) -> Result<String, KernelError> {
    let text = match language {
        Language::CudaCpp => {
            let mut compiler =
                cubecl_cpp::shared::CppCompiler::<cubecl_cpp::target::Cuda>::default();
            Compiler::compile(&mut compiler, definition, &Default::default())
                .map_err(|e| KernelError::Runtime(format!("{e:?}")))?
                .to_string()
        }
        #[cfg(feature = "wgpu")]
        Language::Wgsl => {
            let mut compiler = cubecl::wgpu::WgslCompiler;
            Compiler::compile(&mut compiler, definition, &Default::default())
                .map_err(|e| KernelError::Runtime(format!("{e:?}")))?
                .to_string()
        }
        #[cfg(not(feature = "wgpu"))]
        Language::Wgsl => {
            drop(definition);
            return Err(KernelError::DeviceUnavailable(
                "WGSL needs the `wgpu` feature".into(),
            ));
        }
    };
    Ok(redact_hashes(&text))
}

/// Refuses a dtype `language` cannot express.
pub fn refuse(dtype: DType, language: Language) -> Result<(), KernelError> {
    if language.supports(dtype) {
        return Ok(());
    }
    Err(KernelError::UnsupportedDType {
        dtype,
        runtime: language.name().into(),
        missing: "a type for it in the language".into(),
        supported: "f32, f16".into(),
    })
}

fn buffer() -> BufferCompilationArg {
    BufferCompilationArg { inplace: None }
}

/// The fused-apply kernel `config` selects, printed in `language`.
pub fn apply_source(config: &TableConfig, language: Language) -> Result<String, KernelError> {
    config.validate()?;
    refuse(config.weight_dtype, language)?;
    refuse(config.state_dtype, language)?;
    let rule = UpdateRule::new(config);
    let b = buffer;
    with_dtype!(config.weight_dtype, F => with_dtype!(config.state_dtype, S => {
        let kernel = fused_apply::FusedApply::<F, S>::new(
            snapshot_settings(), snapshot_properties(), Arc::new(Default::default()),
            b(), b(), b(), b(), b(), b(), b(), b(), b(), (), (), (), (),
            SNAPSHOT_VECTOR, rule,
        );
        compile(kernel.define(), language)
    }))
}

/// The gather kernel for `dtype`, printed in `language`.
pub fn gather_source(dtype: DType, language: Language) -> Result<String, KernelError> {
    refuse(dtype, language)?;
    with_dtype!(dtype, F => {
        let kernel = gather_rows::GatherRows::<F>::new(
            snapshot_settings(), snapshot_properties(), Arc::new(Default::default()),
            buffer(), buffer(), buffer(), (), (), SNAPSHOT_VECTOR,
        );
        compile(kernel.define(), language)
    })
}

/// The row-copy kernel of the read-write cache (one for every dtype: it moves 32-bit words),
/// printed in `language`.
pub fn copy_source(language: Language) -> Result<String, KernelError> {
    let kernel = copy_rows::CopyRows::new(
        snapshot_settings(),
        snapshot_properties(),
        Arc::new(Default::default()),
        buffer(),
        buffer(),
        buffer(),
        buffer(),
        (),
        (),
    );
    compile(kernel.define(), language)
}

/// The dense kernels (see [`crate::kernels::dense`]) with GPU tiles for rows of 128, named:
/// the score kernel per epilogue and the label and query-gradient kernels for tables of
/// `dtype`; the softmax, table-gradient and query-panel kernels (only `f32` in, no table) when
/// `dtype` is `f32`.
pub fn dense_sources(
    dtype: DType,
    language: Language,
) -> Result<Vec<(&'static str, String)>, KernelError> {
    refuse(dtype, language)?;
    let b = buffer;
    let target = || Arc::new(Default::default());
    let (settings, properties) = (snapshot_settings, snapshot_properties);
    let tiles = DenseTiles::gpu(128 / SNAPSHOT_VECTOR);
    let mut out = Vec::new();
    for (name, epilogue) in [
        ("dense_scores", ScoreEpilogue::Scores),
        ("dense_scores_bce", ScoreEpilogue::BinaryCrossEntropy),
        ("dense_scores_softmax_stats", ScoreEpilogue::SoftmaxStats),
        ("dense_scores_count_better", ScoreEpilogue::CountBetter),
    ] {
        let source = with_dtype!(dtype, F => compile(
            dense_scores::DenseScores::<F>::new(
                settings(), properties(), target(),
                b(), b(), b(), b(), (), (), (), (), (), (), (), (),
                SNAPSHOT_VECTOR, tiles.scores, epilogue, tiles.polynomial_exp,
            ).define(),
            language,
        ))?;
        out.push((name, source));
    }
    let labels = with_dtype!(dtype, F => compile(
        label_corrections::LabelCorrections::<F>::new(
            settings(), properties(), target(),
            b(), b(), b(), b(), b(), b(), b(), (), (), (), (), (), (),
            SNAPSHOT_VECTOR, true,
        ).define(),
        language,
    ))?;
    out.push(("label_corrections", labels));
    let query_grad = with_dtype!(dtype, F => compile(
        dense_query_grad::DenseQueryGrad::<F>::new(
            settings(), properties(), target(),
            b(), b(), b(), b(), b(), b(), b(), b(), (), (), (), (), (), (), (), (), (), (),
            SNAPSHOT_VECTOR, tiles.query_grad, false, tiles.polynomial_exp,
        ).define(),
        language,
    ))?;
    out.push(("dense_query_grad", query_grad));
    if dtype != DType::F32 {
        return Ok(out);
    }
    let softmax = softmax_grad::SoftmaxGrad::new(
        settings(),
        properties(),
        target(),
        b(),
        b(),
        (),
        (),
        (),
        (),
        (),
        SNAPSHOT_VECTOR,
        tiles.scores.vectors,
        tiles.polynomial_exp,
    );
    out.push(("softmax_grad", compile(softmax.define(), language)?));
    let adversarial = adversarial_grad::AdversarialGrad::new(
        settings(),
        properties(),
        target(),
        b(),
        b(),
        b(),
        (),
        (),
        (),
        (),
        (),
        SNAPSHOT_VECTOR,
        tiles.scores.vectors,
        tiles.polynomial_exp,
    );
    out.push(("adversarial_grad", compile(adversarial.define(), language)?));
    let margin = margin_grad::MarginGrad::new(
        settings(),
        properties(),
        target(),
        b(),
        b(),
        b(),
        b(),
        b(),
        b(),
        (),
        (),
        (),
        (),
        (),
        SNAPSHOT_VECTOR,
        tiles.scores.vectors,
    );
    out.push(("margin_grad", compile(margin.define(), language)?));
    let table_grad = dense_table_grad::DenseTableGrad::new(
        settings(),
        properties(),
        target(),
        b(),
        b(),
        b(),
        (),
        (),
        (),
        (),
        (),
        (),
        (),
        (),
        SNAPSHOT_VECTOR,
        tiles.table_grad,
    );
    out.push(("dense_table_grad", compile(table_grad.define(), language)?));
    let panels = query_panels::QueryPanels::new(
        settings(),
        properties(),
        target(),
        b(),
        b(),
        (),
        (),
        (),
        (),
        (),
    );
    out.push(("query_panels", compile(panels.define(), language)?));
    Ok(out)
}

/// The names kernel entry points start with: rowshard's kernels and those `#[scoring]`
/// generates.
const ENTRY_POINTS: &[&str] = &[
    "gather_rows",
    "copy_rows",
    "fused_apply",
    "dense_scores",
    "dense_table_grad",
    "dense_query_grad",
    "softmax_grad",
    "adversarial_grad",
    "margin_grad",
    "label_corrections",
    "query_panels",
    "forward",
    "backward",
    "query",
];

/// Replaces the 8-hex-digit hash suffix of every kernel entry-point name with `HASH`.
pub fn redact_hashes(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let bytes = source.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let is_suffix = bytes[i] == b'_'
            && i + 9 <= bytes.len()
            && bytes[i + 1..i + 9]
                .iter()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            && bytes
                .get(i + 9)
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
            && entry_point_name(&source[..i]);
        if is_suffix {
            out.push_str("_HASH");
            i += 9;
        } else {
            let c = source[i..].chars().next().unwrap_or('\0');
            out.push(c);
            i += c.len_utf8().max(1);
        }
    }
    out
}

/// Whether the identifier that ends at the end of `before` is a kernel entry point.
fn entry_point_name(before: &str) -> bool {
    let start = before
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |p| p + 1);
    let ident = &before[start..];
    ENTRY_POINTS.iter().any(|e| ident.starts_with(e))
}
