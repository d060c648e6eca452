//! Hand-written `f64` references of the shipped models' published formulas, written from the
//! papers (not from the DSL), and central finite differences of them: what the generated
//! forward and backward kernels are checked against.

/// One model's published score.
pub type Score = fn(&[f64], &[f64], &[f64]) -> f64;

/// DistMult (Yang et al., 2015): `⟨h, r, t⟩`.
pub fn distmult(h: &[f64], r: &[f64], t: &[f64]) -> f64 {
    (0..h.len()).map(|i| h[i] * r[i] * t[i]).sum()
}

/// ComplEx (Trouillon et al., 2016): `Re(⟨h, r, conj(t)⟩)` over complex numbers whose real parts
/// are the first half of a row and imaginary parts the second.
pub fn complex(h: &[f64], r: &[f64], t: &[f64]) -> f64 {
    let k = h.len() / 2;
    (0..k)
        .map(|i| {
            // (a + bi)(c + di) = (ac − bd) + (ad + bc)i; then times conj(t) = (e − fi).
            let (a, b) = (h[i], h[k + i]);
            let (c, d) = (r[i], r[k + i]);
            let (e, f) = (t[i], t[k + i]);
            let (re, im) = (a * c - b * d, a * d + b * c);
            re * e + im * f
        })
        .sum()
}

/// TransE with L1 distance and margin 6.
pub fn transe(h: &[f64], r: &[f64], t: &[f64]) -> f64 {
    6.0 - (0..h.len())
        .map(|i| (h[i] + r[i] - t[i]).abs())
        .sum::<f64>()
}

/// TransE with L2 distance and margin 6.
pub fn transe_l2(h: &[f64], r: &[f64], t: &[f64]) -> f64 {
    6.0 - (0..h.len())
        .map(|i| (h[i] + r[i] - t[i]).powi(2))
        .sum::<f64>()
        .sqrt()
}

/// TransE with the squared L2 distance and margin 6: `6 − ‖h + r − t‖²`.
pub fn transe_sq(h: &[f64], r: &[f64], t: &[f64]) -> f64 {
    6.0 - (0..h.len())
        .map(|i| (h[i] + r[i] - t[i]).powi(2))
        .sum::<f64>()
}

/// RotatE's rotation followed by the squared L2 distance: `6 − Σ_i |h_i·e^{iθ_i} − t_i|²`.
pub fn rotate_sq(h: &[f64], r: &[f64], t: &[f64]) -> f64 {
    6.0 - rotation_residuals(h, r, t)
        .map(|(re, im)| re * re + im * im)
        .sum::<f64>()
}

/// `h_i·e^{iθ_i} − t_i` for each complex coordinate `i`, as (real, imaginary).
fn rotation_residuals<'a>(
    h: &'a [f64],
    r: &'a [f64],
    t: &'a [f64],
) -> impl Iterator<Item = (f64, f64)> + 'a {
    let k = h.len() / 2;
    (0..k).map(move |i| {
        let (c, s) = (r[i].cos(), r[i].sin());
        (
            h[i] * c - h[k + i] * s - t[i],
            h[i] * s + h[k + i] * c - t[k + i],
        )
    })
}

/// RotatE (Sun et al., 2019): `6 − Σ_i |h_i·e^{iθ_i} − t_i|` with complex entity rows and
/// relation phases θ.
pub fn rotate(h: &[f64], r: &[f64], t: &[f64]) -> f64 {
    6.0 - rotation_residuals(h, r, t)
        .map(|(re, im)| re.hypot(im))
        .sum::<f64>()
}

/// QuatE / QMult: `⟨h ⊗ r/|r|, t⟩` with the Hamilton product over quaternions whose four parts
/// are the rows' quarters.
pub fn qmult(h: &[f64], r: &[f64], t: &[f64]) -> f64 {
    let k = h.len() / 4;
    (0..k)
        .map(|i| {
            let q = |x: &[f64]| [x[i], x[k + i], x[2 * k + i], x[3 * k + i]];
            let [a, b, c, d] = q(h);
            let [w, x, y, z] = q(r);
            let n = (w * w + x * x + y * y + z * z).sqrt();
            let (w, x, y, z) = (w / n, x / n, y / n, z / n);
            let product = [
                a * w - b * x - c * y - d * z,
                a * x + b * w + c * z - d * y,
                a * y - b * z + c * w + d * x,
                a * z + b * y - c * x + d * w,
            ];
            let tt = q(t);
            (0..4).map(|j| product[j] * tt[j]).sum::<f64>()
        })
        .sum()
}

/// Central finite differences of `f` at `(h, r, t)`: the gradient with respect to each row.
pub fn finite_differences(f: Score, h: &[f64], r: &[f64], t: &[f64]) -> [Vec<f64>; 3] {
    let step = 1e-6;
    let rows = [h.to_vec(), r.to_vec(), t.to_vec()];
    let mut out: [Vec<f64>; 3] = Default::default();
    for k in 0..3 {
        for i in 0..rows[k].len() {
            let mut plus = rows.clone();
            let mut minus = rows.clone();
            plus[k][i] += step;
            minus[k][i] -= step;
            let value = |x: &[Vec<f64>]| f(&x[0], &x[1], &x[2]);
            out[k].push((value(&plus) - value(&minus)) / (2.0 * step));
        }
    }
    out
}
