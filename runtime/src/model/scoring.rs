//! The contract between `#[scoring]` and the runtime: what the macro generates for a scoring
//! function ([`ScoringFunction`]: its kernels, how to launch and print them, its `f64` host
//! versions), and [`ScoreKernels`], which compiles and runs them for one model.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cubecl::bytes::Bytes;
use cubecl::ir::DeviceProperties;
use cubecl::prelude::{Client, KernelDefinition, KernelSettings};
use cubecl::server::Handle;
use rowshard_kernels::element::runtime_error;
use rowshard_kernels::shape::{CPU_UNITS, LaunchShape, vector_size};
use rowshard_kernels::source::{self, Language};
use rowshard_kernels::{DType, KernelError};

/// The kernels of a scoring function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScoreKernel {
    /// Triples → scores.
    Forward,
    /// Triples and the gradient of each score → the gradient of each row.
    Backward,
    /// (head, relation) → `q` with `score = ⟨q, t⟩` (scores linear in the tail only).
    Query,
}

impl ScoreKernel {
    /// Every kernel.
    pub const ALL: [ScoreKernel; 3] = [
        ScoreKernel::Forward,
        ScoreKernel::Backward,
        ScoreKernel::Query,
    ];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            ScoreKernel::Forward => "forward",
            ScoreKernel::Backward => "backward",
            ScoreKernel::Query => "query",
        }
    }
}

/// A scoring function's value and gradient at one triple, in `f64` on the host.
#[derive(Clone, Debug, PartialEq)]
pub struct HostGradient {
    /// The score.
    pub score: f64,
    /// `∂score/∂h`.
    pub head: Vec<f64>,
    /// `∂score/∂r`.
    pub relation: Vec<f64>,
    /// `∂score/∂t`.
    pub tail: Vec<f64>,
}

/// What a generated launch needs: buffers, sizes and the launch shape. Built by [`ScoreKernels`].
#[doc(hidden)]
pub struct ScoreLaunch {
    pub client: Client,
    pub shape: LaunchShape,
    pub vector_size: usize,
    pub entity_dtype: DType,
    pub relation_dtype: DType,
    pub entities: Handle,
    pub entity_len: usize,
    pub relations: Handle,
    pub relation_len: usize,
    pub heads: Handle,
    pub rels: Handle,
    pub tails: Handle,
    pub triples: usize,
    pub upstream: Handle,
    /// Forward: scores; backward: dh, dr, dt; query: q.
    pub outputs: [Handle; 3],
    pub output_lens: [usize; 3],
    pub seg_vectors: u32,
    pub seg_len: f32,
}

/// What printing a generated kernel's source needs (see [`kernel_source`]).
#[doc(hidden)]
pub struct DefineContext {
    pub settings: KernelSettings,
    pub properties: Arc<DeviceProperties>,
    pub vector_size: usize,
    pub entity_dtype: DType,
    pub relation_dtype: DType,
}

/// A scoring function, as `#[scoring]` generates it from `fn score(h: Row, r: Row, t: Row)`.
pub trait ScoringFunction: 'static {
    /// The model struct's name.
    const NAME: &'static str;
    /// Segments a row is cut into (2 for halves, 4 for quarters): `dim` must be a multiple.
    const SEGMENTS: usize;
    /// Relation rows are `dim · num / den` long.
    const RELATION_WIDTH: (usize, usize);
    /// `Ok` when the score is linear in the tail (it has a query kernel); else why not.
    const TAIL_LINEAR: Result<(), &'static str>;
    /// Whether the score is, by its syntax, a polynomial of degree 2 in the tail (a squared
    /// distance) or linear plus an offset: `c(h, r) + ⟨a(h, r), t⟩ + (degree 2 in t)`. When the
    /// degree-2 part is `κ‖t‖²` (checked numerically, [`super::Augmented`]) it scores against
    /// every entity as a dense product of augmented rows.
    const TAIL_QUADRATIC: bool = false;

    /// Launches one of the kernels.
    fn launch(kernel: ScoreKernel, launch: &ScoreLaunch) -> Result<(), KernelError>;

    /// The kernel's definition, for printing its source; `None` for a query it does not have.
    fn define(kernel: ScoreKernel, context: &DefineContext) -> Option<KernelDefinition>;

    /// The score of one triple, in `f64`.
    fn score_host(h: &[f64], r: &[f64], t: &[f64]) -> f64;

    /// The score and its gradient at one triple, in `f64`.
    fn gradient_host(h: &[f64], r: &[f64], t: &[f64]) -> HostGradient;
}

