//! Planning a recipe for a model and a data set: every default filled in, every value checked
//! against the model (its dims, its optimizer table) and every choice against the others — the
//! objective and the candidates through the one check that steps use
//! ([`StepKind::choose`]) — before anything is trained.

use rowshard_kernels::{Backend, Optimizer};

use super::Recipe;
use super::error::RecipeError;
use crate::data::Dataset;
use crate::model::{DenseSupport, ModelDefaults, ModelSpec, OptimizerSettings, ScoringFunction};
use crate::objective::{Dropout, Mode, Objective, ObjectiveError, Regularization, Setting};
use crate::step::StepKind;
use crate::train::{Checkpoints, LrSchedule, Plan, Protocol, RunSettings, Stopping, TrainConfig};

/// The defaults of keys a recipe leaves out (the model's own settings aside).
pub mod defaults {
    /// Epochs.
    pub const EPOCHS: u32 = 256;
    /// Global batch.
    pub const BATCH_SIZE: u32 = 1024;
    /// Corruptions per true triple.
    pub const NEG_RATIO: u32 = 4;
    /// The self-adversarial temperature.
    pub const ADVERSARIAL_TEMPERATURE: f64 = 1.0;
    /// The margin of margin ranking.
    pub const MARGIN: f64 = 1.0;
    /// Training triples per streamed block.
    pub const STREAM_BLOCK: u32 = 1 << 20;
    /// The seed.
    pub const SEED: u64 = 1;
    /// Global queries per ranking call.
    pub const EVAL_BATCH: usize = 512;
}

