//! What a run is, decided once from the arguments: the model spec, the training configuration,
//! the regularisers.

use rowshard::data::Dataset;
use rowshard::model::{
    CorruptionLoss, ModelDefaults, ModelSpec, OptimizerSettings, Regularization, ScoringFunction,
};
use rowshard::train::{EpochReport, Loss, Mode, Negatives, Protocol, TrainConfig};
use rowshard_kernels::Optimizer;

use super::args::{LossArg, ModeArg, TrainArgs};

/// Everything a rank needs, decided once from the arguments.
pub(super) struct Plan<'a> {
    pub args: &'a TrainArgs,
    pub data: &'a Dataset,
    pub spec: ModelSpec,
    pub config: TrainConfig,
    pub regularization: Regularization,
}

impl<'a> Plan<'a> {
    /// Checks the arguments against model `S` and the data set.
    pub fn new<S: ScoringFunction + ModelDefaults>(
        args: &'a TrainArgs,
        data: &'a Dataset,
    ) -> Result<Self, Box<dyn std::error::Error>> {
        let name = args.model.to_ascii_lowercase();
        let mode = match args.mode {
            Some(ModeArg::Kvsall) => Mode::KvsAll,
            Some(ModeArg::OneVsAll) => Mode::OneVsAll,
            Some(ModeArg::Negsample) => Mode::NegSample {
                neg_ratio: args.neg_ratio,
            },
            None if S::TAIL_LINEAR.is_ok() => Mode::KvsAll,
            None => Mode::NegSample {
                neg_ratio: args.neg_ratio,
            },
        };
        let mut settings = S::settings();
        if let Some(dim) = args.dim {
            rowshard::model::check_dim::<S>(dim as usize)?;
            settings.dim = dim as usize;
        }
        // Shared negatives without batch negatives score pair by pair where the dense kernels
        // cannot (slower, and without dropout or regularisers).
        let per_pair = matches!(args.negatives, Negatives::Shared { batch: false, .. });
        if let (Mode::KvsAll | Mode::OneVsAll, Err(why), false) = (
            mode,
            rowshard::model::dense_form::<S>(settings.dim),
            per_pair,
        ) {
            let label = if mode == Mode::KvsAll {
                "KvsAll"
            } else {
                "1vsAll"
            };
            return Err(format!(
                "{name} cannot train with {label}: {why}; use --mode negsample, or shared \
                     negatives without batch negatives (--negatives uniform:N, scored pair by pair)"
            )
            .into());
        }
        if let Some(dtype) = args.dtype {
            settings.dtype = dtype;
        }
        if let Some(opt) = &args.optimizer {
            let optimizer = Optimizer::from_name(opt).ok_or_else(|| {
                format!(
                    "unknown optimizer `{opt}`; expected one of: {}",
                    Optimizer::names().join(", ")
                )
            })?;
            let lr = settings.entity.lr;
            settings.entity = OptimizerSettings::new(optimizer).with_lr(lr);
            settings.relation = OptimizerSettings::new(optimizer).with_lr(settings.relation.lr);
        }
        if let Some(lr) = args.lr {
            settings.entity.set("lr", lr)?;
            settings.relation.set("lr", lr)?;
        }
        if let Some(lr) = args.relation_lr {
            settings.relation.set("lr", lr)?;
        }
        for &(name, value) in &args.hyper.0 {
            settings.entity.set(name, value)?;
            settings.relation.set(name, value)?;
        }
        if let Some(init) = args.init {
            settings.init = init;
        }
        if let Some(p) = &args.partition {
            settings.partition = p.clone();
        }
        let regularization = Regularization {
            entities: args.entity_reg.or(args.reg).unwrap_or_default(),
            relations: args.relation_reg.or(args.reg).unwrap_or_default(),
        };
        let regularized =
            !(regularization.entities.is_none() && regularization.relations.is_none());
        if regularized && !mode.all_entities() {
            return Err(
                "--reg applies to kvsall and 1vsall; negsample trains without a regulariser".into(),
            );
        }
        if args.negatives != Negatives::All && !mode.all_entities() {
            return Err(
                "--negatives applies to kvsall and 1vsall; negsample draws its own per triple \
                 (--neg-ratio)"
                    .into(),
            );
        }
        if matches!(args.negatives, Negatives::Shared { batch: false, .. })
            && args.label_smoothing > 0.0
        {
            return Err(
                "--label-smoothing with --negatives uniform:N needs batch negatives \
                 (uniform:N,batch): it spreads over candidates every query shares"
                    .into(),
            );
        }
        if args.chunk.is_some() && args.negatives == Negatives::All {
            return Err(
                "--chunk applies to shared negatives (--negatives uniform:N, degree:N, batch): \
                 each chunk of the batch draws its own"
                    .into(),
            );
        }
        if args.patience > 0 && args.eval_every == 0 {
            return Err("--patience needs --eval-every: evaluations to be patient with".into());
        }
        let negsample = matches!(mode, Mode::NegSample { .. });
        let unbatched = matches!(args.negatives, Negatives::Shared { batch: false, .. });
        if args.adversarial_temperature.is_some()
            && !((negsample || unbatched) && matches!(args.loss, None | Some(LossArg::Bce)))
        {
            return Err(
                "--adversarial-temperature applies to negsample, or to kvsall and 1vsall with \
                 shared negatives without batch negatives, with --loss bce (it weighs a true \
                 triple's corruptions)"
                    .into(),
            );
        }
        let corruption_loss = match (args.loss, args.adversarial_temperature) {
            (None | Some(LossArg::Bce), Some(alpha)) if unbatched => {
                Some(CorruptionLoss::Logistic {
                    adversarial: Some(alpha as f32),
                })
            }
            (Some(LossArg::Margin), _) if unbatched => Some(CorruptionLoss::Margin {
                margin: args.margin as f32,
            }),
            _ if !negsample => None,
            (None | Some(LossArg::Bce), None) => None,
            (None | Some(LossArg::Bce), Some(alpha)) => Some(CorruptionLoss::Logistic {
                adversarial: Some(alpha as f32),
            }),
            (Some(LossArg::Ce), _) => Some(CorruptionLoss::Softmax),
            (Some(LossArg::Margin), _) => Some(CorruptionLoss::Margin {
                margin: args.margin as f32,
            }),
        };
        if corruption_loss.is_some() && args.label_smoothing > 0.0 {
            return Err(
                "--label-smoothing applies to negsample's plain bce (targets on each triple)"
                    .into(),
            );
        }
        let loss = match args.loss {
            _ if negsample => Loss::BinaryCrossEntropy,
            None => Loss::default_for(mode),
            Some(LossArg::Bce) => Loss::BinaryCrossEntropy,
            Some(LossArg::Ce) => Loss::SoftmaxCrossEntropy,
            // Ranks each query's true tails against its shared negatives (`corruption_loss`).
            Some(LossArg::Margin) if unbatched => Loss::default_for(mode),
            Some(LossArg::Margin) => {
                return Err(
                    "--loss margin applies to negsample (ranking a true triple against its \
                     corruptions) and to kvsall and 1vsall with shared negatives without batch \
                     negatives (ranking each query's true tails against them); against every \
                     entity or with batch negatives they train with bce or ce"
                        .into(),
                );
            }
        };
        Ok(Plan {
            args,
            data,
            regularization,
            spec: ModelSpec {
                entities: data.entities.len(),
                relations: mode.model_relations(data),
                settings,
                seed: args.seed,
            },
            config: TrainConfig {
                mode,
                loss,
                corruption_loss,
                negatives: args.negatives,
                epochs: args.epochs as usize,
                batch_size: args.batch_size as usize,
                seed: args.seed,
                label_smoothing: args.label_smoothing,
                schedule: args.lr_schedule,
                eval_batch: 512,
                eval_protocol: match args.eval_sample {
                    None => Protocol::Full,
                    Some(n) => Protocol::Sampled {
                        candidates: n as usize,
                    },
                },
                stream_block: args.stream_block as usize,
                chunk: args.chunk.unwrap_or(0) as usize,
            },
        })
    }

    /// `, N effective GFLOP/s` for an epoch that scores against every entity (6 · dim flops per
    /// (query, entity) pair: scores, table gradient, query gradient), else nothing.
    pub fn epoch_speed(&self, report: &EpochReport) -> String {
        let shared = self.config.negatives != Negatives::All;
        if !self.config.mode.all_entities() || shared || report.seconds <= 0.0 {
            return String::new();
        }
        let pairs = report.examples as f64 * self.spec.entities as f64;
        let flops = 6.0 * self.spec.settings.dim as f64 * pairs;
        format!(", {:.0} effective GFLOP/s", flops / report.seconds / 1e9)
    }
}
