use rowshard_macros::scoring;

pub struct Model;

#[scoring]
impl Model {
    fn score(h: Row, r: Row, t: Row) -> Scalar {
        let x = if sum(h) > 0.0 { h } else { r };
        sum(x * t)
    }
}

fn main() {}
