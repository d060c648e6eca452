use rowshard_macros::sharded_embedding;

#[sharded_embedding(
    dim = 32,
    dtype = f64,
    optimizer = adam(eps = 0),
    relation_optimizer = sgd(beta1 = 0.5),
    partitions = even,
)]
pub struct Model;

fn main() {}
