use rowshard_macros::sharded_embedding;

#[sharded_embedding(dim = 32, optimizer = rmsprop(alpha = 0.9, beta2 = 0.99))]
pub struct Model;

fn main() {}