/// The relation row length of a model with `dim`-wide entity rows.
pub fn relation_dim<S: ScoringFunction>(dim: usize) -> usize {
    let (num, den) = S::RELATION_WIDTH;
    dim * num / den
}

/// Checks that `dim` suits `S`'s splits.
pub fn check_dim<S: ScoringFunction>(dim: usize) -> Result<(), KernelError> {
    if dim == 0 || !dim.is_multiple_of(S::SEGMENTS) {
        return Err(KernelError::InvalidShape(format!(
            "{} needs dim to be a positive multiple of {} (its rows are split into {} parts); got {dim}",
            S::NAME,
            S::SEGMENTS,
            S::SEGMENTS
        )));
    }
    Ok(())
}

/// Rows on the device that a scoring kernel reads.
#[derive(Clone, Debug)]
pub struct DeviceRows {
    /// The buffer.
    pub handle: Handle,
    /// Its length in elements.
    pub len: usize,
    /// Its element type.
    pub dtype: DType,
}

/// Which rows each triple reads: indices into the entity and relation rows.
#[derive(Clone, Debug)]
pub struct DeviceTriples {
    /// Head row of each triple.
    pub heads: Handle,
    /// Relation row of each triple.
    pub relations: Handle,
    /// Tail row of each triple (unused by the query kernel).
    pub tails: Handle,
    /// How many triples.
    pub count: usize,
}

/// `S`'s kernels compiled for one client and row length.
pub struct ScoreKernels<S: ScoringFunction> {
    client: Client,
    dim: usize,
    relation_dim: usize,
    vector_size: usize,
    jit_time: Duration,
    _scoring: PhantomData<S>,
}

impl<S: ScoringFunction> ScoreKernels<S> {
    /// Compiles `S`'s kernels for `dim`-wide rows read as `entity_dtype`/`relation_dtype`, by
    /// running each once.
    pub fn new(
        client: &Client,
        dim: usize,
        entity_dtype: DType,
        relation_dtype: DType,
    ) -> Result<Self, KernelError> {
        check_dim::<S>(dim)?;
        let seg_len = dim / S::SEGMENTS;
        let mut kernels = Self {
            client: client.clone(),
            dim,
            relation_dim: relation_dim::<S>(dim),
            vector_size: vector_size(client, seg_len),
            jit_time: Duration::ZERO,
            _scoring: PhantomData,
        };
        let start = Instant::now();
        let ent = kernels.upload_rows(&vec![0.5; dim], entity_dtype);
        let rel = kernels.upload_rows(&vec![0.5; kernels.relation_dim], relation_dtype);
        // One triple, and as many as a launch has units on the `cpu` runtime: the launch shapes
        // of a single triple and of any batch (see `LaunchShape::for_rows`).
        for n in [1, CPU_UNITS as usize] {
            let zeros = vec![0u32; n];
            let triples = kernels.upload_triples(&zeros, &zeros, &zeros);
            let scores = kernels.forward(&ent, &rel, &triples);
            let upstream = client.create(Bytes::from_elems(vec![1.0f32; n]));
            let grads = kernels.backward(&ent, &rel, &triples, &upstream);
            if S::TAIL_LINEAR.is_ok() {
                kernels.query(&ent, &rel, &triples)?;
            }
            client.read_one(scores).map_err(runtime_error)?;
            client.read_one(grads[2].clone()).map_err(runtime_error)?;
        }
        kernels.jit_time = start.elapsed();
        Ok(kernels)
    }

    /// How long compiling and the first launch of every kernel took.
    pub fn jit_time(&self) -> Duration {
        self.jit_time
    }

