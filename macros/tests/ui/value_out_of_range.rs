use rowshard_macros::sharded_embedding;

#[sharded_embedding(dim = 32, optimizer = adam(beta1 = 1.5))]
pub struct Model;

fn main() {}
