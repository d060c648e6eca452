use rowshard_macros::sharded_embedding;

#[sharded_embedding(dim = 32, dtype = bf16, runtime = [cpu, wgpu])]
pub struct Model;

fn main() {}
