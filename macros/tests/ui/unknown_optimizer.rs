use rowshard_macros::sharded_embedding;

#[sharded_embedding(dim = 32, optimizer = adamw(lr = 0.1))]
pub struct Model;

fn main() {}
