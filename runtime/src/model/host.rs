//! The `f64` helpers of the host functions `#[scoring]` generates (`score_host`,
//! `gradient_host`).

/// The segment length of rows `h`, `r`, `t` cut into `segments` (entity) and
/// `relation_segments` parts.
///
/// # Panics
/// If the rows' lengths do not fit the scoring function (`h` and `t` alike, a multiple of
/// `segments`, and `r` as long as `relation_segments` segments).
pub fn segment_len(
    h: &[f64],
    r: &[f64],
    t: &[f64],
    segments: usize,
    relation_segments: usize,
) -> usize {
    let seg = h.len() / segments;
    assert!(
        h.len() == t.len()
            && h.len() == seg * segments
            && r.len() == seg * relation_segments
            && seg > 0,
        "rows of lengths {}, {}, {} do not fit a scoring function with {segments} entity and \
         {relation_segments} relation segments",
        h.len(),
        r.len(),
        t.len()
    );
    seg
}

/// `n` zeros.
pub fn zeros(n: usize) -> Vec<f64> {
    vec![0.0; n]
}

pub use crate::objective::host::sigmoid;

/// -1, 0 or 1.
pub fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    }
}
