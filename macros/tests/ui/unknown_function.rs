use rowshard_macros::scoring;

pub struct Model;

#[scoring]
impl Model {
    fn score(h: Row, r: Row, t: Row) -> Scalar {
        sum(tanh(h * r) * t)
    }
}

fn main() {}
