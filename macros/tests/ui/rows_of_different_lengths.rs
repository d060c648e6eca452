use rowshard_macros::scoring;

pub struct Model;

#[scoring]
impl Model {
    fn score(h: Row, r: Row, t: Row) -> Scalar {
        let (re, _) = halves(h);
        dot(re * r, t)
    }
}

fn main() {}
