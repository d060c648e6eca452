//! The model: a sharded entity table, a replicated relation table, and a scoring function's
//! kernels.

use cubecl::prelude::Client;
use rowshard_kernels::{DType, DenseKernels, KernelError, LocalTable};

use super::augmented::{Augmented, dense_form};
use super::scoring::{DeviceRows, ScoreKernels, ScoringFunction, check_dim, relation_dim};
use super::settings::ModelSpec;
use crate::agree::{agree_on, agree_on_input};
use crate::comm::Communicator;
use crate::error::{InputError, ShardError};
use crate::objective::Objective;
use crate::sharded::{ShardedTable, ShardedTableSpec};
use crate::step::{StepClock, StepPhase, StepTimings};

/// A knowledge-graph-embedding model whose entity table is row-sharded over the ranks of a
/// communicator and whose relation table is replicated on each; `S` is its scoring function.
///
/// Every method that touches the entity table is a collective: all ranks call it, each with its
/// own part of the batch (possibly empty).
pub struct ShardedModel<'c, S: ScoringFunction> {
    pub(crate) comm: &'c dyn Communicator,
    pub(crate) spec: ModelSpec,
    pub(crate) entities: ShardedTable<'c>,
    pub(crate) relations: LocalTable,
    pub(crate) kernels: ScoreKernels<S>,
    /// The dense scoring kernels: scores linear in the tail, or quadratic with augmented rows.
    pub(crate) dense: Option<DenseKernels>,
    /// How a score quadratic in the tail reaches the dense kernels.
    pub(crate) augmented: Option<Augmented>,
    /// Why the score does not reach the dense kernels, when it does not.
    pub(crate) dense_refusal: Option<String>,
    pub(crate) relation_dim: usize,
    /// What a training step optimises.
    objective: Objective,
    /// Where the steps' time goes, by phase.
    pub(crate) step_timings: StepTimings,
    pub(crate) step_clock: StepClock,
}

/// Whether a model's score reaches the dense kernels (as it is, or with augmented rows), which
/// steps scoring queries against many entities at once need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DenseSupport {
    /// It does.
    Dense,
    /// It does not.
    Not {
        /// The model (its scoring function's name).
        model: String,
        /// Why not.
        why: String,
    },
}

/// The seed of the relation table, apart from the entity table's.
const RELATION_SEED: u64 = 0x5eed_0f7e_1a71_05ed;

impl<'c, S: ScoringFunction> ShardedModel<'c, S> {
    /// Builds this rank's part of the model on `client` after checking that every rank
    /// describes the same model; compiles the scoring kernels (JIT) on the way. A collective.
    pub fn new(
        comm: &'c dyn Communicator,
        client: &Client,
        spec: &ModelSpec,
    ) -> Result<Self, ShardError> {
        let s = &spec.settings;
        let mut fields = vec![
            ("model".to_string(), S::NAME.to_string()),
            ("entities".into(), spec.entities.to_string()),
            ("relations".into(), spec.relations.to_string()),
            ("dim".into(), s.dim.to_string()),
            ("dtype".into(), s.dtype.to_string()),
            ("seed".into(), spec.seed.to_string()),
            ("init".into(), format!("{:?}", s.init)),
        ];
        fields.extend(s.relation.describe("relation"));
        let named: Vec<(&str, String)> = fields
            .iter()
            .map(|(n, v)| (n.as_str(), v.clone()))
            .collect();
        agree_on(comm, &named)?;
        // Every rank has agreed on these, so every rank refuses alike.
        check_dim::<S>(s.dim)?;
        if spec.relations == 0 {
            return Err(
                KernelError::InvalidShape("a model needs at least one relation".into()).into(),
            );
        }
        let dim = s.dim;
        let entities = ShardedTable::new(
            comm,
            client,
            &ShardedTableSpec {
                rows: spec.entities,
                config: s.entity.table_config(s.dtype, dim, s.stochastic_rounding),
                hyper: s.entity.hyper.clone(),
                scheme: s.partition.clone(),
                init: s.init.initializer(spec.entities, dim, spec.seed),
                state_location: s.state_location,
                cache: crate::cache::CachePolicy::None,
            },
        )?;
        let rdim = relation_dim::<S>(dim);
        let relation_init = s
            .init
            .initializer(spec.relations, rdim, spec.seed ^ RELATION_SEED)
            .values(0, spec.relations, rdim);
        let mut relations = LocalTable::new(
            client,
            s.relation
                .table_config(s.dtype, rdim, s.stochastic_rounding),
            spec.relations,
            &relation_init,
        )?;
        for (name, value) in s.relation.hyper.iter() {
            relations.set_parameter(name, value)?;
        }
        relations.set_seed((spec.seed as u32) ^ 0x7e1a);
        let mut model = Self {
            comm,
            spec: spec.clone(),
            entities,
            relations,
            kernels: ScoreKernels::new(client, dim, DType::F32, s.dtype)?,
            dense: None,
            augmented: None,
            dense_refusal: None,
            relation_dim: rdim,
            objective: Objective::default(),
            step_timings: StepTimings::default(),
            step_clock: StepClock::start(),
        };
        model.entities.set_seed(spec.seed as u32);
        match dense_form::<S>(dim) {
            Ok(None) => model.dense = Some(DenseKernels::new(client, s.dtype, dim)?),
            Ok(Some(form)) => {
                model.dense = Some(DenseKernels::new(client, DType::F32, form.width)?);
                model.augmented = Some(form);
            }
            Err(why) => model.dense_refusal = Some(why),
        }
        Ok(model)
    }

