//! TransH, a model rowshard does not ship, defined and trained the way a user would: the
//! macros generate its kernels (forward, and the backward pass derived from the formula) and
//! its glue to a sharded model.
//!
//! Usage: `cargo run --release -- [EPOCHS] [DATASET_FOLDER]`.

use rowshard::comm::{Communicator, threads};
use rowshard::data::{Dataset, Split};
use rowshard::error::ShardError;
use rowshard::model::ModelSpec;
use rowshard::train::{Filters, Mode, Silent, TrainConfig, Trainer};
use rowshard::{scoring, sharded_embedding};

/// TransH: `γ − ‖h⊥ + d − t⊥‖₂`, where `x⊥ = x − ⟨n, x⟩ n` projects onto the hyperplane with
/// unit normal `n = w / ‖w‖` and the relation row is `(w, d)`.
#[sharded_embedding(dim = 32, optimizer = adam(lr = 0.01), init = uniform(bound = 0.1))]
pub struct TransH;

#[scoring(relation_dim = dim * 2)]
impl TransH {
    fn score(h: Row, r: Row, t: Row) -> Scalar {
        let (w, d) = halves(r);
        let n = w / norm_l2(w);
        let h_proj = h - dot(n, h) * n;
        let t_proj = t - dot(n, t) * n;
        6.0 - norm_l2(h_proj + d - t_proj)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let epochs: usize = args.next().map_or(Ok(40), |a| a.parse())?;
    let folder = args
        .next()
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/umls").to_string());
    let data = Dataset::load(&folder)?;
    let mode = Mode::NegSample { neg_ratio: 4 };
    let config = TrainConfig {
        mode,
        epochs,
        batch_size: 512,
        ..TrainConfig::default()
    };
    let spec = ModelSpec::of::<TransH>(data.entities.len(), mode.model_relations(&data));
    let results = threads::run(2, |comm| -> Result<_, ShardError> {
        let client = rowshard::Backend::Cpu.client()?;
        let mut model = TransHModel::new(comm, &client, &spec)?;
        let mut trainer = Trainer::new(&data, config.clone())?;
        while trainer.epochs_done < epochs {
            let report = trainer.epoch(&mut model, &mut Silent)?;
            if comm.rank() == 0 {
                println!("epoch {}: loss {:.4}", report.epoch, report.loss);
            }
        }
        trainer.evaluate(&model, &Filters::new(&data)?, Split::Test)
    });
    let metrics = results.into_iter().next().expect("rank 0")?;
    println!(
        "TransH on {} ranks: test MRR {:.4}, Hits@10 {:.4} ({} queries)",
        2, metrics.mrr, metrics.hits10, metrics.queries
    );
    Ok(())
}
