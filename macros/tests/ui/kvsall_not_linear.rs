use rowshard_macros::scoring;

pub struct TransE;

#[scoring(kvsall)]
impl TransE {
    fn score(h: Row, r: Row, t: Row) -> Scalar {
        6.0 - norm_l1(h + r - t)
    }
}

fn main() {}