impl Recipe {
    /// What this recipe trains for model `S` (called `name`) on `data`, with every default
    /// filled in; refuses a value or a combination that cannot train, naming its key (and, for
    /// a key read from a file, the file and line).
    pub fn plan<S: ScoringFunction + ModelDefaults>(
        &self,
        data: &Dataset,
        name: &str,
    ) -> Result<Plan, RecipeError> {
        let at = |key: &str, message: String| RecipeError::about(&self.origins, key, message);
        let (m, o, n, opt, r, t, e, run) = (
            &self.model,
            &self.objective,
            &self.negatives,
            &self.optimizer,
            &self.regularization,
            &self.training,
            &self.evaluation,
            &self.run,
        );
        let neg_ratio = n.neg_ratio.map_or(defaults::NEG_RATIO, |c| c.0) as usize;
        let mode = match o.mode {
            Some(Mode::NegSample { .. }) => Mode::NegSample { neg_ratio },
            Some(mode) => mode,
            None if S::TAIL_LINEAR.is_ok() => Mode::KvsAll,
            None => Mode::NegSample { neg_ratio },
        };
        let negsample = matches!(mode, Mode::NegSample { .. });
        let mut settings = S::settings();
        if let Some(dim) = m.dim {
            crate::model::check_dim::<S>(dim.0 as usize)
                .map_err(|err| at("dim", err.to_string()))?;
            settings.dim = dim.0 as usize;
        }
        if let Some(dtype) = m.dtype {
            settings.dtype = dtype;
        }
        if let Some(init) = m.init {
            settings.init = init;
        }
        if let Some(partition) = &m.partition {
            settings.partition = partition.clone();
        }
        if let Some(name) = &opt.optimizer {
            let optimizer = Optimizer::from_name(name).ok_or_else(|| {
                at(
                    "optimizer",
                    format!(
                        "unknown optimizer `{name}`; expected one of: {}",
                        Optimizer::names().join(", ")
                    ),
                )
            })?;
            settings.entity = OptimizerSettings::new(optimizer).with_lr(settings.entity.lr);
            settings.relation = OptimizerSettings::new(optimizer).with_lr(settings.relation.lr);
        }
        if let Some(lr) = opt.lr {
            for table in [&mut settings.entity, &mut settings.relation] {
                table
                    .set("lr", lr.0)
                    .map_err(|err| at("lr", err.to_string()))?;
            }
        }
        if let Some(lr) = opt.relation_lr {
            settings
                .relation
                .set("lr", lr.0)
                .map_err(|err| at("relation-lr", err.to_string()))?;
        }
        for &(key, value) in &opt.hyper.0 {
            for table in [&mut settings.entity, &mut settings.relation] {
                table
                    .set(key, value)
                    .map_err(|err| at(&key.replace('_', "-"), err.to_string()))?;
            }
        }
        let stopping = Stopping {
            eval_every: e.eval_every.unwrap_or(0),
            patience: e.patience.unwrap_or(0),
            min_delta: e.min_delta.map_or(0.0, |d| d.0),
        };
        if stopping.patience > 0 && stopping.eval_every == 0 {
            return Err(at(
                "patience",
                "--patience needs --eval-every: evaluations to be patient with".into(),
            ));
        }
        let shared = n.negatives.is_some_and(|n| n.is_shared());
        if shared && negsample {
            return Err(at(
                "negatives",
                "--negatives applies to kvsall and 1vsall; negsample draws its own per triple \
                 (--neg-ratio)"
                    .into(),
            ));
        }
        if n.chunk.is_some() && !shared {
            return Err(at(
                "chunk",
                "--chunk applies to shared negatives (--negatives uniform:N, degree:N, batch): \
                 each chunk of the batch draws its own"
                    .into(),
            ));
        }
        if n.neg_ratio.is_some() && !negsample {
            return Err(at(
                "neg-ratio",
                "--neg-ratio applies to negsample; kvsall and 1vsall score against every \
                 entity or --negatives"
                    .into(),
            ));
        }
        let loss_name = o.loss.unwrap_or_else(|| mode.default_loss());
        use crate::objective::LossName;
        if o.adversarial_temperature.is_some() && loss_name != LossName::SelfAdversarial {
            return Err(at(
                "adversarial-temperature",
                "--adversarial-temperature applies to --loss self-adversarial".into(),
            ));
        }
        if o.margin.is_some() && loss_name != LossName::Margin {
            return Err(at("margin", "--margin applies to --loss margin".into()));
        }
        let objective = Objective {
            loss: loss_name.with(
                o.adversarial_temperature
                    .map_or(defaults::ADVERSARIAL_TEMPERATURE, |t| t.0) as f32,
                o.margin.map_or(defaults::MARGIN, |m| m.0) as f32,
            ),
            label_smoothing: o.label_smoothing.map_or(0.0, |s| s.0),
            regularization: Regularization {
                entities: r.entity_reg.or(r.reg).unwrap_or_default(),
                relations: r.relation_reg.or(r.reg).unwrap_or_default(),
            },
            dropout: Dropout {
                entity: r.entity_dropout.or(r.dropout).map_or(0.0, |p| p.0),
                relation: r.relation_dropout.or(r.dropout).map_or(0.0, |p| p.0),
            },
        };
        let negatives = n
            .negatives
            .unwrap_or_default()
            .in_chunks(n.chunk.map_or(0, |c| c.0 as usize));
        let config = TrainConfig {
            mode,
            objective,
            negatives,
            epochs: t.epochs.map_or(defaults::EPOCHS, |c| c.0) as usize,
            batch_size: t.batch_size.map_or(defaults::BATCH_SIZE, |c| c.0) as usize,
            seed: run.seed.unwrap_or(defaults::SEED),
            schedule: opt.lr_schedule.unwrap_or(LrSchedule::Constant),
            eval_batch: defaults::EVAL_BATCH,
            eval_protocol: match e.eval_sample {
                None => Protocol::Full,
                Some(c) => Protocol::Sampled {
                    candidates: c.0 as usize,
                },
            },
            stream_block: data_stream_block(self) as usize,
            train_fraction: self.data.train_fraction.map_or(1.0, |f| f.0),
        };
        let form = crate::model::dense_form::<S>(settings.dim);
        let tail_linear = matches!(form, Ok(None));
        let dense = match form {
            Ok(_) => DenseSupport::Dense,
            Err(why) => DenseSupport::Not {
                model: name.to_string(),
                why,
            },
        };
        StepKind::choose(config.candidates(), &objective, &dense)
            .map_err(|err| self.objective_error(err, mode, shared))?;
        let runtime = run.runtime.unwrap_or(Backend::Cpu);
        let (ranks, ranks_note) = match run.ranks {
            Some(count) => (count.0 as usize, None),
            None => {
                RunSettings::default_ranks(mode, config.negatives, tail_linear, runtime, cores())
            }
        };
        Ok(Plan {
            spec: ModelSpec {
                entities: data.entities.len(),
                relations: mode.model_relations(data),
                settings,
                seed: config.seed,
            },
            config,
            stopping,
            checkpoints: Checkpoints {
                dir: run.checkpoint_dir.clone(),
                resume: run.resume.clone(),
            },
            test: e.test.unwrap_or(true),
            run: RunSettings {
                ranks,
                comm: run.comm.unwrap_or_default(),
                runtime,
                ranks_note,
            },
        })
    }

    /// An objective the candidates cannot train, as an error about the key at fault.
    fn objective_error(&self, mut err: ObjectiveError, mode: Mode, shared: bool) -> RecipeError {
        if let ObjectiveError::NotDense { what, advice, .. } = &mut err
            && !shared
        {
            *what = match mode {
                Mode::KvsAll => "KvsAll",
                _ => "1vsAll",
            }
            .into();
            *advice = "use --mode negsample, or shared negatives without batch negatives \
                       (--negatives uniform:N, scored pair by pair)"
                .into();
        }
        let given = |keys: &[&'static str]| {
            keys.iter()
                .copied()
                .find(|k| self.keys().iter().any(|given| given == k))
                .unwrap_or(keys[0])
        };
        let key = match err.option() {
            Setting::Loss => "loss",
            Setting::Temperature => "adversarial-temperature",
            Setting::Margin => "margin",
            Setting::LabelSmoothing => "label-smoothing",
            Setting::Regularization => given(&["reg", "entity-reg", "relation-reg"]),
            Setting::Dropout => given(&["dropout", "entity-dropout", "relation-dropout"]),
            Setting::Candidates => given(&["mode", "negatives"]),
        };
        RecipeError::about(&self.origins, key, err.to_string())
    }
}

/// Training triples per streamed block.
fn data_stream_block(recipe: &Recipe) -> u32 {
    recipe
        .data
        .stream_block
        .map_or(defaults::STREAM_BLOCK, |c| c.0)
}

/// The cores this process may run on.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
