use rowshard_macros::scoring;

pub struct Biased;

#[scoring(kvsall)]
impl Biased {
    fn score(h: Row, r: Row, t: Row) -> Scalar {
        dot(h * r, t) + 1.0
    }
}

fn main() {}