    /// Entity row length.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Relation row length.
    pub fn relation_dim(&self) -> usize {
        self.relation_dim
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Uploads `f32` rows, stored as `dtype`.
    pub fn upload_rows(&self, values: &[f32], dtype: DType) -> DeviceRows {
        DeviceRows {
            handle: self
                .client
                .create(Bytes::from_bytes_vec(dtype.encode(values))),
            len: values.len(),
            dtype,
        }
    }

    /// Uploads `f32` rows as they are (no copy into another dtype).
    pub fn upload_f32(&self, values: Vec<f32>) -> DeviceRows {
        let len = values.len();
        DeviceRows {
            handle: self.client.create(Bytes::from_elems(values)),
            len,
            dtype: DType::F32,
        }
    }

    /// Uploads `values` (`f32`) into a buffer with room for `room` more values after them,
    /// for [`ScoreKernels::write_f32`] to fill later.
    pub fn upload_f32_with_room(&self, values: &[f32], room: usize) -> DeviceRows {
        let len = values.len() + room;
        let handle = self.client.empty(len.max(1) * 4);
        self.write_f32(&handle, 0, values);
        DeviceRows {
            handle,
            len,
            dtype: DType::F32,
        }
    }

    /// Writes `values` into the `f32` buffer `handle` from value `at` on.
    pub fn write_f32(&self, handle: &Handle, at: usize, values: &[f32]) {
        if values.is_empty() {
            return;
        }
        let (start, size) = (4 * at as u64, 4 * values.len() as u64);
        let end = handle.size_in_used() - start - size;
        let place = handle.clone().offset_start(start).offset_end(end);
        self.client
            .write(&place, Bytes::from_elems(values.to_vec()));
    }

    /// Uploads triple indices.
    pub fn upload_triples(&self, heads: &[u32], relations: &[u32], tails: &[u32]) -> DeviceTriples {
        let up = |v: &[u32]| self.client.create(Bytes::from_elems(v.to_vec()));
        DeviceTriples {
            heads: up(heads),
            relations: up(relations),
            tails: up(tails),
            count: heads.len(),
        }
    }

    fn launch(
        &self,
        kernel: ScoreKernel,
        ent: &DeviceRows,
        rel: &DeviceRows,
        triples: &DeviceTriples,
        upstream: Option<&Handle>,
        outputs: [(Handle, usize); 3],
    ) -> Result<(), KernelError> {
        if triples.count == 0 {
            return Ok(());
        }
        let seg_len = self.dim / S::SEGMENTS;
        let [(a, la), (b, lb), (c, lc)] = outputs;
        let launch = ScoreLaunch {
            client: self.client.clone(),
            shape: LaunchShape::for_rows(&self.client, triples.count),
            vector_size: self.vector_size,
            entity_dtype: ent.dtype,
            relation_dtype: rel.dtype,
            entities: ent.handle.clone(),
            entity_len: ent.len,
            relations: rel.handle.clone(),
            relation_len: rel.len,
            heads: triples.heads.clone(),
            rels: triples.relations.clone(),
            tails: triples.tails.clone(),
            triples: triples.count,
            upstream: upstream.cloned().unwrap_or_else(|| a.clone()),
            outputs: [a, b, c],
            output_lens: [la, lb, lc],
            seg_vectors: (seg_len / self.vector_size) as u32,
            seg_len: seg_len as f32,
        };
        S::launch(kernel, &launch)
    }

    fn empty(&self, len: usize) -> Handle {
        self.client.empty(len.max(1) * 4)
    }

    /// Enqueues the scores of `triples` (`f32`, one per triple).
    pub fn forward(&self, ent: &DeviceRows, rel: &DeviceRows, triples: &DeviceTriples) -> Handle {
        let out = self.empty(triples.count);
        let unused = (out.clone(), triples.count);
        self.launch(
            ScoreKernel::Forward,
            ent,
            rel,
            triples,
            None,
            [(out.clone(), triples.count), unused.clone(), unused],
        )
        .expect("every scoring function has a forward kernel");
        out
    }

    /// Enqueues `upstream[k] · ∂score_k/∂(h, r, t)`: three `f32` buffers of one row per triple.
    pub fn backward(
        &self,
        ent: &DeviceRows,
        rel: &DeviceRows,
        triples: &DeviceTriples,
        upstream: &Handle,
    ) -> [Handle; 3] {
        let n = triples.count;
        let (dh, dr, dt) = (
            self.empty(n * self.dim),
            self.empty(n * self.relation_dim),
            self.empty(n * self.dim),
        );
        self.launch(
            ScoreKernel::Backward,
            ent,
            rel,
            triples,
            Some(upstream),
            [
                (dh.clone(), n * self.dim),
                (dr.clone(), n * self.relation_dim),
                (dt.clone(), n * self.dim),
            ],
        )
        .expect("every scoring function has a backward kernel");
        [dh, dr, dt]
    }

    /// Enqueues the query vectors of `triples`' heads and relations (`f32`, one row each).
    pub fn query(
        &self,
        ent: &DeviceRows,
        rel: &DeviceRows,
        triples: &DeviceTriples,
    ) -> Result<Handle, KernelError> {
        if let Err(why) = S::TAIL_LINEAR {
            return Err(KernelError::InvalidShape(format!(
                "{} has no query kernel: its score is not linear in the tail ({why})",
                S::NAME
            )));
        }
        let n = triples.count;
        let q = self.empty(n * self.dim);
        let unused = (q.clone(), n * self.dim);
        self.launch(
            ScoreKernel::Query,
            ent,
            rel,
            triples,
            None,
            [(q.clone(), n * self.dim), unused.clone(), unused],
        )?;
        Ok(q)
    }

    /// Reads the first `len` values of an `f32` buffer back (none without reading when `len`
    /// is 0: buffers for empty batches hold a placeholder).
    pub fn read(&self, handle: Handle, len: usize) -> Result<Vec<f32>, KernelError> {
        let [values] = self.read_each([(handle, len)])?;
        Ok(values)
    }

    /// [`ScoreKernels::read`] of several buffers, in one round trip to the device.
    pub fn read_each<const N: usize>(
        &self,
        reads: [(Handle, usize); N],
    ) -> Result<[Vec<f32>; N], KernelError> {
        let values = rowshard_kernels::wait::read_f32(&self.client, reads.into())?;
        Ok(values.try_into().expect("one value list per read"))
    }
}

/// The source of `S`'s `kernel` in `language`, with rows stored as `dtype` (entities and
/// relations), compiled without a device — for snapshot tests. `Ok(None)` for a query kernel
/// the function does not have.
pub fn kernel_source<S: ScoringFunction>(
    kernel: ScoreKernel,
    dtype: DType,
    language: Language,
) -> Result<Option<String>, KernelError> {
    source::refuse(dtype, language)?;
    let context = DefineContext {
        settings: source::snapshot_settings(),
        properties: source::snapshot_properties(),
        vector_size: source::SNAPSHOT_VECTOR,
        entity_dtype: dtype,
        relation_dtype: dtype,
    };
    S::define(kernel, &context)
        .map(|definition| source::compile(definition, language))
        .transpose()
}

/// Launches one of a generated module's kernels (used by `#[scoring]`'s output).
#[doc(hidden)]
#[macro_export]
macro_rules! launch_scoring {
    ($module:ident, $kernel:expr, $launch:expr $(, $query:ident)?) => {{
        let launch: &$crate::__private::ScoreLaunch = $launch;
        match $kernel {
            $crate::__private::ScoreKernel::Forward => $crate::launch_scoring!(@forward $module, launch),
            $crate::__private::ScoreKernel::Backward => $crate::launch_scoring!(@backward $module, launch),
            $crate::__private::ScoreKernel::Query => $crate::launch_scoring!(@query $module, launch $(, $query)?),
        }
    }};
    (@forward $module:ident, $l:ident) => {{
        use $crate::__private::cubecl::prelude::BufferArg;
        $crate::__private::with_dtype!($l.entity_dtype, E => $crate::__private::with_dtype!($l.relation_dtype, R => {
            // SAFETY: ScoreKernels built every index buffer from rows it checked against the row
            // buffers, sized every output for one value (or row) per triple, and each unit
            // writes only its own triples' outputs.
            unsafe {
                $module::forward::launch_unchecked::<E, R>(
                    &$l.client, $l.shape.count(), $l.shape.dim(), $l.vector_size,
                    BufferArg::from_raw_parts($l.entities.clone(), $l.entity_len),
                    BufferArg::from_raw_parts($l.relations.clone(), $l.relation_len),
                    BufferArg::from_raw_parts($l.heads.clone(), $l.triples),
                    BufferArg::from_raw_parts($l.rels.clone(), $l.triples),
                    BufferArg::from_raw_parts($l.tails.clone(), $l.triples),
                    BufferArg::from_raw_parts($l.outputs[0].clone(), $l.output_lens[0]),
                    $l.seg_vectors, $l.seg_len, $l.shape.rows_per_unit,
                )
            }
        }));
        ::core::result::Result::Ok(())
    }};
    (@backward $module:ident, $l:ident) => {{
        use $crate::__private::cubecl::prelude::BufferArg;
        $crate::__private::with_dtype!($l.entity_dtype, E => $crate::__private::with_dtype!($l.relation_dtype, R => {
            // SAFETY: as for the forward kernel.
            unsafe {
                $module::backward::launch_unchecked::<E, R>(
                    &$l.client, $l.shape.count(), $l.shape.dim(), $l.vector_size,
                    BufferArg::from_raw_parts($l.entities.clone(), $l.entity_len),
                    BufferArg::from_raw_parts($l.relations.clone(), $l.relation_len),
                    BufferArg::from_raw_parts($l.heads.clone(), $l.triples),
                    BufferArg::from_raw_parts($l.rels.clone(), $l.triples),
                    BufferArg::from_raw_parts($l.tails.clone(), $l.triples),
                    BufferArg::from_raw_parts($l.upstream.clone(), $l.triples),
                    BufferArg::from_raw_parts($l.outputs[0].clone(), $l.output_lens[0]),
                    BufferArg::from_raw_parts($l.outputs[1].clone(), $l.output_lens[1]),
                    BufferArg::from_raw_parts($l.outputs[2].clone(), $l.output_lens[2]),
                    $l.seg_vectors, $l.seg_len, $l.shape.rows_per_unit,
                )
            }
        }));
        ::core::result::Result::Ok(())
    }};
    (@query $module:ident, $l:ident, query) => {{
        use $crate::__private::cubecl::prelude::BufferArg;
        $crate::__private::with_dtype!($l.entity_dtype, E => $crate::__private::with_dtype!($l.relation_dtype, R => {
            // SAFETY: as for the forward kernel.
            unsafe {
                $module::query::launch_unchecked::<E, R>(
                    &$l.client, $l.shape.count(), $l.shape.dim(), $l.vector_size,
                    BufferArg::from_raw_parts($l.entities.clone(), $l.entity_len),
                    BufferArg::from_raw_parts($l.relations.clone(), $l.relation_len),
                    BufferArg::from_raw_parts($l.heads.clone(), $l.triples),
                    BufferArg::from_raw_parts($l.rels.clone(), $l.triples),
                    BufferArg::from_raw_parts($l.outputs[0].clone(), $l.output_lens[0]),
                    $l.seg_vectors, $l.seg_len, $l.shape.rows_per_unit,
                )
            }
        }));
        ::core::result::Result::Ok(())
    }};
    (@query $module:ident, $l:ident) => {
        ::core::result::Result::Err($crate::__private::KernelError::InvalidShape(
            "this scoring function is not linear in the tail: it has no query kernel".into(),
        ))
    };
}

/// Builds one of a generated module's kernel definitions (used by `#[scoring]`'s output).
#[doc(hidden)]
#[macro_export]
macro_rules! define_scoring {
    ($module:ident, $kernel:expr, $context:expr $(, $query:ident)?) => {{
        let c: &$crate::__private::DefineContext = $context;
        let b = || $crate::__private::cubecl::prelude::BufferCompilationArg { inplace: ::core::option::Option::None };
        let target = || $crate::__private::Arc::new(::core::default::Default::default());
        match $kernel {
            $crate::__private::ScoreKernel::Forward => ::core::option::Option::Some(
                $crate::__private::with_dtype!(c.entity_dtype, E => $crate::__private::with_dtype!(c.relation_dtype, R => {
                    use $crate::__private::cubecl::prelude::*;
                    $module::forward::Forward::<E, R>::new(
                        c.settings.clone(), c.properties.clone(), target(),
                        b(), b(), b(), b(), b(), b(), (), (), (), c.vector_size,
                    ).define()
                })),
            ),
            $crate::__private::ScoreKernel::Backward => ::core::option::Option::Some(
                $crate::__private::with_dtype!(c.entity_dtype, E => $crate::__private::with_dtype!(c.relation_dtype, R => {
                    use $crate::__private::cubecl::prelude::*;
                    $module::backward::Backward::<E, R>::new(
                        c.settings.clone(), c.properties.clone(), target(),
                        b(), b(), b(), b(), b(), b(), b(), b(), b(), (), (), (), c.vector_size,
                    ).define()
                })),
            ),
            $crate::__private::ScoreKernel::Query => $crate::define_scoring!(@query $module, c, b, target $(, $query)?),
        }
    }};
    (@query $module:ident, $c:ident, $b:ident, $target:ident, query) => {
        ::core::option::Option::Some(
            $crate::__private::with_dtype!($c.entity_dtype, E => $crate::__private::with_dtype!($c.relation_dtype, R => {
                use $crate::__private::cubecl::prelude::*;
                $module::query::Query::<E, R>::new(
                    $c.settings.clone(), $c.properties.clone(), $target(),
                    $b(), $b(), $b(), $b(), $b(), (), (), (), $c.vector_size,
                ).define()
            })),
        )
    };
    (@query $module:ident, $c:ident, $b:ident, $target:ident) => {
        ::core::option::Option::None
    };
}