    /// The spec the model was built from (learning rates follow [`ShardedModel::set_lr`]).
    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// The communicator.
    pub fn comm(&self) -> &'c dyn Communicator {
        self.comm
    }

    /// Where this rank's training steps spent their time, by phase.
    pub fn step_timings(&self) -> &StepTimings {
        &self.step_timings
    }

    /// Resets [`ShardedModel::step_timings`] and the entity table's timings.
    pub fn reset_timings(&mut self) {
        self.step_timings = StepTimings::default();
        self.entities.reset_timings();
    }

    /// Charges the time since the last lap of the step to `phase`.
    pub(crate) fn lap(&self, phase: StepPhase) {
        self.step_clock.lap(&self.step_timings, phase);
    }

    /// The sharded entity table.
    pub fn entities(&self) -> &ShardedTable<'c> {
        &self.entities
    }

    /// The sharded entity table, for its API (set_parameter, gather_to_root, …).
    pub fn entities_mut(&mut self) -> &mut ShardedTable<'c> {
        &mut self.entities
    }

    /// This rank's replica of the relation table.
    pub fn relations(&self) -> &LocalTable {
        &self.relations
    }

    /// This rank's replica of the relation table, to restore it; keep the replicas equal.
    pub fn relations_mut(&mut self) -> &mut LocalTable {
        &mut self.relations
    }

    /// Relation row length.
    pub fn relation_dim(&self) -> usize {
        self.relation_dim
    }

    /// How long compiling the scoring kernels took.
    pub fn jit_time(&self) -> std::time::Duration {
        self.kernels.jit_time()
            + self
                .dense
                .as_ref()
                .map_or(std::time::Duration::ZERO, |d| d.jit_time())
    }

    /// What every later [`train_step`](ShardedModel::train_step) optimises, after checking
    /// its values and that every rank sets the same. A collective.
    pub fn set_objective(&mut self, objective: Objective) -> Result<(), ShardError> {
        agree_on(self.comm, &[("the objective", format!("{objective:?}"))])?;
        objective
            .check()
            .map_err(|e| ShardError::Unsupported(e.to_string()))?;
        self.objective = objective;
        Ok(())
    }

    /// What a training step optimises.
    pub fn objective(&self) -> &Objective {
        &self.objective
    }

    /// Whether the model's score reaches the dense kernels.
    pub fn dense_support(&self) -> DenseSupport {
        match &self.dense_refusal {
            None => DenseSupport::Dense,
            Some(why) => DenseSupport::Not {
                model: S::NAME.to_string(),
                why: why.clone(),
            },
        }
    }

    /// The dense kernels, or why the score does not reach them.
    pub(crate) fn dense_kernels(&self) -> Result<&DenseKernels, ShardError> {
        self.dense.as_ref().ok_or_else(|| {
            ShardError::Unsupported(format!(
                "{} against many entities at once: {}",
                S::NAME,
                self.dense_refusal.as_deref().unwrap_or_default()
            ))
        })
    }

    /// Sets both tables' learning rates (a schedule); call it on every rank.
    pub fn set_lr(&mut self, entity: f64, relation: f64) -> Result<(), ShardError> {
        self.spec.settings.entity.set("lr", entity)?;
        self.spec.settings.relation.set("lr", relation)?;
        Ok(())
    }

    /// The relation table's rows as the scoring kernels read them.
    pub(crate) fn relation_rows(&self) -> DeviceRows {
        DeviceRows {
            handle: self.relations.buffers().weights.clone(),
            len: self.relations.rows() * self.relation_dim,
            dtype: self.spec.settings.dtype,
        }
    }

    /// The first relation id outside the table, as an input error.
    pub(crate) fn check_relations(&self, relations: &[u32]) -> Option<InputError> {
        let rows = self.spec.relations as u64;
        relations
            .iter()
            .find(|&&r| r as u64 >= rows)
            .map(|&r| InputError::RelationOutOfRange { id: r as u64, rows })
    }

    /// The scores of this rank's triples `(heads[k], relations[k], tails[k])`. A collective.
    pub fn score(
        &self,
        heads: &[u32],
        relations: &[u32],
        tails: &[u32],
    ) -> Result<Vec<f32>, ShardError> {
        let n = heads.len();
        let verdict = [relations.len(), tails.len()]
            .into_iter()
            .find(|&l| l != n)
            .map(|got| InputError::BatchLength {
                expected: n as u64,
                got: got as u64,
            })
            .or_else(|| self.check_relations(relations));
        agree_on_input(self.comm, verdict)?;
        let ids: Vec<u32> = heads.iter().chain(tails).copied().collect();
        let rows = self.entities.lookup(&ids)?;
        let ent = self.kernels.upload_f32(rows);
        let positions: Vec<u32> = (0..2 * n as u32).collect();
        let triples = self
            .kernels
            .upload_triples(&positions[..n], relations, &positions[n..]);
        let scores = self.kernels.forward(&ent, &self.relation_rows(), &triples);
        Ok(self.kernels.read(scores, n)?)
    }
}
